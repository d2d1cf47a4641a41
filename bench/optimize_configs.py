"""The benchmark's configurations (issue 21), their names and run order, and the seed's figures.

``CONFIGS`` are numbered from 1 in this order everywhere (the table's ``#`` column, ``--only`` and ``--walk`` of
bench/optimize_bench.py and scripts/gpu/optimize_bench.sh).
"""

from __future__ import annotations

from typing import Any

SEED_FIGURES = {
    "configurations": 44,
    "improved_with_evidence": 39,
    "geomean_without_evidence": 0.054,
    "geomean_with_evidence": 0.089,
    "source": "the Argus paper (AlphaEvolve on 44 persistent GEMM and attention configurations, with and without "
    "Argus's evidence)",
}

# fmt: off
CONFIGS: list[dict[str, Any]] = [
    {"kind": "gemm", "m": 3072, "n": 3072, "k": 8192, "dtype": "bf16", "walk": True},
    {"kind": "attn", "batch": 4, "heads": 16, "seq": 2048, "head_dim": 128, "causal": True, "dtype": "bf16"},
    {"kind": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"},
    {"kind": "attn", "batch": 4, "heads": 16, "seq": 2048, "head_dim": 64, "causal": True, "dtype": "bf16"},
    {"kind": "gemm", "m": 1024, "n": 1024, "k": 8192, "dtype": "bf16"},
    {"kind": "attn", "batch": 2, "heads": 16, "seq": 4096, "head_dim": 128, "causal": False, "dtype": "bf16"},
    {"kind": "gemm", "m": 6144, "n": 6144, "k": 4096, "dtype": "bf16"},
    {"kind": "attn", "batch": 2, "heads": 16, "seq": 4096, "head_dim": 64, "causal": False, "dtype": "fp16"},
    {"kind": "gemm", "m": 2048, "n": 2048, "k": 2048, "dtype": "bf16"},
    {"kind": "attn", "batch": 1, "heads": 32, "seq": 4096, "head_dim": 128, "causal": True, "dtype": "fp16"},
    {"kind": "gemm", "m": 8192, "n": 1024, "k": 4096, "dtype": "bf16"},
    {"kind": "attn", "batch": 8, "heads": 16, "seq": 1024, "head_dim": 64, "causal": True, "dtype": "bf16"},
    {"kind": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "fp16"},
    {"kind": "attn", "batch": 1, "heads": 16, "seq": 8192, "head_dim": 128, "causal": True, "dtype": "bf16"},
    {"kind": "gemm", "m": 3072, "n": 3072, "k": 8192, "dtype": "fp16"},
    {"kind": "attn", "batch": 4, "heads": 32, "seq": 1024, "head_dim": 128, "causal": False, "dtype": "bf16"},
    {"kind": "gemm", "m": 1024, "n": 8192, "k": 4096, "dtype": "fp16"},
    {"kind": "attn", "batch": 2, "heads": 8, "seq": 8192, "head_dim": 64, "causal": True, "dtype": "fp16"},
    {"kind": "gemm", "m": 6144, "n": 6144, "k": 2048, "dtype": "bf16"},
    {"kind": "attn", "batch": 16, "heads": 16, "seq": 512, "head_dim": 64, "causal": False, "dtype": "bf16"},
    {"kind": "gemm", "m": 512, "n": 512, "k": 16384, "dtype": "bf16"},
    {"kind": "attn", "batch": 2, "heads": 16, "seq": 2048, "head_dim": 128, "causal": True, "dtype": "fp16"},
    {"kind": "gemm", "m": 4096, "n": 4096, "k": 1024, "dtype": "bf16"},
    {"kind": "gemm", "m": 2048, "n": 8192, "k": 1024, "dtype": "fp16"},
]
# fmt: on
TINY = [CONFIGS[0], CONFIGS[1]]
HOST_DEMO: list[dict[str, Any]] = [{"kind": "host", "n": 96, "walk": True}, {"kind": "host", "n": 64}]
"""``--host-demo``: the driver end to end on a host region (tests/optimize_cpu.py, host.wall), on any machine."""


def label(cfg: dict[str, Any]) -> str:
    """The configuration in words (the target's name)."""
    if cfg["kind"] == "gemm":
        return f"gemm {cfg['dtype']} {cfg['m']}x{cfg['n']}x{cfg['k']}"
    if cfg["kind"] == "host":
        return f"blocked matmul {cfg['n']}"
    kind = "causal" if cfg["causal"] else "full"
    return f"attn {cfg['dtype']} b{cfg['batch']} h{cfg['heads']} n{cfg['seq']} d{cfg['head_dim']} {kind}"


def parse_only(text: str, count: int) -> list[int]:
    """``--only``: configuration numbers (1-based) as ``10-24``, ``13,10-12`` or ``5``; an error names the fix."""
    out: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo_s, _, hi_s = part.partition("-")
        try:
            lo, hi = int(lo_s), int(hi_s or lo_s)
        except ValueError:
            msg = f"--only {text!r}: {part!r} is not a number or a range; write e.g. --only 10-24 or --only 3,10-12"
            raise ValueError(msg) from None
        if not 1 <= lo <= hi <= count:
            msg = f"--only {text!r}: {part!r} is outside 1-{count} (the configurations are numbered from 1)"
            raise ValueError(msg)
        out.extend(n for n in range(lo, hi + 1) if n not in out)
    if not out:
        msg = f"--only {text!r} selects no configuration; write e.g. --only 10-24"
        raise ValueError(msg)
    return out


def run_order(numbers: list[int], configs: list[dict[str, Any]], walk: int | None) -> list[int]:
    """The order the configurations ``numbers`` are measured in: the walk configuration first, then the kinds
    alternating (GEMM, attention, ...: a time budget that ends early leaves both kinds measured), each kind in its
    numbered order."""
    rest = [n for n in numbers if n != walk]
    queues: dict[str, list[int]] = {}
    for n in rest:
        queues.setdefault(configs[n - 1]["kind"], []).append(n)
    order = [walk] if walk in numbers else []
    last = configs[walk - 1]["kind"] if order and walk is not None else None
    while any(queues.values()):
        kinds = [k for k, q in queues.items() if q]
        k = next((k for k in kinds if k != last), kinds[0])
        order.append(queues[k].pop(0))
        last = k
    return order


__all__ = ["CONFIGS", "HOST_DEMO", "SEED_FIGURES", "TINY", "label", "parse_only", "run_order"]
