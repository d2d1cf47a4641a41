"""Regions opened in processes a measurement starts (DataLoader workers, multiprocessing children, forks) are
recorded there and merged into the run's region_instances once each (argus_lab/regions/worker.py, capture.py).

Real processes and a real torch DataLoader on the CPU; the workloads (tests/worker_regions_cases.py) are SYNTHETIC.
"""

from __future__ import annotations

import multiprocessing
import os
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import worker_regions_cases as cases

import argus_lab
from argus_lab.regions import active_recorder
from argus_lab.store import Store

COLS = (
    "path, instance_index, thread_id, pid, thread_name, repetition, instance_id, parent_instance_id, start_ns, end_ns, "
    "warmup"
)


def _measure(tmp_path: Path, step: Any, repeat: int, warmup: int) -> list[dict[str, Any]]:
    store = tmp_path / "s.duckdb"
    argus_lab.measure(step, "host.wall", repeat=repeat, warmup=warmup, store=str(store), progress=False)
    st = Store(str(store))
    names = [c.strip() for c in COLS.split(",")]
    return [dict(zip(names, r, strict=True)) for r in st.rows(f"SELECT {COLS} FROM region_instances")]


def _check_loader_run(rows: list[dict[str, Any]], items: int, reps: int, workers: int) -> None:
    me = os.getpid()
    ids = [r["instance_id"] for r in rows]
    assert len(ids) == len(set(ids)), "instance ids collide"
    assert len({(r["path"], r["instance_index"]) for r in rows}) == len(rows), "instance indexes repeat"
    loads = [r for r in rows if r["path"] == "load"]
    assert len(loads) == items * reps  # every item's instance exactly once
    for rep in range(reps):
        assert sum(1 for r in loads if r["repetition"] == rep) == items
    assert all(r["pid"] != me for r in loads)
    names = {r["thread_name"] for r in loads}
    assert names <= {f"DataLoader worker {w}" for w in range(workers)} and len(names) == workers
    assert all(r["parent_instance_id"] in (0, None) for r in loads)  # a worker's top level: no parent
    by_id = {r["instance_id"]: r for r in rows}
    decodes = [r for r in rows if r["path"] == "load/decode"]
    assert len(decodes) == items * reps
    for d in decodes:  # nesting inside the worker kept, on its remapped ids
        parent = by_id[d["parent_instance_id"]]
        assert parent["path"] == "load" and parent["pid"] == d["pid"]
        assert parent["start_ns"] <= d["start_ns"] <= d["end_ns"] <= parent["end_ns"]
    steps = [r for r in rows if r["path"] == "step"]  # the measuring process's own regions, as before
    mine = {r["thread_id"] & 0xFFFFFFFF for r in steps}
    theirs = {r["pid"]: r["thread_id"] & 0xFFFFFFFF for r in loads}
    assert len(set(theirs.values())) == len(theirs) and not mine & set(theirs.values()), "threads mix in the join"
    assert [r["repetition"] for r in sorted(steps, key=lambda r: r["start_ns"])] == list(range(reps))
    assert all(r["pid"] == me and r["thread_name"] == "MainThread" for r in steps)
    for load in loads:  # on the measuring process's clock: inside the step that consumed it
        step = next(s for s in steps if s["repetition"] == load["repetition"])
        assert step["start_ns"] <= load["start_ns"] <= load["end_ns"] <= step["end_ns"]


def test_dataloader_fork_workers_regions_are_stored_once_with_the_worker_pid_and_name(tmp_path: Path) -> None:
    seen: list[int] = []
    rows = _measure(tmp_path, cases.loader_step(10, 2, None, seen), repeat=2, warmup=1)
    assert sorted(seen) == sorted(list(range(10)) * 3)
    _check_loader_run(rows, 10, 3, 2)
    assert {r["warmup"] for r in rows if r["repetition"] == 0} == {True}


def test_dataloader_spawn_workers_regions_are_stored_once(tmp_path: Path) -> None:
    seen: list[int] = []
    rows = _measure(tmp_path, cases.loader_step(6, 2, "spawn", seen), repeat=1, warmup=0)
    assert sorted(seen) == list(range(6))
    _check_loader_run(rows, 6, 1, 2)


def test_a_multiprocessing_child_records_under_its_process_name_without_the_parent_region(tmp_path: Path) -> None:
    rows = _measure(tmp_path, cases.process_step(5, "fork"), repeat=2, warmup=0)
    work = [r for r in rows if r["path"] == "child_work"]
    assert len(work) == 10 and {r["thread_name"] for r in work} == {"reader"}
    assert len({r["pid"] for r in work}) == 2 and os.getpid() not in {r["pid"] for r in work}
    assert all(r["parent_instance_id"] in (0, None) for r in work)
    outer = [r for r in rows if r["path"] == "outer"]
    assert len(outer) == 2 and {r["pid"] for r in outer} == {os.getpid()}


def test_a_child_killed_with_sigkill_keeps_what_it_wrote(tmp_path: Path) -> None:
    rows = _measure(tmp_path, cases.killed_step(tmp_path / "ready"), repeat=1, warmup=0)
    killed = [r for r in rows if r["path"] == "before_kill"]
    assert len(killed) == 1
    assert killed[0]["pid"] == int((tmp_path / "ready").read_text())


def test_a_child_forked_inside_an_open_region_does_not_take_it_as_its_own(tmp_path: Path) -> None:
    out = tmp_path / "child_path"
    rows = _measure(tmp_path, cases.fork_inside_region(out), repeat=1, warmup=0)
    assert out.read_text() == "in_child"  # not held/in_child: the parent's open region is not the child's
    paths = sorted((r["path"], r["pid"] == os.getpid()) for r in rows)
    assert paths == [("held", True), ("in_child", False)]  # `held` once: the child's exit of it is not recorded
    child = next(r for r in rows if r["path"] == "in_child")
    assert child["parent_instance_id"] in (0, None)


def test_a_child_process_run_stores_its_workers_instances(tmp_path: Path) -> None:
    """isolate=True: the measured process is a child run; its workers' instances reach the store through its
    shards (ev-region_instances.workers.parquet), with their host.wall values."""
    script = tmp_path / "loader.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\nimport worker_regions_cases as c\n"
        "if __name__ == '__main__':\n    c.loader_step(6, 2, None, [])()\n"
    )
    store = tmp_path / "s.duckdb"
    argus_lab.measure(str(script), "host.wall", repeat=2, warmup=0, isolate=True, store=str(store), progress=False)
    st = Store(str(store))
    got = st.rows(
        "SELECT i.path, count(*), count(DISTINCT i.pid), count(m.value) FROM region_instances i LEFT JOIN metrics m "
        "ON m.run_id = i.run_id AND m.instance_id = i.instance_id AND m.signal = 'host.wall' GROUP BY ALL ORDER BY 1"
    )
    assert [tuple(r) for r in got] == [("load", 12, 4, 12), ("load/decode", 12, 4, 12), ("step", 2, 1, 2)]
    assert sorted(r[0] for r in st.rows("SELECT name FROM regions")) == ["decode", "load", "step"]


def _report_recording(path: str) -> None:
    with argus_lab.region("unmeasured"):
        rec = active_recorder()
        Path(path).write_text(f"{rec is not None} {os.environ.get('ARGUS_REGION_SPOOL') is not None}")


def test_without_a_run_started_processes_record_nothing_and_write_no_files(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    argus_lab.measure(lambda: None, "host.wall", repeat=1, warmup=0, store=str(store), progress=False)
    assert not list(tmp_path.glob("s.duckdb.runs/*/workers")), "a run that started no process leaves no spool"
    for method in ("fork", "spawn"):  # after the run: nothing records, in the parent nor in its children
        proc = multiprocessing.get_context(method).Process(target=_report_recording, args=(str(tmp_path / method),))
        proc.start()
        proc.join()
        assert (tmp_path / method).read_text() == "False False", method
    seen: list[int] = []
    cases.loader_step(4, 2, None, seen)()  # a DataLoader with workers outside every run
    assert sorted(seen) == list(range(4)) and active_recorder() is None
    files = [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if re.search(r"\d+-\d+\.json", p.name)]
    assert files == []
