"""Cross-rank clock offsets (argus_lab.run.clock_sync) and region skew (argus_lab.join.skew): unit tests of the offset
arithmetic and the ping-pong protocol on a fake store, the skew SQL on a SYNTHETIC store with an injected offset,
and real torchrun + gloo runs on the CPU."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import argus_lab
from argus_lab.join import attribute_request
from argus_lab.report import Report
from argus_lab.run.clock_sync import ClockOffset, Endpoint, Sample, best_sample, endpoint_from_env, exchange
from argus_lab.store import Store

WORKLOADS = Path(__file__).parent / "workloads"
TORCHRUN = (sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2")
MS = 1_000_000


# -- offset arithmetic --------------------------------------------------------------------------------------------
def test_offset_is_reference_time_minus_the_midpoint_and_uncertainty_half_the_round_trip() -> None:
    s = Sample(t_send_ns=1_000, t_ref_ns=6_000, t_recv_ns=1_400)
    assert s.round_trip_ns == 400
    assert s.offset_ns == 6_000 - 1_200  # rank-0 time = rank time + offset
    assert s.uncertainty_ns == 200


def test_the_sample_with_the_smallest_round_trip_wins() -> None:
    slow = Sample(0, 10_500, 1_000)  # a long round trip: offset 10_000 +- 500
    fast = Sample(2_000, 12_050, 2_100)  # offset 10_000 +- 50
    assert best_sample([slow, fast, slow]) is fast
    est = ClockOffset.from_samples(1, 2, "before", [slow, fast])
    assert (est.status, est.offset_ns, est.uncertainty_ns, est.round_trip_ns, est.samples) == (
        "estimated",
        10_000,
        50,
        100,
        2,
    )
    assert est.at_ns == 2_050
    with pytest.raises(ValueError, match="no clock samples"):
        best_sample([])
    assert ClockOffset.from_samples(1, 2, "after", [], reason="x").status == "not estimated"


def test_provenance_row_carries_the_estimate() -> None:
    est = ClockOffset.from_samples(1, 2, "after", [Sample(0, 700, 200)], endpoint="localhost:1")
    cols = est.provenance_columns("r-1")
    assert cols["provenance_id"] == ["r-1:clock:rank1:after"]
    assert cols["backend"] == ["clock"]
    settings = json.loads(cols["settings"][0])
    assert settings | {"method": ""} == {
        "rank": 1,
        "world_size": 2,
        "phase": "after",
        "status": "estimated",
        "offset_ns": 600,
        "uncertainty_ns": 100,
        "round_trip_ns": 200,
        "samples": 1,
        "at_ns": 100,
        "method": "",
        "reason": "",
    }
    assert "round_trip / 2" in settings["method"]


# -- the ping-pong on an in-memory store --------------------------------------------------------------------------
class FakeStore:
    """A thread-safe key-value store with TCPStore's blocking get (raises on timeout)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.cond = threading.Condition()
        self.timeout_s = 5.0
        self.local = threading.local()

    def set(self, key: str, value: str) -> None:
        with self.cond:
            self.data[key] = value.encode()
            self.cond.notify_all()

    def get(self, key: str) -> bytes:
        timeout = getattr(self.local, "timeout_s", 5.0)
        with self.cond:
            if not self.cond.wait_for(lambda: key in self.data, timeout):
                raise TimeoutError(f"key {key} not set")
            return self.data[key]

    def set_timeout(self, timeout: Any) -> None:
        self.local.timeout_s = timeout.total_seconds()


def _pair(
    rank1: Callable[[FakeStore, Endpoint], ClockOffset], first_timeout_s: float = 5.0
) -> tuple[ClockOffset, ClockOffset]:
    store = FakeStore()
    eps = [Endpoint("fake", 1, r, 2, "argus/clock/r-x///before") for r in (0, 1)]
    out: dict[int, ClockOffset] = {}
    t = threading.Thread(
        target=lambda: out.__setitem__(
            0, exchange(store, eps[0], "before", samples=8, first_timeout_s=first_timeout_s, sample_timeout_s=1.0)
        )
    )
    t.start()
    out[1] = rank1(store, eps[1])
    t.join(10)
    return out[0], out[1]


def test_ping_pong_recovers_a_known_clock_offset() -> None:
    """Rank 1's clock runs 5 ms behind rank 0's: the estimate is +5 ms within its uncertainty."""
    behind = 5 * MS

    def rank1(store: FakeStore, ep: Endpoint) -> ClockOffset:
        return exchange(store, ep, "before", samples=8, clock=lambda: time.time_ns() - behind)

    r0, r1 = _pair(rank1)
    assert (r0.status, r0.offset_ns, r0.samples) == ("reference", 0, 8)
    assert r1.status == "estimated" and r1.samples == 8
    assert r1.offset_ns is not None and r1.uncertainty_ns is not None
    assert 0 < r1.uncertainty_ns < 50 * MS
    assert abs(r1.offset_ns - behind) <= r1.uncertainty_ns + 1


def test_a_rank_that_skips_releases_rank_0_at_once() -> None:
    def rank1(store: FakeStore, ep: Endpoint) -> ClockOffset:
        return exchange(store, ep, "after", skip="the workload did not finish on this rank (failed)")

    t0 = time.monotonic()
    r0, r1 = _pair(rank1, first_timeout_s=30.0)
    assert time.monotonic() - t0 < 5  # rank 0 did not wait out its 30 s timeout
    assert r1.status == "not estimated" and "did not finish" in r1.reason
    assert r0.status == "reference" and "rank 1: did not take part" in r0.reason


def test_rank_0_stops_waiting_and_tells_the_late_rank() -> None:
    def rank1(store: FakeStore, ep: Endpoint) -> ClockOffset:
        time.sleep(0.6)  # later than rank 0's timeout for the first ping
        return exchange(store, ep, "before", first_timeout_s=5.0)

    r0, r1 = _pair(rank1, first_timeout_s=0.3)
    assert "rank 1: no ping 0 within the timeout" in r0.reason
    assert r1.status == "not estimated" and "rank 0 stopped waiting" in r1.reason


def test_without_a_torchrun_store_the_reason_says_how_to_get_one() -> None:
    why = endpoint_from_env({"WORLD_SIZE": "2", "RANK": "1"}, "r-1", "before")
    assert isinstance(why, str) and "MASTER_ADDR, MASTER_PORT not set" in why and "torchrun" in why
    env = {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "29500"}
    why = endpoint_from_env(env, "r-1", "before")
    assert isinstance(why, str) and "TORCHELASTIC_USE_AGENT_STORE" in why
    ep = endpoint_from_env({**env, "TORCHELASTIC_USE_AGENT_STORE": "True"}, "r-1", "after")
    assert isinstance(ep, Endpoint) and (ep.host, ep.port, ep.rank, ep.world_size) == ("h", 29500, 1, 2)
    # keys are unique per run and phase, so repeated runs never read each other's pongs
    other = endpoint_from_env({**env, "TORCHELASTIC_USE_AGENT_STORE": "True"}, "r-2", "after")
    before = endpoint_from_env({**env, "TORCHELASTIC_USE_AGENT_STORE": "True"}, "r-1", "before")
    assert isinstance(other, Endpoint) and isinstance(before, Endpoint)
    assert len({ep.prefix, other.prefix, before.prefix}) == 3


# -- the skew SQL on a synthetic store ----------------------------------------------------------------------------
T0 = 1_795_938_194_000_000_000


def _synthetic_two_ranks(store: Store, rank1_ahead_ns: int, estimated: bool = True) -> str:
    """SYNTHETIC: one run, two ranks, two repetitions of `step` (rank 1 enters 30 ms late, both leave together),
    rank 1's clock `rank1_ahead_ns` ahead of rank 0's, and clock records saying so (before/after +-2 us)."""
    run = "r-synth"
    store.write({"runs": {"run_id": [run], "plan_index": [0], "status": ["ok"], "backends": [["host"]]}})
    rows: dict[str, list[Any]] = {k: [] for k in ("run_id", "instance_id", "path", "repetition", "start_ns")}
    rows |= {"end_ns": [], "rank": [], "thread_id": [], "warmup": []}
    for rep in range(2):
        base = T0 + rep * 1_000 * MS
        for rank, start in ((0, base), (1, base + 30 * MS)):
            rows["run_id"].append(run)
            rows["instance_id"].append((rank << 40) + rep + 1)
            rows["path"].append("step")
            rows["repetition"].append(rep)
            shift = rank1_ahead_ns if rank == 1 else 0
            rows["start_ns"].append(start + shift)
            rows["end_ns"].append(base + 100 * MS + shift)
            rows["rank"].append(rank)
            rows["thread_id"].append(1)
            rows["warmup"].append(False)
    prov: dict[str, list[Any]] = {k: [] for k in ("provenance_id", "run_id", "backend", "settings")}
    for rank, phase, off in (
        (0, "before", 0),
        (1, "before", -rank1_ahead_ns - 2_000),
        (1, "after", -rank1_ahead_ns + 2_000),
    ):
        status = "reference" if rank == 0 else "estimated" if estimated else "not estimated"
        prov["provenance_id"].append(f"{run}:clock:rank{rank}:{phase}")
        prov["run_id"].append(run)
        prov["backend"].append("clock")
        prov["settings"].append(
            json.dumps({"rank": rank, "phase": phase, "status": status, "offset_ns": off if estimated else None})
        )
    store.write({"region_instances": rows, "provenance": prov})
    attribute_request(store, [run])
    return run


def _lags(store: Store, run: str) -> dict[tuple[str, int, int], float]:
    rows = store.rows(
        "SELECT v.signal, i.rank, i.repetition, v.inclusive, v.exclusive, v.unit, v.provenance_id "
        "FROM instance_values v JOIN region_instances i USING (run_id, instance_id) "
        "WHERE v.run_id = ? AND v.signal LIKE 'rank.%'",
        [run],
    )
    assert all(r[4] is None and r[5] == "ns" and r[6].startswith(f"{run}:clock:rank{r[1]}:") for r in rows)
    return {(sig, rank, rep): val for sig, rank, rep, val, *_ in rows}


def test_skew_is_computed_on_rank_0s_clock(store_path: Path) -> None:
    """Rank 1's clock is 1 s ahead; corrected by its recorded offset, its start lag is the true 30 ms."""
    store = Store(store_path)
    run = _synthetic_two_ranks(store, rank1_ahead_ns=1_000 * MS)
    lags = _lags(store, run)
    assert len(lags) == 8  # 2 signals x 2 ranks x 2 repetitions
    for rep in (0, 1):
        assert lags["rank.start_lag", 0, rep] == 0
        assert lags["rank.start_lag", 1, rep] == 30 * MS  # the mean of before/after: the +-2 us cancel
        assert lags["rank.end_lag", 0, rep] == 0
        assert lags["rank.end_lag", 1, rep] == 0
    report = Report(store, [run])
    (row,) = report.ranks
    assert (row.path, row.ranks, row.occurrences, row.last_to_start) == ("step", 2, 2, 1)
    assert row.start_skew_median == row.start_skew_max == 30 * MS
    assert row.end_skew_max == 0
    assert "30 ms" in report.rank_table()
    regions = {r.signal: r for r in report.regions}
    assert regions["rank.start_lag"].max == 30 * MS and regions["rank.start_lag"].min == 0
    # the JSON form carries the ranks and clock offsets as docs/report-json.schema.json describes them
    import jsonschema

    doc = json.loads(report.to_json())
    jsonschema.validate(doc, json.loads((Path(__file__).parents[1] / "docs" / "report-json.schema.json").read_text()))
    assert doc["ranks"][0]["start_skew_max"] == 30 * MS
    assert {(c["rank"], c["status"]) for c in doc["clock_offsets"]} >= {(1, "estimated")}


def test_an_unestimated_offset_leaves_the_clock_as_it_is_and_says_so(store_path: Path) -> None:
    store = Store(store_path)
    run = _synthetic_two_ranks(store, rank1_ahead_ns=1_000 * MS, estimated=False)
    lags = _lags(store, run)
    assert lags["rank.start_lag", 1, 0] == 1_030 * MS  # uncorrected
    assert lags["rank.end_lag", 1, 0] == 1_000 * MS
    cov = Report(store, [run]).coverage()
    assert any("rank 1: clock offset not estimated" in c for c in cov)


def test_single_rank_runs_get_no_lags(store_path: Path) -> None:
    store = Store(store_path)
    report = argus_lab.measure(
        str(WORKLOADS / "nested.py"), "host.wall,rank.start_lag", repeat=1, warmup=0, store=str(store_path)
    )
    assert store.rows("SELECT count(*) FROM instance_values WHERE signal LIKE 'rank.%'") == [(0,)]
    assert report.ranks == ()
    assert any("no run of this report has more than one rank" in c and "torchrun" in c for c in report.coverage())


# -- real ranks: torchrun + gloo on the CPU -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def skew_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Report]:
    pytest.importorskip("torch.distributed", reason="torch is needed for the gloo multi-rank test")
    path = tmp_path_factory.mktemp("skew") / "evidence.duckdb"
    report = argus_lab.measure(
        str(WORKLOADS / "gloo_skew.py"), "host.wall", repeat=2, warmup=0, store=str(path), launch=TORCHRUN
    )
    (run,) = report.runs
    assert run.status == "ok", run.cause
    return Store(path), report


def test_both_ranks_record_their_clock_offset_before_and_after(skew_run: tuple[Store, Report]) -> None:
    _, report = skew_run
    offs = {(o.rank, o.phase): o for o in report.clock_offsets}
    assert set(offs) == {(r, p) for r in (0, 1) for p in ("before", "after")}
    for phase in ("before", "after"):
        r0, r1 = offs[0, phase], offs[1, phase]
        assert (r0.status, r0.offset_ns) == ("reference", 0)
        assert r1.status == "estimated", r1.reason
        assert r1.offset_ns is not None and abs(r1.offset_ns) < 5 * MS  # one host, one CLOCK_REALTIME
        assert r1.uncertainty_ns is not None and r1.uncertainty_ns > 0
        assert r1.samples > 1


def test_a_late_rank_shows_its_start_lag_and_a_collective_aligns_the_ends(skew_run: tuple[Store, Report]) -> None:
    """SYNTHETIC workload: rank 1 sleeps 30 ms before entering `late`, which ends in an all_reduce."""
    store, report = skew_run
    rows = store.rows(
        "SELECT i.rank, v.signal, v.inclusive FROM instance_values v "
        "JOIN region_instances i USING (run_id, instance_id) WHERE i.path = 'late' AND v.signal LIKE 'rank.%'"
    )
    assert len(rows) == 2 * 2 * 2  # ranks x signals x repetitions
    for rank, signal, lag in rows:
        if signal == "rank.start_lag" and rank == 1:
            assert 20 * MS <= lag <= 200 * MS, lag
        elif signal == "rank.start_lag":
            assert lag == 0
        else:
            assert lag < 10 * MS, (rank, lag)
    (row,) = [r for r in report.ranks if r.path == "late"]
    assert row.ranks == 2 and row.last_to_start == 1
    assert row.start_skew_max is not None and 20 * MS <= row.start_skew_max <= 200 * MS
    assert "ranks (skew of each occurrence" in report.text()


def test_a_launcher_without_a_store_records_why_and_the_run_succeeds(store_path: Path) -> None:
    launch = ("env", "-u", "MASTER_ADDR", "-u", "MASTER_PORT", "WORLD_SIZE=2", "RANK=1")
    report = argus_lab.measure(
        str(WORKLOADS / "nested.py"), "host.wall", repeat=2, warmup=0, store=str(store_path), launch=launch
    )
    (run,) = report.runs
    assert run.status == "ok", run.cause
    assert {(r.path, r.signal): r.instances for r in report.regions}["outer/inner", "host.wall"] == 4
    offs = {(o.rank, o.phase): o for o in report.clock_offsets}
    assert set(offs) == {(1, "before"), (1, "after")}
    for o in offs.values():
        assert o.status == "not estimated" and o.offset_ns is None
        assert "MASTER_ADDR" in o.reason and "torchrun" in o.reason
    assert any("clock offset not estimated" in c for c in report.coverage())
