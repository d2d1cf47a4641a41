"""A PyTorch matmul + elementwise chain in nested regions (GPU).

    argus-lab run examples/gpu/nested_torch.py --signals gpu.time,gpu.kernels,hw:dram__bytes_read.sum

Importable too: ``setup()`` allocates, ``step(state)`` runs one iteration (used by scripts/gpu_record.py).
"""

from __future__ import annotations

from typing import Any

import torch

import argus_lab

N = 2048


def setup(n: int = N) -> dict[str, Any]:
    """Inputs on the GPU (allocated outside every region)."""
    g = torch.Generator(device="cuda").manual_seed(0)
    return {
        "a": torch.randn(n, n, device="cuda", generator=g),
        "b": torch.randn(n, n, device="cuda", generator=g),
    }


def step(s: dict[str, Any]) -> torch.Tensor:
    """outer{ matmul; inner{ relu; add } }."""
    with argus_lab.region("outer"):
        c = s["a"] @ s["b"]
        with argus_lab.region("inner"):
            d = torch.relu(c)
            e = d + s["a"]
    return e


if __name__ == "__main__":
    state = setup()
    for _ in range(2):
        step(state)
    torch.cuda.synchronize()
