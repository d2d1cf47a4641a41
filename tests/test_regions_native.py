"""Region boundaries in C (issue 13): while a native timing run records, ``with region(...)`` on a thread's stack is
one call into the CUPTI extension.  These tests hold it to the Python path: the same workload through both gives
the same rows (one definition of an instance row), and issue 16's guarantees (abandoned instances, per-task stacks
under asyncio, fork, ids, memory per instance) hold with the C path on.

No GPU is needed: the extension builds here, and its ``set_current`` (the boundary's launch-side effect) only stores
the thread's current instance id while no CUPTI subscriber runs; a launch is driven through ``simulate()``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
from test_cupti_native import module  # the extension built once for this module

import argus_lab
from argus_lab import regions
from argus_lab.backends.cupti import native
from argus_lab.errors import RegionMisuseError
from argus_lab.regions import ABANDONED, InstanceRow, Recorder

RUNTIME, ENTER, EXIT = 2, 0, 1
__all__ = ["module"]


class NativeHook:
    """What the CUPTI collector hands the recorder while its native launch path runs."""

    def __init__(self, module: ModuleType) -> None:
        self.current_instance = module.set_current
        self.native_boundary = module


class PythonSink:
    """The same boundary work done from Python: the recorder's Python path with one sink."""

    def __init__(self) -> None:
        self.current: list[int] = []

    def current_instance(self, instance_id: int) -> None:
        self.current.append(instance_id)


def recorder(kind: str, module: ModuleType, run_id: str = "r") -> Recorder:
    hooks: list[Any] = [NativeHook(module)] if kind == "native" else [PythonSink()]
    return Recorder(run_id, hooks, cpu_clock=False)


def workload() -> None:
    """Nesting, a decorator, a raising body, a second thread, a region reused at two depths."""
    outer, inner = argus_lab.region("outer"), argus_lab.region("inner")

    @argus_lab.region("step")
    def step(x: int) -> int:
        with inner:
            return x + 1

    def worker() -> None:
        for _ in range(3):
            with outer, inner:
                pass

    for k in range(3):
        with outer:
            step(k)
            with inner, argus_lab.region("deep"):
                pass
            try:
                with argus_lab.region("fails"):
                    raise KeyError(k)
            except KeyError:
                pass
        with inner:
            pass
    t = threading.Thread(target=worker, name="worker")
    t.start()
    t.join()


def shape(rows: list[InstanceRow]) -> list[tuple[Any, ...]]:
    """Each row with ids replaced by their finishing order and times by their order: what must not differ."""
    order = {r.instance_id: k for k, r in enumerate(rows)}
    main = threading.get_ident()  # a finished thread's id may be reused by the next one: only main vs other
    return [
        (
            r.path,
            r.region_id,
            r.instance_index,
            order.get(r.parent_instance_id, -1),
            r.repetition,
            r.pid,
            r.thread_id == main,
            r.cpu_ns,
            r.error,
            r.end_ns >= r.start_ns > 0,
        )
        for r in rows
    ]


def record(kind: str, module: ModuleType, body: Callable[[], None], reps: int = 2) -> Recorder:
    rec = recorder(kind, module)
    with rec:
        assert rec.native_boundaries == (kind == "native")
        for rep in range(reps):
            rec.repetition = rep
            body()
    return rec


def test_both_paths_record_the_same_rows(module: ModuleType) -> None:
    py = record("python", module, workload)
    c = record("native", module, workload)
    assert shape(c.instances()) == shape(py.instances())
    assert c.columns().keys() == py.columns().keys()
    assert len(shape(c.instances())) == 2 * (3 * 7 + 3 * 2)
    paths = {r.path for r in c.instances()}
    assert paths == {"outer", "outer/step", "outer/step/inner", "outer/inner", "outer/inner/deep", "outer/fails",
                     "inner"}  # fmt: skip
    assert [r.error for r in c.instances() if r.path == "outer/fails"] == ["KeyError: 0", "KeyError: 1",
                                                                           "KeyError: 2"] * 2  # fmt: skip
    assert {r.thread_id for r in c.instances()} <= set(c.thread_names)  # every thread is named


def test_the_c_path_runs_and_sets_the_current_instance_for_launches(module: ModuleType) -> None:
    a, b = argus_lab.region("a"), argus_lab.region("b")
    seen: list[tuple[int, int, int]] = []
    module.allocate(8)
    with recorder("native", module) as rec:
        with a:
            with b:
                seen.append((module.current(), regions.current_instance(), module.boundary_pending()))
                module.simulate(RUNTIME, 211, ENTER, 41)  # a kernel launch inside b
                module.simulate(RUNTIME, 211, EXIT, 41)
            seen.append((module.current(), regions.current_instance(), module.boundary_pending()))
        seen.append((module.current(), regions.current_instance(), module.boundary_pending()))
    rows = {r.path: r for r in rec.instances()}
    ia, ib = rows["a"].instance_id, rows["a/b"].instance_id
    assert seen == [(ib, ib, 0), (ia, ia, 1), (0, 0, 2)]  # rows wait in the C buffer until the recorder takes them
    launches = native.LaunchRecords.from_export(module.export())
    assert launches.instance.tolist() == [ib]
    module.release()


def test_rows_past_the_c_buffer_are_taken_in_order(module: ModuleType) -> None:
    n = 2 * regions._NATIVE_ROWS + 7
    m = argus_lab.region("many")
    with recorder("native", module) as rec:
        rec.repetition = 0
        for k in range(n):
            if k == n // 2:
                rec.repetition = 1
            with m:
                pass
        assert rec.count() == n
    rows = rec.instances()
    assert [r.instance_index for r in rows] == list(range(n))
    assert [r.repetition for r in rows] == [0] * (n // 2) + [1] * (n - n // 2)
    ids = [r.instance_id for r in rows]
    assert ids == sorted(ids) and len(set(ids)) == n


def test_instance_ids_continue_across_python_and_native_runs(module: ModuleType) -> None:
    m = argus_lab.region("r")
    seen: list[int] = []
    for kind in ("python", "native", "python", "native"):
        with recorder(kind, module, kind) as rec:
            for _ in range(4):
                with m:
                    pass
        seen += [r.instance_id for r in rec.instances()]
    assert len(set(seen)) == len(seen) == 16
    assert seen == sorted(seen)


def test_a_region_open_before_the_run_is_not_a_parent_and_exits_quietly(module: ModuleType) -> None:
    def gen() -> Iterator[None]:
        with argus_lab.region("g"):
            yield

    it = gen()
    next(it)  # "g" is open on this thread's stack before the run starts
    with recorder("native", module) as rec, argus_lab.region("x"):
        assert argus_lab.current_path() == "x"
    it.close()
    assert [(r.path, r.parent_instance_id) for r in rec.instances()] == [("x", 0)]
    assert argus_lab.current_path() == ""


def test_an_instance_left_open_is_recorded_as_abandoned(module: ModuleType) -> None:
    def gen() -> Iterator[None]:
        with argus_lab.region("g"), argus_lab.region("h"):
            yield

    it = gen()
    with recorder("native", module) as rec:
        with argus_lab.region("done"):
            pass
        next(it)  # leaves g/h open
    rows = rec.instances()
    assert [(r.path, r.error) for r in rows] == [("done", ""), ("g/h", ABANDONED), ("g", ABANDONED)]
    assert rows[1].parent_instance_id == rows[2].instance_id
    it.close()  # exits after the run: nothing recorded twice, nothing raises
    assert len(rec.instances()) == 3
    assert argus_lab.current_path() == ""


def test_misuse_is_refused_with_the_python_message(module: ModuleType) -> None:
    a, b = argus_lab.region("a"), argus_lab.region("b")
    with recorder("native", module), a:
        b.__enter__()
        with pytest.raises(RegionMisuseError, match="region 'a' was exited while 'a/b' is the innermost open region"):
            a.__exit__(None, None, None)
        b.__exit__(None, None, None)
    with recorder("native", module), pytest.raises(RegionMisuseError, match="not open in this thread"):
        b.__exit__(None, None, None)


def test_asyncio_tasks_fall_back_to_python_and_keep_their_own_stacks(module: ModuleType) -> None:
    async def task(k: int, delay: float) -> str:
        with argus_lab.region(f"task{k}"):
            await asyncio.sleep(delay)
            with argus_lab.region("inner"):
                await asyncio.sleep(delay)
                return argus_lab.current_path()

    async def main() -> list[str]:
        with argus_lab.region("main"):
            return list(await asyncio.gather(task(0, 0.03), task(1, 0.02), task(2, 0.01)))

    with recorder("native", module) as rec, argus_lab.region("outer"):  # "outer" is entered in C
        paths = asyncio.run(main())
    assert paths == ["outer/main/task0/inner", "outer/main/task1/inner", "outer/main/task2/inner"]
    rows = {r.path: r for r in rec.instances()}
    assert rows["outer/main"].parent_instance_id == rows["outer"].instance_id  # a C frame is the tasks' parent
    for k in range(3):
        assert rows[f"outer/main/task{k}"].parent_instance_id == rows["outer/main"].instance_id
        assert rows[f"outer/main/task{k}/inner"].parent_instance_id == rows[f"outer/main/task{k}"].instance_id
    assert len(rows) == 8 and all(r.error == "" for r in rows.values())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_inside_a_region_turns_the_c_path_off_in_the_child(module: ModuleType) -> None:
    read, write = os.pipe()
    with recorder("native", module) as rec, argus_lab.region("outer"):
        pid = os.fork()
        if pid == 0:
            try:
                off = regions.active_recorder() is None and rec.forked and regions._cpath[0] is None
                off = off and argus_lab.region is regions.region  # the C region() is the parent's
                with argus_lab.region("in_child"):
                    path = argus_lab.current_path()
                os.write(write, f"{off} {path} {rec.count()}".encode())
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
    assert sorted(r.path for r in rec.instances()) == ["outer", "outer/after_fork"]


def test_memory_per_instance_with_the_c_path_stays_under_200_bytes(module: ModuleType) -> None:
    n = 50_000
    a, b = argus_lab.region("a"), argus_lab.region("b")
    rec = recorder("native", module)
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
    # the C buffer is a fixed _NATIVE_ROWS rows (untraced, freed at stop); the rows end in the same int64 columns
    per_instance = (after - before) / n
    assert per_instance <= 200, f"{per_instance:.0f} bytes per recorded instance"


def test_the_c_path_is_used_only_when_it_is_the_only_boundary_work(module: ModuleType) -> None:
    assert Recorder("x", [NativeHook(module)], cpu_clock=True).activate().native_boundaries is False
    regions._active[0].deactivate()  # type: ignore[union-attr]
    with Recorder("y", [NativeHook(module), PythonSink()], cpu_clock=False) as rec:
        assert not rec.native_boundaries
    with Recorder("z", [NativeHook(module)], cpu_clock=False) as rec:
        assert rec.native_boundaries
    assert regions._cpath[0] is None


def test_argus_lab_region_is_the_c_function_only_while_the_c_path_runs(module: ModuleType) -> None:
    python_region = regions.region
    assert argus_lab.region is python_region
    with recorder("native", module):
        assert argus_lab.region is module.region
        line = sys._getframe().f_lineno + 1
        first = [argus_lab.region("site") for _ in range(3)]  # one call site: one object, found in C
        assert first[0] is first[1] is first[2]
        assert isinstance(first[0], module.Marker)
        assert isinstance(first[0].marker, regions.RegionMarker)
        assert (first[0].marker.region.line, first[0].marker.region.file) == (line, __file__)  # the caller's site
        assert first[0].region.name == "site" and repr(first[0]) == "region('site')"  # forwarded attributes
        other = argus_lab.region("site")  # another call site: its own marker, with its own line
        assert other is not first[0] and other.region.line == sys._getframe().f_lineno - 1
    assert argus_lab.region is python_region
    with recorder("python", module):
        assert argus_lab.region is python_region


def test_the_c_region_binds_the_region_marker_and_decorates(module: ModuleType) -> None:
    with recorder("native", module) as rec:
        with argus_lab.region("outer") as bound:
            assert isinstance(bound, regions.RegionMarker)
            assert argus_lab.current_path() == "outer"

        @argus_lab.region("step")
        def step(x: int) -> int:
            return x * 2

        assert step(4) == 8 and step.__name__ == "step"
        with argus_lab.region("kw", module="given"):  # keyword arguments: the Python region() decides
            pass
    rows = {r.path: r for r in rec.instances()}
    assert set(rows) == {"outer", "step", "kw"}
    assert rec.regions[rows["kw"].region_id].module == "given"


def test_the_c_region_checks_names_like_the_python_one(module: ModuleType) -> None:
    with recorder("native", module), pytest.raises(RegionMisuseError, match="contains '/'"):
        argus_lab.region("a/b")
    with recorder("native", module), pytest.raises(RegionMisuseError, match="non-empty string"):
        argus_lab.region(3)  # type: ignore[arg-type]


def test_names_built_at_run_time_each_get_their_region(module: ModuleType) -> None:
    with recorder("native", module) as rec:
        for k in range(3):
            for _ in range(2):
                with argus_lab.region(f"layer{k}"):  # one call site, three names: never the cached one of another
                    pass
    assert [r.path for r in rec.instances()] == ["layer0", "layer0", "layer1", "layer1", "layer2", "layer2"]


def test_a_marker_made_during_the_run_still_works_after_it(module: ModuleType) -> None:
    with recorder("native", module):
        kept = argus_lab.region("kept")
    with kept:  # no recorder: the RegionMarker's Python methods keep the stack
        assert argus_lab.current_path() == "kept"
    with recorder("python", module) as rec, kept:
        pass
    assert [r.path for r in rec.instances()] == ["kept"]


def test_the_implicit_regions_first_repetition_keeps_its_id_and_its_warm_up_with_the_c_path(module: ModuleType) -> None:
    """A workload that marks no region (``%%argus`` on a plain cell, ``measure(fn)``) is measured as its implicit
    region; its first repetition is recorded after the fact (``Recorder.record_span``) while the timing run's
    boundaries run in C.  On the H200 that instance took an id of the C buffer's (``ten_kernels`` instance 2 twice)
    and came last in the columns, so the warm-up flag went to the second repetition, the warm-up's 10 kernels counted
    as measured and the per-ordinal table read ordinals 0-19 with 2 launches, then 1.  Both paths must give the same
    rows: unique ids, the warm-up (repetition 0) the first instance, indexes in start order."""
    from argus_lab.run import driver
    from argus_lab.run.workload import Workload

    def ten_kernels() -> None:
        pass

    marker = driver._implicit_marker(Workload.of_callable(ten_kernels))
    assert marker is not None
    rows = {}
    for kind in ("python", "native"):
        rec = recorder(kind, module)
        with rec:
            assert rec.native_boundaries == (kind == "native")
            fn: Callable[[], None] = ten_kernels
            for rep in range(4):  # warm-up + 3 measured repetitions, as driver.drive runs them
                rec.repetition = rep
                if rep == 0:
                    fn = driver._first_repetition(rec, fn, marker)
                else:
                    fn()
        cols = rec.columns()
        order = (cols["start_ns"], cols["instance_id"], cols["repetition"], cols["instance_index"])
        rows[kind] = sorted(zip(*order, strict=True))
        ids = [r[1] for r in rows[kind]]
        assert len(set(ids)) == 4, rows[kind]  # one id per instance
        assert [(r[2], r[3]) for r in rows[kind]] == [(0, 0), (1, 1), (2, 2), (3, 3)], rows[kind]
    assert [r[2:] for r in rows["native"]] == [r[2:] for r in rows["python"]]
