"""Region markers: identity, nesting, instances, hooks, and every misuse message."""

from __future__ import annotations

import threading

import pytest

import argus_lab
from argus_lab.errors import CollectorBusyError, RegionMisuseError
from argus_lab.regions import Recorder, Region


def test_identity_is_stable_and_ignores_the_line() -> None:
    a = Region("attn", "host", "model", "/x/model.py", 10)
    b = Region("attn", "host", "model", "/y/model.py", 99)
    assert a.region_id == b.region_id
    assert a.region_id != Region("attn", "host", "other").region_id
    assert a.region_id != Region("attn", "device", "model").region_id
    assert argus_lab.region("attn").region.module == "test_regions"


def test_nested_paths_parents_and_indices() -> None:
    outer, inner = argus_lab.region("outer"), argus_lab.region("inner")
    with Recorder("r") as rec:
        for _ in range(2):
            with outer:
                with inner:
                    assert argus_lab.current_path() == "outer/inner"
                with inner:
                    pass
    rows = rec.instances()
    by_path: dict[str, list[int]] = {}
    for r in rows:
        by_path.setdefault(r.path, []).append(r.instance_index)
    assert by_path == {"outer/inner": [0, 1, 2, 3], "outer": [0, 1]}
    outer_ids = {r.instance_id for r in rows if r.path == "outer"}
    assert all(r.parent_instance_id in outer_ids for r in rows if r.path == "outer/inner")
    assert all(r.end_ns >= r.start_ns > 0 for r in rows)
    assert len({r.instance_id for r in rows}) == len(rows)


def test_decorator_records_each_call_and_keeps_the_result() -> None:
    @argus_lab.region("step")
    def step(x: int) -> int:
        return x * 2

    with Recorder("r") as rec:
        assert [step(i) for i in range(3)] == [0, 2, 4]
    assert [r.path for r in rec.instances()] == ["step"] * 3


def test_body_error_is_recorded_and_propagates() -> None:
    with Recorder("r") as rec, pytest.raises(ZeroDivisionError), argus_lab.region("bad"):
        1 / 0  # noqa: B018
    (row,) = rec.instances()
    assert row.error.startswith("ZeroDivisionError")
    assert argus_lab.current_path() == ""


def test_hooks_see_every_boundary_in_order() -> None:
    events: list[tuple[str, int]] = []

    class Hook:
        def enter(self, instance_id: int) -> None:
            events.append(("enter", instance_id))

        def exit(self, instance_id: int) -> None:
            events.append(("exit", instance_id))

    with Recorder("r", hooks=[Hook()]), argus_lab.region("a"), argus_lab.region("b"):
        pass
    first = events[0][1]
    assert events == [("enter", first), ("enter", first + 1), ("exit", first + 1), ("exit", first)]


def test_without_a_recorder_nothing_is_recorded_but_paths_work() -> None:
    with argus_lab.region("a"), argus_lab.region("b"):
        assert argus_lab.current_path() == "a/b"
    assert argus_lab.regions.active_recorder() is None


def test_threads_have_their_own_stacks() -> None:
    seen: dict[str, str] = {}

    def worker() -> None:
        with argus_lab.region("w"):
            seen["thread"] = argus_lab.current_path()

    with Recorder("r") as rec, argus_lab.region("main"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen["thread"] == "w"
    rows = {r.path: r for r in rec.instances()}
    assert rows["w"].parent_instance_id == 0
    assert rows["w"].thread_id != rows["main"].thread_id


def test_exit_without_enter() -> None:
    marker = argus_lab.region("lonely")
    with pytest.raises(RegionMisuseError, match="enter it first"):
        marker.__exit__(None, None, None)


def test_unbalanced_exit_names_the_open_region() -> None:
    a, b = argus_lab.region("a"), argus_lab.region("b")
    a.__enter__()
    b.__enter__()
    with pytest.raises(RegionMisuseError, match=r"'a/b' is the innermost open region"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)


def test_exit_on_another_thread_than_entry() -> None:
    marker = argus_lab.region("moved")
    marker.__enter__()
    errors: list[Exception] = []

    def other() -> None:
        try:
            marker.__exit__(None, None, None)
        except RegionMisuseError as exc:
            errors.append(exc)

    t = threading.Thread(target=other, name="helper-thread")
    t.start()
    t.join()
    marker.__exit__(None, None, None)
    assert errors
    assert "helper-thread" in str(errors[0])
    assert "exit it on the thread that entered it" in str(errors[0])


@pytest.mark.parametrize(("name", "needle"), [("", "non-empty"), ("a/b", "contains '/'"), (3, "non-empty")])
def test_bad_region_names(name: object, needle: str) -> None:
    with pytest.raises(RegionMisuseError, match=needle):
        argus_lab.region(name)  # type: ignore[arg-type]


def test_second_recorder_is_refused() -> None:
    with Recorder("first"), pytest.raises(CollectorBusyError, match="already active"):
        Recorder("second").activate()
