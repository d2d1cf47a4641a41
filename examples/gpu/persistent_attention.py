"""A persistent flash-attention forward kernel in Triton, with device regions per KV block.

One launch of ``programs = min(ctas_per_sm x SMs, tiles)`` programs; each loops over output tiles (one head, one
block of ``BLOCK_M`` query rows) with a stride of ``NUM_PROGRAMS`` and, per tile, over the KV blocks of
``BLOCK_N`` keys with the online softmax (running maximum, rescaled sum and accumulator). ``causal`` masks keys
after the query; its loop stops at the diagonal, so tiles of late query blocks do more work.

Phases marked inside the kernel (``argus_lab.device.markers``), with ``MARKS="block"``:

* ``qk``: the load of a K block and ``q @ k^T``;
* ``softmax``: the causal mask, the running maximum, the exponentials, the rescale of the sum and accumulator;
* ``pv``: the load of a V block and ``p @ v``;
* ``epilogue``: the normalisation and store of one output tile.

``MARKS="none"`` (or ``probe=None``) compiles the markers to nothing. Tensor cores run asynchronously: a phase's
time is the time between its markers on the CTA's first warp, so the wait for a ``q @ k^T`` result shows in the
``softmax`` phase that consumes it.

Parameters an optimisation loop varies (:class:`AttentionConfig`): ``block_m``, ``block_n``, ``num_warps``,
``num_stages``, ``heavy_first`` (tile order: all heads' last query blocks first, which under a causal mask are
the longest, so the last wave holds the short ones) and ``ctas_per_sm`` (programs per SM of the persistent grid).

Layout: ``q``, ``k``, ``v`` and the output are contiguous ``(batch, heads, seq, head_dim)``; ``seq`` must be a
multiple of ``block_m`` and ``block_n``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import triton
import triton.language as tl

import argus_lab.device
from argus_lab.device import markers as dm

PHASES = argus_lab.device.regions("qk", "softmax", "pv", "epilogue", module="examples.gpu.persistent_attention")

LOG2E = 1.4426950408889634


@dataclass(frozen=True)
class AttentionConfig:
    """Tuning parameters of the kernel."""

    block_m: int = 128
    block_n: int = 64
    num_warps: int = 8
    num_stages: int = 2
    heavy_first: bool = False
    ctas_per_sm: int = 1


@triton.jit
def _kv_block(
    q, k_base, v_base, start_n, acc, m_i, l_i, offs_m, offs_n, offs_d, n_kv, qk_scale, probe, c,
    HEAD_DIM: tl.constexpr, MASK: tl.constexpr, MARKS: tl.constexpr,
):  # fmt: skip
    """One KV block of the online softmax; ``MASK`` applies the causal mask (and the end of the sequence)."""
    cols = start_n + offs_n
    if MARKS == "block":
        c = dm.enter(probe, c, "qk")
    k_ptrs = k_base + cols[:, None] * HEAD_DIM + offs_d[None, :]
    if MASK:  # noqa: SIM108 (a constexpr branch: only one load is compiled)
        k = tl.load(k_ptrs, mask=cols[:, None] < n_kv, other=0.0)
    else:
        k = tl.load(k_ptrs)
    qk = tl.dot(q, tl.trans(k))
    if MARKS == "block":
        c = dm.exit(probe, c, "qk")
        c = dm.enter(probe, c, "softmax")
    if MASK:
        qk = tl.where(offs_m[:, None] >= cols[None, :], qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    if MARKS == "block":
        c = dm.exit(probe, c, "softmax")
        c = dm.enter(probe, c, "pv")
    v_ptrs = v_base + cols[:, None] * HEAD_DIM + offs_d[None, :]
    if MASK:  # noqa: SIM108
        v = tl.load(v_ptrs, mask=cols[:, None] < n_kv, other=0.0)
    else:
        v = tl.load(v_ptrs)
    acc = tl.dot(p.to(v.dtype), v, acc)
    if MARKS == "block":
        c = dm.exit(probe, c, "pv")
    return acc, m_new, l_i, c


@triton.jit
def persistent_attention(
    q_ptr, k_ptr, v_ptr, o_ptr, probe, qk_scale, heads_total, n_ctx, n_kv,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
    HEAVY_FIRST: tl.constexpr, NUM_PROGRAMS: tl.constexpr, MARKS: tl.constexpr,
):  # fmt: skip
    n_m = tl.cdiv(n_ctx, BLOCK_M)
    num_tiles = heads_total * n_m
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    c = dm.begin(probe)
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_PROGRAMS, flatten=False):
        if HEAVY_FIRST:  # query blocks from the last one down, every head of one block before the next block
            mb = n_m - 1 - tile // heads_total
            zh = tile % heads_total
        else:  # head by head, query blocks in order
            mb = tile % n_m
            zh = tile // n_m
        head = zh.to(tl.int64) * n_ctx * HEAD_DIM
        head_kv = zh.to(tl.int64) * n_kv * HEAD_DIM
        offs_m = mb * BLOCK_M + tl.arange(0, BLOCK_M)
        rows = offs_m[:, None] < n_ctx  # a short query (decode) may fill only part of the block
        q = tl.load(q_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=rows, other=0.0)
        k_base = k_ptr + head_kv
        v_base = v_ptr + head_kv
        m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
        l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
        acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
        if CAUSAL:
            hi = (mb + 1) * BLOCK_M
            lo_diag = (mb * BLOCK_M) // BLOCK_N * BLOCK_N  # blocks before it are below the diagonal for every row
            for start_n in range(0, lo_diag, BLOCK_N):
                acc, m_i, l_i, c = _kv_block(
                    q, k_base, v_base, start_n, acc, m_i, l_i, offs_m, offs_n, offs_d, n_kv, qk_scale, probe, c,
                    HEAD_DIM, False, MARKS,
                )  # fmt: skip
            for start_n in range(lo_diag, hi, BLOCK_N):
                acc, m_i, l_i, c = _kv_block(
                    q, k_base, v_base, start_n, acc, m_i, l_i, offs_m, offs_n, offs_d, n_kv, qk_scale, probe, c,
                    HEAD_DIM, True, MARKS,
                )  # fmt: skip
        else:
            for start_n in range(0, n_kv, BLOCK_N):
                acc, m_i, l_i, c = _kv_block(
                    q, k_base, v_base, start_n, acc, m_i, l_i, offs_m, offs_n, offs_d, n_kv, qk_scale, probe, c,
                    HEAD_DIM, False, MARKS,
                )  # fmt: skip
        if MARKS != "none":
            c = dm.enter(probe, c, "epilogue")
        out = acc / l_i[:, None]
        tl.store(o_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], out.to(o_ptr.dtype.element_ty), mask=rows)
        if MARKS != "none":
            c = dm.exit(probe, c, "epilogue")
    dm.end(probe, c)


ARG_NAMES: tuple[str, ...] = tuple(persistent_attention.arg_names)


def num_tiles(batch: int, heads: int, seq: int, cfg: AttentionConfig) -> int:
    """Output tiles: one per head and block of ``block_m`` query rows."""
    return batch * heads * triton.cdiv(seq, cfg.block_m)


def programs(batch: int, heads: int, seq: int, cfg: AttentionConfig, num_sms: int) -> int:
    """The persistent grid: ``ctas_per_sm`` programs per SM, never more than there are tiles."""
    return min(cfg.ctas_per_sm * num_sms, num_tiles(batch, heads, seq, cfg))


def kv_blocks_per_tile(seq: int, cfg: AttentionConfig, causal: bool) -> int:
    """KV blocks of the longest tile."""
    return triton.cdiv(seq, cfg.block_n)


def flops(batch: int, heads: int, seq: int, head_dim: int, causal: bool) -> float:
    """FLOPs of the forward pass (two matmuls; half of them under a causal mask)."""
    f = 4.0 * batch * heads * seq * seq * head_dim
    return f / 2 if causal else f


def shared_estimate(cfg: AttentionConfig, head_dim: int, elem: int = 2) -> int:
    """Shared memory the pipelined K and V blocks take (bytes, an estimate before compiling)."""
    stages = max(cfg.num_stages, 1)
    return stages * 2 * cfg.block_n * head_dim * elem + cfg.block_m * head_dim * elem


def check_shape(seq: int, cfg: AttentionConfig) -> str | None:
    """Why the config cannot run this sequence length (``None`` when it can)."""
    if seq % cfg.block_m or seq % cfg.block_n:
        return f"seq {seq} is not a multiple of block_m {cfg.block_m} and block_n {cfg.block_n}"
    return None


def check_decode(n_q: int, n_kv: int, cfg: AttentionConfig, causal: bool) -> str | None:
    """Why the config cannot run a query of ``n_q`` rows against ``n_kv`` keys (``None`` when it can).

    With ``n_q == n_kv`` this is :func:`check_shape`; a shorter query (decode) needs no causal mask and
    ``n_kv`` a multiple of ``block_n`` (its query rows past ``n_q`` are masked).
    """
    if n_q == n_kv:
        return check_shape(n_q, cfg)
    if causal:
        return f"a causal mask needs as many queries as keys (got {n_q} queries, {n_kv} keys)"
    if n_kv % cfg.block_n:
        return f"n_kv {n_kv} is not a multiple of block_n {cfg.block_n}"
    return None


def make_inputs(
    batch: int, heads: int, seq: int, head_dim: int, *, dtype: Any = None, seed: int = 0, device: str = "cuda"
) -> tuple[Any, Any, Any]:
    """``q``, ``k``, ``v`` of shape ``(batch, heads, seq, head_dim)``, reproducible from ``seed``."""
    import torch

    dt = dtype or torch.bfloat16
    g = torch.Generator(device=device).manual_seed(seed)
    shape = (batch, heads, seq, head_dim)
    q, k, v = (torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dt) for _ in range(3))
    return q, k, v


def reference(q: Any, k: Any, v: Any, causal: bool) -> Any:
    """The same attention by PyTorch's scaled_dot_product_attention."""
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def launch(
    q: Any,
    k: Any,
    v: Any,
    cfg: AttentionConfig,
    *,
    causal: bool,
    probe: Any = None,
    num_sms: int,
    out: Any = None,
    marks: str = "block",
) -> Any:
    """Attention by the persistent kernel through Triton's JIT (``probe=None``: the clean variant).

    ``k`` and ``v`` may be longer than ``q`` (a short query against a long KV cache, without a causal mask).
    """
    import torch

    batch, heads, seq, head_dim = q.shape
    n_kv = k.shape[2]
    problem = check_decode(seq, n_kv, cfg, causal)
    if problem:
        raise ValueError(problem)
    o = out if out is not None else torch.empty_like(q)
    grid = (programs(batch, heads, seq, cfg, num_sms),)
    persistent_attention[grid](
        q, k, v, o, probe, LOG2E / math.sqrt(head_dim), batch * heads, seq, n_kv,
        HEAD_DIM=head_dim, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, CAUSAL=causal, HEAVY_FIRST=cfg.heavy_first,
        NUM_PROGRAMS=cfg.ctas_per_sm * num_sms, MARKS=marks if probe is not None else "none",
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return o
