#!/usr/bin/env python3
"""Record, on the GPU machine, the join cases the backend recordings (tests/data/gpu) do not cover.

    python scripts/record_join_cases.py OUT          # OUT/<run>/{cupti/*.parquet, instances.parquet}

Runs (CUPTI activity + host clocks, through argus_lab's own run driver, 1 repetition each):

* ``tn-timing``: ``examples/gpu/triton_nested.py`` ``main(steps=2)``, the program whose Nsight Compute report is
  ``tests/data/gpu/ncu/triton_nested.ncu-rep``: the timing run the ordinal join matches that report against.
* ``tn-variant``: the same program except that the second step's ``inner`` launches its two kernels in the other
  order (what autotuning or a data-dependent branch does between runs): the ncu report must *mismatch* it there.
* ``shared``: ``prefetch`` open on a helper thread while the main thread is inside ``decode``; a third thread with
  no region launches a negation while both are open: one kernel, two candidate regions (ambiguous).
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def triton_program(swap_second: bool) -> Callable[[], None]:
    """``triton_nested.main(steps=2)``, optionally with the second inner instance's kernels swapped."""
    import torch
    import triton

    import argus_lab

    spec = importlib.util.spec_from_file_location("triton_nested", ROOT / "examples" / "gpu" / "triton_nested.py")
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    y, z = torch.empty_like(x), torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)

    def run() -> None:
        for step in range(2):
            with argus_lab.region("outer"):
                mod.scale_kernel[grid](x, y, n, 2.0, BLOCK=1024)
                with argus_lab.region("inner"):
                    if swap_second and step == 1:
                        mod.scale_kernel[grid](z, y, n, 0.5, BLOCK=1024)
                        mod.exp_add_kernel[grid](x, y, z, n, BLOCK=1024)
                    else:
                        mod.exp_add_kernel[grid](x, y, z, n, BLOCK=1024)
                        mod.scale_kernel[grid](z, y, n, 0.5, BLOCK=1024)
        torch.cuda.synchronize()

    return run


def shared_program() -> Callable[[], None]:
    """decode (main thread) and prefetch (helper thread) open while a third thread launches a kernel."""
    import torch

    import argus_lab

    a = torch.randn(2048, 2048, device="cuda")
    b = torch.empty_like(a)

    def run() -> None:
        ready, done = threading.Event(), threading.Event()

        def prefetch() -> None:
            with argus_lab.region("prefetch"):
                ready.set()
                done.wait()

        helper = threading.Thread(target=prefetch, name="prefetch")
        helper.start()
        ready.wait()
        with argus_lab.region("decode"):
            a @ a
            side = threading.Thread(target=lambda: torch.neg(a, out=b), name="side")
            side.start()
            side.join()
            torch.cuda.synchronize()
        done.set()
        helper.join()

    return run


def record(name: str, fn: Callable[[], None], out: Path) -> None:
    """Run ``fn`` once under CUPTI + host clocks and save the raw CUPTI records and the instances."""
    import torch

    from argus_lab.backends.cupti import decode as dec
    from argus_lab.backends.cupti.collector import CuptiCollector
    from argus_lab.backends.host import HostCollector
    from argus_lab.run.driver import drive
    from argus_lab.run.shards import write_table
    from argus_lab.run.workload import Workload

    fn()  # compile, cuBLAS handles, caching allocator: outside the run
    torch.cuda.synchronize()
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    cupti = CuptiCollector()
    settings: dict[str, Any] = {"cupti": {"memcpy": True, "memset": True}}
    outcome = drive(f"rec-{name}", Workload.of_callable(fn), [cupti, HostCollector()], ["gpu.time", "host.wall"],
                    settings, 1, 0, folder)  # fmt: skip
    print(f"[{name}] status={outcome.status} reps={outcome.reps_done} {outcome.cause[:300]}")
    dec.save_raw(cupti.raw, folder / "cupti")
    write_table(folder / "instances.parquet", outcome.evidence["region_instances"])
    k = dec.kernel_table(cupti.raw, f"rec-{name}")
    for row in zip(k["name"].tolist(), k["instance_id"].tolist(), k["thread_id"].tolist(), k["stream_id"].tolist(),
                   strict=True):  # fmt: skip
        print(f"[{name}] kernel", row)
    inst = outcome.evidence["region_instances"]
    for row in zip(inst["instance_id"], inst["path"], inst["thread_id"], strict=True):
        print(f"[{name}] instance", row)


def main(out: Path) -> None:
    import torch

    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
    record("tn-timing", triton_program(swap_second=False), out)
    record("tn-variant", triton_program(swap_second=True), out)
    record("shared", shared_program(), out)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
