"""Edge cases (GPU): a region with no kernel, kernels outside every region, a kernel still running after its
region exited on the host, and copies (host to device, device to host, memset) inside a region."""

from __future__ import annotations

import time
from typing import Any

import torch

import argus_lab


def setup(n: int = 4096) -> dict[str, Any]:
    """Inputs, a pinned host buffer."""
    return {
        "a": torch.randn(n, n, device="cuda"),
        "host": torch.randn(1 << 22).pin_memory(),
        "dev": torch.empty(1 << 22, device="cuda"),
    }


def _memset(t: torch.Tensor) -> None:
    try:
        from cuda.bindings import driver
    except ImportError:
        return
    stream = torch.cuda.current_stream().cuda_stream
    try:
        driver.cuMemsetD8Async(t.data_ptr(), 0, t.numel() * t.element_size(), stream)
    except (TypeError, RuntimeError):
        return


def step(s: dict[str, Any]) -> None:
    """outside kernel; host_only{}; tail{ long matmul, no sync }; copies{ H2D, D2H, memset }."""
    torch.cos(s["dev"])  # outside every region
    with argus_lab.region("host_only"):
        time.sleep(0.001)
    with argus_lab.region("tail"):
        s["a"] @ s["a"]  # still running when the region exits on the host
    with argus_lab.region("copies"):
        s["dev"].copy_(s["host"], non_blocking=True)
        s["host"].copy_(s["dev"], non_blocking=True)
        s["dev"].zero_()  # a fill kernel in PyTorch
        _memset(s["dev"])  # a real cudaMemset
    torch.cuda.synchronize()


if __name__ == "__main__":
    state = setup()
    for _ in range(2):
        step(state)
