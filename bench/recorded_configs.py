"""The configurations of the recorded optimisation table, chosen before any search ran, each with why; the H200's
peaks (the one place they are written for this benchmark).

Every configuration is one kernel on one shape and type.  ``CONFIGS`` is numbered from 1 in this order everywhere
(``--only`` of bench/record_candidates.py, the tables of bench/replay_report.py).  The list covers what the seed's
44 configurations cover and what a user of these kernels runs: persistent GEMM (square, skinny, tall, short and long
K; bf16, fp16 and fp8 e4m3) and persistent flash attention (bf16 and fp16, causal and full, head dims 64 and 128,
long sequences, many short ones, and decode-shaped calls: a short query against a long KV cache).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.optimize_configs import parse_only

PEAKS: dict[str, float] = {
    "bf16": 989.4e12,
    "fp16": 989.4e12,
    "fp8": 1978.9e12,
    "hbm_bytes_per_s": 4.8e12,
}
"""NVIDIA H200 SXM: dense tensor-core FLOP/s by input type (no sparsity) and HBM3e bandwidth (datasheet)."""
SMS = 132
"""Streaming multiprocessors of the H200."""
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True)
class Config:
    """One configuration: ``kind`` (``gemm`` or ``attn``), its shape and type, and why it is in the table."""

    kind: str
    dtype: str
    why: str
    m: int = 0
    n: int = 0
    k: int = 0
    batch: int = 0
    heads: int = 0
    seq_q: int = 0
    seq_kv: int = 0
    head_dim: int = 0
    causal: bool = False

    @property
    def label(self) -> str:
        """The configuration in words (unique in :data:`CONFIGS`)."""
        if self.kind == "gemm":
            return f"gemm {self.dtype} {self.m}x{self.n}x{self.k}"
        shape = f"n{self.seq_q}" if self.seq_q == self.seq_kv else f"q{self.seq_q} kv{self.seq_kv}"
        mask = "causal" if self.causal else "full"
        return f"attn {self.dtype} b{self.batch} h{self.heads} {shape} d{self.head_dim} {mask}"

    @property
    def family(self) -> str:
        """Configurations of one family share compiled kernels (the shape is a run-time argument)."""
        if self.kind == "gemm":
            return f"gemm-{self.dtype}"
        return f"attn-{self.dtype}-d{self.head_dim}-{'causal' if self.causal else 'full'}"

    @property
    def flops(self) -> float:
        """FLOPs of one call (attention: two matmuls; half of the square under a causal mask)."""
        if self.kind == "gemm":
            return 2.0 * self.m * self.n * self.k
        f = 4.0 * self.batch * self.heads * self.seq_q * self.seq_kv * self.head_dim
        return f / 2 if self.causal else f

    @property
    def bytes(self) -> float:
        """Compulsory HBM bytes of one call (inputs read once, output written once)."""
        e = ELEMENT_BYTES[self.dtype]
        if self.kind == "gemm":
            out = 2  # bf16 output, fp8 included
            return float(e * (self.m * self.k + self.k * self.n) + out * self.m * self.n)
        bh, d = self.batch * self.heads, self.head_dim
        return float(e * bh * d * (2 * self.seq_q + 2 * self.seq_kv))

    def to_dict(self) -> dict[str, Any]:
        """The fields with the label and family."""
        out = {k: v for k, v in vars(self).items() if v not in (0, "")}
        return out | {"label": self.label, "family": self.family, "causal": self.causal}


def bound_ns(cfg: Config) -> float:
    """The roofline bound of one call on the H200 (compute or HBM, whichever is longer)."""
    return max(cfg.flops / PEAKS[cfg.dtype], cfg.bytes / PEAKS["hbm_bytes_per_s"]) * 1e9


def _g(dtype: str, m: int, n: int, k: int, why: str) -> Config:
    return Config("gemm", dtype, why, m=m, n=n, k=k)


def _a(dtype: str, b: int, h: int, nq: int, nkv: int, d: int, causal: bool, why: str) -> Config:
    return Config("attn", dtype, why, batch=b, heads=h, seq_q=nq, seq_kv=nkv, head_dim=d, causal=causal)


# fmt: off
CONFIGS: list[Config] = [
    # GEMM, bf16
    _g("bf16", 4096, 4096, 4096, "the square reference GEMM: 1024 tiles of 128x128, ~7.8 waves on 132 SMs"),
    _g("bf16", 2048, 2048, 2048, "small square: 256 tiles, under two waves, launch and tail matter"),
    _g("bf16", 8192, 8192, 8192, "large square: compute-bound, the tensor cores' peak is the limit"),
    _g("bf16", 6144, 6144, 4096, "square, 2304 tiles: wave quantisation differs by tile shape"),
    _g("bf16", 3072, 3072, 8192, "long K: the main loop dominates, pipelining depth matters"),
    _g("bf16", 1024, 1024, 8192, "few tiles (64 of 128x128), long K: fewer programs than SMs with large tiles"),
    _g("bf16", 8192, 1024, 4096, "tall-skinny output (N = 1024): an FFN projection of a big batch"),
    _g("bf16", 1024, 8192, 4096, "wide output, M = 1024: a batch of tokens through a wide layer"),
    _g("bf16", 64, 8192, 4096, "decode-shaped GEMM (M = 64 tokens): memory-bound on the weights"),
    _g("bf16", 256, 14336, 4096, "skinny M = 256 through an MLP up-projection (14336): memory- and wave-bound"),
    _g("bf16", 4096, 4096, 1024, "short K: the epilogue is a large share of each tile"),
    _g("bf16", 512, 512, 16384, "16 tiles and a very long K: at most 16 SMs busy without split-K"),
    # GEMM, fp16
    _g("fp16", 4096, 4096, 4096, "the square reference in fp16 (same tensor-core peak as bf16)"),
    _g("fp16", 8192, 8192, 2048, "large output, moderate K: many waves, compute-bound"),
    _g("fp16", 3072, 3072, 8192, "long K in fp16"),
    _g("fp16", 2048, 8192, 1024, "wide and short K: epilogue-heavy"),
    _g("fp16", 128, 4096, 14336, "skinny M = 128 through an MLP down-projection (K = 14336): weight-streaming"),
    _g("fp16", 1024, 1024, 1024, "tiny: a few microseconds, launch-bound"),
    _g("fp16", 6144, 2048, 8192, "rectangular, long K"),
    _g("fp16", 8192, 128, 8192, "skinny N = 128: one tile column, every tile walks K = 8192"),
    # GEMM, fp8 e4m3 (bf16 output; B is K-major, as torch._scaled_mm wants it)
    _g("fp8", 4096, 4096, 4096, "fp8 e4m3 square: Triton 3.6 emits wgmma e4m3 for sm_90 (checked by compiling)"),
    _g("fp8", 8192, 8192, 8192, "fp8 large square: twice the bf16 peak is the limit"),
    _g("fp8", 2048, 8192, 4096, "fp8 rectangular"),
    _g("fp8", 256, 8192, 8192, "fp8 skinny M = 256: memory-bound on the weights"),
    # attention, bf16, causal
    _a("bf16", 4, 16, 2048, 2048, 128, True, "prefill, d128, causal: unequal tiles, the tile order matters"),
    _a("bf16", 4, 16, 2048, 2048, 64, True, "prefill, d64, causal: less math per KV block, softmax weighs more"),
    _a("bf16", 1, 16, 8192, 8192, 128, True, "long causal sequence, few heads: the longest tiles set the tail"),
    _a("bf16", 8, 16, 1024, 1024, 64, True, "many short causal sequences"),
    _a("bf16", 2, 32, 4096, 4096, 128, True, "32 heads, 4k causal: a common LLM prefill"),
    # attention, bf16, full
    _a("bf16", 2, 16, 4096, 4096, 128, False, "full attention, d128, 4k: equal tiles, compute-bound"),
    _a("bf16", 4, 32, 1024, 1024, 128, False, "full, 1k, many heads: 1024 tiles"),
    _a("bf16", 16, 16, 512, 512, 64, False, "full, short sequences, d64: many small tiles (encoder-style)"),
    _a("bf16", 1, 16, 8192, 8192, 64, False, "full, long, d64, few heads"),
    _a("bf16", 2, 16, 2048, 2048, 64, False, "full, 2k, d64"),
    # attention, fp16, causal
    _a("fp16", 1, 32, 4096, 4096, 128, True, "fp16 causal 4k, d128"),
    _a("fp16", 2, 8, 8192, 8192, 64, True, "fp16 causal 8k, d64, few heads"),
    _a("fp16", 2, 16, 2048, 2048, 128, True, "fp16 causal 2k, d128"),
    _a("fp16", 8, 32, 512, 512, 128, True, "fp16 causal, short sequences: 1024 tiles of uneven work"),
    # attention, fp16, full
    _a("fp16", 2, 16, 4096, 4096, 64, False, "fp16 full 4k, d64"),
    _a("fp16", 4, 16, 2048, 2048, 128, False, "fp16 full 2k, d128"),
    _a("fp16", 8, 16, 1024, 1024, 128, False, "fp16 full 1k, d128"),
    _a("fp16", 1, 8, 16384, 16384, 64, False, "fp16 full, very long, 8 heads: few tiles per head count"),
    # decode-shaped attention: a short query against a long KV cache (no causal mask: the query sees every key)
    _a("bf16", 8, 32, 16, 8192, 128, False, "decode: 16 query tokens (speculative) against 8k keys, d128"),
    _a("bf16", 1, 64, 128, 32768, 128, False, "decode/chunked prefill: 128 queries against 32k keys"),
    _a("bf16", 16, 16, 128, 4096, 64, False, "decode, d64: 128 queries against 4k keys, 256 heads in all"),
    _a("fp16", 4, 32, 64, 16384, 128, False, "decode, fp16: 64 queries against 16k keys"),
    _a("fp16", 32, 8, 16, 8192, 64, False, "decode, fp16 d64: a batch of 32 with 16 queries each against 8k keys"),
]
# fmt: on


__all__ = ["CONFIGS", "ELEMENT_BYTES", "PEAKS", "SMS", "Config", "bound_ns", "parse_only"]
