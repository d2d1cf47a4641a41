"""Triton kernels in nested regions (GPU), small enough that an ncu report of it stays small.

    argus-lab run examples/gpu/triton_nested.py --signals gpu.time,hw:dram__bytes_read.sum

Run directly (``python examples/gpu/triton_nested.py``) it records its own regions, so ncu's NVTX filters
(``argus@outer/inner/``) and payloads work without argus-lab around it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import argus_lab
from argus_lab.regions import Recorder, active_recorder


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


@triton.jit
def exp_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.exp(x) + y, mask=mask)


def main(steps: int = 2, n: int = 1 << 20) -> None:
    """outer{ scale; inner{ exp_add; scale } } x steps."""
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    z = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)
    for _ in range(steps):
        with argus_lab.region("outer"):
            scale_kernel[grid](x, y, n, 2.0, BLOCK=1024)
            with argus_lab.region("inner"):
                exp_add_kernel[grid](x, y, z, n, BLOCK=1024)
                scale_kernel[grid](z, y, n, 0.5, BLOCK=1024)
    torch.cuda.synchronize()


if __name__ == "__main__":
    if active_recorder() is None:
        with Recorder("standalone"):
            main()
    else:
        main()
