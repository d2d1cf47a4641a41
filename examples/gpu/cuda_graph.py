"""A CUDA graph captured outside regions and replayed inside one (GPU).

Replayed kernels share the correlation id of their cudaGraphLaunch, so they carry the region's id.
"""

from __future__ import annotations

from typing import Any

import torch

import argus_lab


def setup(n: int = 1 << 20) -> dict[str, Any]:
    """Capture a graph of three elementwise kernels."""
    x = torch.randn(n, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream, as torch's docs ask
        y = torch.sin(x) * 2 + 1
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = torch.sin(x) * 2 + 1
    return {"graph": g, "x": x, "y": y}


def step(s: dict[str, Any]) -> None:
    """graph{ replay x2 }."""
    with argus_lab.region("graph"):
        s["graph"].replay()
        s["graph"].replay()


if __name__ == "__main__":
    state = setup()
    step(state)
    torch.cuda.synchronize()
