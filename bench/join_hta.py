"""The same SYNTHETIC Kineto trace through HolisticTraceAnalysis and through argus_lab's join.

Writes a single-rank trace in PyTorch profiler's (Kineto) JSON schema: ``--regions`` user annotations on the CPU
thread (each mirrored as a ``gpu_user_annotation`` on the GPU stream, as Kineto does), and ``--kernels`` kernels
launched by ``cudaLaunchKernel`` inside them, linked by ``correlation``; a share of the kernels is shorter than
1 us (``--short``), timestamps are epoch microseconds with nanosecond decimals, as Kineto writes them.

* HTA (``--hta-python``, a Python with ``HolisticTraceAnalysis`` installed): ``TraceAnalysis(trace_dir=...)`` and
  ``get_gpu_kernels_with_user_annotations(0)`` (kernel -> leaf GPU annotation by interval overlap).
* argus_lab: the same JSON read into the store (DuckDB ``read_json``; times converted to integer ns), then
  :func:`argus_lab.join.attribute_request` (kernel -> launch on the CPU thread -> innermost open region, ASOF).

Run: ``.venv/bin/python bench/join_hta.py --kernels 200000 --regions 20000 --hta-python /tmp/hta/bin/python``.
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

from argus_lab import join
from argus_lab.store import Store

T0_US = 1_795_938_194_000_000.0  # epoch microseconds

HTA_SCRIPT = """
import json, sys, time, resource
def peak_mib():  # this process's own peak (ru_maxrss of a child starts at its parent's peak)
    return next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM:')) / 1024
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
load = time.perf_counter() - t
t = time.perf_counter()
df = ta.get_gpu_kernels_with_user_annotations(0, expand_names=False)
attr = time.perf_counter() - t
print(json.dumps({"load_s": load, "attribute_s": attr, "kernels": int(len(df)),
                  "attributed": int((df["user_annotation"] != -1).sum()),
                  "zero_dur": int((df["dur"] <= 0).sum()),
                  "kernel_us": float(df["dur"].sum()),
                  "peak_rss_mib": peak_mib()}))
"""


def write_trace(path: Path, kernels: int, regions: int, short: float, seed: int = 0) -> dict[str, float]:
    """Write the trace; returns its true totals (kernel ns, kernels)."""
    rng = np.random.default_rng(seed)
    per = kernels // regions
    dur_ns = np.where(
        rng.random(kernels) < short, rng.integers(300, 1000, kernels), rng.integers(2_000, 20_000, kernels)
    )
    gap_ns = 1_500
    region_of = np.repeat(np.arange(regions), per)
    start_ns = np.zeros(kernels, dtype=np.int64)
    # kernels of a region back to back on the GPU; regions 50 us apart
    offs = np.cumsum(dur_ns + gap_ns) - (dur_ns + gap_ns)
    start_ns[:] = offs + region_of * 50_000 + 10_000
    launch_ns = start_ns - 5_000
    r_first = start_ns[::per]
    r_last_end = (start_ns + dur_ns)[per - 1 :: per]
    events: list[dict[str, object]] = []

    def us(ns: np.ndarray | int) -> np.ndarray:
        return T0_US + np.asarray(ns) / 1e3

    cpu_ts, cpu_end = us(r_first - 8_000), us(r_last_end - 4_000)
    gpu_ts, gpu_end = us(r_first), us(r_last_end)
    for i in range(regions):
        name = f"region_{i % 100}"
        events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1,
                       "ts": round(float(cpu_ts[i]), 3), "dur": round(float(cpu_end[i] - cpu_ts[i]), 3)})  # fmt: skip
        events.append({"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": 0, "tid": 7,
                       "ts": round(float(gpu_ts[i]), 3), "dur": round(float(gpu_end[i] - gpu_ts[i]), 3)})  # fmt: skip
    k_ts, l_ts = us(start_ns), us(launch_ns)
    for j in range(kernels):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": round(float(l_ts[j]), 3), "dur": 2.0, "args": {"correlation": j + 1}})  # fmt: skip
        events.append({"ph": "X", "cat": "kernel", "name": f"kernel_{j % 7}", "pid": 0, "tid": 7,
                       "ts": round(float(k_ts[j]), 3), "dur": round(float(dur_ns[j]) / 1e3, 3),
                       "args": {"correlation": j + 1, "stream": 7, "device": 0}})  # fmt: skip
    doc = {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1}, "deviceProperties": [],
           "traceEvents": events}  # fmt: skip
    path.write_text(json.dumps(doc))
    return {"kernel_ns": float(dur_ns.sum()), "kernels": float(kernels)}


def argus_load_and_join(trace: Path, store: Store) -> dict[str, float]:
    """Read the trace into the store with DuckDB (integer ns), then run the join."""
    t = time.perf_counter()
    with store.connect(write=True) as con:
        con.execute(
            "CREATE TEMP TABLE ev AS SELECT unnest(traceEvents, recursive := true) "
            "FROM read_json(?, maximum_object_size = 2000000000)",
            [str(trace)],
        )
        ns = "CAST(round(ts * 1000) AS BIGINT)"
        dns = "CAST(round(dur * 1000) AS BIGINT)"
        con.execute(
            f"""
            INSERT INTO region_instances (run_id, instance_id, region_id, path, instance_index, parent_instance_id,
                                          repetition, pid, thread_id, start_ns, end_ns, cpu_ns, error, warmup)
            SELECT 'r-hta', row_number() OVER (ORDER BY ts), name, name, 0, 0, 0, pid, tid, {ns}, {ns} + {dns},
                   0, '', false
            FROM ev WHERE cat = 'user_annotation'
            """
        )
        con.execute(
            f"""
            INSERT INTO kernels (run_id, kernel_key, correlation_id, instance_id, name, start_ns, end_ns, device_id,
                                 context_id, stream_id, kind, thread_id, api_start_ns, api_end_ns)
            SELECT 'r-hta', '0/1/' || k.correlation || '/0', k.correlation, NULL, k.name, {ns.replace("ts", "k.ts")},
                   {ns.replace("ts", "k.ts")} + {dns.replace("dur", "k.dur")}, 0, 1, k.stream, 'kernel', l.tid,
                   {ns.replace("ts", "l.ts")}, {ns.replace("ts", "l.ts")} + {dns.replace("dur", "l.dur")}
            FROM ev k LEFT JOIN ev l ON l.cat = 'cuda_runtime' AND l.correlation = k.correlation
            WHERE k.cat = 'kernel'
            """
        )
        con.execute("INSERT INTO runs (run_id, plan_index, backends, status) VALUES ('r-hta', 0, ['cupti'], 'ok')")
    load = time.perf_counter() - t
    t = time.perf_counter()
    summary = join.attribute_request(store, ["r-hta"])
    attr = time.perf_counter() - t
    got = store.rows(
        "SELECT count(*) FILTER (WHERE class <> 'unattributed'), sum(weight * (k.end_ns - k.start_ns)) "
        "FROM attributions a JOIN kernels k ON k.run_id = a.run_id AND k.kernel_key = a.evidence_id "
        "WHERE a.evidence = 'kernel'"
    )[0]
    return {"load_s": load, "attribute_s": attr, "attributed": got[0], "kernel_ns": float(got[1] or 0),
            "classes": summary.counts.get("kernel", {})}  # type: ignore[dict-item]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=200_000)
    ap.add_argument("--regions", type=int, default=20_000)
    ap.add_argument("--short", type=float, default=0.2, help="share of kernels shorter than 1 us")
    ap.add_argument("--hta-python", default="", help="a python with HolisticTraceAnalysis installed")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="argus-hta-"))
    (folder / "trace").mkdir()
    trace = folder / "trace" / "rank0.json"
    t = time.perf_counter()
    truth = write_trace(trace, args.kernels, args.regions, args.short)
    out: dict[str, object] = {"trace_mib": round(trace.stat().st_size / 2**20, 1), "write_s": time.perf_counter() - t}
    out["truth"] = truth
    out["argus"] = argus_load_and_join(trace, Store(folder / "argus.duckdb"))
    if args.hta_python:
        res = subprocess.run(
            [args.hta_python, "-c", HTA_SCRIPT, str(folder / "trace")], capture_output=True, text=True, check=False
        )
        lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
        out["hta"] = json.loads(lines[-1]) if lines else {"error": res.stderr[-2000:]}
    print(json.dumps(out, indent=1, default=float))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
