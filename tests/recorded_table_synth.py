"""A SYNTHETIC recorded table (NOT MEASURED): the files bench/record_candidates.py writes, filled from a made-up
cost model, so that the replayed searches and the report can be tested before (and besides) the H200 recording.

The model is deliberately simple and its evidence is consistent with its times: a candidate whose estimated
accumulator does not fit the registers spills (``cuobjdump`` local memory > 0) and runs 1.6x slower; shallow
pipelines have a large ``load`` phase and run slower; wave quantisation shows as the SM tail; shared memory over
the limit is a compile failure.  Nothing here says anything about a GPU.
"""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from bench.recorded_configs import CONFIGS, Config, bound_ns
from bench.recorded_launch import programs, tiles
from bench.recorded_spaces import autotune_list, key_of, space

SYNTH_CONFIGS = (1, 6, 9, 21, 25, 27, 30, 43)
"""Configuration numbers the synthetic table holds (GEMM bf16, fp8, skinny; attention causal, full, decode)."""
SHARED_LIMIT = 232448


def _jitter(key: str, label: str) -> float:
    return 0.92 + 0.16 * (zlib.crc32(f"{label}|{key}".encode()) % 1000) / 1000


def _shared(cfg: Config, p: dict[str, Any]) -> int:
    if cfg.kind == "gemm":
        elem = 1 if cfg.dtype == "fp8" else 2
        return int(p["num_stages"]) * (p["block_m"] + p["block_n"]) * p["block_k"] * elem
    return int(p["num_stages"]) * 2 * p["block_n"] * cfg.head_dim * 2 + p["block_m"] * cfg.head_dim * 2


def model_time(cfg: Config, p: dict[str, Any]) -> tuple[float | None, dict[str, Any]]:
    """(SYNTHETIC) time in ns, or ``None`` when it does not compile, and the evidence that goes with it."""
    if _shared(cfg, p) > SHARED_LIMIT:
        return None, {}
    acc = p["block_m"] * (p["block_n"] if cfg.kind == "gemm" else cfg.head_dim + p["block_n"])
    regs_needed = acc / (32 * p["num_warps"]) + 40
    spills = regs_needed > 255
    regs = min(255, int(regs_needed))
    n_tiles, progs = tiles(cfg, p), programs(cfg, p)
    wave_eff = n_tiles / (math.ceil(n_tiles / progs) * progs)
    fill = progs / 132 if progs < 132 else 1.0
    tile_eff = min(1.0, (p["block_m"] * p["block_n"]) / (128 * 128)) ** 0.3
    stage_f = {2: 0.8, 3: 0.93, 4: 1.0, 5: 0.97, 7: 0.9}[int(p["num_stages"])]
    ctas_f = 1.05 if p["ctas_per_sm"] == 2 and regs * 32 * p["num_warps"] * 2 <= 65536 else 0.97
    order_f = 1.06 if (cfg.causal and p.get("heavy_first")) else 1.0
    eff = 0.7 * tile_eff * wave_eff * fill * stage_f * ctas_f * order_f
    t = bound_ns(cfg) / max(eff, 0.02) * _jitter(key_of(p), cfg.label) * (1.6 if spills else 1.0)
    load = 0.5 if p["num_stages"] <= 2 else 0.35 if p["num_stages"] == 3 else 0.2
    shares = ({"load": load, "mma": 0.9 - load, "epilogue": 0.1} if cfg.kind == "gemm" else
              {"qk": 0.35, "softmax": 0.45 if p["block_n"] <= 32 else 0.3, "pv": 0.2, "epilogue": 0.05})  # fmt: skip
    span = t
    ev = {
        "cuobjdump": {"registers": regs, "local_bytes": 64 if spills else 0, "shared_bytes": _shared(cfg, p) + 1024},
        "phases": {
            "source": "SYNTHETIC", "programs": progs, "sms_used": min(progs, 132), "span_ns": span,
            "tail_ns": span * (1 - wave_eff), "tail_fraction": 1 - wave_eff,
            "regions": [{"region": r, "count": 10, "per_cta_median_ns": s * span, "occurrence_ns": s * span / 10,
                         "share": s} for r, s in shares.items()],
            "step_region": "load" if cfg.kind == "gemm" else "qk", "step_period_ns": None,
            "step_efficiency": min(0.95, eff), "sampled": False, "problems": [],
        },
    }  # fmt: skip
    return t, ev


def write(folder: Path, numbers: tuple[int, ...] = SYNTH_CONFIGS, *, seed: int = 0, launches: int = 30) -> Path:
    """Write a SYNTHETIC recording of configurations ``numbers`` into ``folder`` (as bench/record_candidates.py)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    files = {n: (folder / f"{n}.jsonl").open("w") for n in ("candidates", "phases", "baselines", "configs")}

    def put(name: str, row: dict[str, Any]) -> None:
        files[name].write(json.dumps(row) + "\n")

    def samples(t: float) -> list[float]:
        return [round(float(x), 1) for x in t * (1 + rng.normal(0, 0.004, launches))]

    for n in numbers:
        cfg = CONFIGS[n - 1]
        times: dict[str, float] = {}
        for p in space(cfg):
            k = key_of(p)
            t, ev = model_time(cfg, p)
            if t is None:
                put("candidates", {"config": n, "key": k, "params": p, "status": "compile_failed",
                                   "cause": "OutOfResources: shared memory (SYNTHETIC)"})  # fmt: skip
                continue
            times[k] = t
            s = samples(t)
            put("candidates", {"config": n, "key": k, "params": p, "status": "ok", "cause": "", "samples_ns": s,
                               "median_ns": float(np.median(s)), "cuobjdump": ev["cuobjdump"],
                               "facts": {"registers": ev["cuobjdump"]["registers"]}})  # fmt: skip
            put("phases", {"config": n, "key": k, "phases": ev["phases"], "error": None})
        tuned = [key_of(p) for p in autotune_list(cfg) if key_of(p) in times]
        picked = min(tuned, key=lambda k: times[k])
        best = min(times.values())
        vendor = best * (0.9 if cfg.kind == "gemm" else 1.15)
        for pas, drift in ((1, 1.0), (2, 1.003)):
            put("baselines", {"config": n, "which": "autotune", "pass": pas, "samples_ns": samples(times[picked] *
                              drift), "picked": picked, "tuning_ms": {k: [times[k] / 1e6] for k in tuned}})  # fmt: skip
            put("baselines", {"config": n, "which": "vendor", "pass": pas, "samples_ns": samples(vendor * drift)})
        put("configs", {"config": n, "label": cfg.label, "complete": True, "seconds": 0.0})
    for f in files.values():
        f.close()
    (folder / "plan.json").write_text(json.dumps({"synthetic": True, "note": "SYNTHETIC: not measured"}))
    (folder / "record.json").write_text(json.dumps({"device": "SYNTHETIC (no GPU)", "wall_s": 0}))
    return folder
