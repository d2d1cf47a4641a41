"""The measured process's memory per kernel record during a timing run, on the GPU (bench/scale_bench.py measures
the part after decoding on any machine).

Usage (on the H200, from the repository root)::

    python3 scripts/gpu/kernel_record_memory.py [--kernels-per-step 1000] [--steps 300] [--out DIR]
    python3 scripts/gpu/kernel_record_memory.py --steps 1000 --dry-run    # no GPU: the CPU parts only

A step launches ``--kernels-per-step`` small elementwise kernels inside one region.  The same steps run first with
no measurement (the workload's own peak, ``VmHWM``), then one short measurement of one step (CUPTI, DuckDB, Arrow
and the native extension loaded: costs that do not grow with the run), then under ``argus_lab.measure(step,
"gpu.time", ...)`` in the same process; (peak after - peak before the long measurement) / kernel records is what
argus_lab costs per record at its peak (``bytes_per_record_from_workload`` counts from the workload's own peak
instead, the first load included): CUPTI's activity buffers (a pool of a few, each decoded as CUPTI completes it),
the compact decoded columns, the launch records, the kernels table made in batches and written to the store (a long
run's by a fresh process: ``argus_lab.store.handoff``), and the join when it runs in this process (runs of at least
200,000 kernel records are joined in a fresh process: ``--join-here`` joins them here, as before).  Prints one JSON
line, with the collector's own account of its buffers and decoding (its provenance).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path


def peak_mib(key: str = "VmHWM:") -> float:
    return next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith(key)) / 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels-per-step", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--join-here", action="store_true", help="join in the measured process whatever the run's size")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: build the native extension, print what would run")
    args = ap.parse_args(argv)
    if args.dry_run:
        return dry_run(args)
    import torch

    import argus_lab
    from argus_lab.app import join_process

    if args.join_here:
        join_process.FRESH_PROCESS_RECORDS = 1 << 62

    x = torch.ones(256, device="cuda")
    n = args.kernels_per_step

    took: list[float] = []  # each step's wall time: the workload alone, then under the measurement

    def step() -> None:
        t = time.perf_counter()
        with argus_lab.region("step"):
            y = x
            for _ in range(n):
                y = y + 1.0
        torch.cuda.synchronize()
        took.append(time.perf_counter() - t)

    for _ in range(args.steps + 1):  # the workload alone, as many steps as the measurement runs
        step()
    plain = statistics.median(took[1:])
    took.clear()
    cold = peak_mib()  # the workload's own peak, before argus_lab measured anything
    # one short measurement first (its own store): CUPTI, DuckDB, Arrow and the native extension loaded, the costs
    # that do not grow with the run; the peak after it is what the long measurement is counted from
    argus_lab.measure(step, "gpu.time", repeat=1, warmup=0, store=str(Path(tempfile.mkdtemp()) / "w.duckdb"),
                      progress=False)  # fmt: skip
    took.clear()
    before = peak_mib()
    t0 = time.perf_counter()
    store = Path(tempfile.mkdtemp()) / "mem.duckdb"
    report = argus_lab.measure(step, "gpu.time", repeat=args.steps, warmup=1, store=str(store), progress=False)
    seconds = time.perf_counter() - t0
    after = peak_mib()
    kernels = int(report.store.rows("SELECT count(*) FROM kernels")[0][0])
    prov = report.store.rows("SELECT settings FROM provenance WHERE backend = 'cupti'")
    cupti = json.loads(prov[0][0]) if prov and prov[0][0] else {}
    out = {
        "joined_in": "fresh process" if kernels >= join_process.FRESH_PROCESS_RECORDS else "this process",
        "decode": cupti.get("decode"),
        "buffers": cupti.get("buffers"),
        "decode_s": cupti.get("decode_s"),
        "buffer_decode_s": cupti.get("buffer_decode_s"),
        "buffers_completed_during_run": cupti.get("buffers_completed_during_run"),
        "dropped_records": cupti.get("dropped_records"),
        "kernels": kernels,
        "peak_workload_mib": round(cold, 1),
        "peak_before_mib": round(before, 1),
        "peak_after_mib": round(after, 1),
        "bytes_per_record": round((after - before) * 2**20 / max(kernels, 1), 1),
        # counted from the workload's own peak, the libraries' first load included (the figure recorded before)
        "bytes_per_record_from_workload": round((after - cold) * 2**20 / max(kernels, 1), 1),
        "rss_after_mib": round(peak_mib("VmRSS:"), 1),
        "measure_s": round(seconds, 2),
        # what the timing run (CUPTI, the launch callback, the pool decoding buffers as they complete) does to this
        # launch-bound step: the median step under the measurement over the median step alone, and the slowest
        "step_ms_alone": round(plain * 1e3, 3),
        "step_ms_measured": round(statistics.median(took[1:]) * 1e3, 3),
        "step_ratio": round(statistics.median(took[1:]) / plain, 4),
        "step_ratio_p95": round(statistics.quantiles(took[1:], n=20)[-1] / plain, 4),
        "step_ratio_max": round(max(took[1:]) / plain, 4),
        "store_mib": round(store.stat().st_size / 2**20, 1),
        # bytes a kernel record holds while the evidence is made, by raw column and run-wide array (collector's count)
        "held_per_record": cupti.get("held_per_record"),
    }
    print(json.dumps(out))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"kernel_record_memory{'-join-here' if args.join_here else ''}.json").write_text(
            json.dumps(out, indent=1)
        )
    return 0


def dry_run(args: argparse.Namespace) -> int:
    """The CPU parts: the imports the run makes, the native extension built from this tree's ``native.c`` (the launch
    records' export), and where a run of this size is joined; prints one JSON line."""
    from argus_lab.app import join_process
    from argus_lab.backends.cupti import native

    built = native.build()
    kernels = (args.steps + 1) * args.kernels_per_step  # the warmup step too
    out = {
        "dry_run": True,
        "native": built.note,
        "kernels": kernels,
        "joined_in": "this process"
        if args.join_here or kernels < join_process.FRESH_PROCESS_RECORDS
        else "fresh process",
    }
    print(json.dumps(out))
    return 0 if built.module is not None else 1


if __name__ == "__main__":
    sys.exit(main())
