"""The benchmark's table: which configurations finished, the counts and geometric means, one run or several merged.

A configuration is *finished* when both searches spent their budget (or ran out of candidates) and the
confirmation runs were made (the default's and each search's best's, :func:`finished`); only finished
configurations are counted.  One that a run stopped before that is listed as stopped, with how far its searches got,
and one never started as not started.  ``merge`` reads several runs' result files (``RUN/results/worker*.jsonl``; the
continuation of a run that ran out of time) and takes, per configuration, the first run (in the order given) that
finished it, else the last run that started it.

    python bench/optimize_bench.py OUT --merge RUN_A RUN_B      # writes OUT/optimize.{md,json}
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from bench.optimize_configs import CONFIGS, SEED_FIGURES, label

SEARCHES = ("timing-only", "evidence-guided")
SCHEMA = "argus_lab.optimize-bench/1"
HEAVY = ("evaluations", "confirm")
"""What a merged document leaves out of each configuration (every evaluation and confirmation run's evidence)."""


def finished(r: dict[str, Any]) -> bool:
    """Whether a configuration's result line is complete: the default measured, both searches stopped by
    themselves (budget spent or no candidate left), and the confirmation runs of the default and of every best that
    is not the default made."""
    s = r.get("summary") or {}
    if not s.get("default_ms"):
        return False
    confirm = r.get("confirm") or {}
    if "default" not in confirm:
        return False
    default_key = (r.get("default") or {}).get("key")
    for name in SEARCHES:
        x = s.get(name) or {}
        if not x.get("stopped") or x.get("best") is None:
            return False
        if x["best"] != default_key and name not in confirm:
            return False
    return True


def state(r: dict[str, Any]) -> str:
    """``finished``, ``stopped`` (started, not finished), ``failed`` (the default did not measure) or
    ``not started``."""
    if finished(r):
        return "finished"
    if "summary" not in r:
        return "not started"
    if not (r.get("summary") or {}).get("default_ms"):
        return "failed"
    return "stopped"


def counted(x: dict[str, Any]) -> float:
    """A search's speed-up as the geometric mean counts it: the confirmed speed-up when it improved the
    configuration beyond noise, else 1.0 (docs/optimize.md, "The benchmark")."""
    sp = x.get("speedup")
    return float(sp) if x.get("improved") and sp else 1.0


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def aggregate(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts and geometric means over the finished configurations of ``results``."""
    done = [r for r in results if state(r) == "finished"]
    agg: dict[str, Any] = {}
    for name in SEARCHES:
        gm = geomean([counted(r["summary"][name]) for r in done])
        agg[name] = {
            "configurations": len(done),
            "improved": sum(1 for r in done if r["summary"][name].get("improved")),
            "geomean_speedup": gm,
            "geomean_gain": None if gm is None else gm - 1.0,
        }
    t, g = SEARCHES
    agg["guided_better"] = sum(1 for r in done if counted(r["summary"][g]) > counted(r["summary"][t]) * 1.01)
    agg["timing_better"] = sum(1 for r in done if counted(r["summary"][t]) > counted(r["summary"][g]) * 1.01)
    return agg


def read_results(folder: Path) -> list[dict[str, Any]]:
    """The configuration lines of one run (``folder/results/worker*.jsonl``), a line cut by a kill skipped; per
    configuration its finished line, else its last line."""
    rows: dict[str, dict[str, Any]] = {}
    for path in sorted((folder / "results").glob("worker*.jsonl")):
        if path.name.endswith("-candidates.jsonl"):
            continue
        for line in path.read_text().splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            have = rows.get(r["target"])
            if have is None or not finished(have):
                rows[r["target"]] = r
    return list(rows.values())


def read_meta(folder: Path) -> dict[str, Any]:
    """What a run's ``optimize.json`` says about it (without its results); ``{}`` when it has none."""
    path = folder / "optimize.json"
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    runs = doc.get("runs")
    if runs and len(runs) == 1:
        return dict(runs[0])
    keep = ("device", "command", "budget", "repeat", "warmup", "wall_s", "started", "only")
    return {k: doc[k] for k in keep if k in doc}


def numbered(configs: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """``configs`` with their numbers (1-based, the table's ``#``)."""
    return list(enumerate(configs, 1))


def run_meta(meta: dict[str, Any], lines: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's meta, its device taken from its own result lines when the meta names none (the driver writes its
    meta before any worker has seen the GPU)."""
    devices = sorted({str(r["device"]) for r in lines if r.get("device")})
    if meta.get("device") in (None, "none") and devices:
        return {**meta, "device": ", ".join(devices)}
    return meta


def assemble(
    runs: list[tuple[dict[str, Any], list[dict[str, Any]]]], configs: list[tuple[int, dict[str, Any]]]
) -> dict[str, Any]:
    """One document from the runs' (meta, result lines): every configuration of ``configs`` (number, config) listed
    once, in number order; result lines of configurations not among them (e.g. the host demo's) follow."""
    by_label: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    listed = sorted(((n, label(c), c) for n, c in configs), key=lambda x: x[0])
    names = {name for _, name, _ in listed}
    top = max((n for n, _, _ in listed), default=0)
    for k, (_, lines) in enumerate(runs, 1):
        for r in lines:
            by_label.setdefault(r["target"], []).append((k, r))
            if r["target"] not in names:
                top += 1
                names.add(r["target"])
                listed.append((top, r["target"], r.get("config") or {}))
    results = []
    for number, name, cfg in listed:
        seen = by_label.get(name, [])
        done = [(k, r) for k, r in seen if finished(r)]
        started = [(k, r) for k, r in seen if "summary" in r]
        pick = done[0] if done else (started[-1] if started else (seen[-1] if seen else None))
        if pick is None:
            row: dict[str, Any] = {"config": cfg, "target": name, "complete": False, "incomplete": "not in any run"}
            k = 0
        else:
            k, row = pick[0], dict(pick[1])
        row["number"] = number
        row["run"] = k
        row["state"] = state(row)
        if row["state"] != "finished":
            row["why"] = why_not(row)
        also = sorted({j for j, _ in done[1:]})
        if also:
            row["also_finished_in"] = also
        results.append(row)
    metas = [m for m, _ in runs]
    devices = sorted({str(r.get("device")) for r in results if r["state"] == "finished" and r.get("device")})
    budgets = sorted({int(r["budget"]) for r in results if r.get("budget")})
    return {
        "schema": SCHEMA,
        "device": ", ".join(devices) if devices else (metas[0].get("device", "none") if metas else "none"),
        "command": " ; ".join(str(m.get("command", "")) for m in metas),
        "budget": max(budgets) if budgets else (metas[0].get("budget") if metas else None),
        "budgets": budgets,
        "repeat": metas[0].get("repeat", 10) if metas else 10,
        "warmup": metas[0].get("warmup", 2) if metas else 2,
        "wall_s": sum(float(m.get("wall_s") or 0.0) for m in metas),
        "configurations": len(listed),
        "measured": sum(1 for r in results if r["state"] == "finished"),
        "not_finished": [r["number"] for r in results if r["state"] != "finished"],
        "runs": [{**run_meta(m, lines), "run": k} for k, (m, lines) in enumerate(runs, 1)],
        "aggregate": aggregate(results),
        "seed": SEED_FIGURES,
        "results": results,
    }


def merge(out: Path, folders: list[Path], configs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Merge the runs in ``folders`` (in that order) into ``out/optimize.{json,md}``."""
    runs = []
    for folder in folders:
        if not (folder / "results").is_dir():
            msg = f"{str(folder)!r} has no results/ folder: give the OUT folder of a benchmark run (or tests/data copy)"
            raise FileNotFoundError(msg)
        meta = {**read_meta(folder), "source": str(folder)}
        runs.append((meta, read_results(folder)))
    doc = assemble(runs, numbered(configs if configs is not None else CONFIGS))
    for r in doc["results"]:  # every evaluation stays in its run's result files (runs[].source)
        for key in HEAVY:
            r.pop(key, None)
    doc["omitted"] = f"per configuration {', '.join(HEAVY)}: in the runs' results/worker*.jsonl (runs[].source)"
    write(out, doc)
    return doc


def write(out: Path, doc: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "optimize.json").write_text(json.dumps(doc, indent=1))
    (out / "optimize.md").write_text(table(doc))


def why_not(r: dict[str, Any]) -> str:
    """Why a configuration is not counted, in words (the table's last column)."""
    st = r["state"]
    if st == "not started":
        return r.get("incomplete") or "not started"
    if st == "failed":
        first = next(iter((r.get("evaluations") or {}).values()), None)
        if first is not None and first.get("status") != "ok":
            return f"default {first.get('status')}: {str(first.get('cause', ''))[:80]}; not counted"
        return "the default was not measured; not counted"
    s = r.get("summary") or {}
    budget = r.get("budget") or "?"
    asked = ", ".join(f"{n} asked {(s.get(n) or {}).get('asked', 0)} of {budget}" for n in SEARCHES)
    why = r.get("incomplete") or "stopped"
    return f"stopped before it finished ({why}: {asked}); not counted"


def table(doc: dict[str, Any]) -> str:
    runs = doc.get("runs") or []
    multi = len(runs) > 1
    budgets = doc.get("budgets") or [doc.get("budget")]
    lines = [
        f"Budget: measured candidates per search (the default included; the same for both searches of a "
        f"configuration): column B ({'/'.join(str(b) for b in budgets)}); each candidate: {doc['repeat']} timed "
        f"launches after {doc['warmup']} warm-ups. Speed-up = default / best on pooled launches of the search's "
        "measurement and a fresh confirmation run; `*` = faster beyond noise (Mann-Whitney p < 0.01 and >= 1 %); "
        "noise = the default's change between its two runs. Counted: finished configurations only (both searches "
        "spent their budget and the confirmation runs were made); a search that did not improve a configuration "
        "beyond noise counts 1.0 in its geometric mean.",
        "",
    ]
    if multi:
        lines.append(
            "Runs: "
            + "; ".join(
                f"{m['run']} = `{m.get('command') or m.get('source', '?')}` ({m.get('device', '?')}, "
                f"{float(m.get('wall_s') or 0):.0f} s)"
                for m in runs
            )
        )
        lines.append("")
    head = "| # | configuration |" + (" run |" if multi else "") + " B | default | timing-only best | x | "
    head += "evidence-guided best | x | noise |"
    lines += [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in doc["results"]:
        run = f" {r['run'] or '-'} |" if multi else ""
        s = r.get("summary") or {}
        if r["state"] != "finished":
            budget = r.get("budget") or "-"
            default = "-" if not s.get("default_ms") else f"{s['default_ms']:.3f} ms"
            why = r.get("why") or why_not(r)
            lines.append(f"| {r['number']} | {r['target']} |{run} {budget} | {default} | - | - | - | - | {why} |")
            continue
        cells = []
        for name in SEARCHES:
            x = s[name]
            mark = "*" if x.get("improved") else ""
            sp = x.get("speedup")
            cells += [f"`{x.get('best') or '-'}`", "-" if sp is None else f"{sp:.3f}{mark}"]
        noise = s.get("run_to_run")
        lines.append(
            f"| {r['number']} | {r['target']} |{run} {r.get('budget', '-')} | {s['default_ms']:.3f} ms | {cells[0]} "
            f"| {cells[1]} | {cells[2]} | {cells[3]} | {'-' if noise is None else f'{noise:.1%}'} |"
        )
    a = doc["aggregate"]
    seed = doc["seed"]
    t, g = a["timing-only"], a["evidence-guided"]

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:+.1f} %"

    n_all = doc["configurations"]
    missing = doc.get("not_finished") or []
    lines += [
        "",
        "| | configurations improved | geometric-mean speed-up |",
        "| --- | --- | --- |",
        f"| timing-only (argus_lab, {doc['device']}) | {t['improved']}/{t['configurations']} "
        f"| {pct(t['geomean_gain'])} |",
        f"| evidence-guided (argus_lab, {doc['device']}) | {g['improved']}/{g['configurations']} "
        f"| {pct(g['geomean_gain'])} |",
        f"| seed: without evidence | - | {pct(seed['geomean_without_evidence'])} |",
        f"| seed: with Argus evidence | {seed['improved_with_evidence']}/{seed['configurations']} "
        f"| {pct(seed['geomean_with_evidence'])} |",
        "",
        f"Finished: {doc['measured']} of {n_all} configurations"
        + (f" (not finished: {', '.join(str(n) for n in missing)})" if missing else "")
        + f". Evidence-guided ahead by > 1 %: {a['guided_better']} configurations; timing-only ahead: "
        f"{a['timing_better']}. Wall time {doc['wall_s']:.0f} s" + (f" over {len(runs)} runs" if multi else "") + ".",
    ]
    return "\n".join(lines) + "\n"


__all__ = [
    "SCHEMA",
    "SEARCHES",
    "aggregate",
    "assemble",
    "counted",
    "finished",
    "geomean",
    "merge",
    "numbered",
    "read_meta",
    "read_results",
    "state",
    "table",
    "why_not",
    "write",
]
