"""SYNTHETIC: region entries and exits at the same nanosecond, as a coarse host clock gives them.

The join places a record launched without an instance id, and cuts a sample window, by each thread's innermost-
instance timeline (``argus_lab.join.timeline``).  Guards: when a parent and its child are entered at the same
nanosecond the child is innermost afterwards; when a child and its parent exit at the same nanosecond the
grandparent is; an exit comes before an entry of the same nanosecond; the sample window's split follows the same
order; and samples whose windows meet no open instance are unattributed (the array pass once failed on them).
(Before the timeline was read in this order, DuckDB's ASOF join picked any event of the nanosecond.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_lab.join import attribute_request
from argus_lab.store import Store
from tests.join_synth import Inst, Kern, SynthRun, attributions, values, write

#   thread 1:  a [0, 1000)  b [0, 400) (child of a, entered at a's nanosecond)
#              c [400, 900) (child of a, entered when b exits)  d [500, 900) (child of c: both exit at 900)
INSTANCES = [
    Inst(1, "a", 0, 1000),
    Inst(2, "a/b", 0, 400, parent=1),
    Inst(3, "a/c", 400, 900, parent=1),
    Inst(4, "a/c/d", 500, 900, parent=3),
]
# launched on thread 2 (no region open there, no instance id): placed by thread 1's timeline at the launch call
KERNELS = [
    Kern(10, "at_entry", 0, 100, None, thread=2),  # no launch call time: placed at its start, 0
    Kern(11, "same_ns_entry", 7000, 8000, None, thread=2, api=400),  # b exits and c enters at 400: c
    Kern(12, "same_ns_exits", 9000, 9500, None, thread=2, api=900),  # d and c exit at 900: a
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    st = Store(Path(tmp_path_factory.mktemp("ties")) / "s.duckdb")
    run = SynthRun("r", instances=INSTANCES, kernels=KERNELS, samples=[("sys.power", 0, 100.0, "W")])
    write(st, [run])
    attribute_request(st, ["r"])
    return st


def test_a_launch_goes_to_the_innermost_instance_after_the_events_of_its_nanosecond(store: Store) -> None:
    placed = {r[0]: (r[1], r[2]) for r in attributions(store, "r")}
    assert placed == {
        "0/1/10/0": (2, "temporal"),  # b, entered with a at 0
        "0/1/11/0": (3, "temporal"),  # c: b's exit comes first, then c's entry
        "0/1/12/0": (1, "temporal"),  # a: d and c exit at 900, innermost first
    }


def test_an_instance_entered_with_its_parent_holds_the_time_from_its_first_nanosecond(store: Store) -> None:
    # one sample alone: its window is [0, 1) ns, in b (entered with a at 0), none of it in a itself
    rows = attributions(store, "r", "sample")
    assert [(r[1], r[2], round(float(r[3]), 6)) for r in rows] == [(2, "temporal", 1.0)]
    power = values(store, "r", "sys.power")
    assert power[2] == (pytest.approx(100.0), pytest.approx(100.0))
    assert power[1] == (pytest.approx(100.0), None)  # a's own share is nothing: a level without own time is NULL


def test_samples_whose_windows_meet_no_instance_are_unattributed(tmp_path: Path) -> None:
    # two samples 10 and 20 ms in, long after the only instance ended: no window overlaps an open instance
    st = Store(tmp_path / "s.duckdb")
    samples = [("sys.power", 10_000_000, 100.0, "W"), ("sys.power", 20_000_000, 110.0, "W")]
    write(st, [SynthRun("r", instances=[Inst(1, "a", 0, 100)], kernels=[Kern(1, "k", 10, 20, 1)], samples=samples)])
    attribute_request(st, ["r"])
    rows = attributions(st, "r", "sample")
    assert [(r[1], r[2], float(r[3])) for r in rows] == [(None, "unattributed", 1.0), (None, "unattributed", 1.0)]
    assert values(st, "r", "sys.power") == {}
    assert values(st, "r", "gpu.time") == {1: (10.0, 10.0)}
