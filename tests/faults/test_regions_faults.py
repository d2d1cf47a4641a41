"""Region markers under hostile use (issue 16): stale stacks, id collisions, asyncio, fork, memory per instance.

Each test reproduces a failure seen on the CPU machine before the fix.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

import argus_lab
from argus_lab.errors import RegionMisuseError
from argus_lab.regions import ABANDONED, Recorder

ROOT = Path(__file__).resolve().parents[2]


def test_a_region_left_open_by_an_earlier_measurement_is_never_a_parent() -> None:
    def gen() -> Iterator[None]:
        with argus_lab.region("g"):
            yield

    it = gen()
    with Recorder("first") as first:
        next(it)  # leaves "g" open on this thread's stack
    with Recorder("second") as second, argus_lab.region("x"):
        assert argus_lab.current_path() == "x"
    (x,) = second.instances()
    assert (x.path, x.parent_instance_id) == ("x", 0)
    (g,) = first.instances()
    assert g.path == "g"
    assert g.error == ABANDONED  # the open instance is kept, marked, not lost
    assert x.instance_id != g.instance_id  # ids never restart with a new recorder
    it.close()  # the generator's region exits now: nothing is recorded twice, nothing raises
    assert [r.instance_id for r in first.instances()] == [g.instance_id]
    assert second.instances() == [x]
    assert argus_lab.current_path() == ""


def test_instance_ids_do_not_collide_across_recorders() -> None:
    marker = argus_lab.region("r")
    seen: list[int] = []
    for k in range(3):
        with Recorder(f"run{k}") as rec:
            for _ in range(5):
                with marker:
                    pass
        seen += [r.instance_id for r in rec.instances()]
    assert len(set(seen)) == len(seen) == 15


def test_the_issue_reproduction_ends_and_keeps_both_runs(tmp_path: Path) -> None:
    store = tmp_path / "cyc.duckdb"
    code = textwrap.dedent(
        f"""
        import argus_lab
        def gen():
            with argus_lab.region("g"):
                yield
        it = gen()
        argus_lab.measure(lambda: next(it), signals="host.wall", repeat=1, warmup=0, store={str(store)!r})
        def w2():
            with argus_lab.region("x"):
                pass
        argus_lab.measure(w2, signals="host.wall", repeat=1, warmup=0, store={str(store)!r})
        import duckdb
        con = duckdb.connect({str(store)!r}, read_only=True)
        print(sorted(con.execute("SELECT path, parent_instance_id, error FROM region_instances").fetchall()))
        """
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == f"[('g', 0, {ABANDONED!r}), ('x', 0, '')]"


def test_concurrent_asyncio_tasks_do_not_nest_into_each_other() -> None:
    async def task(k: int, delay: float) -> str:
        with argus_lab.region(f"task{k}"):
            await asyncio.sleep(delay)
            with argus_lab.region("inner"):
                await asyncio.sleep(delay)
                return argus_lab.current_path()

    async def main() -> list[str]:
        with argus_lab.region("main"):
            # finish in the reverse order of entry: task2 first
            return list(await asyncio.gather(task(0, 0.03), task(1, 0.02), task(2, 0.01)))

    with Recorder("async") as rec:
        paths = asyncio.run(main())
    assert paths == ["main/task0/inner", "main/task1/inner", "main/task2/inner"]
    rows = {r.path: r for r in rec.instances()}
    assert sorted(rows) == ["main", "main/task0", "main/task0/inner", "main/task1", "main/task1/inner", "main/task2",
                            "main/task2/inner"]  # fmt: skip
    for k in range(3):
        assert rows[f"main/task{k}"].parent_instance_id == rows["main"].instance_id
        assert rows[f"main/task{k}/inner"].parent_instance_id == rows[f"main/task{k}"].instance_id
    assert all(r.error == "" for r in rows.values())
    assert argus_lab.current_path() == ""
    with Recorder("next") as nxt, argus_lab.region("after"):  # nothing leaked into the next measurement
        pass
    assert [(r.path, r.parent_instance_id) for r in nxt.instances()] == [("after", 0)]


def test_a_region_exited_in_another_task_is_refused_with_a_message() -> None:
    marker = argus_lab.region("moved")

    async def enter() -> None:
        marker.__enter__()

    async def leave() -> None:
        marker.__exit__(None, None, None)

    async def main() -> None:
        await asyncio.create_task(enter())
        await asyncio.create_task(leave())

    with pytest.raises(RegionMisuseError, match="not open in this asyncio task"):
        asyncio.run(main())


def test_a_region_entered_before_the_loop_is_the_parent_of_the_tasks() -> None:
    async def work() -> None:
        with argus_lab.region("t"):
            await asyncio.sleep(0)

    with Recorder("mixed") as rec, argus_lab.region("outer"):
        asyncio.run(work())
    rows = {r.path: r for r in rec.instances()}
    assert rows["outer/t"].parent_instance_id == rows["outer"].instance_id


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_inside_a_region_disables_the_childs_recorder() -> None:
    read, write = os.pipe()
    with Recorder("parent") as rec, argus_lab.region("outer"):
        pid = os.fork()
        if pid == 0:  # the child: its recorder is off, its regions still work
            try:
                ok = argus_lab.regions.active_recorder() is None and rec.forked
                with argus_lab.region("in_child"):
                    path = argus_lab.current_path()
                os.write(write, f"{ok} {path} {rec.count()}".encode())
            finally:
                os._exit(0)
        os.close(write)
        _, status = os.waitpid(pid, 0)
        with argus_lab.region("after_fork"):
            pass
    report = os.read(read, 1000).decode()
    os.close(read)
    assert os.waitstatus_to_exitcode(status) == 0
    assert report == "True outer/in_child 0"
    assert not rec.forked
    assert sorted(r.path for r in rec.instances()) == ["outer", "outer/after_fork"]


def test_memory_per_recorded_instance_stays_under_200_bytes() -> None:
    n = 50_000
    a, b = argus_lab.region("a"), argus_lab.region("b")
    rec = Recorder("mem", cpu_clock=False)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        with rec:
            for _ in range(n // 2):
                with a, b:
                    pass
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert rec.count() == n
    per_instance = (after - before) / n
    assert per_instance <= 200, f"{per_instance:.0f} bytes per recorded instance"
