"""A long run's evidence stored by a fresh process (argus_lab.store.handoff): the same rows as storing them in the
measured process, stored once whatever fails, nothing left beside the store, and a spool left by a killed process
stored by recovery.  The workload is the SYNTHETIC ``workloads/instance_shapes.py`` of test_instance_columns, whose
golden rows were written with main at 703d109 (before the hand-off existed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_instance_columns import GOLDEN, shapes

from argus_lab.app.measure import recover_runs
from argus_lab.store import Store, handoff

HERE = Path(__file__).parent
ROOT = HERE.parent


def _want() -> Any:
    return json.loads(GOLDEN.read_text())["in-process"]


@pytest.fixture
def fresh_processes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every run counts as long; the outcome of each fresh process is listed."""
    monkeypatch.setattr(handoff, "FRESH_PROCESS_ROWS", 1)
    outcomes: list[bool] = []
    real = handoff._run_fresh_process

    def counted(spool: Path) -> bool:
        outcomes.append(real(spool))
        return outcomes[-1]

    monkeypatch.setattr(handoff, "_run_fresh_process", counted)
    return outcomes


def test_a_long_runs_evidence_is_stored_by_a_fresh_process_with_the_rows_of_storing_it_here(
    tmp_path: Path, fresh_processes: list[bool]
) -> None:
    store = tmp_path / "s.duckdb"
    assert shapes(store, child=False) == _want()
    assert fresh_processes == [True]  # the run's evidence went through one fresh process
    assert Store(store).rows("SELECT status, reps_done FROM runs") == [("ok", 4)]  # 3 repetitions after 1 warm-up
    assert not (tmp_path / "s.duckdb.runs").exists()  # no spool, no run folder left beside the store


def test_a_short_run_is_stored_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[Path] = []
    monkeypatch.setattr(handoff, "_run_fresh_process", lambda spool: called.append(spool) or True)
    assert shapes(tmp_path / "s.duckdb", child=False) == _want()
    assert called == []


def test_a_failed_fresh_process_leaves_the_store_write_to_the_measured_process(
    tmp_path: Path, fresh_processes: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", "/bin/false")  # the fresh process exits 1 having stored nothing
    store = tmp_path / "s.duckdb"
    assert shapes(store, child=False) == _want()  # stored once, here
    assert fresh_processes == [False]
    assert not (tmp_path / "s.duckdb.runs").exists()


def test_a_fresh_process_that_stored_the_run_and_then_failed_never_has_it_stored_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handoff, "FRESH_PROCESS_ROWS", 1)
    store = tmp_path / "s.duckdb"

    def stored_then_failed(spool: Path) -> bool:
        handoff.store_spool(Store(store, recover=False), spool)
        (spool / handoff.STORED_FILE).unlink()  # as if it died before saying so
        return False

    monkeypatch.setattr(handoff, "_run_fresh_process", stored_then_failed)
    assert shapes(store, child=False) == _want()  # the same rows, each once


def test_a_spool_is_stored_once_even_when_recovery_and_the_fresh_process_both_reach_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.duckdb")
    spool = tmp_path / "spool"
    then = [("UPDATE runs SET status = ? WHERE run_id = ?", ["ok", "r-x"])]
    handoff.write_spool(spool, store, {"regions": {"region_id": ["r7"], "name": ["a"]}}, then, {"status": "ok"})
    assert handoff.store_spool(store, spool) == {"status": "ok"}
    handoff.store_spool(Store(store.path), spool)  # the second one finds it stored
    assert store.rows("SELECT region_id, name FROM regions") == [("r7", "a")]


KILLED = """
import os, signal, sys
sys.path[:0] = [{root!r}, {tests!r}]
from argus_lab.store import handoff
from test_instance_columns import shapes
handoff.FRESH_PROCESS_ROWS = 1
def killed(spool):  # the spool is complete: the measured process is killed before any process stores it
    print(spool, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
handoff._run_fresh_process = killed
shapes({store!r}, child=False)
"""


def test_a_long_run_killed_while_its_evidence_was_stored_is_recovered_from_its_spool(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    code = KILLED.format(root=str(ROOT), tests=str(HERE), store=str(store))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    spool = Path(done.stdout.strip())
    assert (spool / handoff.THEN_FILE).is_file()
    st = Store(store, recover=False)
    assert st.rows("SELECT status, count(*) FROM runs GROUP BY ALL") == [("running", 1)]
    assert st.rows("SELECT count(*) FROM region_instances") == [(0,)]

    got = recover_runs(str(store))
    (run,) = got.recovered
    assert run.status == "ok" and run.reps_done == 4  # as the run would have stored it
    assert "recovered from" in run.cause and str(os.sep) in run.cause
    st = Store(store, recover=False)
    ((status, cause),) = st.rows("SELECT status, cause FROM runs")
    assert status == "ok" and "recovered from" in cause
    assert st.rows("SELECT count(*) FROM region_instances") == [(len(_want()),)]
    assert not spool.exists()
    assert recover_runs(str(store)).recovered == ()  # stored once
