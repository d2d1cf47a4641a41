"""A persistent split-K Triton GEMM: each output tile's K range is cut into ``SPLIT_K`` slices, and the slices are
separate work units of the persistent loop, so a GEMM with fewer output tiles than SMs (skinny, small M x N, long
K) still keeps every SM busy.

The reduction is in the same launch: each unit stores its fp32 partial tile in a workspace, then counts itself on
the tile's counter (an atomic, release/acquire at GPU scope, after a CTA barrier so every warp's stores are
ordered before it); the unit that arrives last sums the ``SPLIT_K`` partials (loads that bypass L1), writes the
output tile, and resets the counter to zero for the next launch.  The slices of one tile are adjacent unit
numbers, so they run at the same time on neighbouring programs and the last one waits for nobody.

Scratch (:func:`scratch_shapes`): ``ws`` (fp32, ``tiles x SPLIT_K x BLOCK_M x BLOCK_N``) and ``locks`` (int32,
one per tile, zero before the first launch; the kernel leaves them zero).

Device regions as in examples/gpu/persistent_gemm.py (``MARKS="kstep"``: ``load``, ``mma`` per k-step and
``epilogue`` per unit, which here includes the partial's store and, for the last slice, the reduction).
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from argus_lab.device import markers as dm
from examples.gpu.persistent_gemm import _tile_coords


@triton.jit
def split_gemm(
    a_ptr, b_ptr, c_ptr, ws_ptr, locks_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    probe,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, NUM_SMS: tl.constexpr, MARKS: tl.constexpr,
):  # fmt: skip
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    k_per = tl.cdiv(k_tiles, SPLIT_K)
    num_units = num_pid_m * num_pid_n * SPLIT_K
    offs_tm = tl.arange(0, BLOCK_M)
    offs_tn = tl.arange(0, BLOCK_N)
    tile_offs = offs_tm[:, None] * BLOCK_N + offs_tn[None, :]
    c = dm.begin(probe)
    for unit in tl.range(tl.program_id(0), num_units, NUM_SMS, flatten=False):
        tile_id = unit // SPLIT_K
        s = unit % SPLIT_K
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        k_lo = s * k_per
        k_hi = tl.minimum(k_lo + k_per, k_tiles)
        offs_am = (pid_m * BLOCK_M + offs_tm) % M
        offs_bn = (pid_n * BLOCK_N + offs_tn) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_am[:, None] * stride_am + (k_lo * BLOCK_K + offs_k[None, :]) * stride_ak
        b_ptrs = b_ptr + (k_lo * BLOCK_K + offs_k[:, None]) * stride_bk + offs_bn[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_lo, k_hi):
            if MARKS == "kstep":
                c = dm.enter(probe, c, "load")
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - ki * BLOCK_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - ki * BLOCK_K, other=0.0)
            if MARKS == "kstep":
                c = dm.exit(probe, c, "load")
                c = dm.enter(probe, c, "mma")
            acc = tl.dot(a, b, acc)
            if MARKS == "kstep":
                c = dm.exit(probe, c, "mma")
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        c = dm.enter(probe, c, "epilogue")
        tl.store(ws_ptr + tl.cast(unit, tl.int64) * (BLOCK_M * BLOCK_N) + tile_offs, acc)
        tl.debug_barrier()  # every warp's partial is stored before the count that publishes it
        arrived = tl.atomic_add(locks_ptr + tile_id, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_K - 1:  # the last slice of the tile: sum the partials, write the tile
            first = tl.cast(tile_id * SPLIT_K, tl.int64) * (BLOCK_M * BLOCK_N)
            total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for j in range(SPLIT_K):
                total += tl.load(ws_ptr + first + j * (BLOCK_M * BLOCK_N) + tile_offs, cache_modifier=".cg")
            offs_cm = pid_m * BLOCK_M + offs_tm
            offs_cn = pid_n * BLOCK_N + offs_tn
            c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
            mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
            tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=mask)
            tl.atomic_xchg(locks_ptr + tile_id, 0, sem="relaxed", scope="gpu")
        c = dm.exit(probe, c, "epilogue")
    dm.end(probe, c)


def tiles(m: int, n: int, block_m: int, block_n: int) -> int:
    """Output tiles of an ``m x n`` result."""
    return triton.cdiv(m, block_m) * triton.cdiv(n, block_n)


def scratch_shapes(m: int, n: int, block_m: int, block_n: int, split_k: int) -> dict[str, tuple[int, str]]:
    """The scratch tensors one launch needs: name -> (elements, torch dtype name)."""
    t = tiles(m, n, block_m, block_n)
    return {"ws": (t * split_k * block_m * block_n, "float32"), "locks": (t, "int32")}


def launch(
    a: Any, b: Any, *, block_m: int, block_n: int, block_k: int, split_k: int, group_m: int = 8,
    num_warps: int = 4, num_stages: int = 3, num_programs: int = 132, out: Any = None, probe: Any = None,
    scratch: dict[str, Any] | None = None, marks: str = "none",
) -> Any:  # fmt: skip
    """``a @ b`` by the split-K kernel (``scratch``: tensors of :func:`scratch_shapes`, made when not given)."""
    import torch

    m, k = a.shape
    n = b.shape[1]
    c = out if out is not None else torch.empty((m, n), device=a.device, dtype=a.dtype)
    if scratch is None:
        scratch = {name: torch.zeros(size, device=a.device, dtype=getattr(torch, dt))
                   for name, (size, dt) in scratch_shapes(m, n, block_m, block_n, split_k).items()}  # fmt: skip
    units = tiles(m, n, block_m, block_n) * split_k
    split_gemm[(min(num_programs, units),)](
        a, b, c, scratch["ws"], scratch["locks"], m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), probe,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m, SPLIT_K=split_k, NUM_SMS=num_programs,
        MARKS=marks if probe is not None else "none", num_warps=num_warps, num_stages=num_stages,
    )  # fmt: skip
    return c
