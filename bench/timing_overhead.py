"""What region timing costs on a GPU: argus_lab's timing run beside NVTX, torch.profiler and Proton.

Two workloads, both launch-bound, both marked with regions the way a user marks them:

* ``loop``: 300 regions x 4 small elementwise kernels (``scripts/gpu_record.py launch_bound_body``);
* ``decode``: one KV-cache decode step (batch 1) of a Llama-shaped model built with ``transformers`` (TinyLlama-1.1B
  shape: 22 layers, hidden 2048, random weights, bf16), one region around the step and one around every attention
  and MLP, entered in a forward pre-hook and exited in a forward hook (45 regions, ~900 kernels a step).

Tools (each in its own process, against a no-tool baseline measured first in that process; medians of the
repetitions; several rounds; ratio = tool median / baseline median):

``none`` (baseline again: the noise), ``nvtx`` (``nvtx.annotate`` per region, no NVTX tool attached),
``torch.profiler`` (CPU + CUDA activities, ``record_function`` per region), ``proton`` (``proton.start`` +
``proton.scope`` per region), ``cupti-kernels`` (CUPTI kernel records alone, no regions, no Python work: the floor),
``cupti-kernels+callbacks`` (+ argus_lab's native launch callback, no regions), ``argus-markers`` (argus_lab regions
recording host.wall, no CUPTI), ``argus-python`` (the timing run with instance ids pushed from Python: the path
before the native one), ``argus-native`` (the timing run: CUPTI collector + region recorder), ``argus-measure``
(``argus_lab.measure(step, signals="gpu.time,gpu.kernels,gpu.span,host.wall")`` as the README shows it).

Correctness, in the same script: ``attribution`` (every PyTorch, cuBLAS, Triton and torch.compile (Inductor) kernel
launched in a region is attributed ``exact`` to that region) and ``events`` (gpu.time vs CUDA events for regions of
1 ms or more, within 2 %).

    python bench/timing_overhead.py OUT [--short] [--rounds 3] [--reps 15] [--workloads loop,decode] [--tools ...]

Writes OUT/timing-overhead.json, OUT/timing-overhead.txt and one log per child process under OUT/logs.  Every child
runs under a timeout; a tool that fails is reported with its error, the others go on.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOOLS = (
    "none",
    "nvtx",
    "torch.profiler",
    "proton",
    "cupti-kernels",
    "cupti-kernels+callbacks",
    "argus-markers",
    "argus-python",
    "argus-native",
    "argus-measure",
)
WORKLOADS = ("loop", "decode")
GPU_TOOLS = {"torch.profiler", "proton", "cupti-kernels", "cupti-kernels+callbacks", "argus-python", "argus-native"}
SHORT_ORDER = (  # --short: the tools that answer the issue first, the rest while the time budget lasts
    "none",
    "proton",
    "cupti-kernels",
    "argus-native",
    "argus-measure",
    "cupti-kernels+callbacks",
    "argus-markers",
    "torch.profiler",
    "nvtx",
    "argus-python",
)
SIGNALS = "gpu.time,gpu.kernels,gpu.span,host.wall"
Marker = Callable[[str], Any]


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


# ----------------------------------------------------------------------------------------------------------------
# workloads: plain() runs one repetition unmarked; marked(marker) returns one repetition with regions
# ----------------------------------------------------------------------------------------------------------------
class Loop:
    """300 regions x 4 small elementwise kernels."""

    top = "loop"

    def __init__(self, device: str, tiny: bool = False) -> None:
        import torch

        self.x = torch.randn(1024, device=device)

    def _body(self) -> None:
        import torch

        y = self.x * 2
        y = y + 1
        y = torch.relu(y)
        y.sin_()

    def plain(self) -> None:
        for _ in range(300):
            self._body()

    def marked(self, marker: Marker) -> Callable[[], None]:
        def run() -> None:
            for _ in range(300):
                with marker("it"):
                    self._body()

        return run

    def unhook(self) -> None:
        return None


class Decode:
    """One KV-cache decode step (batch 1) of a Llama-shaped model with random weights."""

    top = "decode"

    def __init__(self, device: str, tiny: bool = False) -> None:
        import torch
        from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        shape = (
            {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
            if tiny
            else {"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32}
        )
        config = LlamaConfig(
            vocab_size=32000,
            num_key_value_heads=4,
            max_position_embeddings=2048,
            rms_norm_eps=1e-5,
            **shape,
        )
        torch.manual_seed(0)
        with torch.device(device):
            self.model = LlamaForCausalLM(config).to(dtype).eval()
        self.torch = torch
        prompt = torch.randint(0, config.vocab_size, (1, 32), device=device)
        self.cache = DynamicCache()
        with torch.no_grad():
            out = self.model(input_ids=prompt, past_key_values=self.cache, use_cache=True)
        self.next = out.logits[:, -1:].argmax(-1)
        self.length = prompt.shape[1]
        self.hooks: list[Any] = []

    def plain(self) -> None:
        with self.torch.no_grad():
            self.model(input_ids=self.next, past_key_values=self.cache, use_cache=True)
        self.cache.crop(self.length)  # every step decodes at the same position

    def marked(self, marker: Marker) -> Callable[[], None]:
        """Regions through forward hooks, as a user adds them to a model they do not edit."""
        self.unhook()
        for layer in self.model.model.layers:
            for name, module in (("attn", layer.self_attn), ("mlp", layer.mlp)):
                self.hooks.append(module.register_forward_pre_hook(_enter_hook(marker, name)))
                self.hooks.append(module.register_forward_hook(_exit_hook))

        def run() -> None:
            with marker(self.top):
                self.plain()

        return run

    def unhook(self) -> None:
        for h in self.hooks:
            h.remove()
        self.hooks = []


def _enter_hook(marker: Marker, name: str) -> Callable[..., None]:
    def pre(module: Any, args: Any) -> None:
        module._region = marker(name)
        module._region.__enter__()

    return pre


def _exit_hook(module: Any, args: Any, output: Any) -> None:
    module._region.__exit__(None, None, None)


def make_workload(name: str, device: str, tiny: bool) -> Loop | Decode:
    return {"loop": Loop, "decode": Decode}[name](device, tiny)


# ----------------------------------------------------------------------------------------------------------------
# one child: baseline, then the tool
# ----------------------------------------------------------------------------------------------------------------
def _sync(device: str) -> Callable[[], None]:
    import torch

    return torch.cuda.synchronize if device == "cuda" else (lambda: None)


def timed(fn: Callable[[], None], reps: int, sync: Callable[[], None]) -> list[float]:
    out = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def markers(tool: str) -> Marker:
    if tool == "nvtx":
        import nvtx

        return lambda name: nvtx.annotate(name)
    if tool == "torch.profiler":
        import torch

        return lambda name: torch.profiler.record_function(name)
    if tool == "proton":
        import triton.profiler as proton

        return lambda name: proton.scope(name)
    if tool.startswith("argus"):
        import argus_lab

        return argus_lab.region  # the README idiom: a region() call at every use
    return lambda name: contextlib.nullcontext()


@contextlib.contextmanager
def attached(tool: str, out: Path, extra: dict[str, Any]) -> Iterator[None]:
    """The tool attached around the measured repetitions; what it recorded goes into ``extra``."""
    if tool == "torch.profiler":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            yield
        return
    if tool == "proton":
        import triton.profiler as proton

        proton.start(str(out / f"proton-{os.getpid()}"), backend="cupti")
        try:
            yield
        finally:
            proton.finalize()
        return
    if tool in ("cupti-kernels", "cupti-kernels+callbacks", "argus-python", "argus-native", "argus-markers"):
        from argus_lab.backends.cupti.collector import CuptiCollector
        from argus_lab.regions import Recorder
        from argus_lab.run.protocols import RunContext

        coll = None
        if tool != "argus-markers":
            coll = CuptiCollector()
            settings: dict[str, Any] = {}
            if tool == "cupti-kernels":
                settings = {"kinds": ["CONCURRENT_KERNEL"]}
            elif tool == "argus-python":
                settings = {"launch_path": "python"}
            coll.start(RunContext(f"overhead-{tool}", tuple(SIGNALS.split(",")), settings, out))
        rec = Recorder(tool, coll.hooks() if coll is not None and tool.startswith("argus") else (), cpu_clock=False)
        try:
            if tool.startswith("argus"):
                with rec:
                    yield
            else:
                yield
        finally:
            if coll is not None:
                coll.stop()
        extra["instances"] = rec.count()
        if coll is not None:
            ev = coll.evidence(rec.columns())
            kernels = ev.get("kernels", {})
            ids = kernels.get("instance_id", [])
            extra.update(
                {
                    "launch_path": coll.launch_path,
                    "notes": coll.notes,
                    "kernels": len(ids),
                    "attributed": sum(1 for i in ids if i),
                    "records": {f: len(next(iter(c.values()), [])) for f, c in coll.raw.items()},
                    "native_launch_records": coll.native_launches,
                    "dropped": coll.dropped,
                    "decode_s": coll.decode_s,
                }
            )
        return
    yield


def run_child(workload: str, tool: str, reps: int, warm: int, device: str, tiny: bool, out: Path) -> dict[str, Any]:
    wl = make_workload(workload, device, tiny)
    sync = _sync(device)
    timed(wl.plain, warm, sync)
    base = timed(wl.plain, reps, sync)
    extra: dict[str, Any] = {}
    if tool == "argus-measure":
        measured = run_measure(wl, reps, warm, sync, out, extra)
    else:
        body = wl.plain if tool in ("none", "cupti-kernels", "cupti-kernels+callbacks") else wl.marked(markers(tool))
        with attached(tool, out, extra):
            timed(body, 2, sync)  # the tool's own first-use costs stay out of the figure
            measured = timed(body, reps, sync)
        wl.unhook()
    return {
        "workload": workload,
        "tool": tool,
        "baseline_ms": base,
        "tool_ms": measured,
        "ratio": median(measured) / median(base),
        **extra,
    }


def run_measure(
    wl: Loop | Decode, reps: int, warm: int, sync: Callable[[], None], out: Path, extra: dict[str, Any]
) -> list[float]:
    """``argus_lab.measure`` as the README shows it; the step times itself (host wall, synchronized)."""
    import argus_lab

    body = wl.marked(argus_lab.region)
    times: list[float] = []

    def step() -> None:
        sync()
        t0 = time.perf_counter()
        body()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)

    store = Path(tempfile.mkdtemp(prefix="argus-measure-", dir=out)) / "overhead.duckdb"
    t0 = time.perf_counter()
    argus_lab.measure(step, signals=SIGNALS, repeat=reps, warmup=2, store=str(store))
    extra["measure_s"] = time.perf_counter() - t0
    wl.unhook()
    import duckdb

    con = duckdb.connect(str(store), read_only=True)
    prov = con.execute("SELECT backend, settings FROM provenance WHERE backend = 'cupti'").fetchall()
    if prov:
        settings = json.loads(prov[0][1]) if isinstance(prov[0][1], str) else prov[0][1]
        extra["launch_path"] = settings.get("launch_path")
        extra["notes"] = settings.get("notes")
        extra["records"] = settings.get("records")
    walls = con.execute(
        "SELECT m.value FROM metrics m JOIN region_instances i USING (run_id, instance_id) "
        "WHERE m.signal = 'host.wall' AND i.path = ? AND NOT coalesce(i.warmup, false) ORDER BY i.instance_index",
        [wl.top],
    ).fetchall()
    gpu = con.execute(
        "SELECT m.signal, median(m.value) FROM metrics m JOIN region_instances i USING (run_id, instance_id) "
        "WHERE i.path = ? AND m.signal IN ('gpu.time', 'gpu.span', 'gpu.kernels') "
        "AND NOT coalesce(i.warmup, false) GROUP BY 1",
        [wl.top],
    ).fetchall()
    extra["top_region_host_wall_ms"] = [v / 1e6 for (v,) in walls]
    extra["top_region_gpu"] = {s: v for s, v in gpu}
    runs = con.execute("SELECT status, cause FROM runs").fetchall()
    extra["runs"] = [list(r) for r in runs]
    con.close()
    return times[-reps:]


# ----------------------------------------------------------------------------------------------------------------
# correctness checks
# ----------------------------------------------------------------------------------------------------------------
def check_attribution(out: Path, launch_path: str) -> dict[str, Any]:
    """PyTorch, cuBLAS, Triton and Inductor kernels in their regions: every one ``exact``, in the right region."""
    import re

    import torch
    import triton
    import triton.language as tl

    import argus_lab
    from argus_lab.backends.cupti.collector import CuptiCollector
    from argus_lab.regions import Recorder
    from argus_lab.run.protocols import RunContext

    @triton.jit
    def argus_add_kernel(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    x = torch.randn(1 << 20, device="cuda")
    y = torch.randn(1 << 20, device="cuda")
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    o = torch.empty_like(x)

    @torch.compile
    def fused(u: Any, v: Any) -> Any:
        return (u.sin() * v + u.cos()).relu()

    def step() -> None:
        with argus_lab.region("torch"):
            (x * 2 + 1).relu_()
        with argus_lab.region("cublas"):
            a @ a
        with argus_lab.region("triton"):
            argus_add_kernel[(len(x) // 1024,)](x, y, o, len(x), BLOCK=1024)
        with argus_lab.region("inductor"):
            fused(x, y)

    step()  # compile, autotune, cuBLAS handles: before the run
    torch.cuda.synchronize()
    coll = CuptiCollector()
    coll.start(RunContext("attr", ("gpu.time", "gpu.kernels"), {"launch_path": launch_path}, out))
    with Recorder("attr", coll.hooks(), cpu_clock=False) as rec:
        for _ in range(3):
            step()
    torch.cuda.synchronize()
    coll.stop()
    inst = rec.columns()
    ev = coll.evidence(inst)
    path_of = dict(zip(inst["instance_id"], inst["path"], strict=True))
    k, att = ev["kernels"], ev["attributions"]
    cls = dict(zip(att["evidence_id"], att["class"], strict=True))
    expect = {
        "torch": re.compile(r"elementwise|vectorized|unrolled", re.I),
        "cublas": re.compile(r"gemm|cutlass|nvjet|xmma|sm90", re.I),
        "triton": re.compile(r"argus_add_kernel"),
        "inductor": re.compile(r"^triton_"),
    }
    per: dict[str, dict[str, Any]] = {p: {"kernels": 0, "exact": 0, "names": set(), "name_ok": True} for p in expect}
    outside = 0
    for iid, key, name in zip(k["instance_id"], k["kernel_key"], k["name"], strict=True):
        path = path_of.get(iid)
        if path is None:
            outside += 1
            continue
        row = per[path]
        row["kernels"] += 1
        row["exact"] += cls.get(key) == "exact"
        row["names"].add(name[:60])
        row["name_ok"] &= bool(expect[path].search(name))
    ok = outside == 0 and all(r["kernels"] >= 3 and r["exact"] == r["kernels"] and r["name_ok"] for r in per.values())
    return {
        "launch_path": coll.launch_path,
        "notes": coll.notes,
        "ok": ok,
        "kernels_outside_regions": outside,
        "regions": {p: {**r, "names": sorted(r["names"])} for p, r in per.items()},
    }


def check_events(out: Path, launch_path: str, instances: int = 10) -> dict[str, Any]:
    """gpu.time (and gpu.span) vs CUDA events for regions of >= 1 ms, events queued behind a sleep kernel."""
    import torch

    import argus_lab
    from argus_lab.backends.cupti.collector import CuptiCollector
    from argus_lab.regions import Recorder
    from argus_lab.run.protocols import RunContext

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    big = torch.randn(32 << 20, device="cuda")

    def gemm() -> None:
        for _ in range(3):
            a @ a

    def chain() -> None:
        y = big
        for _ in range(13):
            y = y * 1.0001
        return None

    work = {"gemm": gemm, "chain": chain}

    def one_pass(recording: bool) -> dict[str, list[float]]:
        res: dict[str, list[float]] = {name: [] for name in work}
        for _ in range(instances):
            for name, fn in work.items():
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(2_000_000)  # queue the events and kernels behind a sleep: events count GPU time
                s.record()
                with argus_lab.region(name) if recording else contextlib.nullcontext():
                    fn()
                e.record()
                torch.cuda.synchronize()
                res[name].append(s.elapsed_time(e) * 1e3)  # us
        return res

    t_end = time.time() + 1.5
    while time.time() < t_end:  # clocks up
        gemm()
    torch.cuda.synchronize()
    plain = one_pass(False)
    coll = CuptiCollector()
    coll.start(RunContext("events", ("gpu.time", "gpu.span"), {"launch_path": launch_path}, out))
    with Recorder("events", coll.hooks(), cpu_clock=False) as rec:
        inside = one_pass(True)
    coll.stop()
    inst = rec.columns()
    m = coll.evidence(inst)["metrics"]
    path_of = dict(zip(inst["instance_id"], inst["path"], strict=True))
    got: dict[str, dict[str, list[float]]] = {}
    for iid, sig, val in zip(m["instance_id"], m["signal"], m["value"], strict=True):
        if iid in path_of and sig in ("gpu.time", "gpu.span"):
            got.setdefault(path_of[iid], {}).setdefault(sig, []).append(val / 1e3)
    res: dict[str, Any] = {"launch_path": coll.launch_path}
    ok = True
    for name in work:
        ev_plain, ev_in = median(plain[name]), median(inside[name])
        t, span = median(got.get(name, {}).get("gpu.time", [])), median(got.get(name, {}).get("gpu.span", []))
        dev = (t - ev_plain) / ev_plain
        dev_span = (span - ev_plain) / ev_plain
        res[name] = {
            "events_no_tool_us": ev_plain,
            "events_in_run_us": ev_in,
            "gpu_time_us": t,
            "gpu_span_us": span,
            "gpu_time_vs_no_tool_events": dev,
            "gpu_span_vs_no_tool_events": dev_span,
        }
        ok &= min(abs(dev), abs(dev_span)) <= 0.02 and ev_plain >= 1000
    res["ok"] = ok
    return res


# ----------------------------------------------------------------------------------------------------------------
# the parent: every child in its own process, rounds interleaved, then the table
# ----------------------------------------------------------------------------------------------------------------
def spawn(args: list[str], out: Path, label: str, timeout_s: float) -> dict[str, Any]:
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    result = out / "logs" / f"{label}.json"
    cmd = [sys.executable, __file__, *args, "--result", str(result)]
    t0 = time.perf_counter()
    with (logs / f"{label}.log").open("w") as log:
        try:
            proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = -9
    secs = time.perf_counter() - t0
    if result.exists():
        data: dict[str, Any] = json.loads(result.read_text())
        data["seconds"] = secs
        return data
    tail = "\n".join((logs / f"{label}.log").read_text(errors="replace").splitlines()[-8:])
    return {"error": f"exit status {rc} after {secs:.0f} s (timeout {timeout_s:.0f} s)", "log_tail": tail}


def ratio_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    pairs = {(r["workload"], r["tool"]) for r in results if "ratio" in r}
    keys = sorted(pairs, key=lambda k: (k[0], TOOLS.index(k[1])))
    for wl, tool in keys:
        rs = [r for r in results if r.get("workload") == wl and r.get("tool") == tool and "ratio" in r]
        ratios = [r["ratio"] for r in rs]
        rows.append(
            {
                "workload": wl,
                "tool": tool,
                "ratio_median": median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
                "rounds": len(ratios),
                "baseline_ms": median([median(r["baseline_ms"]) for r in rs]),
                "tool_ms": median([median(r["tool_ms"]) for r in rs]),
                "launch_path": rs[-1].get("launch_path", ""),
            }
        )
    return rows


def table(rows: list[dict[str, Any]], failures: list[dict[str, Any]], checks: dict[str, Any]) -> str:
    lines = [
        "| workload | tool | ratio (median) | range | rounds | baseline ms | with tool ms | launch path |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['tool']} | {r['ratio_median']:.2f}x | {r['ratio_min']:.2f}-{r['ratio_max']:.2f} "
            f"| {r['rounds']} | {r['baseline_ms']:.2f} | {r['tool_ms']:.2f} | {r['launch_path'] or ''} |"
        )
    for f in failures:
        lines.append(f"FAILED {f.get('label')}: {f.get('error')}\n{f.get('log_tail', '')}")
    for name, c in checks.items():
        lines.append(f"check {name}: {json.dumps(c, default=str)[:1500]}")
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    import importlib.metadata

    env: dict[str, Any] = {"python": sys.version, "platform": platform.platform()}
    for dist in ("torch", "triton", "transformers", "cupti-python", "nvidia-cuda-cupti", "nvtx", "duckdb"):
        try:
            env[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            env[dist] = "missing"
    try:
        env["gpu"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,power.draw", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        env["gpu"] = "nvidia-smi unavailable"
    from argus_lab.backends.cupti import native

    env["native_build"] = native.build().note
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default="")
    ap.add_argument("--short", action="store_true", help="one round, 7 repetitions, a time budget of ~3 minutes")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--checks", default="attribution,events")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of the harness (GPU tools are skipped)")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer model (smoke tests)")
    ap.add_argument("--budget-s", type=float, default=0.0, help="stop starting children after this many seconds")
    ap.add_argument("--child", nargs=2, metavar=("WORKLOAD", "TOOL"), help=argparse.SUPPRESS)
    ap.add_argument("--check", default="", help=argparse.SUPPRESS)
    ap.add_argument("--launch-path", default="native", help=argparse.SUPPRESS)
    ap.add_argument("--result", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="timing-overhead-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.child or args.check:  # a child process: one measurement, its JSON to --result
        try:
            if args.child:
                res = run_child(*args.child, args.reps, args.warm, args.device, args.tiny, out)
            elif args.check == "attribution":
                res = check_attribution(out, args.launch_path)
            else:
                res = check_events(out, args.launch_path)
        except Exception as exc:
            res = {"error": f"{type(exc).__name__}: {exc}", "log_tail": traceback.format_exc()[-3000:]}
        Path(args.result).write_text(json.dumps(res, indent=1, default=str))
        return 0
    paths = ("native", "python")
    if args.short:
        args.rounds, args.reps, args.warm = 1, 7, 3
        args.budget_s = args.budget_s or 200.0
        paths = ("native",)
    started = time.perf_counter()
    workloads = [w for w in args.workloads.split(",") if w]
    tools = [t for t in args.tools.split(",") if t]
    if args.short:
        tools = [t for t in SHORT_ORDER if t in tools] + [t for t in tools if t not in SHORT_ORDER]
    if args.device != "cuda":
        tools = [t for t in tools if t not in GPU_TOOLS]
    env = environment()
    print(f"environment: {json.dumps(env)}", flush=True)
    results: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    checks: dict[str, Any] = {}
    skipped: list[str] = []

    def left() -> float:
        return args.budget_s - (time.perf_counter() - started) if args.budget_s else 1e9

    def save() -> str:  # after every child: a run killed from outside keeps what it measured
        text = table(ratio_rows(results), failures, checks)
        if skipped:
            text += f"\nskipped (time budget): {', '.join(skipped)}"
        figures = {
            "environment": env,
            "protocol": {"rounds": args.rounds, "reps": args.reps, "warm": args.warm, "short": args.short},
            "rows": ratio_rows(results),
            "results": results,
            "failures": failures,
            "checks": checks,
            "skipped": skipped,
            "seconds": time.perf_counter() - started,
        }
        (out / "timing-overhead.json").write_text(json.dumps(figures, indent=1, default=str))
        (out / "timing-overhead.txt").write_text(text + "\n")
        return text

    if args.device == "cuda":
        for check in [c for c in args.checks.split(",") if c]:
            for path in paths:
                label = f"check-{check}-{path}"
                res = spawn(["--check", check, "--launch-path", path, str(out)], out, label, min(240, left() + 30))
                checks[label] = res
                print(f"{label}: {json.dumps(res, default=str)[:600]}", flush=True)
                save()
    for rnd in range(args.rounds):
        for wl in workloads:
            order = tools if args.short else tools[rnd % len(tools) :] + tools[: rnd % len(tools)]  # rotate
            for tool in order:
                label = f"r{rnd}-{wl}-{tool}"
                if left() <= 0:
                    skipped.append(label)
                    continue
                child = ["--child", wl, tool, "--reps", str(args.reps), "--warm", str(args.warm)]
                child += ["--device", args.device] + (["--tiny"] if args.tiny else []) + [str(out)]
                res = spawn(child, out, label, min(180 if wl == "decode" else 120, left() + 30))
                if "error" in res:
                    failures.append({"label": label, **res})
                    print(f"{label}: FAILED {res['error']}", flush=True)
                else:
                    results.append(res)
                    print(f"{label}: ratio {res['ratio']:.3f} ({res.get('launch_path', '')})", flush=True)
                save()
    text = save()
    print(text)
    print(f"total {time.perf_counter() - started:.0f} s; figures in {out / 'timing-overhead.json'}")
    return 0 if not failures and all(c.get("ok", False) for c in checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
