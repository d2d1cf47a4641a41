#!/usr/bin/env python3
"""The recorded optimisation table's figures: baselines, the best of each space, and the three searchers replayed
over it at equal budgets and ten seeds; JSON, Markdown, and the section of docs/benchmarks.md.

    python bench/replay_report.py tests/data/gpu/optimize_table               # JSON + Markdown next to the data
    python bench/replay_report.py tests/data/gpu/optimize_table --docs docs/benchmarks.md   # and the docs section
    python bench/replay_report.py tests/data/gpu/optimize_table --install OUT/table.tgz --pack --docs docs/benchmarks.md

Verdicts (one rule everywhere): a candidate *beats* a baseline when its recorded samples are faster by the two-sided
Mann-Whitney U test (p < 0.01) and its median is faster by more than the noise: 1 %, or the run-to-run change of
baseline (a) between its two passes when that is larger.  A configuration is *improved* by a search when the best
candidate the search read beats baseline (a), Triton's autotuner over the tutorials' list.  Per seed, the seed's two
numbers: improved configurations over those counted, and the geometric mean of baseline (a)'s median over the
best's (every configuration's own speed-up, below 1 when the search's best is slower); then their mean, minimum and
maximum over the seeds.  Configurations are counted when the recording finished them (both baselines, the default).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from argus_lab.report.diff import mann_whitney  # noqa: E402
from bench.recorded_configs import PEAKS  # noqa: E402
from bench.replay_searches import SEARCHERS, Replay  # noqa: E402
from bench.replay_table import ConfigTable, load  # noqa: E402

SCHEMA = "argus_lab.recorded-table-report/1"
P_LIMIT = 0.01
MIN_GAIN = 0.01
SEEDS = tuple(range(10))
BUDGET = 10
BUDGETS = (6, 10, 16)
SEED_FIGURES = {"configurations": 44, "improved_with_evidence": 39, "geomean_without_evidence": 0.054,
                "geomean_with_evidence": 0.089}  # fmt: skip
"""The seed's figures (the Argus paper: AlphaEvolve over 44 configurations without and with Argus's evidence)."""
NAMES = {"timing": "evolutionary, timing only", "evidence": "evolutionary + argus_lab evidence",
         "rules": "argus_lab rule set"}  # fmt: skip
DEFAULT_COMMAND = "OUT=$OUT GPU_CHECK_PARTS=table scripts/gpu-check"
"""How the committed recording was made (the text of the section says it)."""
BEGIN = "<!-- recorded-table:begin (bench/replay_report.py writes this section) -->"
END = "<!-- recorded-table:end -->"


def noise(t: ConfigTable) -> float:
    """Baseline (a)'s run-to-run change between its two passes (0 when the second pass is missing)."""
    m1, m2 = t.autotune.median(1), t.autotune.median(2)
    return abs(m2 / m1 - 1.0) if math.isfinite(m1) and math.isfinite(m2) and m1 > 0 else 0.0


def beats(base: np.ndarray, other: np.ndarray, noise_frac: float) -> dict[str, Any]:
    """Whether ``other`` is faster than ``base`` beyond noise; the speed-up (base median over other median), p."""
    if len(base) == 0 or len(other) == 0:
        return {"speedup": None, "p": None, "faster": False}
    speed = float(np.median(base) / np.median(other))
    _, p = mann_whitney(base, other)
    return {"speedup": speed, "p": p, "faster": bool(p < P_LIMIT and speed > 1.0 + max(MIN_GAIN, noise_frac))}


def tflops(t: ConfigTable, median_ns: float) -> float | None:
    return t.cfg.flops / median_ns / 1e3 if math.isfinite(median_ns) and median_ns > 0 else None


def peak_fraction(t: ConfigTable, median_ns: float) -> float | None:
    tf = tflops(t, median_ns)
    return None if tf is None else tf * 1e12 / PEAKS[t.cfg.dtype]


def config_row(t: ConfigTable) -> dict[str, Any]:
    """One configuration: both baselines, the best of its space, each with TFLOP/s and the fraction of peak."""
    best = t.best()
    a1, v1 = t.autotune.passes.get(1, np.zeros(0)), t.vendor.passes.get(1, np.zeros(0))
    nz = noise(t)

    def fig(median: float) -> dict[str, Any]:
        return {"median_ns": median if math.isfinite(median) else None, "tflops": tflops(t, median),
                "peak_fraction": peak_fraction(t, median)}  # fmt: skip

    row: dict[str, Any] = {
        "config": t.number, "label": t.cfg.label, "why": t.cfg.why, "counted": t.usable,
        "candidates": len(t.candidates), "ok": sum(r.ok for r in t.candidates.values()),
        "vendor": fig(t.vendor.median(1)), "autotune": fig(t.autotune.median(1)) | {"picked": t.autotune.picked,
        "tune_s": t.autotune.tune_s}, "noise": nz, "autotune_vs_vendor": beats(v1, a1, nz),
    }  # fmt: skip
    if best is not None:
        row["best"] = fig(best.median) | {"key": best.key}
        row["best_vs_autotune"] = beats(a1, best.samples, nz)
        row["best_vs_vendor"] = beats(v1, best.samples, nz)
    return row


def replay(tables: dict[int, ConfigTable], budget: int, seeds: tuple[int, ...]) -> dict[str, Any]:
    """Every searcher at ``budget`` over every counted configuration and seed: per seed the two numbers, per
    configuration what each seed found."""
    counted = [t for t in tables.values() if t.usable]
    out: dict[str, Any] = {"budget": budget, "seeds": list(seeds), "configurations": len(counted), "searchers": {}}
    for name, fn in SEARCHERS.items():
        per_seed = []
        per_config: dict[int, list[dict[str, Any]]] = {t.number: [] for t in counted}
        for seed in seeds:
            improved, vendor, speeds = 0, 0, []
            for t in counted:
                r: Replay = fn(t, budget, seed)
                best = t.candidates[r.best] if r.best else None
                samples = best.samples if best is not None else np.zeros(0)
                va = beats(t.autotune.passes[1], samples, noise(t))
                vv = beats(t.vendor.passes[1], samples, noise(t))
                improved += va["faster"]
                vendor += vv["faster"]
                speeds.append(va["speedup"] or 0.0)
                per_config[t.number].append({"seed": seed, "best": r.best, "read": len(r.read),
                                             "speedup": va["speedup"], "p": va["p"], "improved": va["faster"],
                                             "beats_vendor": vv["faster"]})  # fmt: skip
            gm = geomean(speeds)
            per_seed.append({"seed": seed, "improved": improved, "geomean": gm, "beats_vendor": vendor})
        out["searchers"][name] = {"name": NAMES[name], "per_seed": per_seed, "summary": spread(per_seed),
                                  "per_config": per_config}  # fmt: skip
    return out


def geomean(values: list[float]) -> float | None:
    """Geometric mean of positive values (``None`` when one is missing or not positive)."""
    if not values or any(v <= 0 for v in values):
        return None
    return float(math.exp(sum(math.log(v) for v in values) / len(values)))


def spread(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean, minimum and maximum over the seeds of each of the seed's numbers."""
    out: dict[str, Any] = {}
    for k in ("improved", "geomean", "beats_vendor"):
        vals = [s[k] for s in per_seed if s[k] is not None]
        out[k] = {"mean": statistics.fmean(vals), "min": min(vals), "max": max(vals)} if vals else None
    return out


def decisions(tables: dict[int, ConfigTable], budget: int, seed: int = 0) -> dict[str, Any]:
    """Every decision of the evidence-fed search (one seed) per configuration, with the evidence it read."""
    from dataclasses import asdict

    out = {}
    for t in tables.values():
        if t.usable:
            r = SEARCHERS["evidence"](t, budget, seed)
            out[t.cfg.label] = {"best": r.best, "decisions": [asdict(d) for d in r.decisions]}
    return out


LOG_VERSIONS = re.compile(r"^torch (?P<torch>\S+) triton (?P<triton>\S+)", re.M)
LOG_DONE = re.compile(r"^done in (?P<wall_s>[0-9.]+) s", re.M)
LOG_DEVICE = re.compile(r"^name, driver_version.*\n(?P<device>[^,\n]+),", re.M)


def record_facts(folder: Path) -> dict[str, Any]:
    """The run's facts: ``record.json`` (the recorder's own), else what the GPU check's log says (``record.log``:
    its ``torch X triton Y`` line, the device from ``nvidia-smi``'s table and the recorder's ``done in N s``)."""
    meta_path, log_path = folder / "record.json", folder / "record.log"
    if meta_path.exists():
        return dict(json.loads(meta_path.read_text()))
    if not log_path.exists():
        return {}
    text = log_path.read_text(errors="replace")
    out: dict[str, Any] = {"source": "record.log"}
    for rx in (LOG_VERSIONS, LOG_DEVICE):
        m = rx.search(text)
        if m:
            out |= {k: v.strip() for k, v in m.groupdict().items()}
    done = LOG_DONE.search(text)
    if done:
        out["wall_s"] = float(done["wall_s"])
    return out


def build(folder: Path, *, seeds: tuple[int, ...] = SEEDS, budgets: tuple[int, ...] = BUDGETS) -> dict[str, Any]:
    """The whole report of one recording."""
    tables = load(folder)
    plan_path = folder / "plan.json"
    meta = record_facts(folder)
    plan = json.loads(plan_path.read_text()) if plan_path.exists() else {}
    rows = [config_row(t) for t in tables.values()]
    counted = [r for r in rows if r["counted"]]
    space_best = sum(bool(r.get("best_vs_autotune", {}).get("faster")) for r in counted)
    return {
        "schema": SCHEMA,
        "source": str(folder),
        "synthetic": bool(plan.get("synthetic")),
        "record": meta,
        "configurations": len(rows),
        "counted": len(counted),
        "rule": f"Mann-Whitney p < {P_LIMIT} and median faster by more than max({MIN_GAIN:.0%}, baseline (a)'s "
        "run-to-run change)",
        "space_best_beats_autotune": space_best,
        "space_best_beats_vendor": sum(bool(r.get("best_vs_vendor", {}).get("faster")) for r in counted),
        "autotune_beats_vendor": sum(bool(r["autotune_vs_vendor"]["faster"]) for r in counted),
        "rows": rows,
        "replays": {str(b): replay(tables, b, seeds) for b in budgets},
        "main_budget": BUDGET if BUDGET in budgets else budgets[0],
        "seed_figures": SEED_FIGURES,
    }


# -- Markdown ---------------------------------------------------------------------------------------------------
def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f} ms"


def _tf(r: dict[str, Any]) -> str:
    if r.get("tflops") is None:
        return "-"
    return f"{r['tflops']:.0f} ({r['peak_fraction']:.0%})"


def _x(v: dict[str, Any] | None) -> str:
    if not v or v.get("speedup") is None:
        return "-"
    return f"{v['speedup']:.3f}{'*' if v['faster'] else ''}"


def _space_sizes(doc: dict[str, Any]) -> str:
    """The range of recorded candidates per configuration, e.g. ``30-50``."""
    sizes = [int(r["candidates"]) for r in doc["rows"]]
    return "-" if not sizes else f"{min(sizes)}-{max(sizes)}" if min(sizes) != max(sizes) else str(sizes[0])


def markdown(doc: dict[str, Any], command: str) -> str:
    """The section: how it was recorded and replayed, the seed's numbers per searcher, then one row per
    configuration."""
    main = doc["replays"][str(doc["main_budget"])]
    n = main["configurations"]
    lines = []
    if doc["synthetic"]:
        lines += ["**SYNTHETIC TABLE** (made by tests/recorded_table_synth.py, not measured): these figures only "
                  "exercise the pipeline.", ""]  # fmt: skip
    rec = doc.get("record", {})
    lines += [
        f"Recorded: `{command}` on {rec.get('device', 'the GPU')} (torch {rec.get('torch', '?')}, Triton "
        f"{rec.get('triton', '?')}, {rec.get('wall_s', '?')} s); {doc['configurations']} configurations, "
        f"{doc['counted']} counted (finished with both baselines). Every candidate of each space, both baselines "
        "and a second pass of both: 30 launches after 5 warm-ups, CUDA events, every sample kept.",
        "",
        "The searches **replay the recorded table**: a searcher measures a candidate by reading its recorded samples "
        "and evidence, and its budget counts distinct candidates read. One GPU run thus serves three searchers x "
        f"{len(main['seeds'])} seeds x {n} configurations at equal budgets, and every searcher sees the same "
        "measurement of a candidate (the comparison is of the searches, not of run-to-run noise).",
        "",
        f"Verdict: {doc['rule']}. Improved = the best candidate a search read beats baseline (a) (Triton's "
        "autotuner over the tutorials' list). Geo-mean: of baseline (a)'s median over the best's, every counted "
        "configuration (below 1 when a search's best is slower).",
        "",
        f"Budget {main['budget']} candidates read per search (of {_space_sizes(doc)} per space):",
        "",
        "| searcher | improved over (a), mean (min-max) over seeds | geo-mean speed-up over (a), mean (min-max) | "
        "best beats the vendor kernel |",
        "| --- | --- | --- | --- |",
    ]
    for s in main["searchers"].values():
        sm = s["summary"]
        im, gm, bv = sm["improved"], sm["geomean"], sm["beats_vendor"]
        gtxt = "-" if gm is None else f"{gm['mean'] - 1:+.1%} ({gm['min'] - 1:+.1%}..{gm['max'] - 1:+.1%})"
        lines.append(
            f"| {s['name']} | {im['mean']:.1f}/{n} ({im['min']}-{im['max']}) | {gtxt} | "
            f"{bv['mean'] / n:.0%} of configurations |"
        )
    sf = doc["seed_figures"]
    lines += [
        f"| seed: AlphaEvolve without / with Argus | - / {sf['improved_with_evidence']}/{sf['configurations']} | "
        f"{sf['geomean_without_evidence']:+.1%} / {sf['geomean_with_evidence']:+.1%} | - |",
        "",
        "Other budgets (mean over seeds, improved / geo-mean): "
        + "; ".join(
            f"{b}: "
            + ", ".join(
                f"{k} {v['summary']['improved']['mean']:.1f}/{r['configurations']} "
                f"{(v['summary']['geomean'] or {'mean': float('nan')})['mean'] - 1:+.1%}"
                for k, v in r["searchers"].items()
            )
            for b, r in doc["replays"].items()
        ),
        "",
        f"The best candidate of the whole space beats baseline (a) in {doc['space_best_beats_autotune']}/"
        f"{doc['counted']} configurations and the vendor kernel in {doc['space_best_beats_vendor']}/"
        f"{doc['counted']}; baseline (a) beats the vendor kernel in {doc['autotune_beats_vendor']}/{doc['counted']}.",
        "",
        "TFLOP/s (fraction of the H200's dense peak: bf16/fp16 989.4, fp8 1978.9 TFLOP/s); x vs (a) = baseline "
        "(a)'s median / the best's, x vs vendor = the vendor kernel's median / the best's; `*` = the best beats it "
        "by the verdict; searchers: median over seeds of their best's speed-up over (a), "
        "and in how many seeds it was improved.",
        "",
        "| # | configuration | vendor | (a) autotuner | (a) noise | best of space | x vs (a) | x vs vendor | "
        + " | ".join(s["name"] for s in main["searchers"].values())
        + " |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |" + " --- |" * len(main["searchers"]),
    ]
    for r in doc["rows"]:
        cols = []
        for s in main["searchers"].values():
            runs = s["per_config"].get(str(r["config"])) or s["per_config"].get(r["config"]) or []
            sp = [x["speedup"] for x in runs if x["speedup"] is not None]
            cols.append(f"{statistics.median(sp):.3f} ({sum(x['improved'] for x in runs)}/{len(runs)})" if sp else "-")
        best = r.get("best", {})
        vs_vendor = r.get("best_vs_vendor")
        vend = _x(vs_vendor)
        lines.append(
            f"| {r['config']} | {r['label']}{'' if r['counted'] else ' (not counted)'} | {_tf(r['vendor'])} | "
            f"{_tf(r['autotune'])} | {r['noise']:.1%} | {_tf(best) if best else '-'} | "
            f"{_x(r.get('best_vs_autotune'))} | {vend} | " + " | ".join(cols) + " |"
        )
    return "\n".join(lines) + "\n"


def write_docs(path: Path, section: str) -> None:
    """Replace the section between :data:`BEGIN` and :data:`END` in ``path`` (appended when missing)."""
    text = path.read_text()
    block = f"{BEGIN}\n{section}{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n## Recorded optimisation table (issue 37)\n\n" + block + "\n"
    path.write_text(text)


def pack(folder: Path) -> None:
    """Gzip the recorded ``.jsonl`` files in place (``load`` reads ``.jsonl.gz`` alike)."""
    import gzip
    import shutil

    for path in sorted(folder.glob("*.jsonl")):
        with path.open("rb") as src, gzip.open(path.with_suffix(".jsonl.gz"), "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()


RECORDED = ("*.jsonl", "*.jsonl.gz", "*.log", "plan.json", "record.json", "report.json", "report.md",
            "decisions.json")  # fmt: skip
"""The files of one recording and its report in the data folder (what :func:`install` replaces)."""


def install(tarball: Path, folder: Path) -> None:
    """Unpack a recording (``OUT/table.tgz`` of the GPU check's part ``table``) into ``folder``, replacing the one
    there; its report and log are kept as ``previous/report.md`` and ``previous/record.log``."""
    import shutil
    import tarfile
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(tarball) as tar:
            tar.extractall(tmp, filter="data")
        found = sorted(Path(tmp).rglob("candidates.jsonl*"))
        if not found:
            msg = f"{tarball} holds no candidates.jsonl: give the OUT/table.tgz the GPU check's part table wrote"
            raise FileNotFoundError(msg)
        src = found[0].parent
        folder.mkdir(parents=True, exist_ok=True)
        for kept in ("report.md", "record.log"):  # the previous recording's figures and how it ran
            if (folder / kept).exists():
                (folder / "previous").mkdir(exist_ok=True)
                shutil.copy2(folder / kept, folder / "previous" / kept)
        for pattern in RECORDED:
            for old in folder.glob(pattern):
                old.unlink()
        for new in src.iterdir():
            if new.is_file():
                shutil.copy2(new, folder / new.name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="the folder bench/record_candidates.py wrote")
    ap.add_argument("--docs", type=Path, help="also write the section of this Markdown file (docs/benchmarks.md)")
    ap.add_argument("--seeds", type=int, default=len(SEEDS))
    ap.add_argument("--command", default=DEFAULT_COMMAND, help="how the data was recorded (for the text)")
    ap.add_argument("--pack", action="store_true", help="gzip the recorded .jsonl files first (they read the same)")
    ap.add_argument("--install", type=Path, help="first unpack this OUT/table.tgz into DATA (replacing its recording; "
                    "the old report is kept as previous/report.md)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.install:
        install(args.install, args.data)
    if args.pack:
        pack(args.data)
    doc = build(args.data, seeds=tuple(range(args.seeds)))
    (args.data / "report.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    dec = decisions(load(args.data), doc["main_budget"])
    (args.data / "decisions.json").write_text(json.dumps(dec, indent=1) + "\n")
    md = markdown(doc, args.command)
    (args.data / "report.md").write_text(md)
    if args.docs:
        write_docs(args.docs, md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
