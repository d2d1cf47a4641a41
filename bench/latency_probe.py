"""Could CUPTI's own launch timestamps replace the boundary probes?  A measurement, not a backend (issue 13).

CUPTI can stamp each kernel record with ``queued``, the host time its launch was put into the command buffer
(``cuptiActivityEnableLatencyTimestamps``).  If that time always falls inside the launch call, region boundaries
could be compared with it directly and no probe call would be needed.  This script measures, on a GPU:

* ordering: for launches timed with ``time.time_ns()`` right before and right after the call, how many kernel
  records have ``before <= queued <= after`` (and the spread of ``queued - before``);
* cost: the time of a launch-bound loop (4 tiny kernels a step) with CUPTI's kernel records alone, and with latency
  timestamps on as well, alternating blocks in one process, medians over blocks.

    python bench/latency_probe.py [--launches 2000] [--blocks 8] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    import torch
    from cupti import cupti

    records: list[Any] = []

    def requested() -> tuple[int, int]:
        return 64 << 20, 0

    def completed(recs: Any) -> None:
        records.extend(r for r in recs if r.kind == cupti.ActivityKind.CONCURRENT_KERNEL)

    x = torch.ones(1024, device="cuda")
    torch.cuda.synchronize()

    def step() -> None:
        for _ in range(4):
            x.add_(1.0)

    def block(n: int) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / n * 1e6

    cupti.activity_register_callbacks(requested, completed)
    res: dict[str, Any] = {}
    # ordering: every launch bracketed by two clock reads
    cupti.activity_enable_latency_timestamps(True)
    cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
    windows = []
    for _ in range(args.launches):
        t0 = time.time_ns()
        x.add_(1.0)
        windows.append((t0, time.time_ns()))
    torch.cuda.synchronize()
    cupti.activity_flush_all(1)
    ks = sorted(records, key=lambda r: r.correlation_id)[-args.launches :]
    inside = sum(1 for r, (a, b) in zip(ks, windows, strict=False) if a <= r.queued <= b)
    offs = [r.queued - a for r, (a, _) in zip(ks, windows, strict=False)]
    widths = [b - a for a, b in windows]
    res["ordering"] = {
        "launches": len(windows),
        "records": len(ks),
        "queued_inside_the_call": inside,
        "queued_minus_before_ns": {"min": min(offs), "median": statistics.median(offs), "max": max(offs)},
        "call_ns_median": statistics.median(widths),
    }
    records.clear()
    # cost: kernel records alone against kernel records + latency timestamps, alternating
    n = 300
    times: dict[str, list[float]] = {"kernel records": [], "+ latency timestamps": []}
    block(n)
    for _ in range(args.blocks):
        for name, latency in (("kernel records", False), ("+ latency timestamps", True)):
            cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
            cupti.activity_enable_latency_timestamps(latency)
            cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
            block(20)
            times[name].append(block(n))
            cupti.activity_flush_all(1)
            records.clear()
    cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
    cupti.activity_enable_latency_timestamps(False)
    times["no tool"] = [block(n) for _ in range(args.blocks)]
    res["us_per_step"] = {k: statistics.median(v) for k, v in times.items()}
    res["blocks"] = times
    print(json.dumps({k: v for k, v in res.items() if k != "blocks"}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
