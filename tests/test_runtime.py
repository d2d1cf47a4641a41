"""The runtime on real workloads: in-process and child-process runs, failures, deaths, skipped GPU runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import argus_lab
from argus_lab.app.measure import run_plan
from argus_lab.plan import Plan, PlannedRun, Request
from argus_lab.run.runtime import Execution
from argus_lab.run.workload import Workload
from argus_lab.store import Store

WORKLOADS = Path(__file__).parent / "workloads"


def execute(plan: Plan, workload: Workload, store: Store, **options: Any) -> Execution:
    """The runtime as every face drives it: execute into the store, then join (:func:`run_plan`)."""
    return run_plan(plan, workload, store, **options).execution


def _host_plan(repeat: int = 3, warmup: int = 1) -> Plan:
    req = Request.build("host.wall,host.cpu", repeat=repeat, warmup=warmup)
    run = PlannedRun(0, ("host",), ("host.wall", "host.cpu"), repeat, warmup, "test")
    return Plan(req, (run,))


def test_measure_a_callable_gives_a_region_table(store_path: Path) -> None:
    def step() -> None:
        with argus_lab.region("step"), argus_lab.region("inner"):
            sum(range(1000))

    report = argus_lab.measure(step, repeat=4, warmup=2, store=str(store_path))
    rows = {(r.path, r.signal): r for r in report.regions}
    assert rows["step/inner", "host.wall"].instances == 4  # warm-up instances are left out
    assert rows["step", "host.cpu"].unit == "ns"
    assert rows["step", "host.wall"].median >= rows["step/inner", "host.wall"].median
    assert "step/inner" in report.text()
    stored = Store(store_path).rows("SELECT count(*), sum(warmup::INT) FROM region_instances")
    assert stored == [(12, 4)]  # 6 repetitions x 2 regions, 2 warm-up repetitions


@pytest.mark.parametrize("force_child", [False, True])
def test_script_that_raises_keeps_finished_repetitions(
    store_path: Path, monkeypatch: pytest.MonkeyPatch, force_child: bool
) -> None:
    if force_child:
        monkeypatch.setenv("ARGUS_FORCE_CHILD", "1")
    store = Store(store_path)
    ex = execute(_host_plan(repeat=4), Workload.script(WORKLOADS / "raises_on_third.py"), store)
    (res,) = ex.results
    assert res.status == "failed"
    assert "RuntimeError: boom in repetition 2" in res.cause
    assert res.reps_done == 2
    rows = store.rows("SELECT repetition, error FROM region_instances ORDER BY repetition")
    assert [r[0] for r in rows] == [0, 1, 2]
    assert rows[2][1].startswith("RuntimeError")
    assert store.rows("SELECT status FROM runs") == [("failed",)]


def test_child_killed_mid_run_is_recorded_as_died(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARGUS_FORCE_CHILD", "1")
    store = Store(store_path)
    ex = execute(_host_plan(repeat=5, warmup=0), Workload.script(WORKLOADS / "killed_on_third.py"), store)
    (res,) = ex.results
    assert res.status == "died"
    assert "killed by SIGKILL" in res.cause
    assert res.reps_done == 2
    assert store.rows("SELECT count(*) FROM region_instances") == [(2,)]


def test_gpu_runs_are_skipped_with_the_reason_and_the_host_run_still_happens(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARGUS_ASSUME_NO_GPU", "1")
    argus_lab.run.machine.gpu_available.cache_clear()
    try:
        req = Request.build("host.wall,gpu.time")
        plan = Plan(
            req,
            (PlannedRun(0, ("host",), ("host.wall",), 2, 0, "t"), PlannedRun(1, ("cupti",), ("gpu.time",), 2, 0, "t")),
        )
        store = Store(store_path)
        ex = execute(plan, Workload.script(WORKLOADS / "nested.py"), store)
    finally:
        argus_lab.run.machine.gpu_available.cache_clear()
    assert [r.status for r in ex.results] == ["ok", "skipped"]
    assert "gpu.time need cupti" in ex.results[1].cause
    assert "no NVIDIA GPU" in ex.results[1].cause
    report = argus_lab.Report(store, ex.run_ids)
    assert any("skipped" in line and "gpu.time" in line for line in report.coverage())


def test_on_error_stop_leaves_later_runs_not_run(store_path: Path) -> None:
    req = Request.build("host.wall")
    runs = (PlannedRun(0, ("host",), ("host.wall",), 4, 0, "t"), PlannedRun(1, ("host",), ("host.wall",), 1, 0, "t"))
    ex = execute(Plan(req, runs), Workload.script(WORKLOADS / "raises_on_third.py"), Store(store_path), on_error="stop")
    assert [r.status for r in ex.results] == ["failed", "not run"]


def test_script_arguments_reach_the_script(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARGUS_FORCE_CHILD", "1")
    ex = execute(_host_plan(1, 0), Workload.script(WORKLOADS / "with_args.py", ("--steps", "3")), Store(store_path))
    assert ex.results[0].status == "ok", ex.results[0].cause


def test_cell_workload_runs_setup_once(store_path: Path) -> None:
    setup = "import argus_lab\ncalls = []"
    cell = "with argus_lab.region('cell'):\n    calls.append(1)\nassert len(calls) <= 3"
    ex = execute(_host_plan(2, 1), Workload.cell(cell, (setup,)), Store(store_path))
    assert ex.results[0].status == "ok", ex.results[0].cause


def test_host_run_with_an_attached_gpu_backend_runs_the_host_part(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARGUS_ASSUME_NO_GPU", "1")
    argus_lab.run.machine.gpu_available.cache_clear()
    try:
        plan = argus_lab.plan("host.wall,compile.registers", repeat=2, warmup=0)
        (run,) = plan.runs
        assert set(run.backends) == {"host", "compiler"}
        store = Store(store_path)
        ex = execute(plan, Workload.script(WORKLOADS / "nested.py"), store)
    finally:
        argus_lab.run.machine.gpu_available.cache_clear()
    (res,) = ex.results
    assert res.status == "partial"
    assert "compile.registers need compiler" in res.cause
    assert store.rows("SELECT count(*) FROM metrics WHERE signal = 'host.wall'") == [(6,)]


def test_shards_keep_json_text_and_dicts_apart(tmp_path: Path) -> None:
    """Merged evidence mixes dicts and JSON text in one column; the child's shards must not encode text twice."""
    import json

    import pyarrow.parquet as pq

    from argus_lab.run import shards

    shards.write_table(tmp_path / "t.parquet", {"settings": ['{"a": 1}', {"b": 2}], "backends": [["x"], ["y"]]})
    got = pq.read_table(tmp_path / "t.parquet").to_pydict()
    assert [json.loads(v) for v in got["settings"]] == [{"a": 1}, {"b": 2}]
    assert got["backends"] == [["x"], ["y"]]
