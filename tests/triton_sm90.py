"""Real Triton kernels compiled for sm_90 on a machine without a GPU (Triton compiles for a target it is given).

The compiled artefacts (metadata, cubin, SASS) are the real ones Triton writes on the H200; only the load onto a
GPU (and the registers the driver reports then) is missing, which ``cuobjdump -res-usage`` on the cubin supplies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import triton
import triton.language as tl

SIGNATURE = {
    "a": "*fp16",
    "b": "*fp16",
    "c": "*fp16",
    "M": "i32",
    "N": "i32",
    "K": "i32",
    "BLOCK_M": "constexpr",
    "BLOCK_N": "constexpr",
    "BLOCK_K": "constexpr",
}


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


CONFIGS = ({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32})


def compile_configs(cache_dir: Path, num_warps: int = 4, num_stages: int = 3) -> list[Any]:
    """``matmul_kernel`` compiled for sm_90 in each configuration of :data:`CONFIGS` (as an autotuner would), into
    the Triton cache ``cache_dir`` (``TRITON_CACHE_DIR`` must point there: Triton reads it at compile time)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    out = []
    for cfg in CONFIGS:
        src = ASTSource(fn=matmul_kernel, signature=SIGNATURE, constexprs=dict(cfg))
        out.append(
            triton.compile(
                src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps, "num_stages": num_stages}
            )
        )
    return out


@triton.jit
def triton_per_fused_gelu_native_layer_norm_0(
    in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr
):
    """A persistent reduction shaped and named like the Inductor kernel of the H200's torch.compile'd MLP (one
    row of ``R0_BLOCK`` fp16 values per program: layer norm, then tanh-free GELU by the sigmoid form)."""
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    r0 = tl.arange(0, R0_BLOCK)[None, :]
    xmask = xindex < xnumel
    x = tl.load(in_ptr0 + (r0 + r0_numel * xindex), xmask, other=0.0).to(tl.float32)
    mean = tl.sum(x, 1)[:, None] / r0_numel
    d = x - mean
    var = tl.sum(d * d, 1)[:, None] / r0_numel
    y = d * tl.rsqrt(var + 1e-5)
    g = y * tl.sigmoid(1.702 * y)
    tl.store(out_ptr0 + (r0 + r0_numel * xindex), g.to(tl.float16), xmask)


INDUCTOR_SIGNATURE = {
    "in_ptr0": "*fp16",
    "out_ptr0": "*fp16",
    "xnumel": "i32",
    "r0_numel": "i32",
    "XBLOCK": "constexpr",
    "R0_BLOCK": "constexpr",
}


def compile_inductor_like(num_warps: int = 2) -> Any:
    """:func:`triton_per_fused_gelu_native_layer_norm_0` compiled for sm_90 into the Triton cache that
    ``TRITON_CACHE_DIR`` names (Inductor compiles into ``<inductor cache>/triton/<device>``)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = ASTSource(
        fn=triton_per_fused_gelu_native_layer_norm_0,
        signature=INDUCTOR_SIGNATURE,
        constexprs={"XBLOCK": 1, "R0_BLOCK": 256},
    )
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps, "num_stages": 1})
