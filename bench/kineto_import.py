"""Importing a SYNTHETIC 1 M-kernel torch.profiler (Kineto) trace: argus_lab's importer against HTA's loader.

The trace is written the way current Kineto writes it (``libkineto/src/output_json.cpp``): pretty-printed events,
``ts``/``dur`` in microseconds with exactly three decimals relative to ``baseTimeNanoseconds``; ``--regions``
``user_annotation`` ranges on one CPU thread (each mirrored as a ``gpu_user_annotation``), ``--kernels`` kernels
each launched by a ``cudaLaunchKernel`` inside a region and linked to it by ``correlation``; ``--short`` of the
kernels last less than 1 us and ``--zero`` last 0 ns.  The true totals are known in integer ns.

* argus_lab: :func:`argus_lab.import_trace` into a new store (parse, nest, attribute launches, write: the
  ``import``), then the join it runs at the end (``join``), timed apart; peak RSS of the process; CPU seconds.
* with ``--export``: the imported run written back as a Perfetto trace (``argus-lab export x.json``), timed.
* HTA 0.5.0 (``--hta-site DIR``: a folder holding ``HolisticTraceAnalysis`` and its dependencies, put on
  ``PYTHONPATH`` for the same Python; or ``--hta-python``: a Python that has it): ``TraceAnalysis(trace_dir=...)``.

Side by side in one run, each in its own process, on the same file: argus, HTA, argus again (``--rounds``
alternations); the load average of the machine before each.  Run:
``.venv/bin/python bench/kineto_import.py --kernels 1000000 --regions 100000 --hta-site /tmp/hta-site``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BASE_NS = 1_795_938_194_000_000_000

HTA_SCRIPT = """
import json, sys, time, resource
def peak_mib():  # this process's own peak (ru_maxrss of a child starts at its parent's peak)
    return next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM:')) / 1024
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
load = time.perf_counter() - t
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"load_s": load, "cpu_s": r.ru_utime + r.ru_stime, "peak_rss_mib": peak_mib()}))
"""

ARGUS_SCRIPT = """
import json, sys, time, resource
def peak_mib():  # this process's own peak (ru_maxrss of a child starts at its parent's peak)
    return next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM:')) / 1024
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
t, c = time.perf_counter(), cpu()
import argus_lab
from argus_lab.store import Store
store = Store(sys.argv[2])
res = argus_lab.import_trace(sys.argv[1], store)
total_s, total_cpu = time.perf_counter() - t, cpu() - c
got = store.rows("SELECT count(*), sum(end_ns - start_ns), count(*) FILTER (WHERE end_ns = start_ns), "
                 "count(*) FILTER (WHERE end_ns - start_ns < 1000) FROM kernels")[0]
out = {"import_s": total_s - res.join.seconds, "join_s": res.join.seconds, "total_s": total_s,
       "cpu_s": total_cpu, "kernels": got[0], "kernel_ns": int(got[1]), "zero_length": got[2],
       "sub_us": got[3], "classes": res.join.counts.get("kernel", {}),
       "peak_rss_mib": peak_mib()}
if sys.argv[3]:  # the Perfetto export of the imported run
    from argus_lab.app.exporting import export
    t = time.perf_counter()
    done = export(store, sys.argv[3], run_ids=[res.run_id])
    out.update({"export_s": time.perf_counter() - t, "export_mib": done.path.stat().st_size / 2**20,
                "peak_rss_after_export_mib": peak_mib()})
print(json.dumps(out))
"""


def _us(ns: np.ndarray) -> list[str]:
    return [f"{v // 1000}.{v % 1000:03d}" for v in ns.tolist()]


def write_trace(path: Path, kernels: int, regions: int, short: float, zero: float, seed: int = 0) -> dict[str, int]:
    """Write the trace; returns its true totals in integer ns."""
    rng = np.random.default_rng(seed)
    per = kernels // regions
    kernels = per * regions
    r = rng.random(kernels)
    dur = np.where(r < short, rng.integers(1, 1000, kernels), rng.integers(2_000, 20_000, kernels))
    dur = np.where(r > 1.0 - zero, 0, dur).astype(np.int64)
    region_of = np.repeat(np.arange(regions), per)
    step = dur + 1_500
    start = (np.cumsum(step) - step) + region_of * 50_000 + 10_000
    launch = start - 5_000
    r_first, r_end = start[::per], (start + dur)[per - 1 :: per]
    cpu0, cpu1 = r_first - 8_000, r_end - 4_000
    out: list[str] = []
    cpu0_s, cpud_s = _us(cpu0), _us(cpu1 - cpu0)
    g0_s, gd_s = _us(r_first - 1), _us(r_end - r_first + 2)
    for i in range(regions):
        out.append(
            f'  {{\n    "ph": "X", "cat": "user_annotation", "name": "region_{i % 100}", "pid": 4242, "tid": 4242,\n'
            f'    "ts": {cpu0_s[i]}, "dur": {cpud_s[i]},\n    "args": {{\n      "External id": {i + 1}\n    }}\n  }}'
        )
        out.append(
            f'  {{\n    "ph": "X", "cat": "gpu_user_annotation", "name": "region_{i % 100}", "pid": 0, "tid": 7,\n'
            f'    "ts": {g0_s[i]}, "dur": {gd_s[i]},\n    "args": {{\n      "External id": {i + 1}\n    }}\n  }}'
        )
    l_s, k_s, d_s = _us(launch), _us(start), _us(dur)
    for j in range(kernels):
        c = j + 1
        out.append(
            f'  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242,\n'
            f'    "ts": {l_s[j]}, "dur": 1.000,\n    "args": {{\n      "cbid": 211, "correlation": {c}\n    }}\n  }}'
        )
        out.append(
            f'  {{\n    "ph": "X", "cat": "kernel", "name": "kernel_{j % 7}", "pid": 0, "tid": 7,\n'
            f'    "ts": {k_s[j]}, "dur": {d_s[j]},\n    "args": {{\n      "queued": 0, "device": 0, "context": 1,\n'
            f'      "stream": 7, "correlation": {c}, "registers per thread": 32, "shared memory": 0,\n'
            f'      "grid": [4, 1, 1], "block": [128, 1, 1]\n    }}\n  }}'
        )
    head = (
        '{\n  "schemaVersion": 1,\n  "deviceProperties": [],\n  "displayTimeUnit": "ms",\n'
        f'  "baseTimeNanoseconds": {BASE_NS},\n  "traceEvents": [\n'
    )
    tail = '\n  ],\n  "distributedInfo": {"rank": 0, "world_size": 1},\n  "traceName": "bench.json"\n}'
    with path.open("w") as f:
        f.write(head)
        f.write(",\n".join(out))
        f.write(tail)
    return {"kernels": kernels, "kernel_ns": int(dur.sum()), "zero_length": int((dur == 0).sum()),
            "sub_us": int((dur < 1000).sum())}  # fmt: skip


def _run(cmd: list[str], env: dict[str, str]) -> dict[str, object]:
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=7200, env=env)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": res.stderr[-2000:]}


def main() -> None:
    import os
    import statistics

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--regions", type=int, default=100_000)
    ap.add_argument("--short", type=float, default=0.2, help="share of kernels shorter than 1 us")
    ap.add_argument("--zero", type=float, default=0.01, help="share of zero-length kernels")
    ap.add_argument("--hta-python", default="", help="a python with HolisticTraceAnalysis installed")
    ap.add_argument("--hta-site", default="", help="a folder with HolisticTraceAnalysis (put on PYTHONPATH)")
    ap.add_argument("--rounds", type=int, default=1, help="HTA runs, each between two argus runs")
    ap.add_argument("--folder", default="", help="where to write the trace (default: a new temporary folder)")
    ap.add_argument("--reuse", action="store_true", help="keep an existing trace in --folder")
    ap.add_argument("--export", action="store_true", help="also time the Perfetto export of the imported run")
    args = ap.parse_args()
    folder = Path(args.folder or tempfile.mkdtemp(prefix="argus-kineto-"))
    (folder / "trace").mkdir(parents=True, exist_ok=True)
    trace = folder / "trace" / "rank0.json"
    out: dict[str, object] = {}
    if not (args.reuse and trace.exists()):
        t = time.perf_counter()
        out["truth"] = write_trace(trace, args.kernels, args.regions, args.short, args.zero)
        out["write_s"] = time.perf_counter() - t
    out["trace_mib"] = round(trace.stat().st_size / 2**20, 1)
    root = str(Path(__file__).resolve().parents[1])
    argus_env = {"PYTHONPATH": root, "PATH": "/usr/bin:/bin"}
    hta_cmd: list[str] = []
    hta_env = dict(os.environ)
    if args.hta_python:
        hta_cmd = [args.hta_python, "-c", HTA_SCRIPT, str(folder / "trace")]
    elif args.hta_site:
        hta_cmd = [sys.executable, "-c", HTA_SCRIPT, str(folder / "trace")]
        hta_env["PYTHONPATH"] = args.hta_site
    argus_runs: list[dict[str, object]] = []
    hta_runs: list[dict[str, object]] = []

    def argus() -> None:
        store = folder / f"argus-{len(argus_runs)}.duckdb"
        store.unlink(missing_ok=True)
        load = os.getloadavg()[0]
        exported = str(folder / "exported.json") if args.export else ""
        r = _run([sys.executable, "-c", ARGUS_SCRIPT, str(trace), str(store), exported], argus_env)
        if exported:
            Path(exported).unlink(missing_ok=True)
        r["load_avg"] = load
        argus_runs.append(r)
        store.unlink(missing_ok=True)
        print(json.dumps({"argus": r}), flush=True)

    argus()
    for _ in range(args.rounds if hta_cmd else 0):
        load = os.getloadavg()[0]
        r = _run(hta_cmd, hta_env)
        r["load_avg"] = load
        hta_runs.append(r)
        print(json.dumps({"hta": r}), flush=True)
        argus()
    out["argus"] = argus_runs
    out["hta"] = hta_runs
    imports = [float(r["import_s"]) for r in argus_runs if "import_s" in r]  # type: ignore[arg-type]
    loads = [float(r["load_s"]) for r in hta_runs if "load_s" in r]  # type: ignore[arg-type]
    if imports:
        out["argus_import_median_s"] = statistics.median(imports)
    if imports and loads:
        out["hta_load_median_s"] = statistics.median(loads)
        out["speedup"] = statistics.median(loads) / statistics.median(imports)
    print(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
