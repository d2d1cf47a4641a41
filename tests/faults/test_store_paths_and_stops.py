"""A store is one file whatever path names it, odd store paths answer with a message, SIGTERM stops an in-process
measurement as Ctrl-C does, a damaged schema is refused instead of recreated empty, absurd repetition counts and
names that would break the notebook are refused, and concurrent child regions never make a parent's exclusive time
negative.  Each case failed on main before the fix (docs/reliability.md, the fault table).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from faultkit import WORKLOADS, cli, pid_alive, start_python, wait_for

import argus_lab
from argus_lab.errors import PlanError, SchemaVersionError
from argus_lab.store import Store

MEASURE = """
import sys, argus_lab
argus_lab.measure({script!r}, signals="host.wall", repeat={repeat}, warmup=0, store={store!r}, progress=False)
print("finished", flush=True)
"""


def _runs(store: Path) -> list[dict[str, Any]]:
    return Store(store).records("SELECT run_id, status, reps_done, cause FROM runs ORDER BY started_ns")


def test_a_child_run_through_a_symlinked_store_is_recovered_through_the_real_file(tmp_path: Path) -> None:
    real, link = tmp_path / "real.duckdb", tmp_path / "lk.duckdb"
    argus_lab.measure(lambda: None, "host.wall", repeat=1, warmup=0, store=str(real), progress=False)
    link.symlink_to(real.name)
    pidfile = tmp_path / "child.pid"
    code = MEASURE.format(script=str(WORKLOADS / "slow_steps.py"), repeat=6, store=str(link))
    parent = start_python(code, ARGUS_FORCE_CHILD="1", ARGUS_TEST_PIDFILE=str(pidfile))
    runs = real.with_name("real.duckdb.runs")  # the folders belong to the file, not to the name that opened it
    try:
        wait_for("two repetition shards beside the real file", lambda: len(list(runs.glob("*/instances-*"))) >= 2)
        parent.kill()
        parent.wait(30)
    finally:
        if parent.poll() is None:
            parent.kill()
    wait_for("the orphaned child to exit", lambda: not pid_alive(int(pidfile.read_text())))
    assert not link.with_name("lk.duckdb.runs").exists()
    done = cli("recover", "--store", str(real))
    assert done.returncode == 0, done.stderr[-2000:]
    child = next(r for r in _runs(real) if r["reps_done"] != 1 or r["status"] != "ok")
    assert child["status"] == "ok" and child["reps_done"] == 6, child
    assert "recovered" in str(child["cause"])
    assert Store(link).path == real.resolve()


def test_a_fifo_or_a_folder_as_the_store_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.duckdb"
    os.mkfifo(fifo)
    done = cli("run", str(WORKLOADS / "slow_steps.py"), "--signals", "host.wall", "--repeat", "1", "--store",
               str(fifo), timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "is a named pipe (FIFO), not an evidence store file" in done.stderr
    shown = cli("show", "--store", str(tmp_path), timeout=60)
    assert shown.returncode == 2 and "is a folder, not an evidence store file" in shown.stderr


def test_control_characters_in_a_store_path_never_reach_the_terminal(tmp_path: Path) -> None:
    store = tmp_path / "evil\x1b[31m\u202e.duckdb"
    done = cli("run", str(WORKLOADS / "slow_steps.py"), "--signals", "host.wall", "--repeat", "1", "--store",
               str(store), "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "\x1b" not in done.stdout + done.stderr and "\u202e" not in done.stdout + done.stderr
    assert "evil\\x1b[31m\\u202e.duckdb" in done.stdout


def test_sigterm_to_an_in_process_measurement_keeps_its_finished_repetitions(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    code = MEASURE.format(script=str(WORKLOADS / "slow_steps.py"), repeat=200, store=str(store))
    proc = start_python(code)
    try:
        wait_for("the run to start", lambda: store.exists() and bool(_runs(store)))
        time.sleep(1.2)  # about 8 repetitions of 0.15 s
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    (run,) = _runs(store)
    assert run["status"] == "interrupted", run
    assert "SIGTERM" in str(run["cause"])
    reps = int(run["reps_done"])
    assert 2 <= reps < 200
    n = Store(store).rows("SELECT count(*) FROM region_instances WHERE error = ''")[0][0]
    assert n == reps


def test_the_cli_says_it_was_terminated_and_exits_143(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    cmd = [sys.executable, "-m", "argus_lab.faces.cli", "run", str(WORKLOADS / "slow_steps.py"), "--signals",
           "host.wall", "--repeat", "200", "--store", str(store), "--quiet"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for("the run to start", lambda: store.exists() and bool(_runs(store)))
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err[-2000:]
    assert "argus-lab: terminated (SIGTERM); the runs that ended are stored" in err
    assert _runs(store)[0]["status"] == "interrupted"


@pytest.mark.parametrize("damage", ["DROP TABLE runs", "ALTER TABLE region_instances DROP COLUMN path"])
def test_a_store_missing_a_table_every_store_has_is_refused_not_recreated(tmp_path: Path, damage: str) -> None:
    store = tmp_path / "s.duckdb"
    argus_lab.measure(lambda: None, "host.wall", repeat=1, warmup=0, store=str(store), progress=False)
    con = duckdb.connect(str(store))
    con.execute("DROP VIEW IF EXISTS attributions")
    con.execute("DROP VIEW IF EXISTS instance_values")
    con.execute(damage)
    con.close()
    refused = "which every argus_lab store has: it was changed outside"
    with pytest.raises(SchemaVersionError, match=refused):
        argus_lab.Report(Store(store)).text()
    with pytest.raises(SchemaVersionError, match=refused):
        argus_lab.measure(lambda: None, "host.wall", repeat=1, warmup=0, store=str(store), progress=False)
    shown = cli("show", "--store", str(store))
    assert shown.returncode == 2 and "Traceback" not in shown.stderr and "restore the file" in shown.stderr
    con = duckdb.connect(str(store), read_only=True)
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    con.close()
    assert ("runs" in tables) == (damage != "DROP TABLE runs")  # never recreated empty


def test_an_absurd_repetition_count_is_a_plan_error_not_an_overflow(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="more than one run can record"):
        argus_lab.measure(lambda: None, "host.wall", repeat=99999999999999999999, store=str(tmp_path / "s.duckdb"))
    done = cli("run", str(WORKLOADS / "slow_steps.py"), "--repeat", "99999999999999999999", "--store",
               str(tmp_path / "s.duckdb"))  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr and "measure fewer repetitions" in done.stderr


@pytest.mark.parametrize("line", ["-n 99999999999999999999", "-n 1 -w 99999999999999999999"])
def test_an_absurd_repetition_count_in_the_magic_is_one_usage_line(
    ipython_shell: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str
) -> None:
    ip = ipython_shell
    ip.run_line_magic("argus", f"store {tmp_path / 's.duckdb'}")
    capsys.readouterr()
    res = ip.run_cell(f"%%argus {line}\nx = 1\n")
    assert res.success is False
    assert type(res.error_in_exec).__name__ == "UsageError", repr(res.error_in_exec)  # not OverflowError
    assert "more than one run can record" in str(res.error_in_exec)
    assert "Traceback" not in "".join(capsys.readouterr())


@pytest.mark.parametrize("name", ["__builtins__", "In", "Out", "_", "__", "_i", "_i3", "_7", "_oh", "get_ipython"])
def test_out_refuses_the_names_python_and_ipython_keep(ipython_shell: Any, tmp_path: Path, name: str) -> None:
    ip = ipython_shell
    ip.run_line_magic("argus", f"store {tmp_path / 's.duckdb'}")
    before = ip.user_ns.get(name, "absent")
    res = ip.run_cell(f"%%argus -n 1 -w 0 -o {name}\nx = 1\n")
    assert res.success is False
    assert ip.user_ns.get(name, "absent") is before
    assert ip.run_cell("y = 2\ny").success  # the notebook still works


def test_concurrent_child_regions_never_make_the_parents_exclusive_time_negative(tmp_path: Path) -> None:
    async def child(k: int) -> None:
        with argus_lab.region(f"child{k}"):
            await asyncio.sleep(0.05)

    async def gathered() -> None:
        with argus_lab.region("parent"):
            await asyncio.gather(*(child(k) for k in range(4)))
            await asyncio.sleep(0.02)

    report = argus_lab.measure(lambda: asyncio.run(gathered()), "host.wall,host.cpu", repeat=2, warmup=0,
                               store=str(tmp_path / "s.duckdb"), progress=False)  # fmt: skip
    rows = report.store.rows(
        "SELECT v.signal, v.inclusive, v.exclusive FROM instance_values v JOIN region_instances i "
        "USING (run_id, instance_id) WHERE i.path = 'parent'"
    )
    wall = [(inc, exc) for sig, inc, exc in rows if sig == "host.wall"]
    assert len(wall) == 2
    for inc, exc in wall:  # the 4 children overlap (50 ms together, not 200 ms): about 20 ms is the parent's own
        assert 0 < exc < inc and exc > 0.01e9, wall
    cpu = [exc for sig, _, exc in rows if sig == "host.cpu"]
    assert cpu and all(c is None or c >= 0 for c in cpu), cpu
