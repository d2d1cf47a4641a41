"""Gradient all-reduce and compute, serial and overlapped, through NCCL (GPU).

    argus-lab run examples/gpu/nccl_overlap.py --signals gpu.time,comm.time,comm.overlap,comm.exposed
    argus-lab run examples/gpu/nccl_overlap.py --signals comm.exposed --launch 'torchrun --nproc-per-node 2'

With one GPU the script forms a one-rank NCCL group: NCCL then reduces with its one-rank kernel (an average
scales the buffer), which is real NCCL device work on NCCL's own stream.  Under torchrun every rank takes the
GPU ``LOCAL_RANK`` and the all-reduce crosses GPUs.  NVLink SHARP (NVLS) stays off: on shared machines it can
take the host down.

``serial``: all-reduce, then the matmul waits for it.  ``overlapped``: the all-reduce is started asynchronously,
the matmul runs while it is in flight, ``wait`` joins them.

Settings (environment, so the same script serves a before/after comparison):

* ``NCCL_OVERLAP_PRIORITY=high`` puts NCCL's stream at high priority: when the all-reduce and the matmul become
  ready together, the GPU schedules the all-reduce's blocks first;
* ``NCCL_OVERLAP_BUCKETS=n`` splits the gradient into ``n`` buckets, one asynchronous all-reduce each;
* ``NCCL_OVERLAP_MODE=train`` runs ``train{ 8 x step; synchronize }`` instead of alternating serial and
  overlapped steps, so the ``train`` region's wall time gives the throughput; ``NCCL_OVERLAP_STEP`` picks the
  step (``overlapped``, the default, or ``serial``).
"""

from __future__ import annotations

import atexit
import os
from typing import Any

import torch
import torch.distributed as dist

import argus_lab


def init() -> None:
    """Join (or form) the NCCL process group once per process."""
    if dist.is_initialized():
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29541")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    options = dist.ProcessGroupNCCL.Options()
    options.is_high_priority_stream = os.environ.get("NCCL_OVERLAP_PRIORITY", "normal") == "high"
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device, pg_options=options)
    atexit.register(dist.destroy_process_group)


def setup(grad_elems: int = 1 << 26, n: int = 8192) -> dict[str, Any]:
    """A 256 MiB fp32 gradient bucket and two bf16 matrices (allocated outside every region)."""
    init()
    g = torch.Generator(device="cuda").manual_seed(0)
    return {
        "grad": torch.randn(grad_elems, device="cuda", generator=g),
        "a": torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g),
        "b": torch.randn(n, n // 2, device="cuda", dtype=torch.bfloat16, generator=g),
    }


def serial(s: dict[str, Any]) -> None:
    """serial{ allreduce; compute }: the matmul is queued behind the all-reduce."""
    with argus_lab.region("serial"):
        with argus_lab.region("allreduce"):
            dist.all_reduce(s["grad"], op=dist.ReduceOp.AVG)
        with argus_lab.region("compute"):
            torch.mm(s["a"], s["b"])


def overlapped(s: dict[str, Any]) -> None:
    """overlapped{ allreduce (async, per bucket); compute; wait }: the matmul runs while the all-reduce is in flight."""
    buckets = int(os.environ.get("NCCL_OVERLAP_BUCKETS", "1"))
    with argus_lab.region("overlapped"):
        with argus_lab.region("allreduce"):
            works = [dist.all_reduce(chunk, op=dist.ReduceOp.AVG, async_op=True) for chunk in s["grad"].chunk(buckets)]
        with argus_lab.region("compute"):
            torch.mm(s["a"], s["b"])
        with argus_lab.region("wait"):
            for work in works:
                assert work is not None
                work.wait()


def train(s: dict[str, Any], steps: int = 8) -> None:
    """train{ steps x step; synchronize }: its wall time is the time of ``steps`` steps."""
    step = serial if os.environ.get("NCCL_OVERLAP_STEP", "overlapped") == "serial" else overlapped
    with argus_lab.region("train"):
        for _ in range(steps):
            step(s)
        torch.cuda.synchronize()


if __name__ == "__main__":
    state = setup()
    if os.environ.get("NCCL_OVERLAP_MODE") == "train":
        train(state)
    else:
        for _ in range(3):
            serial(state)
            overlapped(state)
        torch.cuda.synchronize()
