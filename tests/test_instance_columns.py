"""The recorder's instances as columns (issue 35, items 7 and 9): arrays without a Python object per instance, and
the stored ``region_instances`` what they were when the columns were Python lists.

The golden file ``golden/instance_shapes.json`` was written by :func:`shapes` with main at 703d109 (the columns as
lists) on the SYNTHETIC workload ``workloads/instance_shapes.py``, in this process and in a child run.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import argus_lab
from argus_lab.app.measure import run_plan
from argus_lab.plan import Plan, PlannedRun, Request
from argus_lab.regions import Recorder
from argus_lab.run.workload import Workload
from argus_lab.store import Store

HERE = Path(__file__).parent
GOLDEN = HERE / "golden" / "instance_shapes.json"
WORKLOAD = HERE / "workloads" / "instance_shapes.py"
N = 100_000


def _recorded(n: int) -> Recorder:
    a, b = argus_lab.region("a"), argus_lab.region("b")
    rec = Recorder("columns", cpu_clock=False)
    with rec:
        for k in range(n // 2):
            with a, b:
                if k == 7:
                    rec.repetition = 1
    return rec


def _is_array(col: Any) -> bool:
    """A numpy array of numbers or an Arrow array: values in one buffer, no Python object each."""
    import numpy as np
    import pyarrow as pa

    if isinstance(col, np.ndarray):
        return col.dtype.kind in "iub"
    return isinstance(col, pa.Array)


def test_the_columns_of_many_instances_are_arrays_of_a_few_bytes_an_instance() -> None:
    from argus_lab.run.driver import _columns

    rec = _recorded(N)
    rec.columns()  # moves the rows into the recorder's integers and numbers the instances
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cols = rec.columns()
        per_instance = (tracemalloc.get_traced_memory()[0] - before) / N
    finally:
        tracemalloc.stop()
    assert {k: type(v).__name__ for k, v in cols.items() if not _is_array(v)} == {}
    assert all(len(v) == N for v in cols.values())
    # as arrays: 7 int64 fields, 3 int32 ones, 3 one-byte dictionary indices (~71 bytes); as lists: ~300 bytes
    assert per_instance < 120, f"{per_instance:.0f} bytes an instance"
    full = _columns(cols, "r-cols", 1, 0, rec.thread_names_of)
    assert {k: type(v).__name__ for k, v in full.items() if not _is_array(v)} == {}
    assert full["thread_name"].unique().to_pylist() == ["MainThread"]
    assert full["warmup"].sum() == 14  # the first 7 pairs, before the repetition changed


def test_columns_from_a_later_start_continue_the_instance_indices() -> None:
    rec = _recorded(10)
    first = rec.columns()
    assert first["instance_index"].tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert first["path"].to_pylist() == ["a/b", "a"] * 5  # finishing order: the inner one first
    rec.repetition = 1
    with rec, argus_lab.region("a"):
        pass
    later = rec.columns(10)
    assert later["instance_index"].tolist() == [5]
    assert later["path"].to_pylist() == ["a"]
    assert later["repetition"].tolist() == [1]


def _plan() -> Plan:
    req = Request.build("host.wall,host.cpu", repeat=3, warmup=1)
    return Plan(req, (PlannedRun(0, ("host",), ("host.wall", "host.cpu"), 3, 1, "test"),))


COLUMNS = (
    "instance_id, region_id, path, instance_index, parent_instance_id, repetition, pid, thread_id, start_ns, "
    "end_ns, cpu_ns, error, warmup, rank, thread_name"
)


def shapes(store_path: Path, child: bool) -> list[list[Any]]:
    """The stored instances of one run of the workload, with what differs from run to run replaced: ids and parents
    by their place in entry order, thread ids by whether it is the first instance's (Python may reuse the worker's
    id); times, pids and region ids checked and left out."""
    import os

    if child:
        os.environ["ARGUS_FORCE_CHILD"] = "1"
    try:
        run_id = run_plan(_plan(), Workload.script(WORKLOAD), Store(store_path)).execution.run_ids[0]
    finally:
        os.environ.pop("ARGUS_FORCE_CHILD", None)
    store = Store(store_path)
    rows = store.records(f"SELECT {COLUMNS} FROM region_instances WHERE run_id = ? ORDER BY instance_id", [run_id])
    names = dict(store.rows("SELECT region_id, name FROM regions"))
    walls = dict(
        store.rows("SELECT instance_id, value FROM metrics WHERE run_id = ? AND signal = 'host.wall'", [run_id])
    )
    place = {r["instance_id"]: k for k, r in enumerate(rows)}
    out = []
    for r in rows:
        assert names[r["region_id"]] == r["path"].rsplit("/", 1)[-1]
        assert r["start_ns"] <= r["end_ns"] and r["cpu_ns"] >= 0 and r["pid"] > 0
        assert walls[r["instance_id"]] == r["end_ns"] - r["start_ns"]
        parent = r["parent_instance_id"]
        out.append(
            [
                place[r["instance_id"]],
                r["path"],
                r["instance_index"],
                place.get(parent, "outside") if parent else None,
                r["repetition"],
                r["warmup"],
                r["thread_id"] == rows[0]["thread_id"],
                r["thread_name"],
                r["error"],
                r["rank"],
            ]
        )
    assert len({r["pid"] for r in rows}) == 1
    return out


@pytest.mark.parametrize("child", [False, True], ids=["in-process", "child run"])
def test_stored_instances_are_those_stored_when_the_columns_were_lists(tmp_path: Path, child: bool) -> None:
    got = shapes(tmp_path / "s.duckdb", child)
    want = json.loads(GOLDEN.read_text())["child run" if child else "in-process"]
    assert got == want
