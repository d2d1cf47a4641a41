#!/usr/bin/env python3
"""The PGO study's results (``scripts/pgo_study.py`` -> ``pgo.json``) as the Markdown of docs/benchmarks.md.

    python scripts/render_pgo.py OUT/pgo/pgo.json > table.md

One row per setting: what argus_lab's evidence said about the baseline (from the store, rank with the most
exposed communication), the rule and the change it chose, the plain (no-tool) steps/s before and after with their
spread over the alternating rounds and the verdict, and ``Report.diff`` of the ``step`` region (host.wall,
comm.exposed, comm.overlap: medians over the measured step instances of both ranks, change and verdict against
run-to-run noise).  Missing parts (cut by the time limit, failed launches) say so instead of a number.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.2f} ms"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f} %"


def p_text(p: float | None) -> str:
    return "" if p is None else f", p={p:.1g}"


def evidence(f: dict[str, Any] | None) -> str:
    if not f:
        return "-"
    return (
        f"rank {f.get('rank')}: step {ms(f.get('W'))}, comm {ms(f.get('C'))} in {f.get('K', 0):.0f} kernels, "
        f"overlap {ms(f.get('O'))}, exposed {ms(f.get('E'))}, start skew {(f.get('S') or 0.0) / 1e3:.0f} us"
    )


def plain(rec: dict[str, Any]) -> tuple[str, str]:
    t = rec.get("throughput") or {}
    if "change" not in t:
        return "-", t.get("verdict") or rec.get("error") or "not measured"
    a, b = t["base_min_max"], t["other_min_max"]
    before_after = (
        f"{t['base_median']:.2f} ({a[0]:.2f}..{a[1]:.2f}) -> {t['other_median']:.2f} ({b[0]:.2f}..{b[1]:.2f}), "
        f"{t['rounds'][0]} rounds a side"
    )
    return before_after, f"{pct(t['change'])} **{t['verdict']}**{p_text(t.get('p_value'))}"


def diff_cell(rec: dict[str, Any], signal: str) -> str:
    rows = [r for r in (rec.get("diff") or {}).get("rows", []) if r["path"] == "step" and r["signal"] == signal]
    if not rows:
        return rec.get("changed_error") or ("-" if "diff" in rec else "not measured")
    r = rows[0]
    return (
        f"{ms(r['base_median'])} -> {ms(r['other_median'])} ({pct(r['change'])}, {r['verdict']}"
        f"{p_text(r.get('p_value'))}; n={r['n_base']}/{r['n_other']})"
    )


def render(study: dict[str, Any]) -> str:
    lines = [
        "| setting | baseline evidence (argus_lab) | rule -> change | plain steps/s before -> after "
        "(min..max over rounds) | throughput change | `Report.diff` step host.wall | step comm.exposed | "
        "step comm.overlap |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for rec in study.get("settings", []):
        s = rec["setting"]
        d = rec.get("decision") or {}
        change = rec.get("exercised_change") or d.get("change")
        what = (
            f"{d.get('rule', '-')}: {json.dumps(change) if change else 'keep (A/A)'}"
            + (" (exercised, not chosen)" if rec.get("exercised_change") else "")
            + (f" -- {d['reason']}" if d.get("reason") else "")
        )
        before_after, verdict = plain(rec)
        lines.append(
            f"| `{s['name']}`: {s['about']} | {evidence(rec.get('figures'))} | {what} | {before_after} | {verdict} | "
            f"{diff_cell(rec, 'host.wall')} | {diff_cell(rec, 'comm.exposed')} | {diff_cell(rec, 'comm.overlap')} |"
        )
    mean = study.get("mean_throughput_change")
    changes = [r["throughput"]["change"] for r in study.get("settings", []) if "change" in r.get("throughput", {})]
    lines += [
        "",
        f"Mean plain throughput change over {len(changes)} setting(s): **{pct(mean)}** "
        f"(the seed reports +7 % over five multi-GPU settings).  Study wall time {study.get('seconds', '-')} s"
        + (" (CPU dry run: gloo, tiny sizes; not a measurement)." if study.get("cpu_dry_run") else "."),
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: scripts/render_pgo.py PATH/pgo.json  (written by scripts/pgo_study.py)", file=sys.stderr)
        return 2
    path = Path(argv[0])
    if not path.is_file():
        print(f"no file {path}; give the pgo.json that scripts/pgo_study.py OUT wrote (OUT/pgo.json)", file=sys.stderr)
        return 2
    print(render(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
