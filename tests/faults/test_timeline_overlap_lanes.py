"""Ranges that overlap without nesting, drawn as Perfetto draws them: instances of one thread and depth that overlap
in time go to overlap lanes of that thread in the report's timeline (the exported HTML and ``views.timeline_figure``
read the same data), each lane's bars side by side, never over each other.  tests/test_browser_report.py opens such
a report in chromium."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
from faultkit import ranges_trace

from argus_lab.app.importing import import_trace
from argus_lab.report import Report
from argus_lab.store import Store
from argus_lab.views.bundle import build
from argus_lab.views.perfetto import write_trace
from argus_lab.views.timeline import figure, timeline_data


def _overlapping_report(tmp_path: Path, n: int, dur: float) -> Report:
    """SYNTHETIC: ``n`` ranges ``ts = 10 i``, ``dur`` us on one thread (each starts inside the one before)."""
    src = ranges_trace(tmp_path, [(10.0 * i, dur, "step") for i in range(n)])
    st = Store(tmp_path / "s.duckdb")
    return Report(st, [import_trace(src, st).run_id])


def _host_bars_per_lane(tl: dict[str, Any]) -> dict[str, list[tuple[int, int]]]:
    host = tl["host"]
    out: dict[str, list[tuple[int, int]]] = {}
    for lane, s, e in zip(host["lane"], host["start"], host["end"], strict=True):
        out.setdefault(tl["lanes"][lane]["label"], []).append((s, e))
    return out


def _assert_no_bar_overlaps_another_of_its_lane(bars: dict[str, list[tuple[int, int]]]) -> None:
    for label, spans in bars.items():
        spans = sorted(spans)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), label


def test_overlapping_sibling_ranges_go_to_overlap_lanes_of_their_thread(tmp_path: Path) -> None:
    """``dur = 15``: each range overlaps the next only: two lanes, the first the thread's usual row."""
    report = _overlapping_report(tmp_path, 40, 15.0)
    (tl,) = build(report)["timelines"]
    bars = _host_bars_per_lane(tl)
    assert sorted(bars) == ["thread 1", "thread 1 (overlap lane 1)"]
    assert len(bars["thread 1"]) == len(bars["thread 1 (overlap lane 1)"]) == 20  # even ranges, odd ranges
    _assert_no_bar_overlaps_another_of_its_lane(bars)
    host_lanes = [lane for lane in tl["lanes"] if lane["kind"] == "host"]
    assert [lane["overlap_lane"] for lane in host_lanes] == [0, 1]
    assert {lane["thread"] for lane in host_lanes} == {"thread 1"}  # hover names the thread, not the lane


def test_three_ranges_open_at_once_need_three_lanes_as_in_the_perfetto_export(tmp_path: Path) -> None:
    """``ts = 10 i, dur = 25`` (the hostile trace of the fault report): ranges i, i+1 and i+2 are open together at
    ``10 i + 20``: three lanes, as many as the Perfetto export's overlap lanes of that thread."""
    report = _overlapping_report(tmp_path, 60, 25.0)
    (tl,) = build(report)["timelines"]
    bars = _host_bars_per_lane(tl)
    assert sorted(bars) == ["thread 1", "thread 1 (overlap lane 1)", "thread 1 (overlap lane 2)"]
    _assert_no_bar_overlaps_another_of_its_lane(bars)
    out = tmp_path / "t.json"
    write_trace(report.store, report.run_ids[0], out)
    events = json.loads(out.read_text())["traceEvents"]
    tracks = {e["tid"] for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"}
    assert len(tracks) == len(bars)
    fig = figure(tl)  # the notebook's plotly figure labels the same lanes
    assert list(fig.layout.yaxis.ticktext)[:3] == ["thread 1", "thread 1 (overlap lane 1)", "thread 1 (overlap lane 2)"]


def test_concurrent_asyncio_tasks_of_one_thread_get_lanes_and_nested_ones_keep_their_level() -> None:
    """SYNTHETIC columns: two asyncio tasks on one thread run ``fetch`` at once (each with a nested ``parse``); a
    third ``fetch`` starts when the first ended (touching is not overlapping: it takes the freed first lane)."""
    start = np.array([0, 10, 20, 30, 100])
    end = np.array([100, 120, 60, 70, 150])
    paths = np.array(["fetch", "fetch", "fetch/parse", "fetch/parse", "fetch"], dtype=object)
    n = len(start)
    inst = {
        "instance_id": np.arange(1, n + 1),
        "path": paths,
        "instance_index": np.array([0, 1, 0, 1, 2]),
        "pid": np.full(n, 1),
        "thread_id": np.full(n, 7),
        "start_ns": start,
        "end_ns": end,
        "error": np.full(n, "", dtype=object),
        "warmup": np.zeros(n, dtype=bool),
    }
    tl = timeline_data("r", inst, {})
    labels = [tl["lanes"][lane]["label"] for lane in tl["host"]["lane"]]
    assert labels == [
        "thread 1",
        "thread 1 (overlap lane 1)",
        "thread 1 (level 2)",
        "thread 1 (level 2) (overlap lane 1)",
        "thread 1",
    ]
    _assert_no_bar_overlaps_another_of_its_lane(_host_bars_per_lane(tl))


def test_overlap_lanes_are_shared_from_the_last_lane_on() -> None:
    """SYNTHETIC: 10 ranges open at once with room for 4 lanes: lanes 0-3, the rest share lane 3."""
    from argus_lab.views.timeline import overlap_lanes

    lanes = overlap_lanes(np.zeros(10, dtype=np.int64), np.arange(10), np.full(10, 100), last=3)
    assert lanes.tolist() == [0, 1, 2, 3, 3, 3, 3, 3, 3, 3]
