"""Two ranks on two H200s (NCCL over NVLink), recorded evidence: per-rank attribution, communication overlap per
rank, cross-rank skew on rank 0's clock, and the merged store.

Evidence: ``tests/data/gpu/two_ranks/`` (``scripts/record_two_ranks.py``; the commands are in its ``runs.json`` and
in ``tests/data/README.md``).  Each test copies the recorded store and runs the *current* join on it again, so the
tests guard the join as it is, not the join that ran on the GPU machine.  Expected values are recomputed here in
plain Python from the raw tables (kernels, region instances, clock provenance), never copied from the store's
derived tables.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from argus_lab import join
from argus_lab.join import comm as comm_sql
from argus_lab.report import Report
from argus_lab.store import Store

DATA = Path(__file__).parent / "data" / "gpu" / "two_ranks"
RUNS_JSON: dict[str, Any] = json.loads((DATA / "runs.json").read_text())
COMM = re.compile(comm_sql.COMM_KERNEL_PATTERN.removeprefix("(?i)"), re.IGNORECASE)
RANK_ID_BITS = 40  # the recorder numbers rank r's instances from r * 2**40


def run_ids(store: str, label: str) -> list[str]:
    """The runs of one recorded request (runs.json, written by scripts/record_two_ranks.py)."""
    (req,) = [r for r in RUNS_JSON["stores"][store]["requests"] if r["label"] == label]
    return list(req["runs"])


@pytest.fixture(scope="module")
def nccl(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """nccl_overlap_2r.duckdb, copied and joined again with the current join."""
    return _joined(tmp_path_factory, "nccl_overlap_2r")


@pytest.fixture(scope="module")
def ddp(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """ddp_train_2r.duckdb, copied and joined again with the current join."""
    return _joined(tmp_path_factory, "ddp_train_2r")


def _joined(factory: pytest.TempPathFactory, name: str) -> Store:
    path = factory.mktemp(name) / f"{name}.duckdb"
    shutil.copy(DATA / f"{name}.duckdb", path)
    st = Store(path)
    join.attribute_request(st, [r for (r,) in st.rows("SELECT run_id FROM runs ORDER BY started_ns")])
    return st


# -- plain-Python model of the evidence ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Inst:
    iid: int
    path: str
    parent: int
    rank: int
    thread: int
    start: int
    end: int
    rep: int
    warmup: bool


@dataclass(frozen=True)
class Kern:
    key: str
    name: str
    rank: int
    device: int
    stream: int
    thread: int
    carried: int
    q: int  # launch time on the host (the API call), else the GPU start
    start: int
    end: int

    @property
    def comm(self) -> bool:
        return COMM.search(self.name) is not None


def instances(st: Store, run: str) -> dict[int, Inst]:
    rows = st.rows(
        "SELECT instance_id, path, coalesce(parent_instance_id, 0), coalesce(rank, 0), thread_id, start_ns, end_ns, "
        "repetition, coalesce(warmup, false) FROM region_instances WHERE run_id = ?",
        [run],
    )
    return {r[0]: Inst(*r) for r in rows}


def kernels(st: Store, run: str) -> list[Kern]:
    rows = st.rows(
        "SELECT kernel_key, name, coalesce(rank, 0), device_id, stream_id, coalesce(thread_id, 0), "
        "coalesce(instance_id, 0), coalesce(nullif(api_start_ns, 0), start_ns), start_ns, end_ns "
        "FROM kernels WHERE run_id = ? AND coalesce(kind, 'kernel') = 'kernel'",
        [run],
    )
    return [Kern(*r) for r in rows]


def owner(k: Kern, inst: dict[int, Inst]) -> tuple[str, int | None]:
    """The attribution rule of docs/join.md, written out: the carried instance (exact); otherwise the innermost
    instance open at launch time on each thread *of the kernel's rank* -- the launching thread's wins, a single
    one on another thread is temporal, several are ambiguous, none unattributed."""
    if k.carried in inst:
        return "exact", k.carried
    innermost: dict[int, Inst] = {}
    for i in inst.values():
        if i.rank == k.rank and i.start <= k.q < i.end:
            best = innermost.get(i.thread)
            if best is None or i.start > best.start:
                innermost[i.thread] = i
    same = [i for t, i in innermost.items() if t % 2**32 == k.thread % 2**32]
    if same:
        return "temporal", same[0].iid
    if len(innermost) == 1:
        return "temporal", next(iter(innermost.values())).iid
    return ("ambiguous", None) if innermost else ("unattributed", None)


def union(iv: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


def ancestors(iid: int, inst: dict[int, Inst]) -> list[int]:
    out = []
    while iid in inst:
        out.append(iid)
        iid = inst[iid].parent
    return out


def values(st: Store, run: str, signal: str) -> dict[int, float]:
    rows = st.rows("SELECT instance_id, inclusive FROM instance_values WHERE run_id = ? AND signal = ?", [run, signal])
    return {i: v for i, v in rows}


def join_classes(st: Store, run: str) -> dict[str, list[tuple[int | None, str, float]]]:
    out: dict[str, list[tuple[int | None, str, float]]] = defaultdict(list)
    for key, iid, cls, w in st.rows(
        "SELECT evidence_id, instance_id, class, weight FROM attributions WHERE run_id = ? AND evidence = 'kernel'",
        [run],
    ):
        out[key].append((iid, cls, w))
    return out


ALL_NCCL = [
    (store, label) for store in ("nccl_overlap_2r",) for label in ("alternating", "train-serial", "train-overlapped")
]
ALL_DDP = [("ddp_train_2r", "ddp-temporal"), ("ddp_train_2r", "ddp-bucket-regions")]


# -- per-rank attribution --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("label", ["alternating", "train-serial", "train-overlapped"])
def test_nccl_kernels_of_both_ranks_are_exact_to_the_all_reduce_of_their_own_rank(nccl: Store, label: str) -> None:
    (run,) = run_ids("nccl_overlap_2r", label)
    inst, ks = instances(nccl, run), kernels(nccl, run)
    got = join_classes(nccl, run)
    per_rank: dict[int, int] = defaultdict(int)
    for k in (k for k in ks if k.comm and k.carried in inst):
        per_rank[k.rank] += 1
        assert got[k.key] == [(k.carried, "exact", 1.0)], k
        i = inst[k.carried]
        assert i.path.endswith("/allreduce") and i.rank == k.rank
        assert k.carried >> RANK_ID_BITS == k.rank  # the carried id itself says which rank recorded it
    assert set(per_rank) == {0, 1} and per_rank[0] == per_rank[1] > 0


@pytest.mark.parametrize(("store", "label"), ALL_NCCL + ALL_DDP)
def test_every_kernel_is_attributed_as_the_rule_says_and_never_to_another_rank(
    nccl: Store, ddp: Store, store: str, label: str
) -> None:
    st = nccl if store == "nccl_overlap_2r" else ddp
    (run,) = run_ids(store, label)
    inst, ks = instances(st, run), kernels(st, run)
    got = join_classes(st, run)
    classes: dict[str, int] = defaultdict(int)
    for k in ks:
        cls, iid = owner(k, inst)
        classes[cls] += 1
        rows = got[k.key]
        assert {c for _, c, _ in rows} == {cls}, (k, rows)
        if iid is not None:
            assert rows == [(iid, cls, 1.0)], (k, rows)
        for i, _, _ in rows:  # whatever the class, a candidate is an instance of the kernel's own rank
            assert i is None or inst[i].rank == k.rank, (k, rows)
    assert classes["ambiguous"] == 0  # every kernel launched inside a region has one instance of its rank


def test_ddp_bucket_all_reduces_from_autograds_thread_are_temporal_to_the_same_ranks_backward(ddp: Store) -> None:
    """DDP launches each bucket's all-reduce from autograd's device thread, where no region is open: the join
    relates it to the only instance open on the rank at launch, ``step/backward`` on the main thread."""
    (run,) = run_ids("ddp_train_2r", "ddp-temporal")
    inst, ks = instances(ddp, run), kernels(ddp, run)
    got = join_classes(ddp, run)
    seen = defaultdict(int)
    for k in (k for k in ks if k.comm and "AllReduce" in k.name):
        ((iid, cls, w),) = got[k.key]
        assert (cls, w) == ("temporal", 1.0)
        assert iid is not None
        b = inst[iid]
        assert b.path == "step/backward" and b.rank == k.rank
        assert b.thread % 2**32 != k.thread % 2**32  # launched by another thread (autograd's)
        assert b.start <= k.q < b.end
        seen[k.rank] += 1
    assert set(seen) == {0, 1} and seen[0] == seen[1]


def _ddp_bucket_counts() -> tuple[int, int]:
    """DDP's own bucket assignment for the recorded model (``--model s``, 25 MB buckets): one bucket of every
    gradient in DDP's first iteration, then buckets rebuilt in gradient-ready order (about the reverse parameter
    order) with a 1 MB first bucket.  Computed with DDP's own function on meta tensors (no memory, no GPU)."""
    torch = pytest.importorskip("torch")
    dist = pytest.importorskip("torch.distributed")
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "gpu"))
    import ddp_train

    d = ddp_train.SIZES["s"]
    with torch.device("meta"):
        params = list(ddp_train.GPT(d["layers"], d["dim"], d["heads"], d["seq"], d["vocab"]).parameters())
    sparse = [False] * len(params)
    first, _ = dist._compute_bucket_assignment_by_size(params, [sys.maxsize], sparse)
    rebuilt, _ = dist._compute_bucket_assignment_by_size(list(reversed(params)), [2**20, 25 * 2**20], sparse)
    return len(first), len(rebuilt)


def test_each_backward_reduces_ddps_buckets_in_launch_order(ddp: Store) -> None:
    """Per ``step/backward`` instance, its NCCL all-reduces are DDP's buckets: as many as DDP's bucket assignment
    gives, the n-th launched is the n-th to run (one NCCL stream), in both recorded requests.  The recorded
    workload built a new DDP in every repetition (a cache keyed by a class that runpy re-created; fixed in
    examples/gpu/ddp_train.py since), so the first step of each repetition is DDP's first iteration."""
    first, rebuilt = _ddp_bucket_counts()
    assert (first, rebuilt) == (1, 13)  # what the recorded model's parameters give (not read from the store)
    for label in ("ddp-temporal", "ddp-bucket-regions"):
        (run,) = run_ids("ddp_train_2r", label)
        inst, ks = instances(ddp, run), kernels(ddp, run)
        by_backward: dict[int, list[Kern]] = defaultdict(list)
        for k in (k for k in ks if k.comm and "AllReduce" in k.name):
            _, iid = owner(k, inst)
            if iid is not None and inst[iid].path == "bucket_allreduce":
                iid = _containing_backward(inst[iid], inst).iid
            assert iid is not None and inst[iid].path == "step/backward"
            by_backward[iid].append(k)
        backwards = sorted((i for i in inst.values() if i.path == "step/backward"), key=lambda i: (i.rank, i.start))
        for b in backwards:
            steps_of_rep = sorted(i.start for i in backwards if i.rank == b.rank and i.rep == b.rep)
            expected = first if b.start == steps_of_rep[0] else rebuilt
            got = by_backward[b.iid]
            assert len(got) == expected, (label, b)
            assert [k.key for k in sorted(got, key=lambda k: k.q)] == [
                k.key for k in sorted(got, key=lambda k: k.start)
            ]


def _containing_backward(i: Inst, inst: dict[int, Inst]) -> Inst:
    (b,) = [b for b in inst.values() if b.path == "step/backward" and b.rank == i.rank and b.start <= i.start < b.end]
    return b


def test_bucket_regions_are_exact_and_each_lies_inside_a_backward_of_its_rank(ddp: Store) -> None:
    """With ``--bucket-regions`` each bucket's all-reduce is a region on autograd's thread: its NCCL kernel is
    exact to it, and the bucket's host interval starts inside exactly one ``step/backward`` of the same rank (the
    backward that produced the bucket; the relation is by time on the rank's own clock, the recorder invents no
    parent across threads)."""
    (run,) = run_ids("ddp_train_2r", "ddp-bucket-regions")
    inst, ks = instances(ddp, run), kernels(ddp, run)
    got = join_classes(ddp, run)
    buckets = [i for i in inst.values() if i.path == "bucket_allreduce"]
    assert {b.rank for b in buckets} == {0, 1}
    nccl_of: dict[int, list[Kern]] = defaultdict(list)
    for k in (k for k in ks if k.comm and "AllReduce" in k.name):
        assert got[k.key] == [(k.carried, "exact", 1.0)]
        nccl_of[k.carried].append(k)
    for b in buckets:
        assert b.parent == 0  # top level on its own thread
        back = _containing_backward(b, inst)
        assert back.thread != b.thread
        assert [k.rank for k in nccl_of[b.iid]] == [b.rank]  # one all-reduce per bucket, of its own rank


# -- comm.overlap / comm.exposed per rank ---------------------------------------------------------------------------
@pytest.mark.parametrize(("store", "label"), ALL_NCCL + ALL_DDP)
def test_overlap_and_exposed_per_rank_equal_interval_arithmetic_over_the_kernels(
    nccl: Store, ddp: Store, store: str, label: str
) -> None:
    """For every instance, ``comm.overlap`` is the overlap of the union of its (and its descendants') NCCL kernels
    with the union of the compute kernels of *its own rank's* device, and ``comm.overlap + comm.exposed`` is the
    union of its NCCL kernels -- recomputed here from the kernels table."""
    st = nccl if store == "nccl_overlap_2r" else ddp
    (run,) = run_ids(store, label)
    inst, ks = instances(st, run), kernels(st, run)
    compute: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    comm_of: dict[int, list[Kern]] = defaultdict(list)
    for k in ks:
        if not k.comm and k.end > k.start:
            compute[k.rank, k.device].append((k.start, k.end))
        if k.comm:
            _, iid = owner(k, inst)
            for a in ancestors(iid, inst) if iid is not None else ():
                comm_of[a].append(k)
    busy = {key: union(iv) for key, iv in compute.items()}
    ov, ex = values(st, run, "comm.overlap"), values(st, run, "comm.exposed")
    assert set(ov) == set(inst)  # every instance of the run gets a value
    checked = 0
    for iid in inst:
        per_device: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
        for k in comm_of[iid]:
            if k.end > k.start:
                per_device[k.rank, k.device].append((k.start, k.end))
        want_ov = sum(overlap(union(iv), busy.get(dev, [])) for dev, iv in per_device.items())
        want_union = sum(e - s for iv in per_device.values() for s, e in union(iv))
        assert ov[iid] == want_ov, (label, inst[iid])
        assert ov[iid] + ex[iid] == want_union, (label, inst[iid])
        checked += bool(per_device)
    assert checked > 0


def test_serial_steps_expose_all_communication_and_overlapped_steps_hide_some_on_both_ranks(nccl: Store) -> None:
    """Before/after of the notebook, per rank: ``train`` serial has comm.overlap 0 on both ranks; overlapped
    hides part of the all-reduce on both ranks, and its median exposed time per rank is lower."""
    medians = {}
    for label in ("train-serial", "train-overlapped"):
        (run,) = run_ids("nccl_overlap_2r", label)
        inst = instances(nccl, run)
        ov, ex = values(nccl, run, "comm.overlap"), values(nccl, run, "comm.exposed")
        for rank in (0, 1):
            train = [i for i in inst.values() if i.path == "train" and i.rank == rank and not i.warmup]
            assert len(train) == 3
            o = sorted(ov[i.iid] for i in train)
            e = sorted(ex[i.iid] for i in train)
            medians[label, rank] = (o[1], e[1])
            if label == "train-serial":
                assert o == [0.0, 0.0, 0.0] and all(x > 0 for x in e)
            else:
                assert all(x > 0 for x in o)
    for rank in (0, 1):
        assert medians["train-overlapped", rank][1] < medians["train-serial", rank][1]


# -- cross-rank skew and clock offsets -------------------------------------------------------------------------------
def _offsets(st: Store, run: str) -> dict[tuple[int, str], dict[str, Any]]:
    out = {}
    for (settings,) in st.rows("SELECT settings FROM provenance WHERE run_id = ? AND backend = 'clock'", [run]):
        s = json.loads(settings)
        out[s["rank"], s["phase"]] = s
    return out


def _half_away(x: float) -> int:
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


@pytest.mark.parametrize(("store", "label"), ALL_NCCL + ALL_DDP)
def test_rank_1s_clock_offset_is_estimated_before_and_after_within_its_uncertainty(
    nccl: Store, ddp: Store, store: str, label: str
) -> None:
    st = nccl if store == "nccl_overlap_2r" else ddp
    (run,) = run_ids(store, label)
    off = _offsets(st, run)
    assert set(off) == {(r, p) for r in (0, 1) for p in ("before", "after")}
    for phase in ("before", "after"):
        assert off[0, phase]["status"] == "reference" and off[0, phase]["offset_ns"] == 0
        e = off[1, phase]
        assert e["status"] == "estimated" and e["samples"] == 32
        assert e["uncertainty_ns"] == (e["round_trip_ns"] + 1) // 2 > 0  # half the round trip, rounded up
        assert abs(e["offset_ns"]) <= e["uncertainty_ns"]  # one host, one clock: the truth (0) is inside the bound
    rows = {(c.rank, c.phase): c for c in Report(st, [run]).clock_offsets}
    assert rows[1, "after"].offset_ns == off[1, "after"]["offset_ns"]
    assert rows[1, "before"].uncertainty_ns == off[1, "before"]["uncertainty_ns"]


@pytest.mark.parametrize(("store", "label"), ALL_NCCL + ALL_DDP)
def test_start_and_end_lags_are_computed_on_rank_0s_clock(nccl: Store, ddp: Store, store: str, label: str) -> None:
    """Per occurrence (path, repetition, n-th instance on each rank): lag = corrected time minus the earliest
    corrected time over the ranks, corrected = rank time + the mean of the rank's before/after offsets."""
    st = nccl if store == "nccl_overlap_2r" else ddp
    (run,) = run_ids(store, label)
    inst = instances(st, run)
    off = _offsets(st, run)
    shift = {0: 0, 1: _half_away((off[1, "before"]["offset_ns"] + off[1, "after"]["offset_ns"]) / 2)}
    occurrences: dict[tuple[str, int, int], dict[int, Inst]] = defaultdict(dict)
    for rank in (0, 1):
        seen: dict[tuple[str, int], int] = defaultdict(int)
        for i in sorted((i for i in inst.values() if i.rank == rank), key=lambda i: (i.start, i.iid)):
            occurrences[i.path, i.rep, seen[i.path, i.rep]][rank] = i
            seen[i.path, i.rep] += 1
    start_lag, end_lag = values(st, run, "rank.start_lag"), values(st, run, "rank.end_lag")
    for occ in occurrences.values():
        assert set(occ) == {0, 1}
        first_s = min(i.start + shift[r] for r, i in occ.items())
        first_e = min(i.end + shift[r] for r, i in occ.items())
        for r, i in occ.items():
            assert start_lag[i.iid] == i.start + shift[r] - first_s
            assert end_lag[i.iid] == i.end + shift[r] - first_e
        assert min(start_lag[i.iid] for i in occ.values()) == 0


def test_the_reports_ranks_table_has_every_region_on_both_ranks(nccl: Store) -> None:
    runs = run_ids("nccl_overlap_2r", "train-serial") + run_ids("nccl_overlap_2r", "train-overlapped")
    rows = {r.path: r for r in Report(nccl, runs).ranks}
    assert {"train", "train/serial/allreduce", "train/overlapped/allreduce"} <= set(rows)
    assert all(r.ranks == 2 for r in rows.values())
    assert rows["train"].occurrences == 6  # 3 measured repetitions x 2 requests
    assert rows["train/serial/allreduce"].occurrences == 3 * 8


# -- the merged store ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("store", ["nccl_overlap_2r", "ddp_train_2r"])
def test_the_merged_store_keeps_ranks_apart(nccl: Store, ddp: Store, store: str) -> None:
    st = nccl if store == "nccl_overlap_2r" else ddp
    assert st.rows("SELECT count(*) = count(DISTINCT (run_id, instance_id)) FROM region_instances") == [(True,)]
    # rank r's instance ids lie in [r * 2**40, (r + 1) * 2**40)
    assert st.rows("SELECT count(*) FROM region_instances WHERE instance_id >> 40 <> coalesce(rank, 0)") == [(0,)]
    # one region id per path, the same on both ranks; both ranks recorded every path, equally often
    per_path = st.rows(
        "SELECT path, count(DISTINCT region_id), count(*) FILTER (WHERE rank = 0), count(*) FILTER (WHERE rank = 1) "
        "FROM region_instances GROUP BY path"
    )
    for path, ids, n0, n1 in per_path:
        assert ids == 1 and n0 == n1 > 0, path
    # both ranks' kernels are stored, each rank on its own device (torchrun's local rank)
    assert st.rows("SELECT DISTINCT rank, device_id FROM kernels ORDER BY rank") == [(0, 0), (1, 1)]
    # one run row per run, both ranks inside it; every run ok
    runs = st.rows(
        "SELECT r.run_id, r.status, count(DISTINCT i.rank) FROM runs r JOIN region_instances i USING (run_id) "
        "GROUP BY ALL"
    )
    assert runs and all(status == "ok" and ranks == 2 for _, status, ranks in runs)
