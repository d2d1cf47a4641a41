"""A region that launches on two CUDA streams (GPU): gpu.span covers both, gpu.time sums both."""

from __future__ import annotations

from typing import Any

import torch

import argus_lab


def setup(n: int = 2048) -> dict[str, Any]:
    """Inputs and two side streams."""
    return {
        "a": torch.randn(n, n, device="cuda"),
        "b": torch.randn(n, n, device="cuda"),
        "s1": torch.cuda.Stream(),
        "s2": torch.cuda.Stream(),
    }


def step(s: dict[str, Any]) -> None:
    """two_streams{ s1{ matmul; relu } s2{ matmul; sigmoid } } then join."""
    cur = torch.cuda.current_stream()
    with argus_lab.region("two_streams"):
        s["s1"].wait_stream(cur)
        s["s2"].wait_stream(cur)
        with argus_lab.region("s1"), torch.cuda.stream(s["s1"]):
            torch.relu(s["a"] @ s["b"])
        with argus_lab.region("s2"), torch.cuda.stream(s["s2"]):
            torch.sigmoid(s["b"] @ s["a"])
        cur.wait_stream(s["s1"])
        cur.wait_stream(s["s2"])


if __name__ == "__main__":
    state = setup()
    for _ in range(2):
        step(state)
    torch.cuda.synchronize()
