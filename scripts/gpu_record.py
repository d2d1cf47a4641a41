#!/usr/bin/env python3
"""Recording workloads and correctness figures on the GPU machine (driven by scripts/gpu-check).

    python scripts/gpu_record.py all OUT          # everything below, each mode in its own process
    python scripts/gpu_record.py case NAME OUT    # one recording workload under cupti + nvml + compiler
    python scripts/gpu_record.py events MODE OUT  # gpu.time vs CUDA events (MODE: none | cupti | abab)
    python scripts/gpu_record.py nccl-probe OUT   # one-rank NCCL group: NCCL's kernels under CUPTI
    python scripts/gpu_record.py overlap-study OUT  # nccl_overlap.py: serial vs overlapped steps, 3 processes
    python scripts/gpu_record.py loop-abab cupti|profiler OUT  # launch-bound loop, all phases in one process
    python scripts/gpu_record.py profiler OUT     # kernel counts per record_function (torch.profiler)
    python scripts/gpu_record.py loop MODE OUT    # launch-bound loop (plain|markers|cupti|cupti-kernel|profiler ...)
    python scripts/gpu_record.py timing OUT       # only the timing figures, several processes each
    python scripts/gpu_record.py ncu OUT          # argus-lab run end to end + a plain ncu run to compare

Evidence lands under OUT/data (raw CUPTI Parquet, SASS text, .ncu-rep, DuckDB stores) and figures in
OUT/figures.json; the text output is what the gpu check prints.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
EXAMPLES = ROOT / "examples" / "gpu"

CASES: dict[str, tuple[str, int]] = {
    "nested": ("nested_torch", 4),
    "triton": ("triton_add", 3),
    "two_streams": ("two_streams", 3),
    "graph": ("cuda_graph", 3),
    "backward": ("backward", 3),
    "edge": ("edge_cases", 3),
}
SIGNALS = [
    "gpu.time",
    "gpu.span",
    "gpu.kernels",
    "gpu.launch_overhead",
    "gpu.memcpy_bytes",
    "gpu.memcpy_time",
    "gpu.memset_bytes",
    "sys.sm_clock",
    "sys.mem_clock",
    "sys.power",
    "sys.temperature",
    "sys.gpu_util",
    "sys.mem_util",
]
HW = [
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "smsp__inst_executed.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "launch__grid_size",
    "lts__t_bytes.sum",
    "l1tex__t_bytes.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "sm__cycles_elapsed.avg",
]


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"argus_example_{name}", EXAMPLES / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def kernel_rows(ev: dict[str, Any]) -> dict[str, Any]:
    """The collector's ``kernels`` evidence as columns (the collector hands them as batches made on demand)."""
    from argus_lab.model.batches import as_arrow

    return as_arrow(ev["kernels"]).to_pydict()


def joined_store(ev: dict[str, Any], instances: dict[str, Any], run_id: str, backends: list[str]) -> Any:
    """The collectors' raw evidence of one run in a temporary store, joined (the join makes every per-instance
    value and attribution; the backends store raw evidence only)."""
    import tempfile

    from argus_lab import join
    from argus_lab.store import Store

    store = Store(Path(tempfile.mkdtemp(prefix="argus-join-")) / f"{run_id}.duckdb")
    inst = dict(instances)
    inst["run_id"] = [run_id] * len(inst["instance_id"])
    tables = {k: v for k, v in ev.items() if k not in ("region_instances", "runs")}
    runs = {"run_id": [run_id], "plan_index": [0], "backends": [backends], "status": ["ok"]}
    store.write({"runs": runs, "region_instances": inst, **tables})
    join.attribute_request(store, [run_id])
    return store


def joined_values(store: Any, run_id: str) -> list[tuple[int, str, str, float]]:
    """(instance id, path, signal, inclusive value) of every value the join made for ``run_id``."""
    return store.rows(
        "SELECT v.instance_id, i.path, v.signal, v.inclusive FROM instance_values v "
        "JOIN region_instances i USING (run_id, instance_id) WHERE v.run_id = ? AND v.inclusive IS NOT NULL",
        [run_id],
    )


def merge_figures(out: Path, key: str, value: Any) -> None:
    path = out / "figures.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[key] = value
    path.write_text(json.dumps(data, indent=1, default=str))


# ----------------------------------------------------------------------------------------------------------------
def run_case(name: str, out: Path) -> None:
    import torch

    from argus_lab.backends.compiler.collector import CompilerCollector
    from argus_lab.backends.cupti import decode as dec
    from argus_lab.backends.cupti.collector import CuptiCollector
    from argus_lab.backends.nvml import NvmlSampler
    from argus_lab.run.driver import drive
    from argus_lab.run.workload import Workload
    from argus_lab.store import Store

    module, reps = CASES[name]
    mod = load_example(module)
    state = mod.setup()
    mod.step(state)  # compile, cuBLAS handles, caching allocator: outside the run
    torch.cuda.synchronize()
    folder = out / "data" / "cases" / name
    folder.mkdir(parents=True, exist_ok=True)
    cupti, nvml, comp = CuptiCollector(), NvmlSampler(), CompilerCollector()
    cupti_settings = {"memcpy": True, "memset": True, "sync": True, "keep_buffers": True}  # buffers saved below
    settings = {"cupti": cupti_settings, "nvml": {"interval_s": 0.005}}
    run_id = f"rec-{name}"
    t0 = time.perf_counter()
    outcome = drive(
        run_id,
        Workload.of_callable(lambda: mod.step(state)),
        [cupti, nvml, comp],
        [*SIGNALS, "compile.registers"],
        settings,
        reps,
        0,
        folder,
    )
    wall = time.perf_counter() - t0
    print(f"[case {name}] status={outcome.status} reps={outcome.reps_done} wall={wall:.2f}s {outcome.cause[:500]}")
    dec.save_raw(cupti.raw, folder / "cupti")
    if cupti.buffers:
        from argus_lab.backends.cupti.collector import save_buffers

        save_buffers(cupti.buffers, cupti.layouts, cupti.raw, folder / "buffers", cupti.kernel_names)
    if name == "triton":
        from argus_lab.backends.compiler.artifacts import sass as cuobjdump_sass
        from argus_lab.backends.compiler.collector import compiled_kernels

        for k in compiled_kernels():
            kname = k.metadata.name
            (folder / f"{kname}.triton.sass").write_text(str(k.asm["sass"]))
            text = cuobjdump_sass(bytes(k.asm["cubin"]))
            if text:
                (folder / f"{kname}.cuobjdump.sass").write_text(text)
            meta = {"n_regs": k.n_regs, "n_spills": k.n_spills, "metadata": k.metadata._asdict()}
            (folder / f"{kname}.meta.json").write_text(json.dumps(meta, default=str, indent=1))
    ev = outcome.evidence
    from argus_lab.run.shards import write_table

    write_table(folder / "instances.parquet", ev["region_instances"])
    if "samples" in ev:
        write_table(folder / "samples.parquet", ev["samples"])
    store = Store(out / "data" / "cases.duckdb")
    store.write(
        {
            "runs": {
                "run_id": [run_id],
                "backends": [["cupti", "nvml", "compiler"]],
                "signals": [SIGNALS],
                "workload": [f"examples/gpu/{module}.py"],
                "command": [f"python scripts/gpu_record.py case {name} OUT"],
                "status": [outcome.status],
                "cause": [outcome.cause],
                "repetitions": [reps],
                "reps_done": [outcome.reps_done],
            },
            **ev,
        }
    )
    counts = {f: dec.count(c) for f, c in cupti.raw.items()}
    print(
        f"[case {name}] records={counts} dropped={cupti.dropped} completed_during_run={cupti.completed_during_run} "
        f"flush={cupti.flush_s * 1e3:.1f} ms decode={cupti.decode_s * 1e3:.1f} ms api_kinds_off={cupti.api_kinds_off} "
        f"notes={cupti.notes} libcupti={cupti.libcupti}"
    )
    summarize_case(name, ev)
    merge_figures(
        out,
        f"case:{name}",
        {
            "records": counts,
            "dropped": cupti.dropped,
            "completed_during_run": cupti.completed_during_run,
            "decode_s": cupti.decode_s,
            "status": outcome.status,
        },
    )


def summarize_case(name: str, ev: dict[str, Any]) -> None:
    inst = ev["region_instances"]
    run_id = inst["run_id"][0] if inst["run_id"] else f"rec-{name}"
    store = joined_store(ev, inst, run_id, ["cupti", "nvml", "compiler"])
    per: dict[tuple[str, str], list[float]] = {}
    for _, path, sig, val in joined_values(store, run_id):
        per.setdefault((path, sig), []).append(val)
    for (path, sig), vals in sorted(per.items()):
        print(f"[case {name}]   {path:28s} {sig:22s} n={len(vals):3d} median={median(vals):14.1f}")
    classes = dict(store.rows("SELECT class, count(*) FROM attributions WHERE evidence = 'kernel' GROUP BY ALL"))
    tails = store.rows("SELECT count(*) FROM attributions WHERE reason LIKE '%past the region''s host exit%'")[0][0]
    print(f"[case {name}]   attribution classes={classes} kernels_running_past_host_exit={tails}")
    facts = ev.get("kernel_facts", {})
    for i, nm in enumerate(facts.get("name", [])):
        print(
            f"[case {name}]   facts {nm[:40]} regs={facts['registers'][i]} local_words={facts['local_words'][i]} "
            f"shared={facts['shared_bytes'][i]} warps={facts['num_warps'][i]} stages={facts['num_stages'][i]} "
            f"sass={facts['sass_instructions'][i]} mix={facts['sass_mix'][i]}"
        )
    k = ev.get("kernels", {})
    api_tids = sorted({t for t in k.get("thread_id", []) if t})
    print(f"[case {name}]   api thread ids={api_tids[:4]} instance thread ids={sorted(set(inst['thread_id']))[:4]}")
    smp = ev.get("samples", {})
    print(f"[case {name}]   nvml samples={len(smp.get('t_ns', []))}")


# ----------------------------------------------------------------------------------------------------------------
def events_workload() -> dict[str, Any]:
    """The regions timed against CUDA events, each a callable opening its region (name = key)."""
    import torch

    import argus_lab

    torch.manual_seed(0)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)
    x = torch.randn(1 << 25, device="cuda")
    y = torch.empty_like(x)
    big = torch.randn(1 << 28, device="cuda")  # 1 GiB: memory-bound kernels of about 0.5 ms
    big_out = torch.empty_like(big)

    def gemm() -> None:
        with argus_lab.region("gemm"):
            for _ in range(3):
                torch.mm(a, b, out=c)

    def chain() -> None:
        with argus_lab.region("chain"):
            torch.mul(x, 1.0001, out=y)
            for _ in range(6):
                torch.add(y, x, out=y)
                y.relu_()

    def stream() -> None:
        with argus_lab.region("stream"):
            for _ in range(3):
                torch.mul(big, 1.0001, out=big_out)

    return {"gemm": gemm, "chain": chain, "stream": stream}


def _sm_clock() -> float:
    try:
        import pynvml

        pynvml.nvmlInit()
        return float(pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM))
    except Exception:
        return float("nan")


SPACER_CYCLES = 600_000  # about 0.3-0.4 ms of GPU work queued before the start event


def _events_pass(work: dict[str, Any], iters: int, res: dict[str, list[float]]) -> None:
    """Time every region with CUDA events, ``iters`` times, in two variants.

    ``<name>``: the GPU is idle when the start event is recorded (events also count the host's launch latency of
    the first kernel).  ``<name>@queued``: a sleep kernel is queued first, so the start event, the region's kernels
    and the end event reach the GPU back to back (events count GPU time only, plus inter-kernel gaps).
    """
    import torch

    for _ in range(iters):
        for name, fn in work.items():
            for queued in (False, True):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                if queued:
                    torch.cuda._sleep(SPACER_CYCLES)
                e0.record()
                fn()
                e1.record()
                torch.cuda.synchronize()
                res.setdefault(f"{name}@queued" if queued else name, []).append(e0.elapsed_time(e1) * 1e6)


def _warm_up(work: dict[str, Any], seconds: float = 1.5) -> None:
    import torch

    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        for fn in work.values():
            fn()
        torch.cuda.synchronize()


def _cupti_pass(work: dict[str, Any], iters: int, out: Path) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """One CUPTI timing run over :func:`_events_pass`: (gpu.time/gpu.span per region variant, CUDA events)."""
    from argus_lab.backends.cupti.collector import CuptiCollector
    from argus_lab.regions import Recorder
    from argus_lab.regions.instance_columns import as_values
    from argus_lab.run.protocols import RunContext

    coll = CuptiCollector()
    coll.start(RunContext("events", ("gpu.time",), {}, out))
    rec = Recorder("events", coll.hooks())
    events: dict[str, list[float]] = {}
    with rec:
        _events_pass(work, iters, events)
    coll.stop()
    inst = {k: as_values(v) for k, v in rec.columns().items()}  # Python values: the columns are arrays
    ev = coll.evidence(inst)
    # instances of one region come in order: idle, queued, idle, queued ...
    variant: dict[Any, str] = {}
    seen: dict[str, int] = {}
    for iid, path in zip(inst["instance_id"], inst["path"], strict=True):
        k = seen.get(path, 0)
        seen[path] = k + 1
        variant[iid] = f"{path}@queued" if k % 2 else path
    vals: dict[str, list[float]] = {}
    for iid, _, sig, val in joined_values(joined_store(ev, inst, "events", ["cupti"]), "events"):
        if sig in ("gpu.time", "gpu.span"):
            vals.setdefault(f"{variant[iid]}:{sig}", []).append(val)
    return vals, events


def _medians(d: dict[str, list[float]]) -> dict[str, Any]:
    return {k: {"median_ns": median(v), "n": len(v)} for k, v in d.items()}


def run_events(mode: str, out: Path) -> None:
    """gpu.time/gpu.span (CUPTI) vs CUDA events around the same regions.

    ``none``: CUDA events with no tool attached.  ``cupti``: the CUPTI timing run, with CUDA events recorded
    around the same regions too (same process, same GPU state).  ``abab``: both in one process, alternating in
    rounds; between CUPTI rounds ``cupti.finalize()`` detaches CUPTI, so the "none" rounds run with no tool
    attached while sharing the process's GPU state.  All warm the GPU up for 1.5 s first.
    """
    work = events_workload()
    iters = 30
    _warm_up(work)
    clock0 = _sm_clock()
    if mode == "none":
        res: dict[str, list[float]] = {}
        _events_pass(work, iters, res)
        fig = _medians(res)
        fig["sm_clock_mhz"] = {"start": clock0, "end": _sm_clock()}
        print(f"[events none] cuda events: {json.dumps(fig)}")
        _append_figure(out, "events:none", fig)
        return
    if mode == "cupti":
        vals, events = _cupti_pass(work, iters, out)
        summary = _medians(vals)
        for k, v in events.items():
            summary[f"{k}:cuda_events_with_cupti"] = {"median_ns": median(v), "n": len(v)}
        summary["sm_clock_mhz"] = {"start": clock0, "end": _sm_clock()}
        print(f"[events cupti] {json.dumps(summary)}")
        _append_figure(out, "events:cupti", summary)
        return
    if mode != "abab":
        raise SystemExit(f"unknown events mode {mode!r}: none, cupti or abab")
    from cupti import cupti

    rounds: list[dict[str, Any]] = []
    for r in range(6):
        res = {}
        _events_pass(work, 10, res)
        vals, events = _cupti_pass(work, 10, out)
        cupti.finalize()  # detach: the next round's "none" pass runs with no tool attached
        row = {"none": _medians(res), "cupti": _medians(vals), "cupti_events": _medians(events)}
        row["sm_clock_mhz"] = _sm_clock()
        rounds.append(row)
        print(f"[events abab] round {r}: {json.dumps(row)}")
    _append_figure(out, "events:abab", {"rounds": rounds, "sm_clock_start": clock0})


def _append_figure(out: Path, key: str, value: Any) -> None:
    path = out / "figures.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    prev = data.get(key)
    data[key] = [*prev, value] if isinstance(prev, list) else ([prev, value] if prev else [value])
    path.write_text(json.dumps(data, indent=1, default=str))


# ----------------------------------------------------------------------------------------------------------------
def run_profiler(out: Path) -> None:
    """Kernel count per record_function instance (same extent as the argus regions) from a Kineto trace."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    result: dict[str, Any] = {}
    for case in ("nested", "two_streams", "graph", "backward"):
        module, reps = CASES[case]
        mod = load_example(module)
        state = mod.setup()
        mod.step(state)
        torch.cuda.synchronize()
        mod.argus_lab = SimpleNamespace(region=record_function)  # the same extent, as record_function
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                mod.step(state)
            torch.cuda.synchronize()
        trace = out / f"trace-{case}.json"
        prof.export_chrome_trace(str(trace))
        counts = kernels_per_annotation(json.loads(trace.read_text()))
        trace.unlink()
        result[case] = counts
        print(f"[profiler] {case}: kernels per record_function instance {counts}")
    merge_figures(out, "profiler", result)


def kernels_per_annotation(trace: dict[str, Any]) -> dict[str, list[int]]:
    evs = trace.get("traceEvents", [])
    launches: dict[int, tuple[float, Any]] = {}
    kernels: list[int] = []
    ann = []
    for e in evs:
        cat = e.get("cat", "")
        args = e.get("args", {}) or {}
        if cat in ("cuda_runtime", "cuda_driver") and "correlation" in args:
            launches[int(args["correlation"])] = (float(e["ts"]), e.get("tid"))
        elif cat == "kernel" and "correlation" in args:
            kernels.append(int(args["correlation"]))
        elif cat == "user_annotation" and e.get("ph") == "X":
            ann.append((e["name"], float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e.get("tid")))
    out: dict[str, list[int]] = {}
    for name, t0, t1, tid in sorted(ann, key=lambda a: a[1]):
        n = 0
        for corr in kernels:
            hit = launches.get(corr)
            if hit and hit[1] == tid and t0 <= hit[0] <= t1:
                n += 1
        out.setdefault(name, []).append(n)
    return out


# ----------------------------------------------------------------------------------------------------------------
LOOP_KINDS: dict[str, list[str]] = {
    "cupti-kernel": ["CONCURRENT_KERNEL"],  # CUPTI's own cost: kernel records only, no API, no external ids
    "cupti-k-ec": ["CONCURRENT_KERNEL", "EXTERNAL_CORRELATION"],
    "cupti-k-ec-rt": ["CONCURRENT_KERNEL", "EXTERNAL_CORRELATION", "RUNTIME"],
    "cupti-k-ec-drv": ["CONCURRENT_KERNEL", "EXTERNAL_CORRELATION", "DRIVER"],
    "cupti-k-rt-drv": ["CONCURRENT_KERNEL", "RUNTIME", "DRIVER"],
}
LOOP_MODES = ("plain", "markers", "cupti", "cupti-kernel", "profiler")
DRIVER_CBIDS_KINDS = ["CONCURRENT_KERNEL", "RUNTIME", "EXTERNAL_CORRELATION"]


def run_driver_attr(mode: str, out: Path) -> None:
    """Triton (driver API launch) and PyTorch (runtime launch) kernels under ``driver_api=MODE``: attribution."""
    import torch

    from argus_lab.backends.cupti.collector import CuptiCollector
    from argus_lab.regions import Recorder
    from argus_lab.regions.instance_columns import as_values
    from argus_lab.run.protocols import RunContext

    mods = [load_example("triton_add"), load_example("nested_torch")]
    states = [m.setup() for m in mods]
    for m, st in zip(mods, states, strict=True):
        m.step(st)
    torch.cuda.synchronize()
    coll = CuptiCollector()
    settings: dict[str, Any] = {} if mode == "kind" else {"kinds": DRIVER_CBIDS_KINDS}
    coll.start(RunContext("attr", ("gpu.time",), settings, out))
    if mode == "cbids":  # the experiment of 2026-11-29: driver callbacks switched on one by one, no DRIVER kind
        from cupti import cupti

        for name, cbid in cupti.driver_api_trace_cbid.__members__.items():
            if 0 < int(cbid) < 0x7FFFFFFF and ("Launch" in name or "Memcpy" in name):
                cupti.activity_enable_driver_api(int(cbid), 1)
    rec = Recorder("attr", coll.hooks())
    with rec:
        for _ in range(3):
            for m, st in zip(mods, states, strict=True):
                m.step(st)
    coll.stop()
    inst = {k: as_values(v) for k, v in rec.columns().items()}  # Python values: the columns are arrays
    ev = coll.evidence(inst)
    path_of = dict(zip(inst["instance_id"], inst["path"], strict=True))
    store = joined_store(ev, inst, "attr", ["cupti"])
    classes = dict(store.rows("SELECT class, count(*) FROM attributions WHERE evidence = 'kernel' GROUP BY ALL"))
    k = kernel_rows(ev)
    per_region: dict[str, int] = {}
    for iid in k["instance_id"]:
        key = str(path_of.get(iid))
        per_region[key] = per_region.get(key, 0) + 1
    fig = {
        "records": {f: len(next(iter(c.values()), [])) for f, c in coll.raw.items()},
        "attribution": classes,
        "kernels_per_region": per_region,
    }
    print(f"[driver-attr {mode}] {json.dumps(fig)}")
    _append_figure(out, f"driver-attr:{mode}", fig)


def run_nccl_probe(out: Path) -> None:
    """One-rank NCCL process group on this GPU: which kernels NCCL launches, and that CUPTI attributes them."""
    import torch
    import torch.distributed as dist

    import argus_lab
    from argus_lab.backends.cupti.collector import CuptiCollector
    from argus_lab.regions import Recorder
    from argus_lab.regions.instance_columns import as_values
    from argus_lab.run.protocols import RunContext

    load_example("nccl_overlap").init()  # the one-rank NCCL group of examples/gpu/nccl_overlap.py
    t = torch.randn(1 << 22, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    coll = CuptiCollector()
    coll.start(RunContext("nccl", ("gpu.time",), {}, out))
    rec = Recorder("nccl", coll.hooks())
    with rec:
        for _ in range(3):
            with argus_lab.region("step"):
                with argus_lab.region("allreduce"):
                    dist.all_reduce(t)
                    dist.all_reduce(t, op=dist.ReduceOp.AVG)
                with argus_lab.region("compute"):
                    t.mul_(0.5)
    coll.stop()
    inst = {k: as_values(v) for k, v in rec.columns().items()}  # Python values: the columns are arrays
    ev = coll.evidence(inst)
    k = kernel_rows(ev)
    path_of = dict(zip(inst["instance_id"], inst["path"], strict=True))
    rows = [
        (kind, name, path_of.get(iid), stream, end - start)
        for kind, name, iid, stream, start, end in zip(
            k["kind"], k["name"], k["instance_id"], k["stream_id"], k["start_ns"], k["end_ns"], strict=True
        )
    ]
    for r in rows:
        print(f"[nccl] {r}")
    _append_figure(out, "nccl_probe", {"kernels": rows, "nccl": list(torch.cuda.nccl.version())})


OVERLAP_CONFIGS: dict[str, dict[str, str]] = {  # name -> the example's settings (environment)
    "serial": {"NCCL_OVERLAP_STEP": "serial"},
    "overlapped": {"NCCL_OVERLAP_STEP": "overlapped"},
    "overlapped-high": {"NCCL_OVERLAP_STEP": "overlapped", "NCCL_OVERLAP_PRIORITY": "high"},
}
OVERLAP_SIGNALS = "host.wall,gpu.time,gpu.span,comm.time,comm.kernels,comm.overlap,comm.exposed"


def run_overlap_study(out: Path, processes: int = 3) -> None:
    """examples/gpu/nccl_overlap.py in train mode, one configuration after another, ``processes`` rounds.

    One store per configuration (``OUT/data/overlap/<name>.duckdb``), one request per process; the stores are
    packed into ``OUT/overlap-stores.tgz``.
    """
    folder = out / "data" / "overlap"
    folder.mkdir(parents=True, exist_ok=True)
    for p in range(processes):
        for i, (name, settings) in enumerate(OVERLAP_CONFIGS.items()):
            env = dict(os.environ, NCCL_OVERLAP_MODE="train", MASTER_PORT=str(29600 + 10 * p + i), **settings)
            cmd = [
                sys.executable, "-m", "argus_lab.faces.cli", "run", str(EXAMPLES / "nccl_overlap.py"),
                "--signals", OVERLAP_SIGNALS, "--repeat", "5", "--warmup", "1",
                "--store", str(folder / f"{name}.duckdb"),
            ]  # fmt: skip
            t0 = time.perf_counter()
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=300)
            keep = ("train ", "serial/allreduce ", "overlapped/allreduce ", "serial/compute ", "overlapped/compute ")
            lines = [ln for ln in res.stdout.splitlines() if ln.startswith(keep)]
            secs = time.perf_counter() - t0
            print(f"=== overlap {name} process {p}: exit {res.returncode} in {secs:.1f}s")
            print("\n".join(lines) if res.returncode == 0 else res.stdout[-1500:] + res.stderr[-1500:])
    subprocess.run(["tar", "czf", str(out / "overlap-stores.tgz"), "-C", str(folder), "."], check=False)


def launch_bound_body() -> tuple[Any, Any]:
    """One iteration of the launch-bound loop (four tiny elementwise kernels) and the region marking it."""
    import torch

    import argus_lab

    x = torch.randn(1024, device="cuda")

    def body() -> None:
        y = x * 2
        y = y + 1
        y = torch.relu(y)
        y.sin_()

    return body, argus_lab.region("it")


LOOP_ABAB_CUPTI: dict[str, dict[str, Any]] = {  # phase -> collector settings
    "cupti": {},
    "cupti-32mib": {"buffer_bytes": 32 << 20},  # a smaller activity buffer (fewer fresh pages)
    "cupti-no-driver": {"kinds": ["CONCURRENT_KERNEL", "RUNTIME", "EXTERNAL_CORRELATION"]},
    "cupti-kernel": {"kinds": ["CONCURRENT_KERNEL"]},
}


def run_loop_abab(which: str, out: Path, rounds: int = 6) -> None:
    """The launch-bound loop, every phase in one process, in rotation (cancels process-to-process noise).

    ``which=cupti``: phases plain, markers and the CUPTI variants of :data:`LOOP_ABAB_CUPTI`, ``cupti.finalize()``
    after each CUPTI phase; ``which=profiler``: phases plain and torch.profiler (+ record_function); ``which=all``:
    every phase, torch.profiler included.  Each phase
    times 5 loops (after 2 untimed) and keeps their median; the figure per phase is the median over rounds of its
    ratio to the plain phase of the same round.
    """
    import torch

    from argus_lab.backends.cupti.collector import CuptiCollector
    from argus_lab.regions import Recorder
    from argus_lab.run.protocols import RunContext

    body, it = launch_bound_body()

    def loop(marked: bool, rf: bool = False) -> None:
        from torch.profiler import record_function

        for _ in range(300):
            if rf:
                with record_function("it"):
                    body()
            elif marked:
                with it:
                    body()
            else:
                body()

    def timed(marked: bool, rf: bool = False) -> float:
        ts = []
        for r in range(7):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            loop(marked, rf)
            torch.cuda.synchronize()
            if r >= 2:
                ts.append((time.perf_counter() - t0) * 1e3)
        return median(ts)

    timed(False)
    per: dict[str, list[float]] = {}
    for _ in range(rounds):
        row = {"plain": timed(False)}
        if which in ("profiler", "all"):
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], acc_events=True):
                row["profiler"] = timed(True, rf=True)
        if which != "profiler":
            from cupti import cupti

            row["markers"] = timed(True)
            for phase, settings in LOOP_ABAB_CUPTI.items():
                coll = CuptiCollector()
                coll.start(RunContext("loop", ("gpu.time",), settings, out))
                with Recorder("loop", () if phase == "cupti-no-hooks" else coll.hooks()):
                    row[phase] = timed(True)
                coll.stop()
                cupti.finalize()
        for k, v in row.items():
            per.setdefault(k, []).append(v)
    ratios = {k: median([a / b for a, b in zip(v, per["plain"], strict=True)]) for k, v in per.items()}
    fig = {"ms": per, "ratio_to_plain": ratios}
    print(f"[loop-abab {which}] ratio to plain (median over {rounds} rounds): {json.dumps(ratios)}")
    print(f"[loop-abab {which}] ms per loop: {json.dumps({k: [round(x, 2) for x in v] for k, v in per.items()})}")
    _append_figure(out, f"loop-abab:{which}", fig)


def run_loop(mode: str, out: Path) -> None:
    """Launch-bound loop: 300 iterations of four tiny elementwise ops, one region per iteration."""
    import torch

    body, it = launch_bound_body()

    def loop_plain() -> None:
        for _ in range(300):
            body()

    def loop_region() -> None:
        for _ in range(300):
            with it:
                body()

    def loop_rf() -> None:
        from torch.profiler import record_function

        for _ in range(300):
            with record_function("it"):
                body()

    rounds = 7
    times: list[float] = []
    extra: dict[str, Any] = {}

    def measure(fn: Any) -> None:
        for r in range(rounds):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            if r >= 2:
                times.append((time.perf_counter() - t0) * 1e3)

    loop_plain()
    torch.cuda.synchronize()
    if mode == "plain":
        measure(loop_plain)
    elif mode == "markers":
        measure(loop_region)
    elif mode == "profiler":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            measure(loop_rf)
    elif mode.startswith("cupti"):
        from argus_lab.backends.cupti.collector import CuptiCollector
        from argus_lab.regions import Recorder
        from argus_lab.run.protocols import RunContext

        coll = CuptiCollector()
        settings: dict[str, Any] = {"api_records": "all" if mode == "cupti-all" else "launch"}
        if mode in LOOP_KINDS:  # a subset of the activity kinds (the cost of each family)
            settings["kinds"] = LOOP_KINDS[mode]
        if mode == "cupti-objects":  # cupti-python's buffer callback (one Python object per record)
            settings["buffers"] = "python"
        coll.start(RunContext("loop", ("gpu.time",), settings, out))
        hooks = () if mode == "cupti-nohooks" else coll.hooks()
        with Recorder("loop", hooks):
            measure(loop_region)
        coll.stop()
        t0 = time.perf_counter()
        ev = coll.evidence(Recorder("x").columns())
        ev_s = time.perf_counter() - t0
        n = sum(len(c.get("start", c.get("correlation_id", []))) for c in coll.raw.values())
        extra = {
            "records": n,
            "decode_s": coll.decode_s,
            "records_per_s_decode": n / coll.decode_s if coll.decode_s else None,
            "evidence_s": ev_s,
            "kernels": len(kernel_rows(ev)["name"]),
            "dropped": coll.dropped,
            "completed_during_run": coll.completed_during_run,
            "flush_s": coll.flush_s,
            "per_family": {f: len(next(iter(c.values()), [])) for f, c in coll.raw.items()},
            "attributed": sum(1 for i in kernel_rows(ev)["instance_id"] if i),
        }
    fig = {"median_ms": median(times), "rounds_ms": times, **extra}
    print(f"[loop {mode}] {json.dumps(fig, default=str)}")
    data = json.loads((out / "figures.json").read_text()) if (out / "figures.json").exists() else {}
    data.setdefault(f"loop:{mode}", []).append(fig)
    (out / "figures.json").write_text(json.dumps(data, indent=1, default=str))


# ----------------------------------------------------------------------------------------------------------------
def run_ncu(out: Path) -> None:
    """argus-lab run end to end on the nested example, then a plain ncu run of the same kernels to compare."""
    store = out / "data" / "e2e.duckdb"
    signals = ",".join(
        ["gpu.time", "gpu.span", "gpu.kernels", "gpu.launch_overhead", "compile.registers", "sys.sm_clock", "sys.power"]
        + [f"hw:{m}" for m in HW]
    )
    cmd = [
        sys.executable,
        "-m",
        "argus_lab.faces.cli",
        "run",
        str(EXAMPLES / "nested_torch.py"),
        "--signals",
        signals,
        "--repeat",
        "2",
        "--warmup",
        "1",
        "--scope",
        "outer/**",
        "--store",
        str(store),
    ]
    print("[ncu] $ " + " ".join(cmd))
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    print(res.stdout[-6000:])
    print(res.stderr[-3000:])
    print(f"[ncu] argus-lab run exit={res.returncode} in {time.perf_counter() - t0:.1f}s")
    reports = sorted(store.parent.glob("e2e.duckdb.runs/*/report.ncu-rep"))
    print(f"[ncu] reports: {[str(r) for r in reports]}")
    for log in sorted(store.parent.glob("e2e.duckdb.runs/*/*.log")):
        text = log.read_text(errors="replace")
        print(f"[ncu] --- {log.name} ({log.parent.name}) tail:\n" + "\n".join(text.splitlines()[-15:]))
    # plain ncu run of the same script (no argus recorder; the regions still push NVTX ranges)
    from argus_lab.backends.ncu.launcher import find_ncu
    from argus_lab.backends.ncu.parse import read_report

    plain = out / "data" / "ncu" / "plain.ncu-rep"
    plain.parent.mkdir(parents=True, exist_ok=True)
    metrics = [
        "gpu__time_duration.sum",
        "dram__bytes_read.sum",
        "smsp__inst_executed.sum",
        "launch__registers_per_thread",
    ]
    pcmd = [
        find_ncu(),
        "--metrics",
        ",".join(metrics),
        "--nvtx",
        "--nvtx-include",
        "argus@outer/",
        "--clock-control",
        "base",
        "--cache-control",
        "all",
        "--export",
        str(plain),
        "--force-overwrite",
        sys.executable,
        str(EXAMPLES / "nested_torch.py"),
    ]
    print("[ncu] $ " + " ".join(pcmd))
    pres = subprocess.run(pcmd, capture_output=True, text=True, check=False, cwd=ROOT)
    print("[ncu] plain exit", pres.returncode, pres.stdout[-1500:], pres.stderr[-1500:])
    ver = subprocess.run([find_ncu(), "--version"], capture_output=True, text=True, check=False)
    print("[ncu] version:", ver.stdout.strip().splitlines()[-1:] if ver.stdout else ver.stderr)
    fig: dict[str, Any] = {"argus_exit": res.returncode, "plain_exit": pres.returncode}
    if plain.exists() and reports:
        pk = read_report(plain, metrics)
        ak = [k for r in reports for k in read_report(r, []) if any(m in k.metrics for m in metrics)]
        cmp: dict[str, Any] = {}
        for m in metrics:
            for name in sorted({k.mangled for k in pk}):
                pv = [k.metrics[m][0] for k in pk if k.mangled == name and isinstance(k.metrics[m][0], float)]
                av = [
                    k.metrics[m][0]
                    for k in ak
                    if k.mangled == name and m in k.metrics and isinstance(k.metrics[m][0], float)
                ]
                if pv and av:
                    p, a = median(pv), median(av)  # type: ignore[arg-type]
                    cmp[f"{m} | {name[:50]}"] = {"plain": p, "argus": a, "rel_diff": (a - p) / p if p else None}
        fig["compare"] = cmp
        for k, v in cmp.items():
            print(f"[ncu] {k:90s} plain={v['plain']:.6g} argus={v['argus']:.6g} rel={v['rel_diff']}")
        shutil.copy(reports[0], out / "data" / "ncu" / "argus.ncu-rep")
        kk = read_report(reports[0], [])
        seen = [(k.path, k.instance_index, k.instance_inferred, k.ordinal, k.name[:30]) for k in kk]
        print(f"[ncu] argus report kernels: {seen}")
    merge_figures(out, "ncu", fig)
    show = subprocess.run(
        [sys.executable, "-m", "argus_lab.faces.cli", "show", "--store", str(store), "--provenance"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    print("[ncu] argus-lab show:\n" + show.stdout[-5000:] + show.stderr[-2000:])


# ----------------------------------------------------------------------------------------------------------------
def run_ncu_fixture(out: Path) -> None:
    """A small .ncu-rep for CI: Triton kernels in nested regions, through NcuLauncher (payload on)."""
    from argus_lab.backends.ncu.launcher import NcuLauncher
    from argus_lab.backends.ncu.parse import read_report_isolated, to_json
    from argus_lab.run.protocols import RunContext

    folder = out / "data" / "ncu" / "triton_nested"
    folder.mkdir(parents=True, exist_ok=True)
    metrics = ["gpu__time_duration.sum", "dram__bytes_read.sum", "smsp__inst_executed.sum", "launch__grid_size"]
    ctx = RunContext("fixture", tuple(f"hw:{m}" for m in metrics), {"nvtx_include": ["argus@outer/"]}, folder)
    launcher = NcuLauncher()
    cmd = launcher.command(ctx, [sys.executable, str(EXAMPLES / "triton_nested.py")])
    print("[ncu-fixture] $ " + " ".join(cmd))
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    print(f"[ncu-fixture] exit {res.returncode}", res.stdout[-800:], res.stderr[-800:])
    ev = launcher.evidence(ctx, {"instance_id": []})
    nk = ev["ncu_kernels"]
    print(
        f"[ncu-fixture] kernels: {list(zip(nk['path'], nk['instance_index'], nk['ordinal'], nk['name'], strict=True))}"
    )
    (folder / "expected.json").write_text(json.dumps(to_json(read_report_isolated(folder / "report.ncu-rep", metrics))))
    print(f"[ncu-fixture] report bytes: {(folder / 'report.ncu-rep').stat().st_size}")
    # the failure messages: a workload that fails under ncu, and a filter that matches nothing
    bad = folder / "bad"
    bad.mkdir(exist_ok=True)
    bctx = RunContext("bad", ("hw:gpu__time_duration.sum",), {}, bad)
    bcmd = launcher.command(bctx, [sys.executable, "-c", "import sys; sys.exit(3)"])
    bres = subprocess.run(bcmd, capture_output=True, text=True, check=False, cwd=ROOT)
    try:
        launcher.evidence(bctx, {"instance_id": []})
    except Exception as exc:
        print(f"[ncu-fixture] failing workload (exit {bres.returncode}) -> {type(exc).__name__}: {exc}")
    shutil.copy(bad / "ncu.log", folder / "failing_workload.ncu.log")
    none = folder / "none"
    none.mkdir(exist_ok=True)
    nctx = RunContext("none", ("hw:gpu__time_duration.sum",), {"nvtx_include": ["argus@nosuchregion/"]}, none)
    nres = subprocess.run(
        launcher.command(nctx, [sys.executable, str(EXAMPLES / "triton_nested.py")]),
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    try:
        launcher.evidence(nctx, {"instance_id": []})
    except Exception as exc:
        print(f"[ncu-fixture] filter matching nothing (exit {nres.returncode}) -> {type(exc).__name__}: {exc}")
    shutil.copy(none / "ncu.log", folder / "no_kernels.ncu.log")


PM_SITE = "/tmp/argus-pm-site"


def run_pm(out: Path) -> None:
    """PM sampling with a private cupti-python 13.4 install (imported before torch)."""
    import cupti

    from argus_lab.backends.pm import PmSampler, installed_version
    from argus_lab.run.protocols import RunContext

    print(f"[pm] cupti from {cupti.__file__} version {installed_version()}")
    import torch

    from argus_lab.regions import Recorder, region

    a = torch.randn(4096, 4096, device="cuda")
    a @ a
    torch.cuda.synchronize()
    results: dict[str, Any] = {}
    for label, metrics, mset in (
        ("single", ["sm__cycles_active.avg", "dram__throughput.avg.pct_of_peak_sustained_elapsed"], None),
        ("triage", ["sm__cycles_active.avg"], "TriageCompute"),
    ):
        pm = PmSampler()
        try:
            pm.start(
                RunContext("pm", tuple(f"pm:{m}" for m in metrics), {"metric_set": mset, "interval_ns": 200_000}, out)
            )
        except Exception as exc:
            print(f"[pm] {label}: start failed: {type(exc).__name__}: {exc}")
            results[label] = f"start failed: {exc}"
            continue
        rec = Recorder("pm")
        with rec:
            for _ in range(5):
                with region("mm"):
                    for _ in range(10):
                        a @ a
                torch.cuda.synchronize()
        pm.stop()
        ev = pm.evidence(rec.columns())
        smp = ev["samples"]
        t = smp["t_ns"]
        print(
            f"[pm] {label}: samples={len(t)} counts={pm.counts} host={pm.host_ns} "
            f"first={t[:2]} last={t[-2:]} values={list(zip(smp['signal'][:4], smp['value'][:4], strict=True))}"
        )
        per: dict[str, list[float]] = {}
        for _, _, sig, val in joined_values(joined_store(ev, rec.columns(), "pm", ["pm"]), "pm"):
            per.setdefault(sig, []).append(val)
        print(f"[pm] {label}: per-instance values (the join's time-weighted windows) {per}")
        results[label] = {"samples": len(t), "counts": pm.counts}
        folder = out / "data" / "pm"
        folder.mkdir(parents=True, exist_ok=True)
        from argus_lab.run.shards import write_table

        write_table(folder / f"samples-{label}.parquet", smp)
        write_table(folder / f"instances-{label}.parquet", rec.columns())
    merge_figures(out, "pm", results)


# ----------------------------------------------------------------------------------------------------------------
def run_steps(steps: list[list[str]]) -> int:
    bad = 0
    for cmd in steps:
        t0 = time.perf_counter()
        res = subprocess.run([*PIN, *cmd], check=False, timeout=400)
        print(f"=== {' '.join(cmd[2:-1])}: exit {res.returncode} in {time.perf_counter() - t0:.1f}s", flush=True)
        bad += res.returncode != 0
    return bad


# The timing processes run on a fixed set of CPUs (GPU_RECORD_CPUS, e.g. "2-5"): on the shared GPU machine the
# same loop read 8.4 or 12.5 ms depending on where a process landed.
PIN = ["taskset", "-c", os.environ["GPU_RECORD_CPUS"]] if os.environ.get("GPU_RECORD_CPUS") else []


def run_timing(out: Path) -> int:
    """Only the timing figures: CUDA events vs CUPTI (separate processes, interleaved, and alternating rounds in
    one process) and the launch-bound loop per mode (interleaved)."""
    out.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    pairs = int(os.environ.get("TIMING_PAIRS", "5"))
    loops = int(os.environ.get("TIMING_LOOPS", "3"))
    steps: list[list[str]] = [[*me, "driver-attr", m, str(out)] for m in ("kind", "cbids")]
    steps += [[*me, "events", "abab", str(out)]] if pairs else []
    for _ in range(pairs):
        steps += [[*me, "events", "none", str(out)], [*me, "events", "cupti", str(out)]]
    for _ in range(loops):
        steps += [[*me, "loop", m, str(out)] for m in LOOP_MODES]
    bad = run_steps(steps)
    report(out)
    return 1 if bad else 0


def run_all(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    steps: list[list[str]] = [[*me, "case", c, str(out)] for c in CASES]
    for _ in range(2):
        steps += [[*me, "events", "none", str(out)], [*me, "events", "cupti", str(out)]]
    steps.append([*me, "profiler", str(out)])
    for _ in range(2):
        modes = ("plain", "markers", "cupti", "cupti-all", "cupti-kernel", "cupti-objects", "profiler")
        steps += [[*me, "loop", m, str(out)] for m in modes]
    steps.append([*me, "ncu-fixture", str(out)])
    steps.append([*me, "ncu", str(out)])
    if os.path.isdir(PM_SITE):
        steps.append([*me, "pm", str(out)])
    bad = run_steps(steps)
    report(out)
    return 1 if bad else 0


def _as_list(v: Any) -> list[Any]:
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def report(out: Path) -> None:
    """The key figures, from figures.json."""
    path = out if out.is_file() else out / "figures.json"
    if not path.exists():
        print("no figures recorded")
        return
    f = json.loads(path.read_text())
    print("\n================ GPU correctness (H200) ================")
    runs0 = _as_list(f.get("events:none"))
    runs1 = _as_list(f.get("events:cupti"))
    regions = sorted({k for r in runs0 for k in r if k != "sm_clock_mhz"})
    for region in regions:
        e_none = [r[region]["median_ns"] for r in runs0 if region in r]
        key_tool = f"{region}:cuda_events_with_cupti"
        e_tool = [r[key_tool]["median_ns"] for r in runs1 if key_tool in r]
        for sig in ("gpu.time", "gpu.span"):
            c = [r[f"{region}:{sig}"]["median_ns"] for r in runs1 if f"{region}:{sig}" in r]
            if e_none and c:
                e, cc = median(e_none), median(c)
                print(
                    f"{region:13s} {sig:9s} {cc / 1e3:9.1f} us (CUPTI, {len(c)} processes) vs CUDA events no tool "
                    f"{e / 1e3:9.1f} us ({len(e_none)} processes): {100 * (cc - e) / e:+.2f} %"
                )
            if e_tool and c:
                pairs = [100 * (a - b) / b for a, b in zip(c, e_tool, strict=False)]
                shown = [f"{p:+.2f} %" for p in pairs]
                print(f"{region:13s} {sig:9s} vs CUDA events in the same CUPTI run, per process: {shown}")
        if e_none:
            print(f"{region:13s} CUDA events, no tool, per process (us): {[round(x / 1e3, 1) for x in e_none]}")
        if e_tool:
            print(f"{region:13s} CUDA events with CUPTI on, per process (us): {[round(x / 1e3, 1) for x in e_tool]}")
    for run in _as_list(f.get("events:abab")):
        rounds = run["rounds"]
        names = sorted(rounds[0]["none"]) if rounds else []
        print(f"-- one process, {len(rounds)} rounds alternating no tool / CUPTI (cupti.finalize between):")
        for name in names:
            none = [r["none"][name]["median_ns"] for r in rounds]
            for sig in ("gpu.time", "gpu.span"):
                tool = [r["cupti"].get(f"{name}:{sig}", {}).get("median_ns") for r in rounds]
                pairs = [100 * (t - e) / e for t, e in zip(tool, none, strict=True) if t is not None]
                if not pairs:
                    continue
                print(
                    f"{name:13s} {sig:9s} {median([t for t in tool if t]) / 1e3:9.1f} us vs events no tool "
                    f"{median(none) / 1e3:9.1f} us: median of per-round differences {median(pairs):+.2f} % "
                    f"(rounds: {', '.join(f'{p:+.2f}' for p in pairs)})"
                )
    prof = f.get("profiler", {})
    for case, counts in prof.items():
        print(f"torch.profiler kernels per record_function [{case}]: {counts}")
    for key in sorted(k for k in f if k.startswith("loop:")):
        meds = [r["median_ms"] for r in f[key]]
        print(f"{key:15s} median ms per 300-iteration loop, per process: {[round(m, 2) for m in meds]}")
    ncu = f.get("ncu", {})
    for k, v in (ncu.get("compare") or {}).items():
        print(f"ncu {k}: plain {v['plain']:.6g} argus {v['argus']:.6g} rel {v['rel_diff']}")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    cmd, rest = argv[0], argv[1:]
    try:
        if cmd == "all":
            return run_all(Path(rest[0]))
        if cmd == "timing":
            return run_timing(Path(rest[0]))
        if cmd == "case":
            run_case(rest[0], Path(rest[1]))
        elif cmd == "events":
            run_events(rest[0], Path(rest[1]))
        elif cmd == "loop-abab":
            run_loop_abab(rest[0], Path(rest[1]))
        elif cmd == "overlap-study":
            run_overlap_study(Path(rest[0]))
        elif cmd == "driver-attr":
            run_driver_attr(rest[0], Path(rest[1]))
        elif cmd == "nccl-probe":
            run_nccl_probe(Path(rest[0]))
        elif cmd == "profiler":
            run_profiler(Path(rest[0]))
        elif cmd == "loop":
            run_loop(rest[0], Path(rest[1]))
        elif cmd == "ncu":
            run_ncu(Path(rest[0]))
        elif cmd == "ncu-fixture":
            run_ncu_fixture(Path(rest[0]))
        elif cmd == "pm":
            if "--inner" in rest:
                run_pm(Path(rest[0]))
            else:
                env = dict(os.environ, PYTHONPATH=os.pathsep.join([PM_SITE, os.environ.get("PYTHONPATH", "")]))
                cmd2 = [sys.executable, str(Path(__file__).resolve()), "pm", rest[0], "--inner"]
                return subprocess.run(cmd2, env=env, check=False).returncode
        elif cmd == "report":
            report(Path(rest[0]))
        else:
            print(__doc__)
            return 2
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
