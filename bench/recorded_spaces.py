"""The fixed candidate spaces of the recorded optimisation table, and Triton's tutorial autotune lists translated
to the persistent kernels' parameters.

A candidate of the GEMM (examples/gpu/persistent_gemm.py; with ``split_k`` > 1 examples/gpu/split_gemm.py, with
``tail_split`` > 1 the same kernel splitting only the last wave's tiles, with ``tma`` examples/gpu/tma_gemm.py) is
``block_m, block_n, block_k, group_m, num_warps, num_stages, ctas_per_sm, split_k, tma, tail_split, warp_spec``
(``warp_spec``: the TMA kernel warp-specialised); one of the
attention kernel
(examples/gpu/persistent_attention.py; with ``split_kv`` > 1 examples/gpu/split_attention.py) is ``block_m,
block_n, num_warps, num_stages, heavy_first, ctas_per_sm, split_kv``.  The spaces are explicit lists (the same for
every configuration of a kernel family, so a family compiles each candidate once): the tutorial list, which is
what ``triton.autotune`` is given for baseline (a), plus the launch settings and tile shapes the tutorials leave
out (the kernels' shipped defaults, two CTAs per SM, the tile order of a causal mask, group sizes) and the
kernels' split-K / split-KV and TMA variants, so that a search can find more than the autotuner does.

Recordings made before these variants existed have candidates without ``split_k`` / ``split_kv`` / ``tma`` /
``tail_split`` / ``warp_spec``;
bench/replay_table.py reads them with the keys they have.

Tutorial lists (Triton's tutorials, as published for Triton 3.x):

* 03-matrix-multiplication, ``get_cuda_autotune_config`` (fp16/bf16) and its fp8 list;
* 09-persistent-matmul, ``matmul_get_configs``: ``BLOCK_M`` 128, ``BLOCK_N`` 128/256, ``BLOCK_K`` 64/128,
  stages 3/4, warps 4/8, ``GROUP_M`` 8;
* 06-fused-attention: ``BLOCK_M`` 64/128, ``BLOCK_N`` 32/64, stages 3/4/7, warps 4/8, kept by its ``keep``
  filter (no 8-warp config whose ``BLOCK_M x BLOCK_N`` is below 128 x 128: every 8-warp one here).

Every tutorial config runs with one program per SM (``ctas_per_sm`` 1) and, for attention, query blocks in order
(``heavy_first`` false), as the tutorials' kernels do.
"""

from __future__ import annotations

from typing import Any

from bench.recorded_configs import Config

GEMM_KEYS = (
    "block_m", "block_n", "block_k", "group_m", "num_warps", "num_stages", "ctas_per_sm", "split_k", "tma",
    "tail_split", "warp_spec",
)  # fmt: skip
ATTN_KEYS = ("block_m", "block_n", "num_warps", "num_stages", "heavy_first", "ctas_per_sm", "split_kv")


def _gemm(
    bm: int,
    bn: int,
    bk: int,
    s: int,
    w: int,
    g: int = 8,
    c: int = 1,
    sk: int = 1,
    tma: bool = False,
    ts: int = 1,
    ws: bool = False,
) -> dict[str, Any]:
    return {"block_m": bm, "block_n": bn, "block_k": bk, "group_m": g, "num_warps": w, "num_stages": s,
            "ctas_per_sm": c, "split_k": sk, "tma": tma, "tail_split": ts, "warp_spec": ws}  # fmt: skip


def _attn(bm: int, bn: int, s: int, w: int, hf: bool = False, c: int = 1, skv: int = 1) -> dict[str, Any]:
    return {"block_m": bm, "block_n": bn, "num_warps": w, "num_stages": s, "heavy_first": hf, "ctas_per_sm": c,
            "split_kv": skv}  # fmt: skip


# fmt: off
TUTORIAL_MATMUL = [
    _gemm(128, 256, 64, 3, 8), _gemm(64, 256, 32, 4, 4), _gemm(128, 128, 32, 4, 4), _gemm(128, 64, 32, 4, 4),
    _gemm(64, 128, 32, 4, 4), _gemm(128, 32, 32, 4, 4), _gemm(64, 32, 32, 5, 2), _gemm(32, 64, 32, 5, 2),
]
"""03-matrix-multiplication, ``get_cuda_autotune_config`` (fp16/bf16)."""
TUTORIAL_MATMUL_FP8 = [
    _gemm(128, 256, 128, 3, 8), _gemm(256, 128, 128, 3, 8), _gemm(256, 64, 128, 4, 4), _gemm(64, 256, 128, 4, 4),
    _gemm(128, 128, 128, 4, 4), _gemm(128, 64, 64, 4, 4), _gemm(64, 128, 64, 4, 4), _gemm(128, 32, 64, 4, 4),
]
"""03-matrix-multiplication, the fp8 list."""
TUTORIAL_PERSISTENT = [
    _gemm(128, bn, bk, s, w) for bn in (128, 256) for bk in (64, 128) for s in (3, 4) for w in (4, 8)
]
"""09-persistent-matmul, ``matmul_get_configs``."""
GEMM_EXTRA = [
    _gemm(128, 128, 64, 3, 8), _gemm(128, 128, 64, 4, 8, g=1), _gemm(128, 128, 64, 4, 8, g=16),
    _gemm(128, 128, 64, 3, 8, c=2), _gemm(64, 128, 64, 3, 4, c=2), _gemm(128, 64, 64, 3, 4, c=2),
    _gemm(256, 128, 64, 3, 8), _gemm(64, 256, 64, 3, 8), _gemm(64, 64, 64, 4, 4), _gemm(64, 64, 128, 4, 4),
    _gemm(256, 64, 64, 4, 8), _gemm(128, 64, 64, 5, 4),
]
"""Beyond the tutorials: the kernel's shipped default (128x128x64, 3 stages, 8 warps), other group sizes, two CTAs
per SM for tiles small enough to share an SM, 256-row tiles and small square tiles."""
GEMM_SPLIT = [
    _gemm(128, 128, 64, 3, 8, sk=2), _gemm(128, 128, 64, 3, 8, sk=4), _gemm(128, 128, 64, 3, 8, sk=8),
    _gemm(128, 256, 64, 3, 8, sk=2), _gemm(128, 256, 64, 3, 8, sk=4), _gemm(128, 128, 128, 3, 8, sk=4),
    _gemm(64, 128, 64, 4, 4, sk=2), _gemm(64, 128, 64, 4, 4, sk=4), _gemm(128, 64, 64, 4, 4, sk=2),
    _gemm(64, 64, 64, 4, 4, sk=4),
]
"""Split-K (examples/gpu/split_gemm.py, reduced in the same launch): the K range of each output tile cut into 2-8
slices that are separate work units, for GEMMs whose output tiles cannot fill 132 SMs (skinny M or N, small
``M x N`` with a long K).  No tutorial list has it: ``triton.autotune`` over those lists cannot find it."""
GEMM_TMA = [
    _gemm(128, 256, 64, 3, 8, tma=True), _gemm(128, 256, 64, 4, 8, tma=True), _gemm(128, 128, 64, 4, 8, tma=True),
    _gemm(256, 128, 64, 3, 8, tma=True), _gemm(128, 256, 128, 3, 8, tma=True), _gemm(128, 128, 128, 4, 8, tma=True),
]
"""The TMA kernel (examples/gpu/tma_gemm.py: device-side tensor descriptors, the tile loop flattened with the
k-loop into one software pipeline, the epilogue stored in two halves) at the tile shapes the persistent tutorial
favours for large GEMMs; the tutorial lists' pointer-based kernel cannot use the TMA.  (128 x 256 x 128 needs
more shared memory than a CTA has in bf16/fp16: it is there for fp8, and recorded as a compile failure
elsewhere.)"""
GEMM_TAIL = [
    _gemm(128, 128, 64, 3, 8, ts=2), _gemm(128, 128, 64, 3, 8, ts=3), _gemm(128, 128, 64, 3, 8, ts=4),
    _gemm(128, 128, 64, 4, 8, ts=2), _gemm(128, 256, 64, 3, 8, ts=2), _gemm(128, 256, 64, 3, 8, ts=4),
    _gemm(128, 128, 128, 3, 8, ts=2),
]
"""Data-parallel + split tail (examples/gpu/split_gemm.py with ``TAIL``, a Stream-K hybrid): the full waves'
tiles run whole and only the tiles of the last, partial wave are cut into 2-4 K slices, so the last wave fills
the SMs.  For GEMMs whose tiles are more than one wave but not a whole number of them (3072 x 3072 in 128 x 128
tiles is 576 tiles, 4.36 waves of 132: 4.5 tile times split in two instead of 5; 256 x 14336 is 224 tiles, 1.70
waves: 1.75 split in four instead of 2).  128 x 128 x 128 is there for fp8.  No tutorial list has it."""

GEMM_WS = [
    _gemm(128, 256, 64, 3, 4, tma=True, ws=True), _gemm(128, 256, 64, 2, 4, tma=True, ws=True),
    _gemm(128, 128, 64, 4, 4, tma=True, ws=True), _gemm(128, 128, 64, 3, 4, tma=True, ws=True),
    _gemm(256, 128, 64, 3, 4, tma=True, ws=True), _gemm(128, 256, 128, 3, 4, tma=True, ws=True),
    _gemm(128, 128, 128, 4, 4, tma=True, ws=True), _gemm(128, 128, 128, 3, 4, tma=True, ws=True),
]
"""The TMA kernel warp-specialised (examples/gpu/tma_gemm.py ``WARP_SPEC``: one producer warp group loading, two
consumer warp groups multiplying, 4 warps a group, so ``num_warps`` is 4), at the TMA list's tile shapes with the
stages that fit 228 KB of shared memory (128 x 256 x 64 in 3 stages takes 213 KB; 128-deep k-steps are there for
fp8 and fail to fit or compile in bf16/fp16 at 128 x 256).  No tutorial list has it: the tutorials' Hopper
warp-specialised matmul is not in the lists ``triton.autotune`` is given here."""

GEMM_GROUP = [
    _gemm(128, 256, 64, 4, 8, g=1), _gemm(128, 256, 64, 4, 8, g=4), _gemm(128, 256, 64, 4, 8, g=16),
    _gemm(128, 256, 64, 3, 8, g=1), _gemm(128, 256, 64, 3, 8, g=16), _gemm(128, 256, 64, 3, 8, g=16, tma=True),
    _gemm(128, 128, 128, 4, 8, g=1), _gemm(128, 128, 128, 4, 8, g=16), _gemm(256, 128, 128, 3, 8, sk=2),
    _gemm(128, 256, 128, 3, 8, sk=2),
]
"""A side study, not in the table's space (``record_candidates.py --study group``): other group sizes (tile orders
for L2 reuse) at the tiles the autotuner picks for the GEMMs no candidate improved (128 x 256 x 64 in bf16/fp16,
128 x 128 x 128 in fp8), and split-K of fp8 tiles that span all of a skinny M (256 x 128 x 128, 128 x 256 x 128)."""
STUDIES = {"group": GEMM_GROUP}
"""Side studies by name: points measured on top of the space by ``record_candidates.py --study NAME``."""

_TUTORIAL_ATTN_ALL = [_attn(bm, bn, s, w) for bm in (64, 128) for bn in (32, 64) for s in (3, 4, 7) for w in (4, 8)]
TUTORIAL_ATTENTION = [p for p in _TUTORIAL_ATTN_ALL
                      if not (p["block_m"] * p["block_n"] < 128 * 128 and p["num_warps"] == 8)]
"""06-fused-attention's list after its ``keep`` filter (12 configs, all 4 warps)."""
ATTN_EXTRA = [
    _attn(128, 64, 2, 8), _attn(128, 64, 3, 8), _attn(128, 128, 2, 8), _attn(128, 128, 3, 8), _attn(128, 32, 3, 8),
    _attn(64, 64, 2, 4), _attn(128, 64, 2, 4), _attn(64, 128, 3, 4),
    _attn(128, 64, 2, 8, c=2), _attn(128, 64, 3, 4, c=2), _attn(64, 64, 3, 4, c=2), _attn(128, 128, 2, 8, c=2),
    _attn(64, 32, 3, 4, c=2),
]
"""Beyond the tutorial: the kernel's shipped default (128x64, 2 stages, 8 warps), 8 warps, 128-key blocks, two
CTAs per SM."""
ATTN_CAUSAL_EXTRA = [
    _attn(128, 64, 2, 8, hf=True), _attn(128, 128, 2, 8, hf=True), _attn(128, 64, 2, 8, hf=True, c=2),
    _attn(128, 64, 3, 4, hf=True), _attn(64, 64, 3, 4, hf=True),
]
"""Causal only: the longest query blocks first (``heavy_first``), so the last wave holds the short tiles."""
ATTN_SPLIT = [
    _attn(64, 64, 3, 4, skv=2), _attn(64, 64, 3, 4, skv=4), _attn(64, 64, 3, 4, skv=8), _attn(64, 128, 3, 4, skv=4),
    _attn(128, 64, 2, 8, skv=2), _attn(128, 64, 2, 8, skv=4), _attn(64, 64, 3, 4, c=2, skv=4),
    _attn(64, 64, 4, 4, skv=2), _attn(64, 64, 4, 4, skv=4), _attn(64, 32, 7, 4, skv=2),
]
"""Full attention only: split-KV (examples/gpu/split_attention.py, combined in the same launch): the KV range of
each output tile cut into 2-8 slices that are separate work units, for decode-shaped calls (a short query against
a long KV cache: few output tiles, each a long walk over the keys), also at the autotuner's deeper pipelines
(64 x 64 in 4 stages, 64 x 32 in 7).  No tutorial list has it."""
# fmt: on

GEMM_DEFAULT = _gemm(128, 128, 64, 3, 8)
"""``GemmConfig()`` of examples/gpu/persistent_gemm.py: where every search starts."""
ATTN_DEFAULT = _attn(128, 64, 2, 8)
"""``AttentionConfig()`` of examples/gpu/persistent_attention.py: where every search starts."""


def _unique(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for p in points:
        k = key_of(p)
        if k not in seen:
            seen.add(k)
            out.append(p)
    return out


def key_of(params: dict[str, Any]) -> str:
    """The candidate's key, as ``argus_lab.optimize.Candidate.key`` writes it (parameters sorted by name)."""
    parts = []
    for k in sorted(params):
        v = params[k]
        parts.append(f"{k}={'true' if v is True else 'false' if v is False else v}")
    return ",".join(parts)


def autotune_list(cfg: Config) -> list[dict[str, Any]]:
    """What ``triton.autotune`` is given for baseline (a): the tutorials' lists for this kernel and type."""
    if cfg.kind == "gemm":
        first = TUTORIAL_MATMUL_FP8 if cfg.dtype == "fp8" else TUTORIAL_MATMUL
        return _unique(first + TUTORIAL_PERSISTENT)
    return list(TUTORIAL_ATTENTION)


def space(cfg: Config, study: str = "") -> list[dict[str, Any]]:
    """Every candidate measured for ``cfg``: the autotune list first, then the extra points (and a side study's GEMM
    points, :data:`STUDIES`, when ``study`` names one)."""
    if cfg.kind == "gemm":
        study_points = STUDIES[study] if study else []
        return _unique(autotune_list(cfg) + GEMM_EXTRA + GEMM_SPLIT + GEMM_TMA + GEMM_TAIL + GEMM_WS + study_points)
    extra = ATTN_EXTRA + (ATTN_CAUSAL_EXTRA if cfg.causal else ATTN_SPLIT)
    return _unique(autotune_list(cfg) + extra)


def default(cfg: Config) -> dict[str, Any]:
    """Where every search of ``cfg`` starts: the kernel's shipped configuration."""
    return dict(GEMM_DEFAULT if cfg.kind == "gemm" else ATTN_DEFAULT)


def axes(cfg: Config) -> dict[str, tuple[Any, ...]]:
    """The values each parameter takes over the space, sorted (the order the searches step along)."""
    pts = space(cfg)
    keys = GEMM_KEYS if cfg.kind == "gemm" else ATTN_KEYS
    return {k: tuple(sorted({p[k] for p in pts})) for k in keys}


__all__ = [
    "ATTN_DEFAULT",
    "ATTN_KEYS",
    "ATTN_SPLIT",
    "GEMM_DEFAULT",
    "GEMM_GROUP",
    "GEMM_KEYS",
    "GEMM_SPLIT",
    "GEMM_TAIL",
    "GEMM_TMA",
    "GEMM_WS",
    "STUDIES",
    "TUTORIAL_ATTENTION",
    "TUTORIAL_MATMUL",
    "TUTORIAL_MATMUL_FP8",
    "TUTORIAL_PERSISTENT",
    "autotune_list",
    "axes",
    "default",
    "key_of",
    "space",
]
