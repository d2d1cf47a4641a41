"""On the GPU: ncu's pass counts agree with the recorded table, the planner's split and the live CUPTI count
(scripts/gpu-check, scripts/gpu/wheel_check.sh)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from argus_lab.plan import Request, plan
from argus_lab.plan.passes import TablePassModel, default_pass_model

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "argus_lab" / "data" / "ncu_passes_gh100.json"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record_ncu_passes", ROOT / "scripts" / "record_ncu_passes.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_planned_counter_runs_take_the_passes_the_model_says() -> None:
    pytest.importorskip("torch")
    rec = _script()
    if not os.path.exists(rec.NCU):
        pytest.skip(f"ncu is not at {rec.NCU}")
    if not TABLE.exists():
        pytest.skip("argus_lab/data/ncu_passes_gh100.json is not recorded yet")
    model = TablePassModel.load(TABLE)
    request = Request.build([f"hw:{m}" for m in rec.BENCH_SET], max_passes_per_run=8)
    p = plan(request, model)
    for run in p.runs:
        metrics = tuple(run.settings["ncu"]["metrics"])
        live = rec.run_set(rec.NCU, sys.executable, metrics, 120.0)
        assert "passes" in live, live
        # the promise that matters: a planned replay run stays within the bound on the real GPU
        assert int(str(live["passes"])) <= 8 or len(metrics) == 1, (metrics, live["passes"], run.passes)
        if frozenset(metrics) in model.combinations or len(metrics) == 1:
            assert live["passes"] == run.passes


def test_live_pass_counts_equal_ncus_own() -> None:
    """Issue 20: on the GPU host the planner's default model asks CUPTI's profiler host API for the chip at hand,
    and its count equals ncu's own profiler__replayer_passes (a recorded set and three that are not recorded)."""
    pytest.importorskip("torch")
    rec = _script()
    if not os.path.exists(rec.NCU):
        pytest.skip(f"ncu is not at {rec.NCU}")
    model = default_pass_model()
    assert model.source.startswith("live: CUPTI profiler host API"), model.source
    try:
        got = rec.compare_live(model, rec.LIVE_SETS, rec.NCU, sys.executable, 120.0)
    finally:
        close = getattr(model, "close", None)
        if close is not None:
            close()
    print(json.dumps(got, indent=1))
    assert all(r["ncu"] is not None for r in got.values()), got
    assert {n: (r["model"], r["ncu"]) for n, r in got.items() if not r["equal"]} == {}
