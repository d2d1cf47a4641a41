"""Regions on many threads at once: every instance recorded once, with its own id, parent and thread name.

Before the fix, 8 threads x 10,000 nested region pairs in one recording stored 161,769 to 174,455 rows for 160,000
instances (two threads moving the recorder's row list into its columns at once copied one batch twice and deleted
rows nobody had copied), and per-step threads were named by a thread id that Python had reused (``w1`` on the
instances of ``w0``).  Both boundary paths are held to it: the Python one (host.wall) and the C one (the CUPTI
extension's boundary functions, built here; no GPU is needed for them).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

import argus_lab
from argus_lab.backends.cupti import native
from argus_lab.regions import Recorder
from argus_lab.regions.instance_columns import as_values


@pytest.fixture(scope="module")
def extension() -> ModuleType:
    built = native.build()
    if built.module is None:
        pytest.skip(f"the CUPTI extension does not build here: {built.note}")
    return built.module


class _NativeHook:
    """What the CUPTI collector hands the recorder while its native launch path runs."""

    def __init__(self, module: ModuleType) -> None:
        self.current_instance = module.set_current
        self.native_boundary = module


def _recorder(path: str, module: ModuleType | None) -> Recorder:
    hooks: list[Any] = [_NativeHook(module)] if path == "native" and module is not None else []
    return Recorder("stress", hooks, cpu_clock=False)


def _threads(n: int, target: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=target, args=(k,), name=f"w{k}") for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _nested_pairs(per_thread: int) -> Callable[[int], None]:
    def work(k: int) -> None:
        outer = argus_lab.region(f"t{k}")
        for _ in range(per_thread):
            with outer, argus_lab.region("inner"):
                pass

    return work


@pytest.mark.parametrize("path", ["python", "native"])
@pytest.mark.parametrize(("n_threads", "per_thread"), [(8, 10_000), (4, 50_000)])
def test_every_instance_of_every_thread_is_recorded_once(
    path: str, n_threads: int, per_thread: int, request: pytest.FixtureRequest
) -> None:
    module = request.getfixturevalue("extension") if path == "native" else None
    with _recorder(path, module) as rec:
        _threads(n_threads, _nested_pairs(per_thread))
        assert rec.native_boundaries == (path == "native")
    cols = {k: as_values(v) for k, v in rec.columns().items()}  # Python values (columns are arrays)
    ids = cols["instance_id"]
    assert len(ids) == 2 * n_threads * per_thread
    assert len(set(ids)) == len(ids)  # no row stored twice, none lost
    per_path = collections.Counter(cols["path"])
    for k in range(n_threads):
        assert per_path[f"t{k}"] == per_path[f"t{k}/inner"] == per_thread
    by_id = dict(zip(ids, range(len(ids)), strict=True))
    names = rec.thread_names_of(cols["thread_id"], cols["start_ns"])
    for i, (p, parent, tid) in enumerate(zip(cols["path"], cols["parent_instance_id"], cols["thread_id"], strict=True)):
        top = p.split("/")[0]
        assert names[i] == f"w{top[1:]}"  # its own thread's name
        if p.endswith("/inner"):  # the parent is the same thread's open outer instance
            j = by_id[parent]
            assert cols["path"][j] == top and cols["thread_id"][j] == tid
        else:
            assert parent == 0
    # each thread's instances are numbered 0.. within their path, once each
    idx = collections.defaultdict(list)
    for p, k in zip(cols["path"], cols["instance_index"], strict=True):
        idx[p].append(k)
    assert all(sorted(v) == list(range(per_thread)) for v in idx.values())


@pytest.mark.parametrize("path", ["python", "native"])
def test_threads_created_anew_each_step_keep_their_own_names(path: str, request: pytest.FixtureRequest) -> None:
    """Two threads made anew each step (``w0`` runs ``t0_work``, ``w1`` runs ``t1_work``): Python hands the ids of
    the ended threads to the next ones, often swapped; each instance must still carry its own thread's name."""
    module = request.getfixturevalue("extension") if path == "native" else None

    def work(k: int) -> None:
        with argus_lab.region(f"t{k}_work"):
            pass

    with _recorder(path, module) as rec:
        for _ in range(12):
            _threads(2, work)
    cols = {k: as_values(v) for k, v in rec.columns().items()}  # Python values (columns are arrays)
    names = rec.thread_names_of(cols["thread_id"], cols["start_ns"])
    assert len(names) == 24
    assert [(p, n) for p, n in zip(cols["path"], names, strict=True) if p[1] != n[1]] == []
    assert len(set(cols["thread_id"])) < 24  # ids were reused: the case the lookup by time exists for


def test_a_thread_is_named_when_it_opens_its_first_region_not_later() -> None:
    ready, renamed = threading.Event(), threading.Event()

    def work() -> None:
        with argus_lab.region("first"):
            pass
        ready.set()
        renamed.wait(5)
        with argus_lab.region("second"):
            pass

    with Recorder("names", cpu_clock=False) as rec:
        t = threading.Thread(target=work, name="loader-0")
        t.start()
        ready.wait(5)
        t.name = "renamed-later"
        renamed.set()
        t.join()
    cols = {k: as_values(v) for k, v in rec.columns().items()}  # Python values (columns are arrays)
    assert set(rec.thread_names_of(cols["thread_id"], cols["start_ns"])) == {"loader-0"}


@pytest.mark.parametrize("path", ["python", "native"])
def test_a_thread_pools_workers_name_the_instances_they_ran(path: str, request: pytest.FixtureRequest) -> None:
    """A ``ThreadPoolExecutor`` hands tasks to whichever worker is free and its workers outlive the tasks: each
    instance carries the name of the worker that ran it (as the task saw it), never another worker's."""
    from concurrent.futures import ThreadPoolExecutor

    module = request.getfixturevalue("extension") if path == "native" else None
    ran_on: dict[str, str] = {}

    def task(k: int) -> None:
        with argus_lab.region(f"task{k}"):
            ran_on[f"task{k}"] = threading.current_thread().name
            time.sleep(0.002)  # long enough that the pool hands the next tasks to its other workers

    with _recorder(path, module) as rec, ThreadPoolExecutor(3, thread_name_prefix="pool") as ex:
        list(ex.map(task, range(60)))
    cols = {k: as_values(v) for k, v in rec.columns().items()}  # Python values (columns are arrays)
    names = rec.thread_names_of(cols["thread_id"], cols["start_ns"])
    assert dict(zip(cols["path"], names, strict=True)) == ran_on
    assert len(set(ran_on.values())) > 1  # the tasks were spread over several workers


def test_a_measured_pool_stores_each_instance_under_its_workers_name(tmp_path: Any) -> None:
    """The same through ``argus_lab.measure`` into a real store: ``region_instances.thread_name`` per instance."""
    from concurrent.futures import ThreadPoolExecutor

    ran_on: dict[tuple[int, str], str] = {}
    rep = [0]

    def task(k: int) -> None:
        with argus_lab.region(f"task{k}"):
            ran_on[(rep[0], f"task{k}")] = threading.current_thread().name

    def step() -> None:
        with ThreadPoolExecutor(2, thread_name_prefix=f"step{rep[0]}") as ex:
            list(ex.map(task, range(8)))
        rep[0] += 1

    report = argus_lab.measure(step, "host.wall", repeat=3, warmup=0, store=str(tmp_path / "pool.duckdb"))
    rows = report.store.rows("SELECT repetition, path, thread_name FROM region_instances")
    assert {(r, p): n for r, p, n in rows} == ran_on
