"""A persistent split-KV flash-attention forward kernel (no causal mask): each output tile's KV range is cut into
``SPLIT_KV`` slices that are separate work units, for decode-shaped calls (a short query against a long KV cache)
whose few output tiles cannot fill the SMs or leave a ragged last wave.

Each unit runs the online softmax of examples/gpu/persistent_attention.py over its slice and stores its unnormalised
accumulator, running maximum and sum (fp32) in a workspace; then it counts itself on the tile's counter (a CTA
barrier, then an atomic, release/acquire at GPU scope).  The unit that arrives last combines the ``SPLIT_KV``
partials (the log-sum-exp merge: every partial rescaled by ``2^(m_s - m)``), writes the output tile and resets the
counter to zero for the next launch.  The slices of one tile are adjacent unit numbers.

Scratch (:func:`scratch_shapes`): ``ws_o`` (fp32, ``units x BLOCK_M x HEAD_DIM``), ``ws_ml`` (fp32,
``units x 2 x BLOCK_M``) and ``locks`` (int32, one per tile, zero before the first launch; left zero).

Device regions as in the persistent kernel (``MARKS="block"``: ``qk``, ``softmax``, ``pv`` per KV block and
``epilogue`` per unit, which includes the partial's store and, for the last slice, the combine).
Layout: contiguous ``(batch, heads, seq, head_dim)``; ``n_kv`` a multiple of ``BLOCK_N``.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from argus_lab.device import markers as dm
from examples.gpu.persistent_attention import _kv_block


@triton.jit
def split_attention(
    q_ptr, k_ptr, v_ptr, o_ptr, ws_o_ptr, ws_ml_ptr, locks_ptr, probe, qk_scale, heads_total, n_ctx, n_kv,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_KV: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr, MARKS: tl.constexpr,
):  # fmt: skip
    n_m = tl.cdiv(n_ctx, BLOCK_M)
    num_units = heads_total * n_m * SPLIT_KV
    kv_blocks = tl.cdiv(n_kv, BLOCK_N)
    per_split = tl.cdiv(kv_blocks, SPLIT_KV)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    offs_r = tl.arange(0, BLOCK_M)
    o_tile = offs_r[:, None] * HEAD_DIM + offs_d[None, :]
    c = dm.begin(probe)
    for unit in tl.range(tl.program_id(0), num_units, NUM_PROGRAMS, flatten=False):
        tile = unit // SPLIT_KV
        s = unit % SPLIT_KV
        mb = tile % n_m
        zh = tile // n_m
        head = zh.to(tl.int64) * n_ctx * HEAD_DIM
        head_kv = zh.to(tl.int64) * n_kv * HEAD_DIM
        offs_m = mb * BLOCK_M + offs_r
        rows = offs_m[:, None] < n_ctx
        q = tl.load(q_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=rows, other=0.0)
        k_base = k_ptr + head_kv
        v_base = v_ptr + head_kv
        m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
        l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
        acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
        lo = s * per_split * BLOCK_N
        hi = tl.minimum(lo + per_split * BLOCK_N, n_kv)
        for start_n in range(lo, hi, BLOCK_N):
            acc, m_i, l_i, c = _kv_block(
                q, k_base, v_base, start_n, acc, m_i, l_i, offs_m, offs_n, offs_d, n_kv, qk_scale, probe, c,
                HEAD_DIM, False, MARKS,
            )  # fmt: skip
        if MARKS != "none":
            c = dm.enter(probe, c, "epilogue")
        u64 = tl.cast(unit, tl.int64)
        tl.store(ws_o_ptr + u64 * (BLOCK_M * HEAD_DIM) + o_tile, acc)
        tl.store(ws_ml_ptr + u64 * (2 * BLOCK_M) + offs_r, m_i)
        tl.store(ws_ml_ptr + u64 * (2 * BLOCK_M) + BLOCK_M + offs_r, l_i)
        tl.debug_barrier()  # every warp's partial is stored before the count that publishes it
        arrived = tl.atomic_add(locks_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_KV - 1:  # the last slice of the tile: merge the partials, write the tile
            first = tl.cast(tile * SPLIT_KV, tl.int64)
            m_all = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
            for j in range(SPLIT_KV):
                m_all = tl.maximum(
                    m_all, tl.load(ws_ml_ptr + (first + j) * (2 * BLOCK_M) + offs_r, cache_modifier=".cg")
                )
            l_all = tl.zeros((BLOCK_M,), dtype=tl.float32)
            o_all = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
            for j in range(SPLIT_KV):
                base = (first + j) * (2 * BLOCK_M)
                m_j = tl.load(ws_ml_ptr + base + offs_r, cache_modifier=".cg")
                l_j = tl.load(ws_ml_ptr + base + BLOCK_M + offs_r, cache_modifier=".cg")
                w = tl.math.exp2(m_j - m_all)  # a slice with no keys has m_j = -inf: weight 0
                l_all += l_j * w
                o_j = tl.load(ws_o_ptr + (first + j) * (BLOCK_M * HEAD_DIM) + o_tile, cache_modifier=".cg")
                o_all += o_j * w[:, None]
            out = o_all / l_all[:, None]
            o_ptrs = o_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
            tl.store(o_ptrs, out.to(o_ptr.dtype.element_ty), mask=rows)
            tl.atomic_xchg(locks_ptr + tile, 0, sem="relaxed", scope="gpu")
        if MARKS != "none":
            c = dm.exit(probe, c, "epilogue")
    dm.end(probe, c)


def tiles(heads_total: int, n_ctx: int, block_m: int) -> int:
    """Output tiles: one per head and block of ``block_m`` query rows."""
    return heads_total * triton.cdiv(n_ctx, block_m)


def scratch_shapes(
    heads_total: int, n_ctx: int, head_dim: int, block_m: int, split_kv: int
) -> dict[str, tuple[int, str]]:
    """The scratch tensors one launch needs: name -> (elements, torch dtype name)."""
    t = tiles(heads_total, n_ctx, block_m)
    units = t * split_kv
    return {
        "ws_o": (units * block_m * head_dim, "float32"),
        "ws_ml": (units * 2 * block_m, "float32"),
        "locks": (t, "int32"),
    }


def launch(
    q: Any, k: Any, v: Any, *, block_m: int, block_n: int, split_kv: int, num_warps: int = 4, num_stages: int = 2,
    num_programs: int = 132, out: Any = None, scratch: dict[str, Any] | None = None,
) -> Any:  # fmt: skip
    """Full (non-causal) attention of ``q`` against ``k, v`` by the split-KV kernel."""
    import math

    import torch

    from examples.gpu.persistent_attention import LOG2E

    batch, heads, n_ctx, d = q.shape
    n_kv = k.shape[2]
    if n_kv % block_n:
        msg = f"n_kv {n_kv} is not a multiple of block_n {block_n}: pad the KV cache or pick a block that divides it"
        raise ValueError(msg)
    o = out if out is not None else torch.empty_like(q)
    if scratch is None:
        shapes = scratch_shapes(batch * heads, n_ctx, d, block_m, split_kv)
        scratch = {
            name: torch.zeros(size, device=q.device, dtype=getattr(torch, dt)) for name, (size, dt) in shapes.items()
        }
    units = tiles(batch * heads, n_ctx, block_m) * split_kv
    split_attention[(min(num_programs, units),)](
        q, k, v, o, scratch["ws_o"], scratch["ws_ml"], scratch["locks"], None, LOG2E / math.sqrt(d), batch * heads,
        n_ctx, n_kv, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, SPLIT_KV=split_kv, NUM_PROGRAMS=num_programs,
        MARKS="none", num_warps=num_warps, num_stages=num_stages,
    )  # fmt: skip
    return o
