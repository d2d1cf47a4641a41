"""Cost of one region boundary (enter + exit), side by side with nvtx.annotate and torch's record_function.

Run: `.venv/bin/python bench/region_bench.py` (torch optional: `pip install torch`).  Prints a markdown table
of medians over repeats; docs/benchmarks.md keeps the figures of a recorded run.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable

import nvtx

import argus_lab
from argus_lab.regions import Recorder

N = 100_000
REPEATS = 11


def per_boundary_ns(body: Callable[[int], None], repeats: int = REPEATS) -> float:
    """Median over ``repeats`` of the time per enter+exit, minus the empty loop."""

    def empty(n: int) -> None:
        for _ in range(n):
            pass

    out = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        t0 = time.perf_counter_ns()
        body(N)
        t1 = time.perf_counter_ns()
        empty(N)
        t2 = time.perf_counter_ns()
        gc.enable()
        out.append(((t1 - t0) - (t2 - t1)) / N)
    return statistics.median(out)


def argus_idle(n: int) -> None:
    r = argus_lab.region("bench")
    for _ in range(n):
        with r:
            pass


class _PushPop:
    """Stands for the CUPTI external-correlation hook: two calls per boundary (the GPU's own cost is extra)."""

    def __init__(self) -> None:
        self.stack: list[int] = []

    def enter(self, instance_id: int) -> None:
        self.stack.append(instance_id)

    def exit(self, instance_id: int) -> None:
        self.stack.pop()


def argus_recording(n: int) -> None:
    r = argus_lab.region("bench")
    with Recorder("bench", cpu_clock=False) as rec:
        for _ in range(n):
            with r:
                pass
    assert len(rec.rows) == n


def argus_recording_cpu(n: int) -> None:
    r = argus_lab.region("bench")
    with Recorder("bench", cpu_clock=True) as rec:
        for _ in range(n):
            with r:
                pass
    assert len(rec.rows) == n


def argus_recording_hook(n: int) -> None:
    r = argus_lab.region("bench")
    with Recorder("bench", hooks=[_PushPop()], cpu_clock=False) as rec:
        for _ in range(n):
            with r:
                pass
    assert len(rec.rows) == n


def nvtx_annotate(n: int) -> None:
    a = nvtx.annotate("bench", domain="argus")
    for _ in range(n):
        with a:
            pass


def record_function(n: int) -> None:
    import torch

    for _ in range(n):
        with torch.profiler.record_function("bench"):
            pass


def main() -> None:
    cases: list[tuple[str, Callable[[int], None]]] = [
        ("argus_lab.region, no measurement active", argus_idle),
        ("argus_lab.region, recording host.wall (wall clock, instance row)", argus_recording),
        ("argus_lab.region, recording host.wall + correlation hook", argus_recording_hook),
        ("argus_lab.region, recording host.wall + host.cpu (thread CPU clock)", argus_recording_cpu),
        ("nvtx.annotate (reused object, no tool attached)", nvtx_annotate),
    ]
    try:
        import torch

        cases.append((f"torch.profiler.record_function (torch {torch.__version__}, no profiler)", record_function))
    except ImportError:
        print("torch not installed: record_function not measured", file=sys.stderr)
    print(f"Python {sys.version.split()[0]}, {N} boundaries x {REPEATS} repeats, median ns per enter+exit\n")
    print("| marker | ns per boundary |\n| --- | ---: |")
    for _, fn in cases:
        fn(1000)  # warm up
    samples: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(REPEATS):  # interleave the cases so that machine noise hits them alike
        for name, fn in cases:
            samples[name].append(per_boundary_ns(fn, repeats=1))
    results = {name: statistics.median(v) for name, v in samples.items()}
    for name, value in results.items():
        print(f"| {name} | {value:.0f} |")
    rf = next((v for k, v in results.items() if k.startswith("torch")), None)
    if rf is not None:
        for key in ("recording host.wall (", "recording host.wall + correlation hook"):
            name = next(k for k in results if key in k)
            print(f"\n{name} / record_function: {results[name] / rf:.2f}x", end="")
        print()


if __name__ == "__main__":
    main()
