"""Child-process and killed runs lose no finished work (issue 16, items 2-5).

Real processes, real signals: the parent of a child run gets SIGINT (Ctrl-C) or SIGKILL, the child is killed, a
shard is damaged, a status file is torn by a full disk, an in-process run ends with ``os._exit``, a workload forks
and its child returns into the measurement loop.  Each case failed on main before the fix: the run stayed
``running`` with nothing stored, the plan stopped on one bad file, or the host values of a dead child were lost.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from faultkit import WORKLOADS, cli, pid_alive, python, shards, start_python, wait_for

import argus_lab
from argus_lab.plan import Plan, PlannedRun, Request
from argus_lab.store import Store

MEASURE_CHILD = """
import sys, argus_lab
try:
    argus_lab.measure({script!r}, signals="host.wall", repeat={repeat}, warmup=0, store={store!r})
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
print("finished", flush=True)
"""


def _runs(store: Path) -> list[dict[str, object]]:
    return Store(store).records("SELECT run_id, status, reps_done, cause FROM runs ORDER BY started_ns")


def _count(store: Path, sql: str, *params: object) -> int:
    return int(Store(store).rows(sql, list(params))[0][0])


def test_ctrl_c_in_the_parent_stops_the_child_and_keeps_its_repetitions(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    pidfile = tmp_path / "child.pid"
    code = MEASURE_CHILD.format(script=str(WORKLOADS / "slow_steps.py"), repeat=60, store=str(store))
    parent = start_python(code, ARGUS_FORCE_CHILD="1", ARGUS_TEST_PIDFILE=str(pidfile))
    try:
        wait_for("three repetition shards", lambda: len(shards(store)) >= 3)
        parent.send_signal(signal.SIGINT)  # Ctrl-C reaches the parent only (the child runs in a session of its own)
        out, err = parent.communicate(timeout=60)
    finally:
        if parent.poll() is None:
            parent.kill()
    assert parent.returncode == 130, err[-2000:]
    assert "interrupted" in out
    (run,) = _runs(store)
    assert run["status"] == "interrupted", run
    reps = int(run["reps_done"])  # type: ignore[call-overload]
    assert 3 <= reps < 60
    # nothing finished is lost: every finished repetition, and the one Ctrl-C cut short, with its error
    assert _count(store, "SELECT count(*) FROM region_instances WHERE error = ''") == reps
    assert _count(store, "SELECT count(*) FROM region_instances WHERE error <> ''") <= 1
    assert _count(store, "SELECT count(*) FROM metrics WHERE signal = 'host.wall'") >= reps
    assert not pid_alive(int(pidfile.read_text()))  # the child was stopped, not left running
    report = argus_lab.Report(store)
    assert any("interrupted" in line for line in report.coverage())


def test_kill_9_of_the_parent_is_recovered_by_the_next_open(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    pidfile = tmp_path / "child.pid"
    code = MEASURE_CHILD.format(script=str(WORKLOADS / "slow_steps.py"), repeat=8, store=str(store))
    parent = start_python(code, ARGUS_FORCE_CHILD="1", ARGUS_TEST_PIDFILE=str(pidfile))
    try:
        wait_for("two repetition shards", lambda: len(shards(store)) >= 2)
        parent.kill()  # SIGKILL: the parent can neither ingest nor mark anything
        parent.wait(30)
    finally:
        if parent.poll() is None:
            parent.kill()
    (run,) = _runs(store)
    assert run["status"] == "running"  # what the parent left
    folder = store.with_name(store.name + ".runs") / str(run["run_id"])
    wait_for("the orphaned child to finish", lambda: (folder / "status.json").exists())
    wait_for("the orphaned child to exit", lambda: not pid_alive(int(pidfile.read_text())))
    assert cli("show", "--store", str(store)).returncode == 0  # a read recovers nothing (it never writes)
    assert _runs(store)[0]["status"] == "running"

    argus_lab.measure(lambda: None, signals="host.wall", repeat=1, warmup=0, store=str(store))  # the next open

    old = next(r for r in _runs(store) if r["run_id"] == run["run_id"])
    assert old["status"] == "ok"  # the child finished: nothing is missing
    assert old["reps_done"] == 8
    assert "recovered" in str(old["cause"])
    assert _count(store, "SELECT count(*) FROM region_instances WHERE run_id = ?", run["run_id"]) == 8
    assert _count(store, "SELECT count(*) FROM metrics WHERE run_id = ? AND signal = 'host.wall'", run["run_id"]) == 8


def test_kill_9_of_parent_and_child_then_recover_keeps_the_finished_repetitions(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    pidfile = tmp_path / "child.pid"
    code = MEASURE_CHILD.format(script=str(WORKLOADS / "slow_steps.py"), repeat=60, store=str(store))
    parent = start_python(code, ARGUS_FORCE_CHILD="1", ARGUS_TEST_PIDFILE=str(pidfile))
    try:
        wait_for("three repetition shards", lambda: len(shards(store)) >= 3)
        parent.kill()
        parent.wait(30)
        child = int(pidfile.read_text())
        os.kill(child, signal.SIGKILL)
        wait_for("the child to die", lambda: not pid_alive(child))
    finally:
        if parent.poll() is None:
            parent.kill()
    kept = len(shards(store))
    done = cli("recover", "--store", str(store))
    assert done.returncode == 0, done.stderr[-2000:]
    (run,) = _runs(store)
    assert f"recovered {run['run_id']}: died, {kept} repetition(s) kept" in done.stdout
    assert run["status"] == "died"
    assert run["reps_done"] == kept
    assert _count(store, "SELECT count(*) FROM region_instances") == kept
    assert _count(store, "SELECT count(*) FROM metrics WHERE signal = 'host.wall'") == kept  # written per repetition
    assert _count(store, "SELECT count(*) FROM instance_values WHERE signal = 'host.wall'") == kept  # and joined


def test_a_child_killed_mid_run_keeps_the_host_values_of_its_finished_repetitions(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARGUS_FORCE_CHILD", "1")
    report = argus_lab.measure(
        str(WORKLOADS.parent.parent / "workloads" / "killed_on_third.py"),
        signals="host.wall,host.cpu",
        repeat=5,
        warmup=0,
        store=str(store_path),
    )
    (run,) = report.runs
    assert run.status == "died"
    assert _count(store_path, "SELECT count(*) FROM metrics WHERE signal = 'host.wall'") == 2
    assert _count(store_path, "SELECT count(*) FROM metrics WHERE signal = 'host.cpu'") == 2
    assert [(r.path, r.signal, r.instances) for r in report.regions] == [
        ("work", "host.cpu", 2),
        ("work", "host.wall", 2),
    ]
    assert "no region instances were recorded" not in report.text()


def test_a_damaged_shard_is_named_the_others_are_stored_and_the_plan_goes_on(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARGUS_FORCE_CHILD", "1")
    monkeypatch.setenv("ARGUS_TEST_RUNS", str(store_path.with_name(store_path.name + ".runs")))
    req = Request.build("host.wall", repeat=4, warmup=0)
    runs = (PlannedRun(0, ("host",), ("host.wall",), 4, 0, "t"), PlannedRun(1, ("host",), ("host.wall",), 4, 0, "t"))
    from argus_lab.app.measure import run_plan
    from argus_lab.run.workload import Workload

    done = run_plan(Plan(req, runs), Workload.script(WORKLOADS / "damages_a_shard.py"), str(store_path))
    assert [r.status for r in done.execution.results] == ["failed", "failed"]  # both ran: the plan went on
    for r in done.execution.results:
        assert "instances-00000.parquet" in r.cause
        assert r.reps_done == 4  # the child's own count
    per_run = Store(store_path).rows(
        "SELECT run_id, count(*), min(repetition) FROM region_instances GROUP BY run_id ORDER BY run_id"
    )
    assert [(n, first) for _, n, first in per_run] == [(3, 1), (3, 1)]  # repetitions 1..3 of each run kept
    joined = "SELECT count(*) FROM instance_values JOIN region_instances USING (run_id, instance_id) WHERE signal = ?"
    assert _count(store_path, joined, "host.wall") == 6
    assert not done.report.pending  # the join ran


def test_a_status_file_is_never_torn_by_a_full_disk(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    code = f"""
    import resource, signal
    from pathlib import Path
    from argus_lab.run import shards
    folder = Path({str(folder)!r})
    shards.write_status(folder, "ok", "", 3)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (40, 40))  # the disk is full after 40 bytes of a file
    try:
        shards.write_status(folder, "failed", "x" * 500, 2)
    except OSError as exc:
        print("refused:", exc.strerror)
    """
    proc = python(code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "refused: File too large" in proc.stdout
    assert json.loads((folder / "status.json").read_text()) == {"status": "ok", "cause": "", "reps_done": 3}
    assert sorted(p.name for p in folder.iterdir() if not p.name.endswith(".tmp")) == ["status.json"]


def test_a_torn_status_file_is_named_and_the_shards_are_stored(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    pidfile = tmp_path / "child.pid"
    code = MEASURE_CHILD.format(script=str(WORKLOADS / "slow_steps.py"), repeat=4, store=str(store))
    parent = start_python(code, ARGUS_FORCE_CHILD="1", ARGUS_TEST_PIDFILE=str(pidfile))
    try:
        wait_for("a repetition shard", lambda: len(shards(store)) >= 1)
        parent.kill()
        parent.wait(30)
    finally:
        if parent.poll() is None:
            parent.kill()
    (run,) = _runs(store)
    folder = store.with_name(store.name + ".runs") / str(run["run_id"])
    wait_for("the orphaned child to finish", lambda: (folder / "status.json").exists())
    wait_for("the orphaned child to exit", lambda: not pid_alive(int(pidfile.read_text())))
    status = folder / "status.json"
    status.write_bytes(status.read_bytes()[:9])  # torn, as a status written in place by a dying process
    done = cli("recover", "--store", str(store))
    assert done.returncode == 0, done.stderr[-2000:]
    (after,) = _runs(store)
    assert after["status"] == "failed"
    assert "status.json" in str(after["cause"])
    assert _count(store, "SELECT count(*) FROM region_instances") == 4


def test_an_in_process_run_that_dies_is_marked_died_by_the_next_open(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    code = f"""
    import argus_lab
    argus_lab.measure({str(WORKLOADS / "exits_in_process.py")!r}, signals="host.wall", repeat=3, warmup=0,
                      store={str(store)!r})
    """
    proc = python(code)
    assert proc.returncode == 3  # os._exit(3) in the second repetition
    assert [r["status"] for r in _runs(store)] == ["running"]
    argus_lab.measure(lambda: None, signals="host.wall", repeat=1, warmup=0, store=str(store))  # the next open
    first = _runs(store)[0]
    assert first["status"] == "died"
    assert "os._exit" in str(first["cause"]) and "pid" in str(first["cause"])
    report = argus_lab.Report(Store(store), [str(first["run_id"])])
    assert any("died" in line for line in report.coverage())


def test_a_forked_child_that_returns_never_writes_the_parents_run(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    code = f"""
    import os, argus_lab
    r = argus_lab.measure({str(WORKLOADS / "forks_without_exit.py")!r}, signals="host.wall", repeat=3, warmup=0,
                          store={str(store)!r})
    print("done", os.getpid(), r.runs[0].status, flush=True)
    """
    proc = python(code, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("done") == 1, proc.stdout  # the forked children never finished the measurement
    assert proc.stdout.split()[2] == "ok"
    assert "forked by the measured workload" in proc.stderr
    assert [(r["status"], r["reps_done"]) for r in _runs(store)] == [("ok", 3)]
    assert _count(store, "SELECT count(*) FROM region_instances") == 3  # the parent's instances, once each
