"""An autotuned Triton matmul in a region (GPU; issue 15): the first instance autotunes, every later one does not.

Measured from examples/gpu as ``autotuned_matmul:step`` (one ``matmul`` instance per repetition; the inputs are built at
import, before the first region).  ``@triton.autotune`` benchmarks its four configurations on the first call, so
instance 0 launches hundreds of kernels (their number depends on timing) and every later instance launches the
chosen configuration once: the case of first-call heterogeneity, of an ncu run whose instance 0 differs from the
timing run's, and of compiler facts that must say which configuration ran in the measured instances.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import argus_lab

CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 32}, num_warps=w, num_stages=3)
    for bm, bn, w in ((64, 64, 4), (128, 64, 4), (64, 128, 4), (128, 128, 8))
]


def _bench(kernel_call, quantiles):  # type: ignore[no-untyped-def]
    """Shorter benchmarking than Triton's default (25 ms warm-up, 100 ms), to keep the recording short."""
    return triton.testing.do_bench(kernel_call, warmup=5, rep=15, quantiles=quantiles)


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"], do_bench=_bench)
@triton.jit
def matmul_kernel(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


SIZE = 512
A = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.float16)
B = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.float16)
C = torch.empty(SIZE, SIZE, device="cuda", dtype=torch.float16)


def step() -> None:
    """matmul{ the autotuned kernel }: one instance."""
    with argus_lab.region("matmul"):
        grid = lambda meta: (triton.cdiv(SIZE, meta["BLOCK_M"]), triton.cdiv(SIZE, meta["BLOCK_N"]))  # noqa: E731
        matmul_kernel[grid](A, B, C, SIZE, SIZE, SIZE)
    torch.cuda.synchronize()


if __name__ == "__main__":
    for _ in range(3):
        step()
