"""A long run read back: a store of ~3 M kernel records (the shape of 3,000 repetitions of a decode step), and the
bytes per kernel record the measured process spends turning its records into evidence.

Usage::

    .venv/bin/python bench/scale_bench.py [--kernels 3000000] [--records 1000000] [--repeats 3] [--out DIR]

Part 1, SYNTHETIC store (``bench/join_bench.py``'s generator; kernel names as long as C++ kernels' mangled names):
one process generates and joins it, then each reader runs in a fresh process of its own (its peak RSS is its
``VmHWM``): ``Report.text()``, the report's kernel summary (``Report.kernel_table()``), an HTML, a Perfetto and a
Parquet export, and the JupyterLab panel's REST reads (``regions``, a region's drill-down, ``runs``), each under
DuckDB's default limit for reads (``--readers Perfetto,HTML``: only those); with ``--baseline``, each reader also with
the baseline checkout's code, on the same store.

Part 2, the measured process's memory per kernel record: (a) SYNTHETIC raw CUPTI columns of ``--records`` kernels (what
the collector decodes its activity buffer into) go the collector's way to the store (``CuptiCollector.evidence``,
``merge_evidence``, ``Store.write``) in a fresh process; bytes per record = (peak RSS - RSS
before) / records, median over ``--repeats`` processes, with the code of this checkout and, side by side, of
another checkout (``--baseline PATH``: e.g. a worktree of main before the change).  CUPTI's own activity record
(about 200 bytes, in its buffer while the run lasts) comes on top and is not measured here (no GPU).  (b) SYNTHETIC
activity buffers (kernel records in CUPTI's own layout, each kernel its launch configuration) and as many launch records
of the native launch path, through the checkout's own decoding (a pool of buffers decoded as each completes, or one
large buffer decoded at stop), evidence and the run's end (``StoreSink.finish_run``: since the hand-off, a long run's
evidence is written to a spool and stored by a fresh process, whose memory is not the measured process's): (peak RSS -
RSS before the first buffer) / records, all of it.
Then the bytes held per kernel record, field by field: each raw column and each run-wide array of the kernels table,
counted from the arrays after the peak the same way for both checkouts (this checkout's ``decode._own_bytes``: a
broadcast, or memory another column holds, counts nothing); the launch records are untimed launches inside regions
(the timing run's default ``launch_clock``), exported as each checkout's extension exports them.

Part 3, the join's memory: a SYNTHETIC run of ``--records`` kernel records (1,000 a step) joined the way the checkout's
``run_plan`` joins a run in the measured process (a long run in a fresh process since the join moved out of it); peak
RSS of the process that asked, over its RSS before.

Prints a markdown section for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

PROBE = """
import json, sys, time, traceback
sys.path.insert(0, {bench!r})
def rss_mib(key="VmHWM:"):
    return next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith(key)) / 1024
out = {{}}
t0 = time.perf_counter()
try:
{body}
except BaseException as exc:
    out["error"] = f"{{type(exc).__name__}}: {{str(exc).splitlines()[0][:160] if str(exc) else ''}}"
out.setdefault("seconds", time.perf_counter() - t0)
out["peak_rss_mb"] = rss_mib()
print("RESULT " + json.dumps(out))
"""


def probe(body: str, root: Path, timeout: float = 1800) -> dict[str, Any]:
    """``body`` in a fresh process importing the argus_lab of ``root``: its result, seconds and peak RSS."""
    code = PROBE.format(bench=str(HERE), body=textwrap.indent(textwrap.dedent(body), "    "))
    env = dict(os.environ, PYTHONPATH=str(root))
    env.pop("ARGUS_READ_MEMORY", None)
    try:
        proc = subprocess.run(  # cwd: `python -c` puts the working folder first on sys.path
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, cwd=str(root)
        )
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {timeout:.0f} s"}
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        return {"error": (proc.stderr.strip().splitlines() or ["no result"])[-1][:160]}
    return json.loads(line[len("RESULT ") :])


BUILD = """
from argus_lab import join
from argus_lab.store import Store
from join_bench import generate
st = Store({path!r})
out["counts"] = generate(st, {kernels}, 3000, 1, 0.02, 0.01, samples=False)
with st.connect(write=True) as con:  # C++-length names, ~460 distinct ones (a decode step's kernels)
    con.execute("UPDATE kernels SET name = '_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIN3c10'"
                " || (correlation_id % 463) || 'EEESt5arrayIPcLm1EEEEvT_T0_T1_'")
join.attribute_request(st, ["r-bench"])
"""

READERS = {
    "Report(store).text()": """
from argus_lab.report import Report
from argus_lab.store import Store
out["chars"] = len(Report(Store({path!r}), ["r-bench"]).text())
""",
    "Report(store).kernel_table() (the kernel summary)": """
from argus_lab.report import Report
from argus_lab.store import Store
out["chars"] = len(Report(Store({path!r}), ["r-bench"]).kernel_table())
""",
    "HTML export": """
from argus_lab.report import Report
from argus_lab.store import Store
from argus_lab.views.html_file import export
p = export(Report(Store({path!r}), ["r-bench"]), {tmp!r} + "/r.html")
out["bytes"] = p.stat().st_size
""",
    "Perfetto export": """
from argus_lab.app.exporting import export
from argus_lab.store import Store
export(Store({path!r}), {tmp!r} + "/t.json", fmt="perfetto", run_ids=["r-bench"])
out["bytes"] = __import__("os").path.getsize({tmp!r} + "/t.json")
""",
    "Parquet export": """
from argus_lab.app.exporting import export
from argus_lab.store import Store
export(Store({path!r}), {tmp!r} + "/tables", fmt="parquet", run_ids=["r-bench"])
out["files"] = len(__import__("os").listdir({tmp!r} + "/tables"))
""",
    "REST: regions, a region's drill-down, runs": """
from argus_lab.report import browse as ev
from argus_lab.store import Store
st = Store({path!r})
out["regions"] = len(ev.regions(st))
d = ev.region_detail(st, "step/layer/attn")
out["drill_down_kernels"] = len(d["kernels"]) if d else -1
out["runs"] = len(ev.runs(st))
""",
}

RECORDS = """
import numpy as np
from argus_lab.backends.cupti import decode as dec
from argus_lab.run.driver import merge_evidence
from argus_lab.store import Store
n = {records}
rng = np.random.default_rng(1)
k = {{f: np.zeros(n, dtype=np.int64) for f in dec.FAMILY_FIELDS["kernel"]}}
k["start"] = 1_800_000_000_000_000_000 + np.arange(n, dtype=np.int64) * 2000
k["end"] = k["start"] + 1500
k["correlation_id"] = np.arange(1, n + 1, dtype=np.int64)
k["grid_x"][:] = 132; k["block_x"][:] = 128; k["registers_per_thread"][:] = 64
k["name"] = np.asarray([f"_ZN2at6native18elementwise_kernel{{i}}" for i in range(463)], dtype=object)[
    np.arange(n) % 463]
ext = {{"external_kind": np.full(n, 5, dtype=np.int64), "correlation_id": k["correlation_id"].copy(),
        "external_id": 1 + np.arange(n, dtype=np.int64) // 925}}  # 925 kernels an instance
raw = {{f: dec.empty_family(f) for f in dec.FAMILY_FIELDS}}
raw["kernel"] = k
raw["external"] = ext
del k, ext
from argus_lab.backends.cupti.collector import CuptiCollector
coll = CuptiCollector()  # the collector's own way from its decoded records to evidence, as after a run
coll.raw = raw
del raw
base = rss_mib("VmRSS:")
instances = {{"thread_id": [1]}}
ev = merge_evidence([coll.evidence(instances), {{"region_instances": {{"run_id": ["r-mem"], "instance_id": [1]}}}}])
Store({path!r}).write(ev)
out["peak_over_base_mb"] = rss_mib() - base
out["bytes_per_record"] = (rss_mib() - base) * 2**20 / n
"""

BUFFERS = """
import ctypes, os
import numpy as np
from cupti import cupti
from argus_lab.backends.cupti import decode as dec, native as nat
from argus_lab.backends.cupti.collector import CuptiCollector, _c_string
from argus_lab.run.driver import merge_evidence
from argus_lab.store import Store
try:  # the checkout decodes each buffer as CUPTI completes it
    from argus_lab.backends.cupti.buffer_pool import POOL_BUFFER_BYTES, DecodingPool
except ImportError:  # an older checkout: one large buffer, decoded at stop
    DecodingPool = None
n, per_instance = {records}, 925
dtype = cupti.activity_kernel10_dtype
names = [ctypes.create_string_buffer(f"_ZN2at6native18elementwise_kernel{{i}}".encode()) for i in range(463)]
ptrs = np.asarray([ctypes.addressof(b) for b in names], dtype=np.int64)
def records(lo, hi):  # SYNTHETIC kernel records as CUPTI lays them out (CONCURRENT_KERNEL, kernel10)
    r = np.zeros(hi - lo, dtype=dtype)
    i = np.arange(lo, hi, dtype=np.int64)
    r["kind"] = 10
    r["start"] = 1_800_000_000_000_000_000 + i * 2000
    r["end"] = r["start"] + 1500
    r["correlation_id"] = i + 1
    k = i % 463  # each kernel its own launch configuration, as a model's kernels have
    r["grid_x"], r["grid_y"], r["grid_z"] = 8 + k % 512, 1 + k % 4, 1
    r["block_x"], r["block_y"], r["block_z"] = 32 * (1 + k % 8), 1 + k % 2, 1
    r["registers_per_thread"], r["static_shared_memory"] = 16 + k % 200, 1024 * (k % 48)
    r["dynamic_shared_memory"], r["local_memory_per_thread"] = 512 * (k % 96), k % 3 * 8
    r["queued"] = r["start"] - 3000 - k  # the launch's time on CUPTI's clock (the clock launch identity)
    r["name"] = ptrs[k]
    return r.view(np.uint8)
kernel_names = {{}}
def name_of(ptr):
    got = kernel_names.get(ptr)
    if got is None:
        got = kernel_names[ptr] = _c_string(ptr)
    return got
layouts = {{10: dtype}}
import pyarrow
with Store({path!r}).connect(write=True):  # the store made and DuckDB loaded: fixed costs, not per record
    pass
base = rss_mib("VmRSS:")
if DecodingPool is not None:
    pool = DecodingPool(POOL_BUFFER_BYTES, layouts, name_of)
    per = POOL_BUFFER_BYTES // dtype.itemsize
    for lo in range(0, n, per):
        arr, off = pool.take()
        b = records(lo, min(lo + per, n))
        arr[off : off + len(b)] = b
        del b
        pool.completed(arr, off, min(lo + per, n) * dtype.itemsize - lo * dtype.itemsize)
        pool.wait_decoded()  # CUPTI fills a buffer in a fraction of a second; the pool decodes it in milliseconds
    raw = pool.finish()
    out["buffers_made"] = pool.allocated
else:
    big = np.empty(512 << 20, dtype=np.uint8)
    per = (8 << 20) // dtype.itemsize
    for lo in range(0, n, per):
        b = records(lo, min(lo + per, n))
        big[lo * dtype.itemsize : lo * dtype.itemsize + len(b)] = b
    raw = dec.decode_buffers([big[: n * dtype.itemsize]], layouts, name_of)
    del big
out["after_decode_mb"] = rss_mib() - base
corr = np.arange(1, n + 1, dtype=np.int64)  # SYNTHETIC launch records of the native launch path: launches inside
# regions on one thread, untimed (launch_clock 'outside', the default of a timing run: entry and exit 0)
one_value = hasattr(nat, "_column")  # the checkout's extension exports a column of one value as that value
def exported(col):
    return col[:1].tobytes() if one_value and len(col) and bool(np.all(col == col[0])) else col.tobytes()
launches = nat.LaunchRecords.from_export((  # as the extension exports them, in the checkout's own widths
    n, 0, exported(corr.astype(np.uint32)), exported(1 + (corr - 1) // per_instance),
    exported(np.full(n, 1, dtype=np.uint64)), exported(np.zeros(n, dtype=np.int64)),
    exported(np.zeros(n, dtype=np.int64)), exported(np.full(n, 307, dtype=np.uint32)),
    exported(np.full(n, 1, dtype=np.uint8))))
raw.update(nat.raw_families(launches, os.getpid()))
del launches
coll = CuptiCollector()
coll.raw = raw
del raw, corr
instances = {{"thread_id": [1]}}
ev = merge_evidence([coll.evidence(instances), {{"region_instances": {{"run_id": ["r-mem"], "instance_id": [1]}}}}])
from argus_lab.store import StoreSink  # the way a run's end goes to the store (a long run's: from a fresh process)
StoreSink(Store({path!r})).finish_run("r-mem", status="ok", cause="", reps_done=1, ended_ns=0, command=None,
                                      evidence=ev)
out["kernels_stored"] = Store({path!r}).rows("SELECT count(*) FROM kernels")[0][0]
out["peak_over_base_mb"] = rss_mib() - base
out["bytes_per_record"] = (rss_mib() - base) * 2**20 / n
import importlib.util  # counted after the peak, the same way for either checkout: by this checkout's decode module
spec = importlib.util.spec_from_file_location("argus_counting", {counting!r})
counting = importlib.util.module_from_spec(spec)
spec.loader.exec_module(counting)
seen = set()
def own(col):  # a broadcast or memory counted already holds no byte
    return counting._own_bytes(np.asarray(col), seen)
held = {{f"{{f}}.{{k}}": own(c) for f, cols in coll.raw.items() for k, c in cols.items()}}
rows = dec.KernelRows(coll.raw, "r")
if hasattr(rows, "arrays"):
    arrays = rows.arrays()
else:  # before the narrow columns: every run-wide array (np.zeros's pages are not backed until written)
    arrays = {{"launch order": rows.order, "instance": rows.instance, "ordinal": rows.ordinal,
              "launch call keys": rows._api_keys, "launch call rows": rows._api_rows}}
    if rows.same.any():
        arrays["rank in launch"] = rows.same
held.update({{f"kernels table.{{k}}": own(a) for k, a in arrays.items()}})
out["held"] = {{k: v / n for k, v in held.items() if v}}
"""

JOIN = """
from argus_lab.store import Store
from join_bench import generate
st = Store({path!r})
out["counts"] = generate(st, {records}, max(1, {records} // 1000), 1, 0.0, 0.0, samples=False)  # 1000 a step
from argus_lab.run.memory import release_freed_memory
release_freed_memory()
with open("/proc/self/clear_refs", "w") as fh:  # the peak so far (the generation's) is not the join's
    fh.write("5")
base = rss_mib("VmRSS:")
try:  # the checkout joins a long run in a fresh process
    from argus_lab.app.join_process import join_measured_runs
    out["joined_in"] = join_measured_runs(st, ["r-bench"])
except ImportError:
    from argus_lab import join
    join.attribute_request(st, ["r-bench"])
    out["joined_in"] = "this process"
out["peak_over_base_mb"] = rss_mib() - base
out["bytes_per_record"] = (rss_mib() - base) * 2**20 / {records}
"""


def _fmt(r: dict[str, Any], extra: str = "") -> str:
    if "error" in r:
        return f"| {r['error']} | - | - |"
    return f"| {r['seconds']:.1f} s | {r['peak_rss_mb']:.0f} MB | {extra} |"


def _per_checkout(
    body: str, prefix: str, args: argparse.Namespace, tmp: Path
) -> Iterator[tuple[str, Path, list[dict[str, Any]], list[dict[str, Any]]]]:
    """For this checkout and the baseline (when given): ``body`` run in ``--repeats`` fresh processes, each with a
    store of its own; yields (label, checkout, every result, the results that measured bytes per record)."""
    for label, root in (("this checkout", ROOT), ("baseline", args.baseline)):
        if root is None or args.skip_records:
            continue
        got = []
        for k in range(args.repeats):
            store = str(tmp / f"{prefix}-{label[:4]}-{k}.duckdb")
            counting = ROOT / "argus_lab" / "backends" / "cupti" / "decode.py"  # how bytes held are counted
            got.append(probe(body.format(records=args.records, path=store, counting=str(counting)), Path(root)))
        yield label, Path(root), got, [g for g in got if "bytes_per_record" in g]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=3_000_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout, measured side by side")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--skip-store", action="store_true", help="no part 1 (the long run read back)")
    ap.add_argument(
        "--readers",
        default="",
        help="part 1's readers whose name holds one of these words (comma-separated; e.g. "
        "'Perfetto,HTML'), default all",
    )
    ap.add_argument("--skip-records", action="store_true", help="no part 2 (memory per record, up to the store)")
    ap.add_argument("--skip-join", action="store_true", help="no part 3 (the join's memory)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="argus-scale-"))
    lines = [f"## A long run read back: {args.kernels:,} kernel records (bench/scale_bench.py)", ""]
    lines.append(f"{os.cpu_count()} CPUs; `{' '.join(['bench/scale_bench.py', *(argv or sys.argv[1:])])}`.")
    if not args.skip_store:
        path = str(tmp / "long.duckdb")
        t0 = time.perf_counter()
        built = probe(BUILD.format(path=path, kernels=args.kernels), ROOT)
        lines += ["", f"Store: {built.get('counts')} generated and joined in {time.perf_counter() - t0:.0f} s "
                  f"(peak {built.get('peak_rss_mb', 0):.0f} MB); {Path(path).stat().st_size / 2**20:.0f} MB on disk.",
                  "", "| reader (fresh process, default read limit) | time | peak RSS | result |",
                  "| --- | --- | --- | --- |"]  # fmt: skip
        wanted = [w.strip().lower() for w in args.readers.split(",") if w.strip()]
        for name, body in READERS.items():  # each reader with this checkout's code, then the baseline's (if given)
            if wanted and not any(w in name.lower() for w in wanted):
                continue
            for label, root in (("", ROOT), (" (baseline)", args.baseline)):
                if root is None:
                    continue
                shutil.rmtree(tmp / "tables", ignore_errors=True)  # the Parquet export writes a new folder
                r = probe(body.format(path=path, tmp=str(tmp)), Path(root))
                shown = {k: v for k, v in r.items() if k not in ("seconds", "peak_rss_mb")}
                lines.append(f"| {name}{label} " + _fmt(r, json.dumps(shown)))
                print(lines[-1], flush=True)
    lines += ["", f"Memory per kernel record, {args.records:,} records, median of {args.repeats} processes:", "",
              "| checkout | bytes per record beyond the decoded records | peak over base |",
              "| --- | --- | --- |"]  # fmt: skip
    for label, root, got, ok in _per_checkout(RECORDS, "mem", args, tmp):
        if not ok:
            lines.append(f"| {label} ({root}) | {got[0].get('error')} | - |")
            continue
        per = statistics.median(g["bytes_per_record"] for g in ok)
        over = statistics.median(g["peak_over_base_mb"] for g in ok)
        lines.append(f"| {label} (`{root}`) | {per:.0f} B | {over:.0f} MB |")
        print(lines[-1], flush=True)
    lines += ["", f"Memory per kernel record from SYNTHETIC activity buffers, {args.records:,} kernel records in "
              "CUPTI's layout plus as many launch records of the native launch path, through the checkout's own "
              f"decoding, evidence and store write, median of {args.repeats} processes:", "",
              "| checkout | bytes per record, all of it | peak over base | after decoding | buffers made |",
              "| --- | --- | --- | --- | --- |"]  # fmt: skip
    held_by = []
    for label, root, got, ok in _per_checkout(BUFFERS, "buf", args, tmp):
        held_by.append((label, root, got, ok))
        if not ok:
            lines.append(f"| {label} ({root}) | {got[0].get('error')} | - | - | - |")
            continue
        per = statistics.median(g["bytes_per_record"] for g in ok)
        over = statistics.median(g["peak_over_base_mb"] for g in ok)
        dec_mb = statistics.median(g["after_decode_mb"] for g in ok)
        made = ok[0].get("buffers_made", "one 512 MiB")
        lines.append(f"| {label} (`{root}`) | {per:.0f} B | {over:.0f} MB | {dec_mb:.0f} MB | {made} |")
        print(lines[-1], flush=True)
    lines += [
        "",
        "Bytes held per kernel record by each raw column and each run-wide array of the kernels table, "
        "counted from the arrays (a broadcast or memory counted already: none), the first process of each "
        "checkout:",
        "",
    ]
    heads = [(label, ok[0]["held"]) for label, _, _, ok in held_by if ok and "held" in ok[0]]
    fields = sorted({k for _, h in heads for k in h}, key=lambda k: (k.split(".")[0] != "kernel", k))
    lines += ["| field | " + " | ".join(label for label, _ in heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for key in fields:
        lines.append(f"| {key} | " + " | ".join(f"{h.get(key, 0):.1f} B" for _, h in heads) + " |")
    lines.append("| **all of it** | " + " | ".join(f"**{sum(h.values()):.1f} B**" for _, h in heads) + " |")
    print("\n".join(lines[-len(fields) - 3 :]), flush=True)
    lines += ["", f"The join of a SYNTHETIC run of {args.records:,} kernel records (1,000 a step, as "
              "scripts/gpu/kernel_record_memory.py), by the measured process's own way (``run_plan``), peak of that "
              "process over its memory before the join (its peak reset there):", "",
              "| checkout | joined in | bytes per record | peak over base |", "| --- | --- | --- | --- |"]  # fmt: skip
    for label, root in (("this checkout", ROOT), ("baseline", args.baseline)):
        if root is None or args.skip_join:
            continue
        r = probe(JOIN.format(records=args.records, path=str(tmp / f"join-{label[:4]}.duckdb")), Path(root))
        if "bytes_per_record" not in r:
            lines.append(f"| {label} ({root}) | {r.get('error')} | - | - |")
            continue
        lines.append(f"| {label} (`{root}`) | {r['joined_in']} | {r['bytes_per_record']:.0f} B | "
                     f"{r['peak_over_base_mb']:.0f} MB |")  # fmt: skip
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "scale_bench.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
