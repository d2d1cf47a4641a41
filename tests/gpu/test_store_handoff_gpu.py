"""GPU test of the hand-off of a long run's store write (argus_lab.store.handoff) on a real timing run: the training
step's kernels (backward on autograd's thread, optimizer) stored by a fresh process are the rows the measured process
stores itself, class by class and region by region (run on the H200 through scripts/gpu-check)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

KERNELS = (
    "SELECT name, count(*), count(DISTINCT instance_id), min(ordinal), max(ordinal) FROM kernels "
    "GROUP BY ALL ORDER BY ALL"
)
CLASSES = (
    "SELECT coalesce(i.path, ''), a.class, count(*) FROM attributions a "
    "LEFT JOIN region_instances i ON i.run_id = a.target_run_id AND i.instance_id = a.instance_id "
    "WHERE a.evidence = 'kernel' GROUP BY ALL ORDER BY ALL"
)


def test_a_long_timing_runs_kernels_stored_by_a_fresh_process_are_those_stored_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argus_lab
    from argus_lab.store import Store, handoff
    from examples.gpu import thread_cases as tc

    step = tc.make_train_step()
    step()
    step()  # first-call effects (the optimizer's state, cuBLAS's handles) before either measurement
    got = {}
    for how, rows in (("here", 1 << 62), ("fresh", 1)):
        monkeypatch.setattr(handoff, "FRESH_PROCESS_ROWS", rows)
        store = tmp_path / f"{how}.duckdb"
        argus_lab.measure(step, "gpu.time,gpu.kernels", repeat=2, warmup=1, store=str(store))
        got[how] = (Store(store).rows(KERNELS), Store(store).rows(CLASSES))
        assert not (tmp_path / f"{how}.duckdb.runs").exists()
    assert got["fresh"][0] and got["fresh"][1], got
    assert got["fresh"] == got["here"], got
