#!/usr/bin/env python3
"""Record how many Nsight Compute replay passes common metrics need on this GPU, as the planner's pass table.

Run it on the GPU machine with a Python that has torch (the H200 test machine: ``/opt/torch/.venv/bin/python``)::

    /opt/torch/.venv/bin/python scripts/record_ncu_passes.py argus_lab/data/ncu_passes_gh100.json

For every metric in :data:`METRICS` alone, then for the sets in :data:`COMBINATIONS` (built from the metrics that
worked alone), it runs::

    ncu --metrics <set> --csv --page raw --launch-count 1 --cache-control none --clock-control none \\
        <python> -c <tiny torch workload>

and reads the ``profiler__replayer_passes`` column of the profiled kernel (one ``torch.ones`` fill kernel; the pass
count depends on the metric set and the chip, not on the kernel).  Invocations run ``--jobs`` at a time; a time
budget (``--budget``, default 150 s) stops launching new ones so the whole script ends within 3 minutes, and the
table lists what was skipped.  Metrics ncu rejects are listed under ``failed`` with ncu's message.

The table (JSON, read by :class:`argus_lab.plan.passes.TablePassModel`) holds ``metrics`` (passes alone),
``combinations`` (``[{"name", "metrics", "passes"}]``), ``failed``, ``skipped``, the device, ncu and driver
versions, the command line and how long each invocation took.  Standard library only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

NCU = "/usr/local/cuda/bin/ncu"

METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_read.max",
    "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_bytes.sum",
    "lts__t_sector_hit_rate.pct",
    "l1tex__t_bytes.sum",
    "l1tex__t_sector_hit_rate.pct",
    "sm__cycles_elapsed.avg",
    "sm__cycles_active.avg",
    "smsp__inst_executed.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "smsp__sass_inst_executed_op_global_ld.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "smsp__warps_issue_stalled_long_scoreboard_per_warp_active.pct",
    "smsp__warps_issue_stalled_barrier_per_warp_active.pct",
    "launch__registers_per_thread",
)
"""Metrics recorded alone (common choices from the Nsight Compute sections)."""

BENCH_SET: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sector_hit_rate.pct",
    "smsp__inst_executed.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
)
"""The counters of bench/plan_bench.py's request: their combined count is ncu's own pass count for that request."""

COMBINATIONS: dict[str, tuple[str, ...]] = {
    "reference_3": (
        "gpu__time_duration.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__bytes_read.sum",
    ),
    "bench_7": BENCH_SET,
    "memory_4": ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum", "l1tex__t_bytes.sum"),
    "dram_pair": ("dram__bytes_read.sum", "dram__bytes_write.sum"),
    "same_counter_pair": ("dram__bytes_read.sum", "dram__bytes_read.max"),
    "fp_mix_4": (
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
        "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
        "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
        "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum",
    ),
    "stalls_pair": (
        "smsp__warps_issue_stalled_long_scoreboard_per_warp_active.pct",
        "smsp__warps_issue_stalled_barrier_per_warp_active.pct",
    ),
    "cycles_inst_pair": ("sm__cycles_active.avg", "smsp__inst_executed.sum"),
    "throughputs_3": (
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    ),
    "all": METRICS,
}
"""Metric sets recorded together (reduced to the metrics that worked alone)."""

WORKLOAD = (
    "import torch\n"
    "x = torch.ones(1 << 16, device='cuda')\n"
    "torch.cuda.synchronize()\n"
    "p = torch.cuda.get_device_properties(0)\n"
    "print(f'ARGUS_DEVICE|{p.name}|{p.major}.{p.minor}', flush=True)\n"
)
"""The profiled program: one fill kernel, then the device name and compute capability on stdout."""

NCU_FLAGS = ("--csv", "--page", "raw", "--launch-count", "1", "--cache-control", "none", "--clock-control", "none")


def parse_passes(stdout: str) -> tuple[int | None, list[str], str]:
    """From ncu's ``--csv --page raw`` output: (replayer passes, column names, device line or "")."""
    lines = stdout.splitlines()
    device = next((ln for ln in lines if ln.startswith("ARGUS_DEVICE|")), "")
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID",')), None)
    if start is None:
        return None, [], device
    rows = list(csv.reader(lines[start:]))
    header = rows[0]
    if "profiler__replayer_passes" not in header or len(rows) < 3:
        return None, header, device
    col = header.index("profiler__replayer_passes")
    values = [r[col].replace(",", "") for r in rows[2:] if len(r) > col and r[col].strip()]
    if not values:
        return None, header, device
    return round(float(values[0])), header, device


def run_set(ncu: str, python: str, metrics: tuple[str, ...], timeout: float) -> dict[str, object]:
    """Profile the workload once with ``metrics``; the result is passes or an error."""
    cmd = [ncu, "--metrics", ",".join(metrics), *NCU_FLAGS, python, "-c", WORKLOAD]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(1.0, timeout), check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s", "seconds": round(time.monotonic() - t0, 2)}
    except OSError as exc:
        return {"error": f"cannot run {ncu}: {exc}", "seconds": round(time.monotonic() - t0, 2)}
    seconds = round(time.monotonic() - t0, 2)
    passes, header, device = parse_passes(proc.stdout)
    if passes is None:
        text = (proc.stdout + "\n" + proc.stderr).splitlines()
        errors = [ln.strip() for ln in text if "error" in ln.lower()][:3] or [ln for ln in text if ln][-3:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(errors), "seconds": seconds}
    missing = [m for m in metrics if m not in header and not any(h.startswith(m + ".") for h in header)]
    out: dict[str, object] = {"passes": passes, "seconds": seconds, "device": device}
    if missing:
        out["missing_columns"] = missing
    return out


LIVE_SETS: dict[str, tuple[str, ...]] = {
    "reference_3": COMBINATIONS["reference_3"],
    "cache_4": (
        "lts__t_sector_hit_rate.pct",
        "l1tex__t_sector_hit_rate.pct",
        "smsp__inst_executed.sum",
        "sm__cycles_active.avg",
    ),
    "mixed_3": (
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "lts__t_sector_hit_rate.pct",
        "launch__registers_per_thread",
    ),
    "tensor_3": (
        "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active",
        "lts__t_sector_hit_rate.pct",
        "dram__bytes_write.sum",
    ),
}
"""Metric sets whose live CUPTI count is compared with ncu's (one recorded in the table, three that are not)."""


def compare_live(
    model: Any, sets: dict[str, tuple[str, ...]], ncu: str, python: str, timeout: float, jobs: int = 4
) -> dict[str, dict[str, Any]]:
    """For each named set: the pass model's count (``model.passes``), where it came from, and ncu's
    ``profiler__replayer_passes`` for the same set (ncu runs ``jobs`` at a time)."""
    out: dict[str, dict[str, Any]] = {}
    for name, metrics in sets.items():
        origin = getattr(model, "origin", None)
        out[name] = {
            "metrics": list(metrics),
            "model": model.passes(metrics),
            "from": origin(metrics) if origin is not None else "",
        }
        raw = getattr(model, "cupti_passes", None)
        if raw is not None:
            out[name]["cupti"] = raw(metrics)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {name: pool.submit(run_set, ncu, python, metrics, timeout) for name, metrics in sets.items()}
        for name, fut in futures.items():
            got = fut.result()
            out[name]["ncu"] = got.get("passes")
            out[name]["ncu_error"] = got.get("error", "")
            out[name]["ncu_seconds"] = got.get("seconds")
            out[name]["equal"] = out[name]["ncu"] == out[name]["model"]
    return out


def _is_metric_error(error: str) -> bool:
    low = error.lower()
    return "metric" in low and ("fail" in low or "invalid" in low or "not" in low)


def run_phase(
    jobs: list[tuple[str, tuple[str, ...]]], args: argparse.Namespace, deadline: float, workers: int
) -> tuple[dict[str, dict[str, object]], list[str]]:
    """Run the named metric sets ``workers`` at a time until ``deadline``; (results, names skipped)."""
    results: dict[str, dict[str, object]] = {}
    skipped: list[str] = []

    def one(name: str, metrics: tuple[str, ...]) -> None:
        left = deadline - time.monotonic()
        if left < 3:
            skipped.append(name)
            return
        results[name] = run_set(args.ncu, args.python, metrics, min(args.timeout, left))
        status = results[name].get("passes", results[name].get("error"))
        print(f"  {name}: {status}  ({results[name]['seconds']} s)", flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        for fut in [pool.submit(one, n, m) for n, m in jobs]:
            fut.result()
    return results, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "out", type=Path, help="where to write the JSON table, e.g. argus_lab/data/ncu_passes_gh100.json"
    )
    parser.add_argument("--ncu", default=NCU if os.path.exists(NCU) else (shutil.which("ncu") or NCU))
    parser.add_argument("--python", default=sys.executable, help="Python with torch that runs the workload")
    parser.add_argument("--jobs", type=int, default=4, help="ncu invocations at a time (default 4)")
    parser.add_argument("--budget", type=float, default=150.0, help="seconds after which nothing new starts")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one invocation may take")
    parser.add_argument("--chip", default="GH100", help="chip name written into the table (default GH100)")
    args = parser.parse_args(argv)
    t_start = time.monotonic()
    deadline = t_start + args.budget

    version = subprocess.run([args.ncu, "--version"], capture_output=True, text=True, check=False).stdout
    ncu_version = next((ln.split()[1] for ln in version.splitlines() if ln.startswith("Version")), version.strip())
    print(f"ncu {ncu_version} at {args.ncu}; workload python {args.python}; {args.jobs} at a time", flush=True)

    print(f"{len(METRICS)} metrics alone:", flush=True)
    singles, skipped = run_phase([(m, (m,)) for m in METRICS], args, deadline, args.jobs)
    retry = [m for m, r in singles.items() if "error" in r and not _is_metric_error(str(r["error"]))]
    if retry:
        print(f"retrying {len(retry)} failure(s) one at a time:", flush=True)
        again, more = run_phase([(m, (m,)) for m in retry], args, deadline, 1)
        singles.update(again)
        skipped += more
    ok = [m for m in METRICS if "passes" in singles.get(m, {})]

    combos: list[tuple[str, tuple[str, ...]]] = []
    for name, metrics in COMBINATIONS.items():
        kept = tuple(m for m in metrics if m in ok)
        if len(kept) >= 2:
            combos.append((name, kept))
    print(f"{len(combos)} combinations:", flush=True)
    together, skipped_c = run_phase(combos, args, deadline, args.jobs)
    skipped += skipped_c

    device = next((str(r["device"]) for r in [*singles.values(), *together.values()] if r.get("device")), "")
    _, gpu, capability = [*device.split("|"), "", "", ""][:3]
    driver = ""
    if shutil.which("nvidia-smi"):
        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    recorded = [
        {"name": n, "metrics": list(ms), "passes": together[n]["passes"]}
        for n, ms in combos
        if "passes" in together.get(n, {})
    ]
    everything = {**singles, **together}
    failed = {n: r["error"] for n, r in everything.items() if "error" in r}
    table: dict[str, Any] = {
        "synthetic": False,
        "note": (
            "Replay passes Nsight Compute needs per metric set, read from the profiler__replayer_passes column "
            "(--csv --page raw) while profiling one torch.ones fill kernel.  Recorded by "
            "scripts/record_ncu_passes.py; record again with the command below."
        ),
        "command": " ".join([Path(args.python).as_posix(), "scripts/record_ncu_passes.py", str(args.out)]),
        "ncu_command": [args.ncu, "--metrics", "<set>", *NCU_FLAGS, args.python, "-c", "<workload>"],
        "workload": WORKLOAD,
        "recorded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "chip": args.chip,
        "gpu": gpu,
        "compute_capability": capability,
        "driver": driver,
        "ncu_version": ncu_version,
        "metrics": {m: singles[m]["passes"] for m in ok},
        "combinations": recorded,
        "failed": failed,
        "skipped": sorted(skipped),
        "warnings": {n: r["missing_columns"] for n, r in everything.items() if "missing_columns" in r},
        "seconds": {n: r["seconds"] for n, r in everything.items()},
        "total_seconds": round(time.monotonic() - t_start, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")

    print(f"\nwrote {args.out} in {table['total_seconds']} s ({gpu or 'device unknown'}, ncu {ncu_version})")
    print(f"  metrics recorded alone: {len(ok)} of {len(METRICS)}")
    for m in ok:
        print(f"    {singles[m]['passes']:>3}  {m}")
    print(f"  combinations recorded: {len(recorded)} of {len(combos)}")
    for c in recorded:
        total = sum(int(str(singles[m]["passes"])) for m in c["metrics"])
        print(f"    {c['passes']:>3}  {c['name']} ({len(c['metrics'])} metrics; {total} if passes added up)")
    if failed:
        print(f"  failed: {len(failed)}")
        for n, e in failed.items():
            print(f"    {n}: {e}")
    if skipped:
        print(f"  skipped (time budget {args.budget:.0f} s reached): {', '.join(sorted(skipped))}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
