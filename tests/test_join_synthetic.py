"""The join on SYNTHETIC evidence (tests/join_synth.py): each tricky case built by hand, expected values by hand.

The same cases on evidence recorded on the H200 are in tests/test_join_recorded.py.
"""

from __future__ import annotations

import pytest
from join_synth import T0, Inst, Kern, SynthRun, attributions, values, write

from argus_lab import join
from argus_lab.store import Store


def case_run(run_id: str = "r1") -> SynthRun:
    """Every in-run case on one timeline (times in ns after T0):

    * thread 1: ``outer`` [0, 10 us] holding ``outer/inner`` [1, 5 us]; k1 and k2 (two streams, overlapping) in
      inner, k3 launched in outer and still running 2 us after outer's host exit; ``idle`` [70, 75 us] runs no
      kernel;
    * thread 2: ``other`` [20, 30 us], inside which it calls backward() [20.5, 29 us]; thread 3, autograd's
      (``pt_autograd_0``), launches ``bwd`` at 21 us; a CUDA graph launched in ``other`` replays three kernels
      under one correlation id; thread 7, a side thread with no region, launches ``side`` at 25 us;
    * threads 4 and 5: ``a4`` and ``b5`` both open [50, 60 us]; a launch whose thread is not known (0, as with
      boundary probes) ``shared`` at 52 us (two candidates), thread 4 launches ``drv`` without an id at 55 us (its
      own thread wins);
    * thread 1: ``solo`` [80, 85 us]; autograd's thread launches ``bwd_nocall`` at 81 us with no backward() call
      recorded (the only region open then is the candidate);
    * outside every region: ``late`` at 90 us, ``stale`` carrying an id the run never recorded, and ``bwd_out`` from
      autograd's thread at 95 us during a backward() call thread 2 makes outside every region [94, 96 us];
    * NVML power samples at 0, 10 and 20 us.
    """
    return SynthRun(
        run_id,
        instances=[
            Inst(1, "outer", 0, 10_000),
            Inst(2, "outer/inner", 1_000, 5_000, parent=1),
            Inst(3, "other", 20_000, 30_000, thread=2),
            Inst(4, "a4", 50_000, 60_000, thread=4),
            Inst(5, "b5", 50_000, 60_000, thread=5),
            Inst(6, "idle", 70_000, 75_000),
            Inst(7, "solo", 80_000, 85_000),
        ],
        kernels=[
            Kern(10, "k1", 1_500, 2_500, 2, api=1_200),
            Kern(11, "k2", 3_000, 9_000, 2, api=1_300, stream=8),
            Kern(12, "k3", 6_000, 12_000, 1, api=6_000),
            Kern(13, "bwd", 21_000, 22_000, None, thread=3, api=21_000),
            *(Kern(20, f"node{i}", 22_000 + i * 1_000, 22_500 + i * 1_000, 3, graph=5, n=i) for i in range(3)),
            Kern(32, "side", 25_100, 25_400, None, thread=7, api=25_000),
            Kern(30, "shared", 52_600, 52_900, None, thread=0, api=52_000),
            Kern(31, "drv", 55_600, 55_900, None, thread=4, api=55_000),
            Kern(33, "bwd_nocall", 81_100, 81_400, None, thread=3, api=81_000),
            Kern(40, "late", 90_000, 91_000, None, api=90_000),
            Kern(41, "stale", 92_000, 93_000, 99, api=92_000),
            Kern(42, "bwd_out", 95_100, 95_400, None, thread=3, api=95_000),
        ],
        threads=[(3, "pt_autograd_0", "autograd", 0), (7, "python", "", 0)],
        backward_calls=[(2, 20_500, 29_000, 0), (2, 94_000, 96_000, 0)],
        samples=[("sys.power", 0, 100.0, "W"), ("sys.power", 10_000, 200.0, "W"), ("sys.power", 20_000, 300.0, "W")],
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """One store holding every synthetic case, joined once per request (keeps the tests fast)."""
    st = Store(tmp_path_factory.mktemp("join") / "j.duckdb")
    t1, n1, nk1, mt1 = ncu_pair("rt", "rn", mismatch=False)
    t2, n2, nk2, mt2 = ncu_pair("rt2", "rn2", mismatch=True)
    _, n3, nk3, mt3 = ncu_pair("rt3", "rn3", mismatch=False)
    write(st, [case_run(), t1, n1, t2, n2, n3])
    for nk, mt in ((nk1, mt1), (nk2, mt2), (nk3, mt3)):
        st.write({"ncu_kernels": nk, "metrics": mt})
    # what the NVML backend also stores: its own per-instance window mean (samples strictly inside the instance)
    nvml = ("r1", 1, None, "sys.power", 999.0, "W", "temporal", "nvml", "r1:nvml")
    cols = ("run_id", "instance_id", "kernel_key", "signal", "value", "unit", "attribution", "backend", "provenance_id")
    st.write({"metrics": {c: [v] for c, v in zip(cols, nvml, strict=True)}})
    return st


@pytest.fixture(scope="module")
def summaries(store: Store) -> dict[str, join.JoinSummary]:
    return {
        "r1": join.attribute_request(store, ["r1"]),
        "rt": join.attribute_request(store, ["rt", "rn"]),
        "rt2": join.attribute_request(store, ["rt2", "rn2"]),
        "rn3": join.attribute_request(store, ["rn3"]),
    }


def kernel_rows(store: Store) -> dict[str, list[tuple[object, ...]]]:
    out: dict[str, list[tuple[object, ...]]] = {}
    for r in attributions(store, "r1"):
        out.setdefault(str(r[0]), []).append(r)
    return out


def test_nested_inclusive_exclusive_and_two_streams(store: Store, summaries: object) -> None:
    t = values(store, "r1", "gpu.time")
    assert t[2] == (1_000 + 6_000, 1_000 + 6_000)  # two streams: kernel time adds up, not the span
    assert t[1] == (13_000, 6_000)  # inclusive of inner, exclusive = its own kernel
    span = values(store, "r1", "gpu.span")
    assert span[2] == (7_500, None)  # first start 1.5 us to last end 9 us; exclusive span is undefined
    wall = values(store, "r1", "host.wall")
    assert wall[1] == (10_000, 6_000)  # exclusive host time = minus the nested instance


def test_kernel_past_host_exit_stays_exact(store: Store, summaries: object) -> None:
    rows = kernel_rows(store)
    [(_, iid, cls, w, reason)] = rows["0/1/12/0"]
    assert (iid, cls, w) == (1, "exact", 1.0)
    assert "2.0 us past the region's host exit" in str(reason)
    assert rows["0/1/11/0"][0][2] == "exact" and "past the region's host exit" in str(rows["0/1/11/0"][0][4])
    assert "past" not in str(rows["0/1/10/0"][0][4])


def test_region_without_kernels_reports_zero_not_missing(store: Store, summaries: object) -> None:
    assert values(store, "r1", "gpu.kernels")[6] == (0.0, 0.0)
    assert values(store, "r1", "gpu.time")[6] == (0.0, 0.0)
    assert 6 not in values(store, "r1", "gpu.span")  # no kernel: no span, rather than a made-up 0


def test_autograd_kernel_goes_to_the_region_of_the_thread_in_backward(store: Store, summaries: object) -> None:
    [(_, iid, cls, w, reason)] = kernel_rows(store)["0/1/13/0"]
    assert (iid, cls, w) == (3, "temporal", 1.0)  # never exact: another thread launched it
    assert "pt_autograd_0 (3), autograd's thread," in str(reason) and "backward() called on thread 2" in str(reason)


def test_autograd_kernel_without_a_recorded_backward_call_takes_the_only_open_region(
    store: Store, summaries: object
) -> None:
    [(_, iid, cls, w, reason)] = kernel_rows(store)["0/1/33/0"]
    assert (iid, cls, w) == (7, "temporal", 1.0)
    assert "no backward() call recorded covers it" in str(reason)


def test_autograd_kernel_of_a_backward_call_outside_every_region_is_unattributed(
    store: Store, summaries: object
) -> None:
    [(_, iid, cls, w, reason)] = kernel_rows(store)["0/1/42/0"]
    assert (iid, cls, w) == (None, "unattributed", 1.0)
    assert "during backward() called on thread 2 outside every region" in str(reason)


def test_a_side_thread_without_a_region_is_never_given_another_threads_region(store: Store, summaries: object) -> None:
    """Thread 7 has no region of its own; ``other`` of thread 2 was open: the kernel is not ``other``'s."""
    [(_, iid, cls, w, reason)] = kernel_rows(store)["0/1/32/0"]
    assert (iid, cls, w) == (None, "unattributed", 1.0)
    assert "python (7), which had no region open" in str(reason) and "other on thread 2" in str(reason)
    assert values(store, "r1", "gpu.kernels")[3] == (4.0, 4.0)  # other's own: 3 graph nodes + the backward kernel


def test_cuda_graph_replay_shares_correlation_id(store: Store, summaries: object) -> None:
    rows = [r for k, v in kernel_rows(store).items() if k.startswith("0/1/20/") for r in v]
    assert [(r[1], r[2]) for r in rows] == [(3, "exact")] * 3
    assert all("CUDA graph 5 replay" in str(r[4]) for r in rows)
    assert values(store, "r1", "gpu.kernels")[3] == (4.0, 4.0)  # 3 graph nodes + the backward kernel
    assert values(store, "r1", "gpu.time")[3] == (1_000 + 3 * 500, 1_000 + 3 * 500)


def test_kernel_serving_two_regions_is_ambiguous_with_all_candidates(store: Store, summaries: object) -> None:
    rows = kernel_rows(store)["0/1/30/0"]
    assert [(r[1], r[2], r[3]) for r in rows] == [(4, "ambiguous", 0.5), (5, "ambiguous", 0.5)]
    assert all("the launching thread is not known" in str(r[4]) for r in rows)
    assert all("2 region instances were open" in str(r[4]) for r in rows)
    # the weights carry into the values, and the ambiguity stays visible on them
    vals = store.rows(
        "SELECT instance_id, inclusive, w_ambiguous FROM instance_values "
        "WHERE run_id = 'r1' AND signal = 'gpu.time' AND instance_id IN (4, 5) ORDER BY 1"
    )
    assert vals == [(4, 150.0 + 300.0, 0.5), (5, 150.0, 0.5)]


def test_a_kernel_has_candidates_only_on_its_own_rank(tmp_path: object) -> None:
    """SYNTHETIC, two ranks of one run whose threads have equal ids (pthread ids of two processes can be equal):
    rank 1's autograd-style thread launches without an id while ``backward`` is open on *both* ranks' main
    threads.  Another rank is another process on its own clock, so only rank 1's ``backward`` is a candidate:
    temporal to it, never ambiguous with (nor given to) rank 0's."""
    from pathlib import Path

    st = Store(Path(str(tmp_path)) / "ranks.duckdb")
    r1 = 1 << 40
    run = SynthRun(
        "rr",
        instances=[
            Inst(1, "backward", 0, 10_000, thread=1, rank=0),
            Inst(r1 + 1, "backward", 500, 10_500, thread=1, rank=1),
        ],
        kernels=[
            Kern(50, "ncclDevKernel_AllReduce", 3_000, 4_000, None, thread=2, api=2_000, device=1, rank=1),
            Kern(51, "ncclDevKernel_AllReduce", 3_000, 4_000, None, thread=2, api=2_000, device=0, rank=0),
        ],
        threads=[(2, "pt_autograd_0", "autograd", 0), (2, "pt_autograd_1", "autograd", 1)],
    )
    write(st, [run])
    join.attribute_request(st, ["rr"])
    got = [(r[0], r[1], r[2], r[3]) for r in attributions(st, "rr")]
    assert got == [("0/1/50/0", r1 + 1, "temporal", 1.0), ("0/1/51/0", 1, "temporal", 1.0)]


def test_same_thread_candidate_wins_over_other_threads(store: Store, summaries: object) -> None:
    rows = kernel_rows(store)["0/1/31/0"]
    assert [(r[1], r[2], r[3]) for r in rows] == [(4, "temporal", 1.0)]


def test_kernels_outside_every_region(store: Store, summaries: object) -> None:
    rows = kernel_rows(store)
    assert rows["0/1/40/0"][0][1:4] == (None, "unattributed", 1.0)
    assert "outside every region" in str(rows["0/1/40/0"][0][4])
    assert "99" in str(rows["0/1/41/0"][0][4])
    # nothing silently dropped: every kernel record has its attribution
    n = store.rows("SELECT count(DISTINCT evidence_id) FROM attributions WHERE run_id = 'r1' AND evidence = 'kernel'")
    assert n[0][0] == len(case_run().kernels)
    assert summaries["r1"].counts["kernel"] == {  # type: ignore[index]
        "exact": 6,
        "temporal": 3,
        "ambiguous": 1,
        "unattributed": 4,
    }


def test_samples_split_over_instances(store: Store, summaries: object) -> None:
    rows = attributions(store, "r1", "sample")
    first = [(r[1], r[2], round(float(r[3]), 6)) for r in rows if str(r[0]).endswith(f"@{T0}")]
    # window [-5, 5] us: 1 us in outer alone, 4 us in inner, 5 us outside
    assert first == [(1, "temporal", 0.1), (2, "temporal", 0.4), (None, "unattributed", 0.5)]
    # the weights of every sample add up to 1
    sums = store.rows(
        "SELECT evidence_id, sum(weight) FROM attributions WHERE run_id = 'r1' AND evidence = 'sample' GROUP BY 1"
    )
    assert len(sums) == 3 and all(abs(s - 1.0) < 1e-9 for _, s in sums)
    power = values(store, "r1", "sys.power")
    # the join's split of the samples replaces the backend's own per-instance value (one value per instance)
    assert power[1][0] == pytest.approx(150.0)  # half at 100 W, half at 200 W
    n = store.rows(
        "SELECT count(*) FROM instance_values WHERE run_id = 'r1' AND signal = 'sys.power' AND instance_id = 1"
    )
    assert n == [(1,)]
    assert power[1][1] == pytest.approx((100 * 1_000 + 200 * 5_000) / 6_000)  # outer's own 6 us


def ncu_pair(
    tid: str, nid: str, mismatch: bool
) -> tuple[SynthRun, SynthRun, dict[str, list[object]], dict[str, list[object]]]:
    """A timing run and an ncu run of 2 repetitions of outer{gemm; inner{relu; add}; inner{relu; add}}."""
    ins, ks = [], []
    for rep in range(2):
        b, o = rep * 100_000, 1 + rep * 3
        ins += [
            Inst(o, "outer", b, b + 50_000, rep=rep, index=rep),
            Inst(o + 1, "outer/inner", b + 1_000, b + 20_000, parent=o, rep=rep, index=2 * rep),
            Inst(o + 2, "outer/inner", b + 21_000, b + 40_000, parent=o, rep=rep, index=2 * rep + 1),
        ]
        c = 10 + 10 * rep
        ks += [
            Kern(c, "gemm", b + 100, b + 900, o, api=b + 50),
            Kern(c + 1, "relu", b + 1_500, b + 2_500, o + 1, api=b + 1_200),
            Kern(c + 2, "add", b + 3_000, b + 9_000, o + 1, api=b + 1_300),
            Kern(c + 3, "relu", b + 21_500, b + 22_500, o + 2, api=b + 21_200),
            Kern(c + 4, "add", b + 23_000, b + 29_000, o + 2, api=b + 21_300),
        ]
    timing = SynthRun(tid, instances=ins, kernels=ks, repetitions=2)
    ncu = SynthRun(nid, backends=("ncu",), plan_index=1, instances=list(ins), host_metrics=False, repetitions=2)
    inner = [("outer/inner", "relu"), ("outer/inner", "add")]
    seq = [("outer", "gemm"), *inner, *inner] * 2
    if mismatch:
        seq[9] = ("outer/inner", "add_autotuned")
    nk: dict[str, list[object]] = {
        c: [] for c in ("run_id", "kernel_key", "path", "instance_index", "instance_inferred", "ordinal", "name")
    }
    mt: dict[str, list[object]] = {
        c: [] for c in ("run_id", "kernel_key", "signal", "value", "unit", "attribution", "backend", "provenance_id")
    }
    prev, idx, od = "", {}, {}  # what ncu_parse infers: index bumps when the path changes
    for j, (p, name) in enumerate(seq):
        if p != prev:
            idx[p] = idx.get(p, -1) + 1
        prev = p
        od[(p, idx[p])] = od.get((p, idx[p]), -1) + 1
        key = f"ncu/{p}/{idx[p]}/{od[(p, idx[p])]}/{name}"
        for col, v in zip(nk, (nid, key, p, idx[p], True, od[(p, idx[p])], name), strict=True):
            nk[col].append(v)
        for sig, val, unit in (
            ("hw:dram__bytes_read.sum", 1000.0 * (j + 1), "byte"),
            ("hw:sm__x.avg.pct", 50.0 + j, "%"),
        ):
            for col, v in zip(mt, (nid, key, sig, val, unit, "ordinal", "ncu", f"{nid}:ncu"), strict=True):
                mt[col].append(v)
    return timing, ncu, nk, mt


def test_ncu_kernels_join_timing_run_by_ordinal(store: Store, summaries: dict[str, join.JoinSummary]) -> None:
    summary = summaries["rt"]
    assert summary.reference_run == "rt"
    assert summary.counts["ncu_kernel"] == {"ordinal": 10}
    rows = attributions(store, "rn", "ncu_kernel")
    # ncu inferred both inner instances of a repetition as one (no kernel between them); the ordinal join
    # still puts relu/add of the second inner instance into timing instance 3
    by_key = {r[0]: r[1] for r in rows}
    assert by_key["ncu/outer/inner/0/2/relu"] == 3 and by_key["ncu/outer/inner/1/0/relu"] == 5
    dram = values(store, "rt", "hw:dram__bytes_read.sum")
    assert dram[2] == (2_000 + 3_000, 2_000 + 3_000)
    assert dram[1] == (15_000, 1_000)  # gemm's own bytes + both inner instances
    pct = values(store, "rt", "hw:sm__x.avg.pct")
    # a percentage is the mean over the instance's kernels weighted by their duration (the timing run's kernel at the
    # same ordinal: gemm 800 ns at 50 %, relu 1,000 at 51, add 6,000 at 52, relu 1,000 at 53, add 6,000 at 54)
    assert pct[1][0] == pytest.approx((50 * 800 + 51 * 1_000 + 52 * 6_000 + 53 * 1_000 + 54 * 6_000) / 14_800)
    assert pct[2] == (pytest.approx((51 * 1_000 + 52 * 6_000) / 7_000),) * 2  # inner: its own kernels alone
    matches = store.rows("SELECT status, count(*) FROM instance_matches WHERE run_id = 'rn' GROUP BY 1")
    assert matches == [("match", 6)]


def test_ncu_mismatch_is_kept_flagged_and_shown(store: Store, summaries: dict[str, join.JoinSummary]) -> None:
    assert summaries["rt2"].counts["ncu_kernel"] == {"ordinal": 8, "mismatch": 2}
    bad = [r for r in attributions(store, "rn2", "ncu_kernel") if r[2] == "mismatch"]
    assert {r[1] for r in bad} == {6}
    reason = str(bad[0][4])
    assert "differ at ordinal 1" in reason and "add_autotuned" in reason and "ran add," in reason
    # no value is forced onto instance 6; its parent says how much of its evidence mismatched
    dram = values(store, "rt2", "hw:dram__bytes_read.sum")
    assert dram[6] == (None, None)
    parent = store.rows(
        "SELECT w_ordinal, w_mismatch FROM instance_values WHERE run_id = 'rt2' AND instance_id = 4 "
        "AND signal = 'hw:dram__bytes_read.sum'"
    )
    assert parent == [(3.0, 2.0)]
    status = store.rows(
        "SELECT instance_id, status, difference FROM instance_matches WHERE run_id = 'rn2' AND status <> 'match'"
    )
    assert [(s[0], s[1]) for s in status] == [(6, "mismatch")]
    assert "add_autotuned" in status[0][2]


def test_ncu_without_timing_run_uses_its_own_nvtx_path(store: Store, summaries: dict[str, join.JoinSummary]) -> None:
    assert summaries["rn3"].reference_run == "rn3"
    rows = attributions(store, "rn3", "ncu_kernel")
    # no payload: the (path, index) ncu inferred from path changes is a guess, so the class is ordinal, not exact
    assert {r[2] for r in rows} == {"ordinal"}
    assert all("inferred from path changes" in str(r[4]) for r in rows)
    assert [r[1] for r in rows if r[0] == "ncu/outer/0/0/gemm"] == [1]


def test_join_is_idempotent_and_records_provenance(store: Store, summaries: dict[str, join.JoinSummary]) -> None:
    first = store.rows("SELECT count(*) FROM attributions WHERE run_id = 'r1'")[0][0]
    join.attribute_request(store, ["r1"])
    assert store.rows("SELECT count(*) FROM attributions WHERE run_id = 'r1'")[0][0] == first
    prov = store.rows("SELECT backend, timestamps FROM provenance WHERE provenance_id = 'r1:join'")
    assert prov and prov[0][0] == "join" and prov[0][1].startswith("derived")
    assert join.joined_runs(store, ["r1", "nope"]) == {"r1"}
