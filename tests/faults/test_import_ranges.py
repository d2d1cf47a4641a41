"""Hostile annotation ranges in an imported trace: overlapping, identical and deeply nested ranges import with a
bounded depth and bounded paths, and every range is kept (SYNTHETIC traces, written here)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from faultkit import ranges_trace

from argus_lab.app.importing import import_trace
from argus_lab.importers.common import MAX_DEPTH, MAX_PATH_CHARS, nest
from argus_lab.store import Store


def _instances(store: Store, run_id: str) -> list[tuple[str, int, int]]:
    with store.connect() as con:
        rows = con.execute(
            "SELECT path, instance_index, parent_instance_id FROM region_instances WHERE run_id = ? ORDER BY start_ns",
            [run_id],
        ).fetchall()
    return [(str(p), int(i), int(par)) for p, i, par in rows]


def test_ten_thousand_overlapping_ranges_import_as_siblings(tmp_path: Path) -> None:
    """``ts = 10 i, dur = 25``: each range starts inside the previous one and ends after it; none encloses another,
    so every one is a top-level instance (it used to nest each under the previous: depth 10,000)."""
    n = 10_000
    src = ranges_trace(tmp_path, [(10.0 * i, 25.0, "step") for i in range(n)])
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(src, st)
    rows = _instances(st, res.run_id)
    assert len(rows) == n
    assert {p for p, _, _ in rows} == {"step"}
    assert [i for _, i, _ in rows] == list(range(n))
    assert all(par == 0 for _, _, par in rows)
    assert res.imported.settings["annotation_nesting_improper"] == n - 1
    assert any("beside it" in note for note in res.imported.notes)


def test_identical_ranges_nest_to_a_capped_depth(tmp_path: Path) -> None:
    """10^4 ranges with the same start and end: each encloses the next (as Perfetto nests them) up to the depth cap;
    the rest are placed at the deepest level, and a note says how many."""
    n = 10_000
    src = ranges_trace(tmp_path, [(5.0, 100.0, "same")] * n)
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(src, st)
    rows = _instances(st, res.run_id)
    assert len(rows) == n
    depths = [p.count("/") + 1 for p, _, _ in rows]
    assert max(depths) == MAX_DEPTH
    assert max(len(p) for p, _, _ in rows) <= MAX_PATH_CHARS
    assert res.imported.settings["annotation_nesting_capped"] == n - MAX_DEPTH
    assert any("deepest level" in note for note in res.imported.notes)


def test_deep_nesting_of_long_names_keeps_paths_bounded(tmp_path: Path) -> None:
    """2,000 properly nested ranges with 100-character names: paths stop at :data:`MAX_PATH_CHARS` characters."""
    n = 2_000
    src = ranges_trace(tmp_path, [(float(i), float(2 * (n - i)), f"{i:03d}" + "x" * 97) for i in range(n)])
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(src, st)
    rows = _instances(st, res.run_id)
    assert len(rows) == n
    assert max(len(p) for p, _, _ in rows) <= MAX_PATH_CHARS
    kept = MAX_PATH_CHARS // 101  # levels of 100 characters and a separator
    assert res.imported.settings["annotation_nesting_capped"] == n - kept


def test_a_range_nested_in_an_overlapping_pair_belongs_to_the_later_one() -> None:
    """SYNTHETIC: A encloses B and C; C starts inside B and ends after it (siblings under A); D lies inside both B
    and C (its parent: C, the latest-started enclosing range); E, after B ended, lies inside C."""
    names = ["A", "B", "C", "D", "E"]
    start = np.array([0, 10, 20, 25, 32])
    end = np.array([100, 30, 40, 28, 38])
    nst = nest(np.zeros(5, dtype=np.int64), start, end, names)
    assert nst.path == ["A", "A/B", "A/C", "A/C/D", "A/C/E"]
    assert nst.parent_id.tolist() == [0, 1, 1, 3, 3]
    assert nst.improper == 1
    assert nst.closes.tolist() == [True, False, True, True, True]  # after B's end, C is still the innermost


def test_a_launch_after_the_earlier_of_two_overlapping_ranges_ended_belongs_to_the_later(tmp_path: Path) -> None:
    """SYNTHETIC: ``outer`` 0-100 us encloses ``b`` 10-30 and ``c`` 20-40 (c overlaps b); a kernel launched at 35 us,
    after b ended, while c is open, is carried by c (not by outer, where b's end used to return the thread)."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": n, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}
        for n, ts, dur in (("outer", 0.0, 100.0), ("b", 10.0, 20.0), ("c", 20.0, 20.0))
    ]
    events += [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 35.0, "dur": 1.0,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 37.0, "dur": 2.0,
         "args": {"correlation": 1, "device": 0, "stream": 7}},
    ]  # fmt: skip
    src = tmp_path / "pair.json"
    src.write_text(json.dumps({"baseTimeNanoseconds": 1_000_000_000, "traceEvents": events}))
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(src, st)
    with st.connect() as con:
        row = con.execute(
            "SELECT i.path FROM kernels k JOIN region_instances i USING (run_id, instance_id) WHERE k.run_id = ?",
            [res.run_id],
        ).fetchone()
    assert row == ("outer/c",)
