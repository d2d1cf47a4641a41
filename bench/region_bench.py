"""Cost of one region boundary (enter + exit) as users write it, beside nvtx.annotate and record_function.

Every case is the idiom of the README: ``with argus_lab.region("attn"):`` (a new ``region()`` call at every use)
and a function decorated with ``@argus_lab.region("step")``; the other tools are written the way their own docs
show them (``with nvtx.annotate("attn"):``, ``with torch.profiler.record_function("attn"):``, and their
decorator forms).  A decorated call is reported minus the same call undecorated.

    .venv/bin/python bench/region_bench.py [--rounds 15] [--n 50000] [--json FILE]
    .venv/bin/python bench/region_bench.py --memory 1000000     # bytes per recorded instance

The native timing-run rows use the CUPTI extension as the collector hands it to the recorder (built here with the
system C compiler; no GPU is needed for its boundary functions): the recorder then runs each boundary in C.

Protocol: one sample times ``n`` boundaries in a loop and subtracts the empty loop; the cases are interleaved
round by round (so machine noise hits them alike) and the table gives the median over rounds with the
lowest and highest sample.  docs/benchmarks.md ("Region boundary cost") keeps the figures of a recorded run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import operator
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import argus_lab
from argus_lab.regions import Recorder

Case = Callable[[int], None]


def _empty(n: int) -> None:
    for _ in range(n):
        pass


def _plain_call(n: int) -> None:
    def step() -> None:
        return None

    for _ in range(n):
        step()


# -- argus_lab, the README idioms ---------------------------------------------------------------------------
def argus_inline(n: int) -> None:
    for _ in range(n):
        with argus_lab.region("attn"):
            pass


def argus_decorator(n: int) -> None:
    @argus_lab.region("step")
    def step() -> None:
        return None

    for _ in range(n):
        step()


def argus_prebuilt(n: int) -> None:
    marker = argus_lab.region("attn")
    for _ in range(n):
        with marker:
            pass


def recording(body: Case, *, cpu_clock: bool = False, sink: bool = False, native: Any = None) -> Case:
    """``body`` while a recorder is active (host.wall; host.cpu reads the thread CPU clock too).

    ``sink``: the Python path with one C call per boundary (``operator.index`` standing in for ``set_current``);
    ``native``: the CUPTI extension as the collector hands it over (``set_current`` + ``native_boundary``), so the
    recorder takes the C path (one C call per enter and per exit does the whole boundary).
    """

    class Sink:  # the native CUPTI path's boundary call: one C function taking the instance id (METH_O)
        current_instance = operator.index

    class Native:
        current_instance = native.set_current if native is not None else None
        native_boundary = native

    hooks: list[Any] = [Native()] if native is not None else [Sink()] if sink else []

    def run(n: int) -> None:
        with Recorder("bench", hooks=hooks, cpu_clock=cpu_clock) as rec:
            if native is not None and not rec.native_boundaries:
                raise AssertionError("the C boundary path is not on")
            body(n)
        if rec.count() < n:
            raise AssertionError("instances were lost")

    return run


def native_module() -> Any:
    """The CUPTI extension (built on first use; no GPU needed for its boundary functions), or None."""
    from argus_lab.backends.cupti import native

    built = native.build()
    if built.module is None:
        print(f"native extension unavailable ({built.note}): the C boundary path is not measured", file=sys.stderr)
    return built.module


def in_event_loop(body: Case) -> Case:
    """``body`` inside a coroutine of a running asyncio event loop (regions keep a stack per task there)."""

    def run(n: int) -> None:
        async def main() -> None:
            body(n)

        asyncio.run(main())

    return run


# -- other tools -------------------------------------------------------------------------------------------
def nvtx_inline(n: int) -> None:
    import nvtx

    for _ in range(n):
        with nvtx.annotate("attn"):
            pass


def nvtx_decorator(n: int) -> None:
    import nvtx

    @nvtx.annotate("step")
    def step() -> None:
        return None

    for _ in range(n):
        step()


def record_function_inline(n: int) -> None:
    import torch

    for _ in range(n):
        with torch.profiler.record_function("attn"):
            pass


def record_function_profiling(n: int) -> None:
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        record_function_inline(n)


# -- protocol ----------------------------------------------------------------------------------------------
def sample(body: Case, n: int, minus: Case | None = None) -> float:
    """ns per boundary of one sample (the empty loop, or ``minus``, subtracted)."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter_ns()
        body(n)
        t1 = time.perf_counter_ns()
        (minus or _empty)(n)
        t2 = time.perf_counter_ns()
    finally:
        gc.enable()
    return ((t1 - t0) - (t2 - t1)) / n


def cases() -> list[tuple[str, Case, Case | None, float]]:
    """(label, body, what to subtract, share of n): the rows of the table."""
    out: list[tuple[str, Case, Case | None, float]] = [
        ("argus_lab `with region('attn')`, no measurement", argus_inline, None, 1.0),
        ("argus_lab `@region('step')` call, no measurement", argus_decorator, _plain_call, 1.0),
        ("argus_lab marker built once, no measurement (reference)", argus_prebuilt, None, 1.0),
        ("argus_lab `with region('attn')`, recording host.wall", recording(argus_inline), None, 1.0),
        ("argus_lab `@region('step')` call, recording host.wall", recording(argus_decorator), _plain_call, 1.0),
        (
            "argus_lab `with region('attn')`, recording host.wall + host.cpu",
            recording(argus_inline, cpu_clock=True),
            None,
            1.0,
        ),
        (
            "argus_lab `with region('attn')`, recording host.wall + one C call per boundary (Python path)",
            recording(argus_inline, sink=True),
            None,
            1.0,
        ),
        (
            "argus_lab `with region('attn')` in an asyncio task, recording host.wall",
            in_event_loop(recording(argus_inline)),
            None,
            1.0,
        ),
    ]
    mod = native_module()
    if mod is not None:
        out += [
            (
                "argus_lab `with region('attn')`, native timing run (C boundary path: host.wall + current instance)",
                recording(argus_inline, native=mod),
                None,
                1.0,
            ),
            (
                "argus_lab `@region('step')` call, native timing run (C boundary path)",
                recording(argus_decorator, native=mod),
                _plain_call,
                1.0,
            ),
        ]
    try:
        import nvtx  # noqa: F401

        out += [
            ("`with nvtx.annotate('attn')` (no NVTX tool attached)", nvtx_inline, None, 1.0),
            ("`@nvtx.annotate('step')` call (no NVTX tool attached)", nvtx_decorator, _plain_call, 1.0),
        ]
    except ImportError:
        print("nvtx not installed: not measured", file=sys.stderr)
    try:
        import torch

        out += [
            (
                f"`with torch.profiler.record_function('attn')`, no profiler (torch {torch.__version__})",
                record_function_inline,
                None,
                1.0,
            ),
            (
                "`with torch.profiler.record_function('attn')` inside torch.profiler.profile (CPU activities)",
                record_function_profiling,
                None,
                0.2,
            ),
        ]
    except ImportError:
        print("torch not installed: record_function not measured", file=sys.stderr)
    return out


def boundary_table(rounds: int, n: int) -> dict[str, Any]:
    rows = cases()
    for _, body, minus, share in rows:  # warm up (imports, caches, first call sites)
        sample(body, max(1000, int(1000 * share)), minus)
    samples: dict[str, list[float]] = {label: [] for label, *_ in rows}
    for _ in range(rounds):
        for label, body, minus, share in rows:
            samples[label].append(sample(body, max(1000, int(n * share)), minus))
    load = os.getloadavg()
    print(
        f"Python {sys.version.split()[0]}, {n:,} boundaries per sample, {rounds} interleaved rounds, "
        f"load average {load[0]:.2f} on {os.cpu_count()} CPUs; ns per boundary (enter + exit)\n"
    )
    print("| marker | median | lowest | highest |\n| --- | ---: | ---: | ---: |")
    result = {}
    for label, values in samples.items():
        med = statistics.median(values)
        result[label] = {"median_ns": med, "min_ns": min(values), "max_ns": max(values), "samples": values}
        print(f"| {label} | {med:.0f} | {min(values):.0f} | {max(values):.0f} |")
    return {"python": sys.version, "n": n, "rounds": rounds, "loadavg": load, "cases": result}


# -- memory per recorded instance --------------------------------------------------------------------------
def _record_many(n: int) -> Recorder:
    rec = Recorder("memory", cpu_clock=False)
    with rec:
        for _ in range(n // 2):
            with argus_lab.region("outer"), argus_lab.region("inner"):
                pass
    return rec


def memory_child(n: int, traced: bool) -> dict[str, float]:
    """Runs in a fresh process: bytes per recorded instance (traced allocations, or peak RSS growth)."""
    argus_lab.region("warm")  # imports and first allocations happen before the baseline
    if traced:
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        rec = _record_many(n)
        now, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return {"instances": rec.count(), "kept_bytes": (now - base) / n, "peak_bytes": (peak - base) / n}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rec = _record_many(n)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"instances": rec.count(), "peak_rss_bytes": (after - before) * 1024 / n}


def memory_table(n: int) -> dict[str, Any]:
    out: dict[str, Any] = {"n": n}
    for traced in (True, False):
        cmd = [sys.executable, __file__, "--memory-child", str(n)] + (["--traced"] if traced else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
        out.update(json.loads(proc.stdout))
    print(f"\n{n:,} region instances recorded (host.wall), bytes per instance while recording:\n")
    print("| measure | bytes per instance |\n| --- | ---: |")
    print(f"| traced allocations kept (tracemalloc) | {out['kept_bytes']:.0f} |")
    print(f"| traced allocations at peak (tracemalloc) | {out['peak_bytes']:.0f} |")
    print(f"| peak RSS growth (ru_maxrss, separate process) | {out['peak_rss_bytes']:.0f} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--memory", type=int, default=0, help="instances for the memory figure (0: skip)")
    ap.add_argument("--memory-child", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", default="", help="also write the figures to this file")
    args = ap.parse_args()
    if args.memory_child:
        print(json.dumps(memory_child(args.memory_child, args.traced)))
        return
    figures: dict[str, Any] = {}
    if args.memory:
        figures["memory"] = memory_table(args.memory)
    else:
        figures["boundary"] = boundary_table(args.rounds, args.n)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=1)


if __name__ == "__main__":
    main()
