"""What region timing costs on a GPU: argus_lab's timing run beside NVTX, torch.profiler and Proton.

Two workloads, both launch-bound, both marked with regions the way a user marks them:

* ``loop``: 300 regions x 4 small elementwise kernels, each region written inline (``with argus_lab.region("it")``,
  the README idiom, or the other tool's own marker);
* ``decode``: one KV-cache decode step (batch 1) of a Llama-shaped model built with ``transformers`` (TinyLlama-1.1B
  shape: 22 layers, hidden 2048, random weights, bf16), one region around the step and one around every attention
  and MLP, entered in a forward pre-hook and exited in a forward hook (45 regions, ~925 kernels a step).

Protocol (each tool in its own process; two CUPTI clients never share one): inside a tool's process the two
workloads are timed in blocks that alternate A (no tool: the plain, unmarked workload) and B (the tool attached,
the workload marked, then the tool detached): A B A B ... A.  A block is ``--reps`` repetitions, each synchronized
and timed with ``perf_counter`` (and CUDA events on the decode step); a B block first runs ``--warm`` untimed
repetitions after attaching.  The ratio of a B block is its median over the mean of the medians of the A blocks
before and after it (linear drift cancels); a process's ratio is the median over its B blocks; a tool's figure is
the median over its processes, with the range over processes and over all blocks.  ``A drift`` (last A block over
the first) shows what the process carries after a tool detached.

Tools: ``none`` (B = A: the protocol's noise), ``nvtx`` (``nvtx.annotate`` per region, no NVTX tool attached: the
cost of the markers and forward hooks alone), ``torch.profiler`` (CPU + CUDA activities, ``record_function`` per
region; ``profile.start/stop`` per block), ``proton`` (``proton.scope`` per region, ``proton.start/finalize`` per
block), ``cupti-kernels`` (CUPTI kernel records alone, no regions, no Python work; CUPTI detached after each block:
the floor), ``cupti-kernels+empty-callbacks`` (+ CUPTI's launch callbacks with a callback that records nothing),
``cupti-kernels+callbacks`` (+ argus_lab's native launch callback, no regions), ``cupti-kernels+probes`` (+ the
boundary probe's subscription, no regions: no probe is made per launch), ``cupti-kernels+clock`` (+ the latency
timestamps that stamp each kernel ``queued`` and the graph-launch subscription of the clock identity, no regions),
``argus-markers`` (argus_lab
regions recording host.wall, no GPU tool: the boundary work), ``argus`` (the timing run exactly as
``argus_lab.measure(..., signals="gpu.time,gpu.kernels,gpu.span,host.wall")`` runs it: the plan's run, its
backends loaded by name, ``run.driver.drive`` per block, region boundaries in C while the native launch path runs),
``argus-python-boundaries`` (the same with the cupti setting ``boundaries="python"``: the region boundaries in
Python, as before the C boundary path), ``argus-driver-callbacks`` (an experiment: the launch callback on the driver
domain only, ``callback_domains="driver"``; its kernels-in-a-region count says whether that attributes),
``argus-launch-callbacks`` (the timing run with the cupti setting ``launch_identity="callbacks"``: a CUPTI callback at
every launch, the default before the probes), ``argus-probes`` (``launch_identity="probes"`` forced: what the
planner picks for this timing run anyway, so the same as ``argus``), ``argus-clock`` (``launch_identity="clock"``:
boundary rows on CUPTI's clock against each kernel's ``queued`` stamp instead of the probes).  Each
argus process ends with one real ``argus_lab.measure`` of the decode step between two no-tool A blocks: its stored
host.wall is compared with the step timed by itself, with those adjacent no-tool blocks and with the process's A
blocks.  Before every block a fixed pure-Python loop is timed
(``probe_ms``): it tells a slow block caused by the machine (the probe is slow too) from one caused by the tool.

Correctness, in a process of its own before the figures: ``attribution`` (every PyTorch, cuBLAS, Triton and
torch.compile (Inductor) kernel launched in a region is attributed ``exact`` to that region, read from the store
``argus_lab.measure`` wrote) and ``events`` (gpu.time and gpu.span of regions of 1 ms or more against CUDA events
without a tool, measured before and after the timing run: within 2 %).

    python bench/timing_overhead.py OUT [--budget-s 200] [--procs 2] [--pairs 6] [--reps 5] [--warm 2]
        [--workloads loop,decode] [--tools ...] [--required ...] [--checks attribution,events] [--start fork|spawn]
        [--device cpu --tiny]   # a CPU smoke test of the harness (GPU tools and checks are skipped)

A paired tool ``B@A`` (e.g. ``argus@cupti-kernels``) runs A's blocks with tool A attached instead of no tool, so its
ratios are B over A in adjacent blocks of one process: the timing run over CUPTI's floor without the spread between
processes that separate rows carry.

The parent imports torch and transformers once and forks one child per (tool, process) (``--start spawn``: a fresh
interpreter each); every child has a deadline and is killed past it; each child rewrites its JSON after every block
pair (OUT/procs/), so a kill keeps what was measured; the parent rewrites OUT/timing-overhead.{json,txt} after every
child.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gzip
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

STARTED = time.time()
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REQUIRED = ("none", "argus", "cupti-kernels", "cupti-kernels+callbacks", "proton", "torch.profiler", "nvtx")
EXTRA = (
    "argus-markers",
    "cupti-kernels+api-records",
    "cupti-kernels+empty-callbacks",
    "cupti-kernels+probes",
    "argus-python-boundaries",
    "argus-driver-callbacks",
    "argus-both-domains",
    "argus-launch-callbacks",
    "argus-probes",
    "argus-clock",
    "argus-modules",
    "cupti-kernels+clock",
    "cupti-kernels+null-marks",
)
TOOLS = REQUIRED + EXTRA
ARGUS_VARIANTS: dict[str, dict[str, Any]] = {
    "argus-python-boundaries": {"boundaries": "python"},
    "argus-driver-callbacks": {"callback_domains": "driver"},
    "argus-both-domains": {"callback_domains": "both"},
    "argus-launch-callbacks": {"launch_identity": "callbacks"},
    "argus-probes": {"launch_identity": "probes"},
    "argus-clock": {"launch_identity": "clock"},
    "argus-modules": {},  # the default run, the decode step's layers marked by argus_lab.mark_modules (no hooks)
}
"""The other tools that run argus_lab's timing run (the ``Argus`` tool), with the cupti settings each changes."""
ARGUS_RUNS = ("argus", *ARGUS_VARIANTS)
TABLE_ORDER = (
    "none",
    "nvtx",
    "torch.profiler",
    "proton",
    "cupti-kernels",
    "cupti-kernels+empty-callbacks",
    "cupti-kernels+callbacks",
    "cupti-kernels+api-records",
    "cupti-kernels+probes",
    "cupti-kernels+clock",
    "argus-markers",
    "argus-python-boundaries",
    "argus-driver-callbacks",
    "argus-both-domains",
    "argus-launch-callbacks",
    "argus-probes",
    "argus-clock",
    "argus-modules",
    "argus",
)
WORKLOADS = ("loop", "decode")
SIGNALS = "gpu.time,gpu.kernels,gpu.span,host.wall"
CPU_SIGNALS = "host.wall"  # --device cpu: the argus paths without a GPU
Marker = tuple[str, dict[str, Any]]
"""A tool's marker as users write it: the expression called at every use (``"argus_lab.region"``) and the names it
reads.  The workloads put it into their source literally (:func:`marked_code`), so the attribute lookups and the
call of the README idiom ``with argus_lab.region("it"):`` are measured, not a function fetched once ahead."""


def marked_code(marker: Marker, source: str, what: str) -> dict[str, Any]:
    """Compile ``source`` with ``MARK`` replaced by the marker's expression; its names, from the marker's."""
    expr, names = marker
    namespace = {"__name__": "timing_workload", **names}
    exec(compile(source.replace("MARK", expr), f"<{what} marked with {expr}>", "exec"), namespace)
    return namespace


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def cpu_probe(n: int = 20_000) -> float:
    """ms of a fixed pure-Python loop: how fast this process's CPU runs right now (no GPU, no tool involved)."""
    t0 = time.perf_counter()
    acc = 0
    for k in range(n):
        acc += k * k % 7
    return (time.perf_counter() - t0) * 1e3 + 0 * acc


# ----------------------------------------------------------------------------------------------------------------
# workloads: plain() is one unmarked repetition; marked(marker) one repetition with regions
# ----------------------------------------------------------------------------------------------------------------
class Loop:
    """300 regions x 4 small elementwise kernels."""

    name = "loop"
    top = "it"

    def __init__(self, device: str, tiny: bool = False) -> None:
        import torch

        self.torch = torch
        self.x = torch.randn(1024, device=device)

    def _body(self) -> None:
        y = self.x * 2
        y = y + 1
        y = self.torch.relu(y)
        y.sin_()

    def plain(self) -> None:
        for _ in range(300):
            self._body()

    def marked(self, marker: Marker, modules: bool = False) -> Callable[[], None]:
        code = marked_code(marker, LOOP_SOURCE, "loop")  # `modules`: no modules here, the same `with` per region
        return functools.partial(code["run"], self)

    def unhook(self) -> None:
        return None


class Decode:
    """One KV-cache decode step (batch 1) of a Llama-shaped model with random weights."""

    name = "decode"
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
        self.hooks: list[Any] = []

    def plain(self) -> None:
        with self.torch.no_grad():
            self.model(input_ids=self.next, past_key_values=self.cache, use_cache=True)
        self.cache.crop(-1)  # every step decodes at the same position

    def marked(self, marker: Marker, modules: bool = False) -> Callable[[], None]:
        """Regions through forward hooks, as a user adds them to a model they do not edit; with ``modules``,
        through ``argus_lab.mark_modules`` instead (the README's way for argus_lab: no hooks)."""
        self.unhook()
        code = marked_code(marker, DECODE_SOURCE, "decode")
        if modules:
            import argus_lab

            patterns = {"model.layers.*.self_attn": "attn", "model.layers.*.mlp": "mlp"}
            self.hooks.append(argus_lab.mark_modules(self.model, patterns))
            return functools.partial(code["run"], self)
        for layer in self.model.model.layers:
            for name, module in (("attn", layer.self_attn), ("mlp", layer.mlp)):
                self.hooks.append(module.register_forward_pre_hook(code["enter_hook"](name)))
                self.hooks.append(module.register_forward_hook(code["exit_hook"]))
        return functools.partial(code["run"], self)

    def unhook(self) -> None:
        for h in self.hooks:
            h.remove()
        self.hooks = []


# The marked workloads as users write them (MARK: the tool's marker expression, e.g. argus_lab.region).
LOOP_SOURCE = """
def run(self):
    for _ in range(300):
        with MARK("it"):
            self._body()
"""

DECODE_SOURCE = """
def enter_hook(name):
    def pre(module, args):
        module._region = MARK(name)
        module._region.__enter__()
    return pre

def exit_hook(module, args, output):
    module._region.__exit__(None, None, None)

def run(self):
    with MARK(self.top):
        self.plain()
"""


def make_workload(name: str, device: str, tiny: bool) -> Loop | Decode:
    return {"loop": Loop, "decode": Decode}[name](device, tiny)


# ----------------------------------------------------------------------------------------------------------------
# timing
# ----------------------------------------------------------------------------------------------------------------
class Clock:
    """Times repetitions: synchronized host wall time (ms) and, when asked, CUDA events around each (ms)."""

    def __init__(self, device: str, events: bool) -> None:
        import torch

        self.cuda = device == "cuda"
        self.sync: Callable[[], None] = torch.cuda.synchronize if self.cuda else (lambda: None)
        self.events = events and self.cuda
        if self.events:
            self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def one(self, fn: Callable[[], None], wall: list[float], ev: list[float]) -> None:
        self.sync()
        if self.events:
            self.start.record()
        t0 = time.perf_counter()
        fn()
        if self.events:
            self.end.record()
        self.sync()
        wall.append((time.perf_counter() - t0) * 1e3)
        if self.events:
            ev.append(self.start.elapsed_time(self.end))

    def run(self, fn: Callable[[], None], n: int) -> tuple[list[float], list[float]]:
        wall: list[float] = []
        ev: list[float] = []
        for _ in range(n):
            self.one(fn, wall, ev)
        return wall, ev


# ----------------------------------------------------------------------------------------------------------------
# tools: attach, run a block, detach
# ----------------------------------------------------------------------------------------------------------------
class Tool:
    """No tool: B blocks are A blocks (the protocol's noise)."""

    marked = False
    module_marks = False  # the decode step's layers marked by argus_lab.mark_modules instead of forward hooks

    def __init__(self, name: str, out: Path, device: str) -> None:
        self.name, self.out, self.device = name, out, device

    def marker(self) -> Marker:
        return "contextlib.nullcontext", {"contextlib": contextlib}

    def attach(self) -> None:
        return None

    def detach(self) -> dict[str, Any]:
        return {}

    def fallback(self) -> str:
        """After a block failed: a safer way to go on ('' = none), e.g. CUPTI left attached between blocks."""
        return ""

    def block(
        self, body: Callable[[], None], reps: int, warm: int, clock: Clock
    ) -> tuple[list[float], list[float], dict[str, Any]]:
        t0 = time.perf_counter()
        self.attach()
        t1 = time.perf_counter()
        clock.run(body, warm)  # the tool's first-use costs stay out of the figure
        wall, ev = clock.run(body, reps)
        t2 = time.perf_counter()
        extra = self.detach()
        extra["attach_s"], extra["detach_s"] = round(t1 - t0, 4), round(time.perf_counter() - t2, 4)
        return wall, ev, extra


class Nvtx(Tool):
    """``nvtx.annotate`` per region with no NVTX tool attached (what users get outside nsys)."""

    marked = True

    def marker(self) -> Marker:
        import nvtx

        return "nvtx.annotate", {"nvtx": nvtx}


class TorchProfiler(Tool):
    """torch.profiler (CPU + CUDA activities) started and stopped per block, ``record_function`` per region."""

    marked = True

    def marker(self) -> Marker:
        import torch

        return "torch.profiler.record_function", {"torch": torch}

    def attach(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        self.prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        self.prof.start()

    def detach(self) -> dict[str, Any]:
        self.prof.stop()
        return {}


class Proton(Tool):
    """Proton (``triton.profiler``, CUPTI backend) started and finalized per block, ``proton.scope`` per region."""

    marked = True

    def marker(self) -> Marker:
        import triton.profiler as proton

        return "proton.scope", {"proton": proton}

    def attach(self) -> None:
        import triton.profiler as proton

        folder = self.out / "proton"
        folder.mkdir(parents=True, exist_ok=True)
        proton.start(str(folder / f"proton-{os.getpid()}"), backend="cupti")

    def detach(self) -> dict[str, Any]:
        import triton.profiler as proton

        proton.finalize()
        return {}


class Cupti(Tool):
    """argus_lab's CUPTI collector alone, the workload unmarked (no region, no Python work per launch)."""

    SETTINGS: ClassVar[dict[str, dict[str, Any]]] = {
        "cupti-kernels": {"kinds": ["CONCURRENT_KERNEL"], "detach": "always"},
        "cupti-kernels+empty-callbacks": {"native_callback": "empty"},
        "cupti-kernels+callbacks": {"launch_identity": "callbacks"},
        # the probe's subscription and its one call at start, no region (so no further probe)
        "cupti-kernels+probes": {"launch_identity": "probes"},
        # latency timestamps (each kernel stamped `queued`) and the graph-launch subscription, no region
        "cupti-kernels+clock": {"launch_identity": "clock"},
        # CUPTI's own records of the launch API calls (thread, entry and exit time; other calls filtered out)
        "cupti-kernels+api-records": {"kinds": ["CONCURRENT_KERNEL", "RUNTIME", "DRIVER"], "detach": "always"},
        # the floor with the workload marked as users mark it (the decode step's forward hooks, the loop's `with`),
        # each marker a no-op: what marking costs before any tool does anything at a boundary
        "cupti-kernels+null-marks": {"kinds": ["CONCURRENT_KERNEL"], "detach": "always"},
    }

    def __init__(self, name: str, out: Path, device: str) -> None:
        super().__init__(name, out, device)
        self.settings = dict(self.SETTINGS[name])
        self.marked = name.endswith("+null-marks")  # marker(): contextlib.nullcontext

    def attach(self) -> None:
        from argus_lab.backends.cupti.collector import CuptiCollector
        from argus_lab.run.protocols import RunContext

        self.coll = CuptiCollector()
        self.coll.start(RunContext(f"bench-{self.name}", tuple(SIGNALS.split(",")), self.settings, self.out))

    def fallback(self) -> str:
        if self.settings.get("detach") == "never":
            return ""
        with contextlib.suppress(Exception):
            self.coll.stop()
        self.settings["detach"] = "never"
        return "CUPTI no longer detached between blocks"

    def detach(self) -> dict[str, Any]:
        from argus_lab.backends.cupti import decode as dec

        c = self.coll
        c.stop()
        return {
            "launch_path": c.launch_path,
            "records": {f: dec.count(cols) for f, cols in c.raw.items()},
            "native_launch_records": c.native_launches,
            "dropped": c.dropped,
            "detached": c.detached,
            "decode_s": round(c.decode_s, 4),
            "notes": c.notes[-2:],
        }


class ArgusMarkers(Tool):
    """argus_lab regions recording host.wall, no GPU tool: the region boundary work alone."""

    marked = True

    def marker(self) -> Marker:
        import argus_lab

        return "argus_lab.region", {"argus_lab": argus_lab}

    def attach(self) -> None:
        from argus_lab.regions import Recorder

        self.rec = Recorder("bench-markers", (), cpu_clock=False).activate()

    def detach(self) -> dict[str, Any]:
        self.rec.deactivate()
        return {"instances": self.rec.count()}


class Argus(Tool):
    """The timing run exactly as ``argus_lab.measure`` runs it: the plan's run, backends loaded by name, ``drive``."""

    marked = True

    def __init__(self, name: str, out: Path, device: str) -> None:
        super().__init__(name, out, device)
        self.signals = SIGNALS if device == "cuda" else CPU_SIGNALS
        self.blocks = 0
        self.keep_attached = False
        self.variant: dict[str, Any] = ARGUS_VARIANTS.get(name, {})
        self.module_marks = name == "argus-modules"

    def fallback(self) -> str:
        if self.keep_attached:
            return ""
        self.keep_attached = True
        return "CUPTI no longer detached between blocks (setting detach=never)"

    def marker(self) -> Marker:
        import argus_lab

        return "argus_lab.region", {"argus_lab": argus_lab}

    def block(
        self, body: Callable[[], None], reps: int, warm: int, clock: Clock
    ) -> tuple[list[float], list[float], dict[str, Any]]:
        import argus_lab
        from argus_lab.run.driver import drive
        from argus_lab.run.loader import load_backend
        from argus_lab.run.workload import Workload

        the_plan = argus_lab.plan(self.signals, repeat=reps, warmup=warm)
        if len(the_plan.runs) != 1:
            raise RuntimeError(f"expected one timing run, the plan has {len(the_plan.runs)}")
        run = the_plan.runs[0]
        settings = {k: dict(v) for k, v in run.settings.items()}
        if self.keep_attached:
            settings.setdefault("cupti", {})["detach"] = "never"
        if self.variant:
            settings.setdefault("cupti", {}).update(self.variant)
        wall: list[float] = []
        ev: list[float] = []
        seen: dict[str, Any] = {}
        self.blocks += 1
        folder = Path(tempfile.mkdtemp(prefix="argus-run-", dir=self.out))

        def rep() -> None:
            if not seen:  # what the recorder does at each boundary in this run (read once, outside the timing)
                seen.update(boundary_state())
            clock.one(body, wall, ev)

        t0 = time.perf_counter()
        collectors = [load_backend(b) for b in run.backends]
        outcome = drive(
            f"bench-{os.getpid()}-{self.blocks}",
            Workload.of_callable(rep),
            collectors,
            run.signals,
            settings,
            run.repeat,
            run.warmup,
            folder,
        )
        total = time.perf_counter() - t0
        shutil.rmtree(folder, ignore_errors=True)
        if outcome.status != "ok":
            raise RuntimeError(f"the timing run ended {outcome.status}: {outcome.cause[:400]}")
        extra: dict[str, Any] = {"backends": list(run.backends), "run_s": round(total, 4), "boundary": seen}
        kernels = outcome.evidence.get("kernels")
        if kernels is not None and len(kernels):
            from argus_lab.model.batches import as_arrow

            ids = as_arrow(kernels).column("instance_id").to_pylist()  # batches since the collector's pool
            extra["kernels"], extra["kernels_with_instance"] = len(ids), sum(1 for i in ids if i)
        for prov_settings, backend in zip(
            outcome.evidence.get("provenance", {}).get("settings", []),
            outcome.evidence.get("provenance", {}).get("backend", []),
            strict=False,
        ):
            if backend == "cupti" and isinstance(prov_settings, dict):
                extra["launch_path"] = prov_settings.get("launch_path")
                extra["records"] = prov_settings.get("records")
                extra["detached"] = prov_settings.get("detached_at_stop")
                extra["dropped"] = prov_settings.get("dropped_records")
                extra["launch_order"] = prov_settings.get("launch_order")
        return wall[warm:], ev[warm:], extra


def boundary_state() -> dict[str, Any]:
    """The active recorder's boundary work: C path or Python, its work level, whether NVTX ranges are opened."""
    import argus_lab
    from argus_lab import regions

    rec = regions.active_recorder()
    fast = regions._fast[0]
    return {
        "c_path": bool(rec is not None and rec.native_boundaries),
        "c_region": argus_lab.region is not regions.region,  # argus_lab.region was the C function of the run
        "work": fast[4] if fast is not None else None,  # 0 clocks only, 1 + one sink, 2 hooks/NVTX/CPU clock
        "nvtx_mode": regions._nvtx.mode,  # 1 = no NVTX tool attached (no range opened)
    }


def make_tool(name: str, out: Path, device: str) -> Tool:
    if name == "none":
        return Tool(name, out, device)
    if name == "nvtx":
        return Nvtx(name, out, device)
    if name == "torch.profiler":
        return TorchProfiler(name, out, device)
    if name == "proton":
        return Proton(name, out, device)
    if name in Cupti.SETTINGS:
        return Cupti(name, out, device)
    if name == "argus-markers":
        return ArgusMarkers(name, out, device)
    if name in ARGUS_RUNS:
        return Argus(name, out, device)
    raise SystemExit(f"unknown tool {name!r}; tools: {', '.join(TOOLS)}")


# ----------------------------------------------------------------------------------------------------------------
# one child: A B A B ... A per workload
# ----------------------------------------------------------------------------------------------------------------
def abab(
    tool: Tool,
    wl: Loop | Decode,
    clock: Clock,
    args: argparse.Namespace,
    until: float,
    res: dict[str, Any],
    save: Callable[[], None],
    base: Tool | None = None,
) -> None:
    """Alternate A (plain) and B (tool attached, workload marked) blocks until ``--pairs`` or ``until``.

    With ``base`` (a paired tool ``B@A``, e.g. ``argus@cupti-kernels``) every A block runs with that tool attached
    instead (its own marking), so each ratio is the tool over the base in adjacent blocks of one process."""
    res.update({"a_ms": [], "a_events_ms": [], "b_ms": [], "b_events_ms": [], "ratios": [], "extras": []})
    res.update({"a_probe_ms": [cpu_probe()], "b_probe_ms": []})

    def run_a() -> tuple[list[float], list[float]]:
        if base is None:
            return clock.run(wl.plain, args.reps)
        try:
            body = wl.marked(base.marker(), base.module_marks) if base.marked else wl.plain
            wall, ev, _ = base.block(body, args.reps, args.warm, clock)
        finally:
            wl.unhook()
        return wall, ev

    a, a_ev = run_a()
    res["a_ms"].append(a)
    res["a_events_ms"].append(a_ev)
    save()
    last_pair = 0.0
    for _ in range(args.pairs):
        if res["ratios"] and time.time() + last_pair * 1.2 > until:
            res["stopped"] = "time budget"
            break
        t0 = time.time()
        body = wl.marked(tool.marker(), tool.module_marks) if tool.marked else wl.plain
        probe = cpu_probe()
        try:
            b, b_ev, extra = tool.block(body, args.reps, args.warm, clock)
        except Exception as exc:
            how = tool.fallback()
            if not how:
                raise
            res.setdefault("fallbacks", []).append(f"{type(exc).__name__}: {exc}; then {how}")
            save()
            continue
        finally:
            wl.unhook()
        a_probe = cpu_probe()
        a_next, a_next_ev = run_a()
        before, after = median(res["a_ms"][-1]), median(a_next)
        res["b_ms"].append(b)
        res["b_probe_ms"].append(probe)
        res["a_probe_ms"].append(a_probe)
        res["b_events_ms"].append(b_ev)
        res["a_ms"].append(a_next)
        res["a_events_ms"].append(a_next_ev)
        res["ratios"].append(median(b) / ((before + after) / 2))
        res["extras"].append(extra)
        last_pair = time.time() - t0
        save()
    if res["ratios"]:
        res["ratio"] = median(res["ratios"])
        res["a_drift"] = median(res["a_ms"][-1]) / median(res["a_ms"][0])
    save()


def child(tool_name: str, index: int, deadline: float, args: argparse.Namespace, out: Path, result: Path) -> None:
    """One tool's process: build the workloads, then A B A B ... A on each; its JSON is rewritten as it goes."""
    res: dict[str, Any] = {"tool": tool_name, "index": index, "pid": os.getpid(), "workloads": {}, "errors": []}

    def save() -> None:
        res["seconds"] = round(time.time() - t_start, 2)
        tmp = result.with_suffix(".tmp")
        tmp.write_text(json.dumps(res, default=str))
        os.replace(tmp, result)

    t_start = time.time()
    save()
    b_name, _, a_name = tool_name.partition("@")  # a paired tool B@A: B's blocks against A's, one process
    tool = make_tool(b_name, out, args.device)
    base = make_tool(a_name, out, args.device) if a_name else None
    names = [w for w in args.workloads.split(",") if w]
    workloads: dict[str, Loop | Decode] = {}
    for name in names:
        try:
            workloads[name] = make_workload(name, args.device, args.tiny)
            Clock(args.device, events=False).run(workloads[name].plain, 3)  # warm: allocator, cuBLAS, clocks
        except Exception as exc:  # the other workload is still measured
            workloads.pop(name, None)
            res["errors"].append(f"{name} setup: {type(exc).__name__}: {exc}")
            res["traceback"] = traceback.format_exc()[-3000:]
    if args.device == "cuda":  # clocks up before the first block (the H200 idles at a low SM clock)
        import torch

        a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        t_end = time.time() + 0.3
        while time.time() < t_end:
            for _ in range(8):
                a @ a
            torch.cuda.synchronize()
    res["setup_s"] = round(time.time() - t_start, 2)
    save()
    names = [n for n in names if n in workloads]
    for k, name in enumerate(names):
        wl = workloads[name]
        left = deadline - time.time()
        share = 0.4 if (name == "loop" and k < len(names) - 1) else 1.0
        until = time.time() + left * share - (5.0 if tool_name == "argus" and name == "decode" else 0)
        out_wl: dict[str, Any] = {}
        res["workloads"][name] = out_wl
        clock = Clock(args.device, events=name == "decode")
        try:
            abab(tool, wl, clock, args, until, out_wl, save, base)
        except Exception as exc:
            res["errors"].append(f"{name}: {type(exc).__name__}: {exc}")
            res["traceback"] = traceback.format_exc()[-3000:]
            save()
    if tool_name == "argus" and "decode" in workloads and time.time() < deadline - 3:
        try:
            res["measure"] = measure_decode(workloads["decode"], args, out, res["workloads"].get("decode", {}))
        except Exception as exc:
            res["errors"].append(f"measure: {type(exc).__name__}: {exc}")
            res["traceback"] = traceback.format_exc()[-3000:]
    save()


def measure_decode(wl: Loop | Decode, args: argparse.Namespace, out: Path, abab_res: dict[str, Any]) -> dict[str, Any]:
    """One ``argus_lab.measure`` of the decode step as the README shows it: its stored host.wall of the step's region
    against the step timed with CUDA events and no tool (the A blocks of this process)."""
    import duckdb

    import argus_lab

    signals = SIGNALS if args.device == "cuda" else CPU_SIGNALS
    clock = Clock(args.device, events=True)
    before_probe = cpu_probe()
    before, before_ev = clock.run(wl.plain, args.reps)  # no tool, right before
    body = wl.marked(("argus_lab.region", {"argus_lab": argus_lab}))
    wall: list[float] = []
    ev: list[float] = []
    probes: list[float] = []
    folder = out / "stores"
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / f"measure-decode-{os.getpid()}.duckdb"

    def rep() -> None:
        probes.append(cpu_probe())
        clock.one(body, wall, ev)

    t0 = time.perf_counter()
    try:
        argus_lab.measure(rep, signals=signals, repeat=args.reps, warmup=args.warm, store=str(store))
    finally:
        wl.unhook()
    measure_s = time.perf_counter() - t0
    after_probe = cpu_probe()
    after, after_ev = clock.run(wl.plain, args.reps)  # no tool, right after
    res: dict[str, Any] = {
        "measure_s": round(measure_s, 3),
        "step_ms": wall[args.warm :],
        "step_events_ms": ev[args.warm :],
        "warmup_step_ms": wall[: args.warm],
        "probe_ms": probes,  # before each repetition (warm-up included), outside the step
        "adjacent_no_tool_ms": before + after,
        "adjacent_no_tool_events_ms": before_ev + after_ev,
        "adjacent_probe_ms": [before_probe, after_probe],
    }
    con = duckdb.connect(str(store), read_only=True)
    try:
        res["host_wall_ms"] = [
            v / 1e6
            for (v,) in con.execute(
                "SELECT m.value FROM metrics m JOIN region_instances i USING (run_id, instance_id) "
                "WHERE m.signal = 'host.wall' AND i.path = ? AND NOT coalesce(i.warmup, false) "
                "ORDER BY i.instance_index",
                [wl.top],
            ).fetchall()
        ]
        res["gpu"] = dict(
            con.execute(
                "SELECT v.signal, median(v.inclusive) FROM instance_values v JOIN region_instances i "
                "USING (run_id, instance_id) WHERE i.path = ? AND NOT coalesce(i.warmup, false) GROUP BY 1",
                [wl.top],
            ).fetchall()
        )
        res["kernel_classes"] = dict(
            con.execute("SELECT class, count(*) FROM attributions WHERE evidence = 'kernel' GROUP BY 1").fetchall()
        )
        res["runs"] = [list(r) for r in con.execute("SELECT status, cause FROM runs").fetchall()]
        prov = con.execute("SELECT settings FROM provenance WHERE backend = 'cupti'").fetchall()
        if prov:
            s = json.loads(prov[0][0]) if isinstance(prov[0][0], str) else prov[0][0]
            res["cupti"] = {k: s.get(k) for k in ("launch_path", "records", "detached_at_stop", "dropped_records")}
    finally:
        con.close()
    no_tool_events = [x for blk in abab_res.get("a_events_ms", []) for x in blk]
    no_tool_wall = [x for blk in abab_res.get("a_ms", []) for x in blk]
    if no_tool_wall:
        res["no_tool_wall_ms"] = median(no_tool_wall)
    if no_tool_events and res["host_wall_ms"]:
        res["no_tool_events_ms"] = median(no_tool_events)
        res["host_wall_vs_no_tool_events"] = median(res["host_wall_ms"]) / median(no_tool_events)
    if res["host_wall_ms"]:
        hw = median(res["host_wall_ms"])
        res["host_wall_vs_step"] = hw / median(res["step_ms"])  # the region against the call timed by itself
        res["host_wall_vs_adjacent_no_tool"] = hw / median(res["adjacent_no_tool_ms"])  # the measure's own ratio
    _keep_small(store)
    return res


def _keep_small(store: Path, limit: int = 7 << 20) -> None:
    """Gzip a store kept as evidence; drop it if even compressed it would pass the size limit."""
    if not store.exists():
        return
    gz = store.with_name(store.name + ".gz")
    with store.open("rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    store.unlink()
    for extra in store.parent.glob(store.name + ".*"):
        if extra != gz:
            extra.unlink(missing_ok=True)
    if gz.stat().st_size > limit:
        gz.unlink()


# ----------------------------------------------------------------------------------------------------------------
# correctness checks (one process)
# ----------------------------------------------------------------------------------------------------------------
def checks(names: list[str], out: Path, result: Path) -> None:
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # one small kernel: no compile worker pool
    res: dict[str, Any] = {}

    def save() -> None:
        result.write_text(json.dumps(res, default=str))

    for name in names:
        t0 = time.perf_counter()
        try:
            res[name] = check_attribution(out) if name == "attribution" else check_events(out)
        except Exception as exc:
            res[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        res[name]["seconds"] = round(time.perf_counter() - t0, 2)
        save()


def attribution_rows(store: Path) -> list[tuple[str, str | None, str]]:
    """(kernel name, region path or None, attribution classes) of every kernel record of a store."""
    import duckdb

    con = duckdb.connect(str(store), read_only=True)
    try:
        rows = con.execute(
            "SELECT k.name, any_value(i.path), string_agg(DISTINCT coalesce(a.class, 'none'), ',') "
            "FROM kernels k LEFT JOIN attributions a "
            "ON a.run_id = k.run_id AND a.evidence = 'kernel' AND a.evidence_id = k.kernel_key "
            "LEFT JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id "
            "WHERE coalesce(k.kind, 'kernel') = 'kernel' GROUP BY k.run_id, k.kernel_key, k.name"
        ).fetchall()
    finally:
        con.close()
    return [(str(n), p, str(c)) for n, p, c in rows]


def attribution_verdict(rows: list[tuple[str, str | None, str]], expect: dict[str, Any]) -> dict[str, Any]:
    """Every region has kernels, all ``exact`` and named as expected; no kernel outside a region."""
    per: dict[str, dict[str, Any]] = {p: {"kernels": 0, "exact": 0, "names": set(), "name_ok": True} for p in expect}
    outside: list[str] = []
    for name, path, classes in rows:
        if path is None or path not in per:
            outside.append(f"{name[:60]} ({classes})")
            continue
        row = per[path]
        row["kernels"] += 1
        row["exact"] += classes == "exact"
        row["names"].add(name[:60])
        row["name_ok"] &= bool(expect[path].search(name))
    ok = not outside and all(r["kernels"] >= 3 and r["exact"] == r["kernels"] and r["name_ok"] for r in per.values())
    return {
        "ok": ok,
        "kernels_outside_regions": outside[:10],
        "regions": {p: {**r, "names": sorted(r["names"])} for p, r in per.items()},
    }


def check_attribution(out: Path) -> dict[str, Any]:
    """PyTorch, cuBLAS, Triton and Inductor kernels in their regions, measured with ``argus_lab.measure``."""
    import re

    import torch
    import triton
    import triton.language as tl

    import argus_lab

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

    step()  # compile, autotune, cuBLAS handles: before the measurement
    torch.cuda.synchronize()
    store = out / "stores" / "check-attribution.duckdb"
    store.parent.mkdir(parents=True, exist_ok=True)
    argus_lab.measure(step, signals="gpu.time,gpu.kernels", repeat=3, warmup=1, store=str(store))
    expect = {
        "torch": re.compile(r"elementwise|vectorized|unrolled", re.I),
        "cublas": re.compile(r"gemm|cutlass|nvjet|xmma|sm90", re.I),
        "triton": re.compile(r"argus_add_kernel"),
        "inductor": re.compile(r"^triton_"),
    }
    res = attribution_verdict(attribution_rows(store), expect)
    res["cupti"] = cupti_provenance(store)
    _keep_small(store)
    return res


def cupti_provenance(store: Path) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect(str(store), read_only=True)
    try:
        prov = con.execute("SELECT settings FROM provenance WHERE backend = 'cupti'").fetchall()
    finally:
        con.close()
    if not prov:
        return {}
    s = json.loads(prov[0][0]) if isinstance(prov[0][0], str) else prov[0][0]
    keys = ("launch_path", "records", "native_launch_records", "detached_at_stop", "dropped_records", "notes")
    return {k: s.get(k) for k in keys}


def instance_gpu_values(store: Path) -> dict[str, dict[str, list[float]]]:
    """path -> signal -> the measured instances' inclusive values (gpu.time, gpu.span), in us."""
    import duckdb

    con = duckdb.connect(str(store), read_only=True)
    try:
        rows = con.execute(
            "SELECT i.path, v.signal, v.inclusive FROM instance_values v JOIN region_instances i "
            "USING (run_id, instance_id) WHERE v.signal IN ('gpu.time', 'gpu.span') "
            "AND NOT coalesce(i.warmup, false) ORDER BY i.path, v.signal, i.instance_index"
        ).fetchall()
    finally:
        con.close()
    got: dict[str, dict[str, list[float]]] = {}
    for path, sig, val in rows:
        got.setdefault(path, {}).setdefault(sig, []).append(float(val) / 1e3)
    return got


def events_verdict(
    plain: list[dict[str, list[float]]], inside: dict[str, list[float]], got: dict[str, dict[str, list[float]]]
) -> dict[str, Any]:
    """gpu.time within 2 % of the no-tool CUDA events (mean of the passes before and after) on regions >= 1 ms."""
    res: dict[str, Any] = {}
    ok = True
    for name in inside:
        ev_plain = statistics.fmean(median(p[name]) for p in plain)
        t = median(got.get(name, {}).get("gpu.time", []))
        span = median(got.get(name, {}).get("gpu.span", []))
        res[name] = {
            "events_no_tool_us": ev_plain,
            "events_no_tool_passes_us": [median(p[name]) for p in plain],
            "events_in_run_us": median(inside[name]),
            "gpu_time_us": t,
            "gpu_span_us": span,
            "gpu_time_vs_no_tool_events": (t - ev_plain) / ev_plain,
            "gpu_span_vs_no_tool_events": (span - ev_plain) / ev_plain,
            "gpu_time_vs_events_in_run": (t - median(inside[name])) / median(inside[name]),
            "long_enough": ev_plain >= 1000,
        }
        ok &= ev_plain >= 1000 and abs(res[name]["gpu_time_vs_no_tool_events"]) <= 0.02
    res["ok"] = ok
    return res


def check_events(out: Path, instances: int = 10) -> dict[str, Any]:
    """gpu.time and gpu.span of regions of >= 1 ms against CUDA events queued behind a sleep kernel (so the events
    count GPU time only), no tool before and after one ``argus_lab.measure``."""
    import torch

    import argus_lab

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    big = torch.randn(64 << 20, device="cuda")  # 256 MiB: ten passes over it take about 1.3 ms

    def gemm() -> None:
        for _ in range(3):
            a @ a

    def chain() -> None:
        y = big
        for _ in range(10):
            y = y * 1.0001

    work = {"gemm": gemm, "chain": chain}

    def one(name: str, recording: bool, into: dict[str, list[float]]) -> None:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(2_000_000)  # the events and the region's kernels queue behind it
        s.record()
        with argus_lab.region(name) if recording else contextlib.nullcontext():
            work[name]()
        e.record()
        torch.cuda.synchronize()
        into.setdefault(name, []).append(s.elapsed_time(e) * 1e3)  # us

    def no_tool() -> dict[str, list[float]]:
        got: dict[str, list[float]] = {}
        for _ in range(instances):
            for name in work:
                one(name, False, got)
        return got

    t_end = time.time() + 1.5
    while time.time() < t_end:  # clocks up
        gemm()
    torch.cuda.synchronize()
    before = no_tool()
    inside: dict[str, list[float]] = {}

    def step() -> None:
        for name in work:
            one(name, True, inside)

    store = out / "stores" / "check-events.duckdb"
    store.parent.mkdir(parents=True, exist_ok=True)
    argus_lab.measure(step, signals="gpu.time,gpu.span", repeat=instances, warmup=1, store=str(store))
    after = no_tool()
    inside = {k: v[1:] for k, v in inside.items()}  # the warm-up repetition
    res = events_verdict([before, after], inside, instance_gpu_values(store))
    res["cupti"] = cupti_provenance(store)
    _keep_small(store)
    return res


# ----------------------------------------------------------------------------------------------------------------
# the parent: checks, then one process per (tool, index), forked from a parent that imported torch + transformers
# ----------------------------------------------------------------------------------------------------------------
def fork_probe(device: str, timeout_s: float = 60.0) -> str:
    """``fork`` if a forked child of this process can use the GPU (CUDA never initialized here), else ``spawn``."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            if device == "cuda":
                import torch

                torch.ones(1, device="cuda").add_(1)
                torch.cuda.synchronize()
        except BaseException:
            code = 3
        os._exit(code)
    t_end = time.time() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "fork" if os.waitstatus_to_exitcode(status) == 0 else "spawn"
        if time.time() > t_end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "spawn"
        time.sleep(0.05)


class Starter:
    """Starts children by fork (after the heavy imports) or as fresh interpreters; kills them past a deadline."""

    def __init__(self, how: str, argv: list[str]) -> None:
        self.how, self.argv = how, argv

    def run(self, label: str, target: Callable[[], None], spawn_args: list[str], log: Path, kill_at: float) -> int:
        if self.how == "fork":
            return self._fork(target, log, kill_at)
        cmd = [sys.executable, str(Path(__file__).resolve()), *spawn_args]
        with log.open("w") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
            try:
                return proc.wait(timeout=max(1.0, kill_at - time.time()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                return -9

    @staticmethod
    def _fork(target: Callable[[], None], log: Path, kill_at: float) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child
            code = 0
            try:
                fd = os.open(str(log), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                target()
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if time.time() > kill_at:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return -9
            time.sleep(0.05)


def aggregate(procs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (workload, tool): the median of the processes' ratios, their range, the range over blocks."""
    rows = []
    keys = {(w, p["tool"]) for p in procs for w, r in p.get("workloads", {}).items() if r.get("ratios")}
    order = {t: i for i, t in enumerate(TABLE_ORDER)}
    for wl, tool in sorted(keys, key=lambda k: (k[0], order.get(k[1], 99))):
        rs = [
            p["workloads"][wl] for p in procs if p["tool"] == tool and p.get("workloads", {}).get(wl, {}).get("ratios")
        ]
        per_proc = [median(r["ratios"]) for r in rs]
        pairs = [x for r in rs for x in r["ratios"]]
        extras = [e for r in rs for e in r.get("extras", [])]
        rows.append(
            {
                "workload": wl,
                "tool": tool,
                "ratio": median(per_proc),
                "proc_min": min(per_proc),
                "proc_max": max(per_proc),
                "pair_min": min(pairs),
                "pair_max": max(pairs),
                "processes": len(rs),
                "pairs": len(pairs),
                "a_ms": median([median(b) for r in rs for b in r["a_ms"]]),
                "b_ms": median([median(b) for r in rs for b in r["b_ms"]]),
                "a_drift": median([r["a_drift"] for r in rs if "a_drift" in r]),
                # the CPU probe before B blocks over the one before A blocks: ~1 when the machine ran alike
                "probe_b_over_a": median([x for r in rs for x in r.get("b_probe_ms", [])])
                / median([x for r in rs for x in r.get("a_probe_ms", [])]),
                "launch_path": ", ".join(sorted({str(e["launch_path"]) for e in extras if e.get("launch_path")})),
                "boundaries": ", ".join(
                    sorted(
                        {
                            ("C" if e["boundary"].get("c_path") else "Python")
                            + (" + C region()" if e["boundary"].get("c_region") else "")
                            for e in extras
                            if e.get("boundary")
                        }
                    )
                ),
                "detached": any(e.get("detached") for e in extras),
                "kernels": sum(e.get("kernels", 0) for e in extras),
                "kernels_with_instance": sum(e.get("kernels_with_instance", 0) for e in extras),
            }
        )
    return rows


def decomposition(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for wl in sorted({r["workload"] for r in rows}):
        by = {r["tool"]: r["ratio"] for r in rows if r["workload"] == wl}
        steps = [
            ("kernel records alone", "cupti-kernels"),
            ("+ launch callbacks (empty)", "cupti-kernels+empty-callbacks"),
            ("+ launch callbacks (recording)", "cupti-kernels+callbacks"),
            ("argus timing run (+ regions, host.wall)", "argus"),
        ]
        text = " -> ".join(f"{label} {by[t]:.2f}x" for label, t in steps if t in by)
        refs = [
            f"{label} {by[t]:.2f}x"
            for label, t in (
                ("region work alone", "argus-markers"),
                ("argus with Python boundaries", "argus-python-boundaries"),
                ("argus, driver callbacks only", "argus-driver-callbacks"),
                ("argus, launch callbacks instead of probes", "argus-launch-callbacks"),
                ("argus, probes forced", "argus-probes"),
                ("argus, CUPTI's clock instead of probes", "argus-clock"),
                ("kernel records + latency timestamps", "cupti-kernels+clock"),
                ("no-op markers + hooks", "nvtx"),
                ("Proton", "proton"),
                ("torch.profiler", "torch.profiler"),
                ("no tool", "none"),
            )
            if t in by
        ]
        out.append(f"{wl}: {text}" + (f"; for reference: {', '.join(refs)}" if refs else ""))
    return out


def table(figures: dict[str, Any]) -> str:
    rows = figures["rows"]
    lines = [
        "| workload | tool | ratio | processes (range) | blocks (range) | A ms | B ms | A drift | probe B/A "
        "| launch path |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lp = ", ".join(
            x for x in (r["launch_path"], f"{r['boundaries']} boundaries" if r.get("boundaries") else "") if x
        )
        if r["kernels"]:
            lp += f" ({r['kernels_with_instance']}/{r['kernels']} kernels in a region)"
        lines.append(
            f"| {r['workload']} | {r['tool']} | {r['ratio']:.3f}x | {r['processes']} ({r['proc_min']:.3f}-"
            f"{r['proc_max']:.3f}) | {r['pairs']} ({r['pair_min']:.3f}-{r['pair_max']:.3f}) | {r['a_ms']:.2f} | "
            f"{r['b_ms']:.2f} | {r['a_drift']:.3f} | {r.get('probe_b_over_a', float('nan')):.2f} | {lp} |"
        )
    lines += decomposition(rows)
    for p in figures["processes"]:
        if p.get("errors") or p.get("exit", 0) != 0:
            lines.append(f"process {p['tool']}#{p['index']}: exit {p.get('exit')} errors {p.get('errors')}")
        if "measure" in p:
            m = p["measure"]
            nan = float("nan")
            lines.append(
                f"decode host.wall in argus_lab.measure ({p['tool']}#{p['index']}): "
                f"{median(m.get('host_wall_ms', [])):.2f} ms (the step timed by itself "
                f"{median(m.get('step_ms', [])):.2f} ms, host.wall/step {m.get('host_wall_vs_step', nan):.3f}); "
                f"no tool right before and after: {median(m.get('adjacent_no_tool_ms', [])):.2f} ms, host.wall / that "
                f"= {m.get('host_wall_vs_adjacent_no_tool', nan):.3f}; the process's A blocks: CUDA events "
                f"{m.get('no_tool_events_ms', nan):.2f} ms, host {m.get('no_tool_wall_ms', nan):.2f} ms "
                f"(host.wall / events {m.get('host_wall_vs_no_tool_events', nan):.3f}); CPU probe ms before/in/after "
                f"{[round(x, 3) for x in m.get('adjacent_probe_ms', [])[:1]]}/"
                f"{[round(x, 3) for x in m.get('probe_ms', [])]}/"
                f"{[round(x, 3) for x in m.get('adjacent_probe_ms', [])[1:]]}; kernels {m.get('kernel_classes')}; "
                f"cupti {m.get('cupti')}"
            )
    for name, c in figures["checks"].items():
        lines.append(f"check {name}: {json.dumps(c, default=str)[:1500]}")
    if figures["skipped"]:
        lines.append(f"skipped (time budget): {', '.join(figures['skipped'])}")
    return "\n".join(lines)


def environment(device: str) -> dict[str, Any]:
    import importlib.metadata

    env: dict[str, Any] = {"python": sys.version, "platform": platform.platform()}
    for dist in ("torch", "triton", "transformers", "cupti-python", "nvidia-cuda-cupti", "nvtx", "duckdb"):
        try:
            env[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            env[dist] = "missing"
    try:
        env["gpu"] = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        env["gpu"] = "nvidia-smi unavailable"
    env["cpus"] = os.cpu_count()
    if device == "cuda":
        from argus_lab.backends.cupti import native

        env["native_build"] = native.build().note
    return env


def schedule(tools: list[str], procs: int, required: tuple[str, ...] = REQUIRED) -> list[tuple[str, int]]:
    """Which (tool, index) processes run, in order: every required tool ``procs`` times (each round rotated), then
    the other tools once each, then their further processes (what the time budget cuts comes last)."""
    need = [t for t in tools if t in required]
    order: list[tuple[str, int]] = []
    for k in range(procs):
        shift = (3 * k) % max(1, len(need))
        order += [(t, k) for t in need[shift:] + need[:shift]]
    extras = [t for t in tools if t not in required]
    for k in range(procs):
        order += [(t, k) for t in extras]
    return order


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default="")
    ap.add_argument("--budget-s", type=float, default=200.0, help="wall time from start; children get deadlines")
    ap.add_argument("--procs", type=int, default=2, help="processes per tool (extras get theirs last)")
    ap.add_argument("--pairs", type=int, default=6, help="B blocks per workload and process (at most)")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per block")
    ap.add_argument("--warm", type=int, default=2, help="untimed repetitions after attaching a tool")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--required", default=",".join(REQUIRED), help="tools that get their --procs processes first")
    ap.add_argument("--checks", default="attribution,events")
    ap.add_argument("--checks-s", type=float, default=45.0, help="time given to the correctness checks")
    ap.add_argument("--child-s", type=float, default=30.0, help="most time a tool's process gets")
    ap.add_argument("--start", choices=("fork", "spawn"), default="fork")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of the harness (GPU tools are skipped)")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer model (smoke tests)")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--run-checks", default="", help=argparse.SUPPRESS)
    ap.add_argument("--result", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="timing-overhead-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.child:  # a spawned child
        child(args.child, args.index, args.deadline, args, out, Path(args.result))
        return 0
    if args.run_checks:
        checks(args.run_checks.split(","), out, Path(args.result))
        return 0

    end = STARTED + args.budget_s
    workloads = [w for w in args.workloads.split(",") if w]
    tools = [t for t in args.tools.split(",") if t]
    unknown = [t for t in tools if any(part not in TOOLS for part in t.split("@", 1))]
    if unknown:
        raise SystemExit(f"unknown tools {unknown}; tools: {', '.join(TOOLS)}")
    if args.device != "cuda":  # the tools that need a GPU: the profilers and every CUPTI collector setting
        tools = [t for t in tools if t not in {"torch.profiler", "proton", *Cupti.SETTINGS}]
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # torch.cuda.is_available() without CUDA init
    env = environment(args.device)
    print(f"environment: {json.dumps(env)}", flush=True)
    import torch  # noqa: F401  (the children inherit it when forked)

    if "decode" in workloads:
        import transformers  # noqa: F401
        from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM  # noqa: F401
    import argus_lab  # noqa: F401
    from argus_lab.run import driver, loader  # noqa: F401

    how = args.start
    if how == "fork":
        how = fork_probe(args.device)
    print(f"parent ready after {time.time() - STARTED:.1f} s (imports); children start by {how}", flush=True)
    common = ["--reps", str(args.reps), "--warm", str(args.warm), "--pairs", str(args.pairs)]
    common += ["--workloads", args.workloads, "--device", args.device] + (["--tiny"] if args.tiny else [])
    starter = Starter(how, common)
    logs, procs_dir = out / "logs", out / "procs"
    logs.mkdir(exist_ok=True)
    procs_dir.mkdir(exist_ok=True)
    figures: dict[str, Any] = {
        "environment": env,
        "protocol": {k: getattr(args, k) for k in ("budget_s", "procs", "pairs", "reps", "warm", "device")}
        | {"start": how},
        "rows": [],
        "processes": [],
        "checks": {},
        "skipped": [],
    }

    def save() -> str:
        figures["rows"] = aggregate(figures["processes"])
        figures["seconds"] = round(time.time() - STARTED, 1)
        text = table(figures)
        (out / "timing-overhead.json").write_text(json.dumps(figures, indent=1, default=str))
        (out / "timing-overhead.txt").write_text(text + "\n")
        return text

    check_names = [c for c in args.checks.split(",") if c] if args.device == "cuda" else []
    if check_names:
        result = out / "checks.json"
        kill_at = min(time.time() + args.checks_s, end)
        rc = starter.run(
            "checks",
            lambda: checks(check_names, out, result),
            ["--run-checks", ",".join(check_names), "--result", str(result), str(out)],
            logs / "checks.log",
            kill_at,
        )
        got = json.loads(result.read_text()) if result.exists() else {}
        for name in check_names:
            figures["checks"][name] = got.get(name, {"ok": False, "error": f"no result (exit {rc})"})
        print(f"checks (exit {rc}): " + json.dumps({k: v.get("ok") for k, v in figures["checks"].items()}), flush=True)
        save()

    plan = schedule(tools, args.procs, tuple(t for t in args.required.split(",") if t))
    weight = {("argus", 0): 1.4, ("argus", 1): 1.4, ("torch.profiler", 0): 1.3, ("torch.profiler", 1): 1.3}
    required = {t for t in args.required.split(",") if t}
    first_round = sum(1 for t, i in plan if i == 0 and t in required)
    k = 0
    while k < len(plan):
        tool, index = plan[k]
        left = end - time.time()
        # a required process shares the time left with the required processes still to come; the others after them
        rest = [p for p in plan[k:] if p[0] in required] if tool in required else plan[k:]
        slot = min(args.child_s, left * weight.get(plan[k], 1.0) / sum(weight.get(p, 1.0) for p in rest))
        if left < 8.0 or (slot < 6.0 and k >= first_round):
            figures["skipped"] += [f"{t}#{i}" for t, i in plan[k:]]
            break
        slot = max(slot, min(left, 8.0))
        deadline = time.time() + slot
        label = f"{tool}-{index}"
        result = procs_dir / f"{label}.json"
        result.unlink(missing_ok=True)
        rc = starter.run(
            label,
            lambda tool=tool, index=index, deadline=deadline, result=result: child(
                tool, index, deadline, args, out, result
            ),
            [
                *("--child", tool, "--index", str(index), "--deadline", str(deadline), "--result", str(result)),
                *starter.argv,
                str(out),
            ],
            logs / f"{label}.log",
            min(deadline + 10.0, end + 5.0),
        )
        data = json.loads(result.read_text()) if result.exists() else {"tool": tool, "index": index, "errors": []}
        data["exit"] = rc
        if rc != 0 and not data.get("workloads"):
            tail = (logs / f"{label}.log").read_text(errors="replace")[-1200:]
            data["errors"].append(f"exit {rc} before measuring; log tail: {tail}")
        figures["processes"].append(data)
        ratios = {w: round(r.get("ratio", float("nan")), 3) for w, r in data.get("workloads", {}).items()}
        print(f"{label}: exit {rc} ratios {ratios} errors {data.get('errors')} ({data.get('seconds')} s)", flush=True)
        save()
        k += 1
    text = save()
    print(text)
    print(f"total {time.time() - STARTED:.0f} s; figures in {out / 'timing-overhead.json'}")
    ok = all(c.get("ok", False) for c in figures["checks"].values())
    return 0 if ok and not any(p.get("errors") for p in figures["processes"]) else 1


if __name__ == "__main__":
    sys.exit(main())
