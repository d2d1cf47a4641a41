"""The recorded optimisation table read back: every candidate's samples and evidence, both baselines, by
configuration, and each candidate as the ``argus_lab.optimize.Evaluation`` a search reads.

The files are what bench/record_candidates.py writes (``candidates``, ``phases``, ``baselines``, ``configs`` and
``compiles`` as ``.jsonl`` or ``.jsonl.gz``).  :func:`load` joins them; :func:`evaluation` turns one recorded
candidate into the optimiser's evidence (timing from its samples, the roofline on the H200, compiler facts with
the occupancy they allow, device-region phases of its instrumented launch, the static model of tiles and waves);
:func:`static_facts` is what the compiler said before the candidate ran (the compile step's ``cuobjdump``).
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from argus_lab import optimize as opt
from bench.recorded_configs import CONFIGS, PEAKS, SMS, Config
from bench.recorded_launch import programs, step_flops, tiles
from bench.recorded_spaces import ATTN_KEYS, GEMM_KEYS, default, key_of

H200 = opt.DeviceSpec(
    name="NVIDIA H200",
    sms=SMS,
    peak_flops={k: v for k, v in PEAKS.items() if k != "hbm_bytes_per_s"},
    dram_bytes_per_s=PEAKS["hbm_bytes_per_s"],
    source="bench/recorded_configs.py PEAKS (H200 SXM datasheet, dense; fp8 e4m3 twice bf16)",
)
PHASE_ROLES = {
    "gemm": {"memory": "load", "math": "mma", "epilogue": "epilogue", "step": "load"},
    "attn": {"math": "qk,pv", "softmax": "softmax", "epilogue": "epilogue", "step": "qk"},
}
"""Which device regions play which part for the optimiser's rules (examples/gpu's markers)."""
ROLES = {
    "gemm": {"tile_m": "block_m", "tile_n": "block_n", "tile_k": "block_k", "group": "group_m",
             "warps": "num_warps", "stages": "num_stages", "ctas_per_sm": "ctas_per_sm", "split": "split_k",
             "async_copy": "tma", "tail_split": "tail_split"},
    "attn": {"tile_m": "block_m", "tile_n": "block_n", "warps": "num_warps", "stages": "num_stages",
             "order": "heavy_first", "ctas_per_sm": "ctas_per_sm", "split": "split_kv"},
}  # fmt: skip


@dataclass
class Recorded:
    """One measured candidate: parameters, status, samples and evidence as recorded."""

    key: str
    params: dict[str, Any]
    status: str
    cause: str = ""
    samples: np.ndarray = field(default_factory=lambda: np.zeros(0))
    facts: dict[str, Any] = field(default_factory=dict)
    cuobjdump: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, Any] | None = None
    phases_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok" and len(self.samples) > 0

    @property
    def median(self) -> float:
        return float(np.median(self.samples)) if self.ok else math.inf


@dataclass
class Baseline:
    """One baseline's two passes (samples in ns) and, for the autotuner, what it picked."""

    which: str
    passes: dict[int, np.ndarray] = field(default_factory=dict)
    picked: str | None = None
    tuning_ms: dict[str, Any] = field(default_factory=dict)
    tune_s: float | None = None
    wrong: str | None = None

    def median(self, pas: int = 1) -> float:
        s = self.passes.get(pas)
        return float(np.median(s)) if s is not None and len(s) else math.inf


@dataclass
class ConfigTable:
    """Everything recorded for one configuration."""

    number: int
    cfg: Config
    candidates: dict[str, Recorded] = field(default_factory=dict)
    autotune: Baseline = field(default_factory=lambda: Baseline("autotune"))
    vendor: Baseline = field(default_factory=lambda: Baseline("vendor"))
    complete: bool = False

    @property
    def keys(self) -> tuple[str, ...]:
        """The parameters the recorded candidates have (a recording made before the split variants lacks
        ``split_k`` / ``split_kv``), in the space's order."""
        every = GEMM_KEYS if self.cfg.kind == "gemm" else ATTN_KEYS
        return tuple(k for k in every if all(k in r.params for r in self.candidates.values()))

    def default(self) -> dict[str, Any]:
        """The kernel's shipped configuration as this recording's candidates write it (where searches start)."""
        keys = self.keys
        return {k: v for k, v in default(self.cfg).items() if k in keys}

    @property
    def usable(self) -> bool:
        """Both baselines' first passes and the default candidate were measured."""
        return (
            self.complete
            and 1 in self.autotune.passes
            and 1 in self.vendor.passes
            and key_of(self.default()) in self.candidates
        )

    def best(self) -> Recorded | None:
        """The fastest correct candidate of the whole space."""
        ok = [r for r in self.candidates.values() if r.ok]
        return min(ok, key=lambda r: r.median) if ok else None


def _lines(folder: Path, name: str) -> Iterator[dict[str, Any]]:
    plain, packed = folder / f"{name}.jsonl", folder / f"{name}.jsonl.gz"
    path = plain if plain.exists() else packed
    if not path.exists():
        return
    with gzip.open(path, "rt") if path is packed else path.open() as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _picked(t: ConfigTable, row: dict[str, Any]) -> str | None:
    """The autotuner's pick as the key of a recorded candidate: a pick written without a parameter the candidates
    have (the recording of 2026-12-03 wrote its picks without ``warp_spec``) takes the kernel's default for it."""
    key, params = row.get("picked"), row.get("params")
    if key in t.candidates or not isinstance(params, dict):
        return key
    return key_of({k: params.get(k, v) for k, v in default(t.cfg).items() if k in t.keys})


def load(folder: Path, configs: list[Config] | None = None) -> dict[int, ConfigTable]:
    """Read a recording (``configs``: the numbered list it was recorded from; default bench/recorded_configs.py)."""
    cfgs = configs if configs is not None else CONFIGS
    if not any(folder.glob("candidates.jsonl*")):
        msg = f"{folder} holds no candidates.jsonl(.gz): give the folder bench/record_candidates.py wrote"
        raise FileNotFoundError(msg)
    tables: dict[int, ConfigTable] = {}

    def table(n: int) -> ConfigTable:
        if n not in tables:
            tables[n] = ConfigTable(n, cfgs[n - 1])
        return tables[n]

    for row in _lines(folder, "candidates"):
        rec = Recorded(
            key=row["key"],
            params=row["params"],
            status=row["status"],
            cause=row.get("cause", ""),
            samples=np.asarray(row.get("samples_ns", []), dtype=float),
            facts=row.get("facts") or {},
            cuobjdump=row.get("cuobjdump") or {},
        )
        table(row["config"]).candidates[rec.key] = rec
    for row in _lines(folder, "phases"):
        rec_or_none = table(row["config"]).candidates.get(row["key"])
        if rec_or_none is not None:
            rec_or_none.phases, rec_or_none.phases_error = row.get("phases"), row.get("error")
    for row in _lines(folder, "baselines"):
        t = table(row["config"])
        b = t.autotune if row["which"] == "autotune" else t.vendor
        b.passes[int(row["pass"])] = np.asarray(row["samples_ns"], dtype=float)
        if row["pass"] == 1:
            b.picked = _picked(t, row)
            b.tuning_ms = row.get("tuning_ms") or {}
            b.tune_s = row.get("tune_s")
            b.wrong = row.get("wrong")
    for row in _lines(folder, "configs"):
        table(row["config"]).complete = bool(row.get("complete"))
    return dict(sorted(tables.items()))


# -- the optimiser's view ----------------------------------------------------------------------------------------
def model(cfg: Config, params: dict[str, Any]) -> opt.Model:
    """Tiles, programs and waves of a candidate, its estimated shared memory and one loop step's FLOPs."""
    p = params
    if cfg.kind == "gemm":
        elem = 1 if cfg.dtype == "fp8" else 2
        shared = int(p["num_stages"]) * (int(p["block_m"]) + int(p["block_n"])) * int(p["block_k"]) * elem
    else:
        shared = max(int(p["num_stages"]), 1) * 2 * int(p["block_n"]) * cfg.head_dim * 2 + int(p["block_m"]) * (
            cfg.head_dim * 2
        )
    return opt.Model(
        tiles=tiles(cfg, p), programs=programs(cfg, p), sms=SMS, shared_bytes=shared, step_flops=step_flops(cfg, p)
    )


def space(t: ConfigTable) -> opt.Space:
    """The recorded space as the optimiser's: axes of the recorded values, a candidate valid when it was recorded."""
    keys = t.keys
    recorded = set(t.candidates)
    axes = {k: tuple(sorted({r.params[k] for r in t.candidates.values()})) for k in keys}
    roles = {role: name for role, name in ROLES[t.cfg.kind].items() if name in keys}

    def constraint(c: opt.Candidate) -> str | None:
        return None if c.key in recorded else "not in the recorded space"

    return opt.Space.of(axes, roles, constraint, note="the candidates recorded on the H200")


def static_facts(rec: Recorded) -> opt.StaticFacts | str | None:
    """What the compile step said before the candidate ran: its facts, or why it did not compile."""
    if rec.status == "compile_failed":
        return rec.cause or "compile failed"
    cu = rec.cuobjdump
    if not cu:
        return None
    p = rec.params
    return opt.StaticFacts(
        kernel="", registers=cu.get("registers"), local_bytes=cu.get("local_bytes"),
        shared_bytes=cu.get("shared_bytes"), num_warps=int(p["num_warps"]), num_stages=int(p["num_stages"]),
    )  # fmt: skip


def phases(d: dict[str, Any] | None) -> opt.Phases | None:
    """Recorded phases (``dataclasses.asdict`` of ``argus_lab.optimize.Phases``) as the optimiser's value."""
    if not d:
        return None
    rows = tuple(opt.PhaseRow(**r) for r in d.get("regions", ()))
    return opt.Phases(**{**d, "regions": rows, "problems": tuple(d.get("problems", ()))})


def evaluation(t: ConfigTable, key: str) -> opt.Evaluation:
    """One recorded candidate as the evidence ``argus_lab.optimize`` searches read."""
    rec = t.candidates[key]
    cfg = t.cfg
    cand = opt.Candidate.of(rec.params)
    region = {"name": cfg.label, "module": "bench.record_candidates", "region_id": cfg.label}
    m = model(cfg, rec.params)
    if not rec.ok:
        return opt.Evaluation(cfg.label, region, cand, rec.status if rec.status != "ok" else "failed", rec.cause,
                              model=m)  # fmt: skip
    s = rec.samples
    med = float(np.median(s))
    p25, p75 = (float(x) for x in np.percentile(s, [25, 75]))
    timing = opt.Timing(
        signal="cuda.events", unit="ns", median=med, p25=p25, p75=p75, min=float(s.min()), max=float(s.max()),
        n=len(s), noise=(p75 - p25) / med if med > 0 else 0.0, values=tuple(float(x) for x in s),
    )  # fmt: skip
    work = opt.Work(cfg.flops, cfg.bytes, cfg.dtype)
    f, cu = rec.facts, rec.cuobjdump
    regs = f.get("registers") or cu.get("registers")
    local = cu.get("local_bytes")
    if local is None and f.get("spills") is not None:
        local = 4 * int(f["spills"])  # the driver counts spilled 4-byte registers
    shared = cu.get("shared_bytes") or f.get("shared_bytes")
    warps = int(rec.params["num_warps"])
    compiled = opt.Compiled(
        kernel=cfg.family, source="cuobjdump -res-usage (compile) and the loaded kernel", registers=regs,
        local_bytes=local, shared_bytes=shared, num_warps=warps, num_stages=int(rec.params["num_stages"]),
        occupancy=opt.occupancy(regs, shared, warps, H200),
    )  # fmt: skip
    return opt.Evaluation(
        target=cfg.label, region=region, candidate=cand, status="ok", time=timing,
        roofline=opt.roofline(work, med, H200), compiled=compiled, phases=phases(rec.phases), model=m,
    )  # fmt: skip


__all__ = [
    "H200",
    "PHASE_ROLES",
    "ROLES",
    "Baseline",
    "ConfigTable",
    "Recorded",
    "evaluation",
    "load",
    "model",
    "phases",
    "space",
    "static_facts",
]
