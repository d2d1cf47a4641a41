"""Planner benchmark: planning time for a dozen signals over four backends, and the plan beside the alternatives.

Usage::

    .venv/bin/python bench/plan_bench.py [--table argus_lab/data/ncu_passes_gh100.json] [--repeats 200]

Prints a markdown section ("## Planner") for docs/benchmarks.md: the median planning time (a fresh pass model per
repetition, so nothing is cached between plans, and a warm one), the run count beside a naive one-run-per-signal
plan, and the replay passes of the counter runs beside ncu's own pass count for the same metrics collected in one
run (the ``bench_7`` combination of the recorded table, written by scripts/record_ncu_passes.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from argus_lab.plan import Request, plan
from argus_lab.plan.passes import TablePassModel

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "argus_lab" / "data" / "ncu_passes_gh100.json"
SYNTHETIC = ROOT / "tests" / "data" / "synthetic" / "ncu_passes_gh100_synthetic.json"

sys.path.insert(0, str(ROOT / "scripts"))
from record_ncu_passes import BENCH_SET as COUNTERS  # noqa: E402  (the set whose combined passes were recorded)

NAMED = ("host.wall", "gpu.time", "gpu.kernels", "compile.registers", "compile.spills")
SIGNALS = (*NAMED, *(f"hw:{m}" for m in COUNTERS))
"""Twelve signals over four backends: host, cupti, compiler (static) and ncu."""


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, {platform.system()}"


def timed(fn: object, repeats: int) -> float:
    """Median milliseconds of ``fn()``."""
    assert callable(fn)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", type=Path, default=RECORDED if RECORDED.exists() else SYNTHETIC)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args(argv)
    data = json.loads(args.table.read_text())
    warm_model = TablePassModel.from_dict(data, args.table.name)
    ncu_own = next((c["passes"] for c in data.get("combinations", ()) if set(c["metrics"]) == set(COUNTERS)), None)
    singles = [warm_model.single(m) for m in COUNTERS]

    print("## Planner\n")
    print(f"Machine: {machine()}; measured {time.strftime('%Y-%m-%d', time.gmtime())}.  ")
    print(f"Command: `.venv/bin/python bench/plan_bench.py --table {args.table.resolve().relative_to(ROOT)}`.  ")
    print(f"Pass table: {warm_model.label}{' (SYNTHETIC: the H200 table is not recorded yet)' * warm_model.synthetic}.")
    print()
    print(
        f"Request: {len(SIGNALS)} signals over 4 backends (host, cupti, compiler, ncu): "
        + ", ".join(f"`{s}`" for s in SIGNALS)
        + "; repeat 5, warm-up 2."
    )
    print()
    print(
        "| max_passes_per_run | runs | naive runs (one per signal) | counter runs: passes each | "
        "replay passes, plan total | plan cost | naive cost | planning median, cold (ms) | warm (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for bound in (8, 16, 64):
        request = Request.build(list(SIGNALS), "decode/*/attn; instances=2:", 5, 2, max_passes_per_run=bound)

        def cold(request: Request = request) -> None:
            plan(request, TablePassModel.from_dict(data, args.table.name))

        def warm(request: Request = request) -> None:
            plan(request, warm_model)

        cold_ms = timed(cold, args.repeats)
        warm_ms = timed(warm, args.repeats)
        p = plan(request, warm_model)
        replay = [r.passes for r in p.runs if "ncu" in r.backends]
        print(
            f"| {bound} | {len(p.runs)} | {p.naive_runs} | {' + '.join(map(str, replay))} | {sum(replay)} | "
            f"{p.cost:g} | {p.naive_cost:g} | {cold_ms:.3f} | {warm_ms:.3f} |"
        )
    print()
    kind = "synthetic" if warm_model.synthetic else "recorded on the GPU"
    own = f"{ncu_own} ({kind})" if ncu_own is not None else "not recorded in this table"
    print(
        f"ncu's own pass count for the {len(COUNTERS)} counters collected in one run: {own}; "
        f"the model's estimate for that set: {warm_model.passes(COUNTERS)}; "
        f"the counters' passes recorded alone: {' + '.join(map(str, singles))} = {sum(singles)} "
        "(the naive plan replays this many passes).  "
        "Runs hold the workload's warm-up + measured executions; cost = executions x passes x cost factors."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
