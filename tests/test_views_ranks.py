"""Ranks in the views, on the two-rank H200 evidence (tests/data/gpu/two_ranks): the timeline's lanes are keyed by
(rank, thread) and (rank, device, stream), every rank is drawn on rank 0's clock, and a scope ``ranks=1`` keeps
rank 1 alone, in the Report's tables and in the timeline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from argus_lab.errors import ArgusError
from argus_lab.report import Report
from argus_lab.store import Store
from argus_lab.views import timeline_figure
from argus_lab.views.bundle import build

DATA = Path(__file__).parent / "data" / "gpu" / "two_ranks"
RUNS = json.loads((DATA / "runs.json").read_text())
(OVERLAPPED,) = next(r for r in RUNS["stores"]["nccl_overlap_2r"]["requests"] if r["label"] == "train-overlapped")[
    "runs"
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    path = tmp_path_factory.mktemp("views") / "n.duckdb"
    shutil.copy(DATA / "nccl_overlap_2r.duckdb", path)
    return Store(path)


def _offset(store: Store, rank: int) -> int:
    """Mean of the rank's before/after estimates, rounded half away from zero (docs: argus_lab.join.skew)."""
    est = [
        json.loads(s)["offset_ns"]
        for (s,) in store.rows(
            "SELECT settings FROM provenance WHERE run_id = ? AND backend = 'clock' AND settings->>'rank' = ?",
            [OVERLAPPED, str(rank)],
        )
    ]
    mean = sum(est) / len(est)
    return int(mean + 0.5) if mean >= 0 else -int(-mean + 0.5)


def test_timeline_lanes_are_keyed_by_rank_then_thread_or_device_and_stream(store: Store) -> None:
    (tl,) = build(Report(store, [OVERLAPPED]))["timelines"]
    lanes = tl["lanes"]
    assert tl["ranks"] == [0, 1]
    assert [lane["rank"] for lane in lanes] == sorted(lane["rank"] for lane in lanes)  # rank 0's lanes first
    for rank in (0, 1):
        mine = [lane for lane in lanes if lane["rank"] == rank]
        kinds = [lane["kind"] for lane in mine]
        assert kinds == sorted(kinds, key=lambda k: k != "host")  # the rank's threads, then its streams
        devices = [(lane["device"], lane["stream"]) for lane in mine if lane["kind"] == "device"]
        assert devices == [(rank, 7), (rank, 17)]  # compute stream and NCCL's stream of the rank's own GPU
        assert all(lane["label"].startswith(f"rank {rank} \u00b7 ") for lane in mine)
        assert f"rank {rank} \u00b7 GPU {rank} stream 17" in [lane["label"] for lane in mine]
    # every drawn row sits on a lane of its own rank
    host, dev = tl["host"], tl["device"]
    assert [lanes[i]["rank"] for i in host["lane"]] == host["rank"]
    n_rank = {r: sum(1 for i in dev["lane"] if lanes[i]["rank"] == r) for r in (0, 1)}
    assert n_rank == {
        r: store.rows("SELECT count(*) FROM kernels WHERE run_id = ? AND rank = ?", [OVERLAPPED, r])[0][0]
        for r in (0, 1)
    }


def test_every_rank_is_drawn_on_rank_0s_clock(store: Store) -> None:
    (tl,) = build(Report(store, [OVERLAPPED]))["timelines"]
    off1 = _offset(store, 1)
    assert off1 != 0  # the recorded estimate; the test would not see a missing shift otherwise
    assert tl["clock"]["offsets_ns"] == {"0": 0, "1": off1}
    t0 = int(tl["t0"])
    starts = dict(
        store.rows(
            "SELECT instance_id, start_ns + CASE WHEN rank = 1 THEN ? ELSE 0 END FROM region_instances "
            "WHERE run_id = ?",
            [off1, OVERLAPPED],
        )
    )
    for iid, start in zip(tl["host"]["iid"], tl["host"]["start"], strict=True):
        assert start == starts[iid] - t0
    kstart = sorted(
        s - t0
        for (s,) in store.rows(
            "SELECT start_ns + CASE WHEN rank = 1 THEN ? ELSE 0 END FROM kernels WHERE run_id = ?", [off1, OVERLAPPED]
        )
    )
    assert sorted(tl["device"]["start"]) == kstart
    fig = timeline_figure(Report(store, [OVERLAPPED]))
    assert "rank 0's clock" in fig.layout.xaxis.title.text
    assert "rank 1 \u00b7 GPU 1 stream 17" in fig.layout.yaxis.ticktext


def test_a_scope_ranks_1_keeps_rank_1_in_tables_and_timeline(store: Store) -> None:
    full = Report(store, [OVERLAPPED])
    one = full.scoped("ranks=1")
    assert one.view_scope == "ranks=1" and "scope: ranks=1" in one.text()
    n_full = {r.path: r.instances for r in full.regions if r.signal == "host.wall"}
    n_one = {r.path: r.instances for r in one.regions if r.signal == "host.wall"}
    assert n_one == {p: n // 2 for p, n in n_full.items()}  # the same instances on each rank, half of them
    assert {k.run_id for k in one.kernels} == {OVERLAPPED}
    (tl,) = build(one)["timelines"]
    assert {lane["rank"] for lane in tl["lanes"]} == {1}
    assert all(lane["label"].startswith("rank 1 \u00b7 ") for lane in tl["lanes"])
    assert set(tl["host"]["rank"]) == {1}
    assert (
        tl["device"]["total"]
        == store.rows("SELECT count(*) FROM kernels WHERE run_id = ? AND rank = 1", [OVERLAPPED])[0][0]
    )
    # scoped() replaces the report's own scope (the requests' scopes stay underneath)
    again = Report(store, [OVERLAPPED], scope="ranks=0").scoped("ranks=1")
    assert {r.path: r.instances for r in again.regions if r.signal == "host.wall"} == n_one


def test_streams_and_devices_in_a_scope_select_kernels_too(store: Store) -> None:
    (tl,) = build(Report(store, [OVERLAPPED], scope="ranks=0; streams=17"))["timelines"]
    dev = [lane for lane in tl["lanes"] if lane["kind"] == "device"]
    assert [(lane["rank"], lane["device"], lane["stream"]) for lane in dev] == [(0, 0, 17)]


def test_a_malformed_view_scope_names_the_column_and_a_valid_example(store: Store) -> None:
    with pytest.raises(ArgusError, match=r"(?s)malformed scope at column 7.*a valid scope looks like"):
        Report(store, [OVERLAPPED], scope="ranks=one")
