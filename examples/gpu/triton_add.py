"""A Triton kernel inside a region (GPU): compiler facts and CUPTI see the same kernel by name."""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

import argus_lab


@triton.jit
def scaled_add_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * alpha + tl.exp(y), mask=mask)


def setup(n: int = 1 << 22) -> dict[str, Any]:
    """Inputs on the GPU."""
    x = torch.randn(n, device="cuda")
    return {"x": x, "y": torch.randn(n, device="cuda"), "out": torch.empty_like(x), "n": n}


def step(s: dict[str, Any]) -> Any:
    """triton_add{ one Triton launch }; returns the CompiledKernel."""
    block = 1024
    with argus_lab.region("triton_add"):
        return scaled_add_kernel[(triton.cdiv(s["n"], block),)](s["x"], s["y"], s["out"], s["n"], 0.5, BLOCK=block)


if __name__ == "__main__":
    state = setup()
    for _ in range(2):
        step(state)
    torch.cuda.synchronize()
