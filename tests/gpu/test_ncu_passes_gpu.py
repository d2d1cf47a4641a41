"""On the GPU: ncu's live pass counts agree with the recorded table and with the planner's split (scripts/gpu-check)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from argus_lab.plan import Request, plan
from argus_lab.plan.passes import TablePassModel

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "tests" / "data" / "ncu_passes_gh100.json"


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
        pytest.skip("tests/data/ncu_passes_gh100.json is not recorded yet")
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
