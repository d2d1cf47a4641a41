"""Importing a SYNTHETIC 1 M-kernel torch.profiler (Kineto) trace: argus_lab's importer against HTA's loader.

The trace is written the way current Kineto writes it (``libkineto/src/output_json.cpp``): pretty-printed events,
``ts``/``dur`` in microseconds with exactly three decimals relative to ``baseTimeNanoseconds``; ``--regions``
``user_annotation`` ranges on one CPU thread (each mirrored as a ``gpu_user_annotation``), ``--kernels`` kernels
each launched by a ``cudaLaunchKernel`` inside a region and linked to it by ``correlation``; ``--short`` of the
kernels last less than 1 us and ``--zero`` last 0 ns.  The true totals are known in integer ns.

* argus_lab: ``argus_lab.backends.imported.kineto.read`` (parse, nest, attribute launches) and the store write,
  then the join, each timed; peak RSS of the process.
* HTA (``--hta-python``, a Python with ``HolisticTraceAnalysis`` installed): ``TraceAnalysis(trace_dir=...)``.

Each side runs in its own process, one after the other, on the same file.  Run:
``.venv/bin/python bench/kineto_import.py --kernels 1000000 --regions 100000 --hta-python /tmp/hta/bin/python``.
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
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
load = time.perf_counter() - t
print(json.dumps({"load_s": load, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

ARGUS_SCRIPT = """
import json, sys, time, resource, os
t = time.perf_counter()
from argus_lab.backends.imported import kineto
from argus_lab.store import Store
from argus_lab import join
imported = kineto.read(sys.argv[1], "r-bench")
read_s = time.perf_counter() - t
store = Store(sys.argv[2])
t = time.perf_counter()
store.write({"runs": {"run_id": ["r-bench"], "plan_index": [0], "backends": [["cupti"]], "status": ["ok"]},
             **imported.tables})
write_s = time.perf_counter() - t
rss_import = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.perf_counter()
summary = join.attribute_request(store, ["r-bench"])
join_s = time.perf_counter() - t
got = store.rows("SELECT count(*), sum(end_ns - start_ns), count(*) FILTER (WHERE end_ns = start_ns), "
                 "count(*) FILTER (WHERE end_ns - start_ns < 1000) FROM kernels WHERE run_id = 'r-bench'")[0]
print(json.dumps({"read_s": read_s, "write_s": write_s, "import_s": read_s + write_s, "join_s": join_s,
                  "kernels": got[0], "kernel_ns": int(got[1]), "zero_length": got[2], "sub_us": got[3],
                  "classes": summary.counts.get("kernel", {}), "peak_rss_import_mib": rss_import,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
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
            f'    "ts": {l_s[j]}, "dur": 2.000,\n    "args": {{\n      "cbid": 211, "correlation": {c}\n    }}\n  }}'
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--regions", type=int, default=100_000)
    ap.add_argument("--short", type=float, default=0.2, help="share of kernels shorter than 1 us")
    ap.add_argument("--zero", type=float, default=0.01, help="share of zero-length kernels")
    ap.add_argument("--hta-python", default="", help="a python with HolisticTraceAnalysis installed")
    ap.add_argument("--folder", default="", help="where to write the trace (default: a new temporary folder)")
    args = ap.parse_args()
    folder = Path(args.folder or tempfile.mkdtemp(prefix="argus-kineto-"))
    (folder / "trace").mkdir(parents=True, exist_ok=True)
    trace = folder / "trace" / "rank0.json"
    t = time.perf_counter()
    truth = write_trace(trace, args.kernels, args.regions, args.short, args.zero)
    out: dict[str, object] = {"trace_mib": round(trace.stat().st_size / 2**20, 1), "write_s": time.perf_counter() - t}
    out["truth"] = truth
    store = folder / "argus.duckdb"
    store.unlink(missing_ok=True)
    root = str(Path(__file__).resolve().parents[1])
    res = subprocess.run(
        [sys.executable, "-c", ARGUS_SCRIPT, str(trace), str(store)],
        capture_output=True, text=True, check=False, timeout=3600, env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    out["argus"] = json.loads(lines[-1]) if lines else {"error": res.stderr[-2000:]}
    if args.hta_python:
        res = subprocess.run(
            [args.hta_python, "-c", HTA_SCRIPT, str(folder / "trace")],
            capture_output=True, text=True, check=False, timeout=3600,
        )  # fmt: skip
        lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
        out["hta"] = json.loads(lines[-1]) if lines else {"error": res.stderr[-2000:]}
        argus, hta = out["argus"], out["hta"]
        if isinstance(argus, dict) and isinstance(hta, dict) and "import_s" in argus and "load_s" in hta:
            out["speedup"] = hta["load_s"] / argus["import_s"]
    print(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
