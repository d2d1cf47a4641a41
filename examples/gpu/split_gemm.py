"""A persistent split-K Triton GEMM: each output tile's K range is cut into ``SPLIT_K`` slices, and the slices are
separate work units of the persistent loop, so a GEMM with fewer output tiles than SMs (skinny, small M x N, long
K) still keeps every SM busy.

``TAIL`` (data-parallel + split tail, a Stream-K hybrid): only the tiles of the last, partial wave are split.  The
``(tiles // NUM_SMS) * NUM_SMS`` tiles of the full waves are whole units (the entire K range, stored straight to
C); the remaining tiles follow as ``SPLIT_K`` slices each, so the last wave's work is spread over more SMs instead
of leaving most of them idle (576 tiles on 132 SMs are 4.36 waves: the fifth wave runs 48 tiles; split in two
they end after 4.5 tile times instead of 5).  When the tiles are a multiple of ``NUM_SMS`` nothing is split; when
they are fewer than ``NUM_SMS`` every tile is split, as without ``TAIL``.

The reduction is in the same launch: each unit stores its fp32 partial tile in a workspace, then counts itself on
the tile's counter (an atomic, release/acquire at GPU scope, after a CTA barrier so every warp's stores are
ordered before it); the unit that arrives last sums the ``SPLIT_K`` partials (loads that bypass L1), writes the
output tile, and resets the counter to zero for the next launch.  The slices of one tile are adjacent unit
numbers, so they run at the same time on neighbouring programs and the last one waits for nobody.

Scratch (:func:`scratch_shapes`): ``ws`` (fp32, ``split tiles x SPLIT_K x BLOCK_M x BLOCK_N``) and ``locks``
(int32, one per split tile, zero before the first launch; the kernel leaves them zero).

Device regions as in examples/gpu/persistent_gemm.py (``MARKS="kstep"``: ``load``, ``mma`` per k-step and
``epilogue`` per unit, which here includes the partial's store and, for the last slice, the reduction).
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from argus_lab.device import markers as dm
from examples.gpu.persistent_gemm import _tile_coords, k_steps


@triton.jit
def _store_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write one output tile (fp32 ``acc``) in C's type, masked at the matrix's edges."""
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _reduce_slices(
    c_ptr, ws_ptr, locks_ptr, acc, part, slot_tile, pid_m, pid_n, M, N, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr,
):  # fmt: skip
    """Store one slice's fp32 partial in workspace slot ``part`` and count it on counter ``slot_tile``; the slice
    that arrives last sums the tile's ``SPLIT_K`` partials (slots ``slot_tile * SPLIT_K ..``), writes the tile and
    resets the counter to zero."""
    tile_offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tl.store(ws_ptr + tl.cast(part, tl.int64) * (BLOCK_M * BLOCK_N) + tile_offs, acc)
    tl.debug_barrier()  # every warp's partial is stored before the count that publishes it
    arrived = tl.atomic_add(locks_ptr + slot_tile, 1, sem="acq_rel", scope="gpu")
    if arrived == SPLIT_K - 1:  # the last slice of the tile: sum the partials, write the tile
        first = tl.cast(slot_tile * SPLIT_K, tl.int64) * (BLOCK_M * BLOCK_N)
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for j in range(SPLIT_K):
            total += tl.load(ws_ptr + first + j * (BLOCK_M * BLOCK_N) + tile_offs, cache_modifier=".cg")
        _store_tile(c_ptr, total, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N)
        tl.atomic_xchg(locks_ptr + slot_tile, 0, sem="relaxed", scope="gpu")


@triton.jit
def split_gemm(
    a_ptr, b_ptr, c_ptr, ws_ptr, locks_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    probe,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, NUM_SMS: tl.constexpr, MARKS: tl.constexpr, TAIL: tl.constexpr = False,
):  # fmt: skip
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    k_per = tl.cdiv(k_tiles, SPLIT_K)
    if TAIL:  # the full waves' tiles are whole units (0 .. whole - 1); only the last wave's tiles are split
        whole = (num_pid_m * num_pid_n // NUM_SMS) * NUM_SMS
        num_units = whole + (num_pid_m * num_pid_n - whole) * SPLIT_K
    else:
        whole = 0
        num_units = num_pid_m * num_pid_n * SPLIT_K
    offs_tm = tl.arange(0, BLOCK_M)
    offs_tn = tl.arange(0, BLOCK_N)
    c = dm.begin(probe)
    for unit in tl.range(tl.program_id(0), num_units, NUM_SMS, flatten=False):
        # ``part``: the unit's number among the split units (its workspace slot), ``slot_tile``: its tile's number
        # among the split tiles (its counter)
        if TAIL:  # noqa: SIM108 (a constexpr branch: the split-K kernel keeps its code as it was)
            part = tl.maximum(unit - whole, 0)
        else:
            part = unit
        slot_tile = part // SPLIT_K
        tile_id = whole + slot_tile
        s = part % SPLIT_K
        k_lo = s * k_per
        k_hi = tl.minimum(k_lo + k_per, k_tiles)
        if TAIL:  # noqa: SIM102 (a constexpr branch around a runtime one)
            if unit < whole:  # a whole tile of a full wave: the entire K range
                tile_id = unit
                k_lo = 0
                k_hi = k_tiles
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_am = (pid_m * BLOCK_M + offs_tm) % M
        offs_bn = (pid_n * BLOCK_N + offs_tn) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_am[:, None] * stride_am + (k_lo * BLOCK_K + offs_k[None, :]) * stride_ak
        b_ptrs = b_ptr + (k_lo * BLOCK_K + offs_k[:, None]) * stride_bk + offs_bn[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc, c = k_steps(a_ptrs, b_ptrs, offs_k, k_lo, k_hi, K, stride_ak, stride_bk, acc, probe, c, BLOCK_K, MARKS)
        c = dm.enter(probe, c, "epilogue")
        if TAIL:
            if unit < whole:
                _store_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N)
            else:
                _reduce_slices(c_ptr, ws_ptr, locks_ptr, acc, part, slot_tile, pid_m, pid_n, M, N, stride_cm,
                               stride_cn, BLOCK_M, BLOCK_N, SPLIT_K)  # fmt: skip
        else:
            _reduce_slices(c_ptr, ws_ptr, locks_ptr, acc, part, slot_tile, pid_m, pid_n, M, N, stride_cm, stride_cn,
                           BLOCK_M, BLOCK_N, SPLIT_K)  # fmt: skip
        c = dm.exit(probe, c, "epilogue")
    dm.end(probe, c)


def tiles(m: int, n: int, block_m: int, block_n: int) -> int:
    """Output tiles of an ``m x n`` result."""
    return triton.cdiv(m, block_m) * triton.cdiv(n, block_n)


def tail_tiles(t: int, num_programs: int) -> int:
    """Tiles of the last, partial wave when ``t`` tiles run on ``num_programs`` programs (0: the waves are full)."""
    return t % num_programs


def units(t: int, split_k: int, num_programs: int, tail: bool = False) -> int:
    """Work units of the persistent loop: every tile's ``split_k`` slices, or with ``tail`` the full waves' tiles
    whole and only the last wave's tiles in slices."""
    if not tail:
        return t * split_k
    return t - tail_tiles(t, num_programs) + tail_tiles(t, num_programs) * split_k


def scratch_shapes(
    m: int, n: int, block_m: int, block_n: int, split_k: int, *, tail: bool = False, num_programs: int = 132
) -> dict[str, tuple[int, str]]:
    """The scratch tensors one launch needs: name -> (elements, torch dtype name).  With ``tail`` only the last
    wave's tiles have partials and counters."""
    t = tiles(m, n, block_m, block_n)
    split_tiles = tail_tiles(t, num_programs) if tail else t
    return {
        "ws": (max(split_tiles, 1) * split_k * block_m * block_n, "float32"),
        "locks": (max(split_tiles, 1), "int32"),
    }


def launch(
    a: Any, b: Any, *, block_m: int, block_n: int, block_k: int, split_k: int, group_m: int = 8,
    num_warps: int = 4, num_stages: int = 3, num_programs: int = 132, out: Any = None, probe: Any = None,
    scratch: dict[str, Any] | None = None, marks: str = "none", tail: bool = False,
) -> Any:  # fmt: skip
    """``a @ b`` by the split-K kernel (``scratch``: tensors of :func:`scratch_shapes`, made when not given; with
    ``tail`` only the tiles of the last, partial wave are split).  ``b`` is ``k x n`` with any strides (fp8's
    K-major B is ``bt.T`` of a contiguous ``n x k``)."""
    import torch

    m, k = a.shape
    n = b.shape[1]
    c = out if out is not None else torch.empty((m, n), device=a.device, dtype=a.dtype)
    if scratch is None:
        shapes = scratch_shapes(m, n, block_m, block_n, split_k, tail=tail, num_programs=num_programs)
        scratch = {name: torch.zeros(size, device=a.device, dtype=getattr(torch, dt)) for name, (size, dt) in
                   shapes.items()}  # fmt: skip
    work = units(tiles(m, n, block_m, block_n), split_k, num_programs, tail)
    split_gemm[(min(num_programs, work),)](
        a, b, c, scratch["ws"], scratch["locks"], m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), probe,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m, SPLIT_K=split_k, NUM_SMS=num_programs,
        MARKS=marks if probe is not None else "none", TAIL=tail, num_warps=num_warps, num_stages=num_stages,
    )  # fmt: skip
    return c
