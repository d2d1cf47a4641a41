"""Matching is per instance (issue 15): one instance whose kernel sequence differs never poisons the others.

SYNTHETIC evidence (tests/join_synth.py) shaped like the autotuned Triton matmul seen on the H200: in the timing
run, instance 0 of ``matmul`` launches the autotuner's benchmark kernels and then the best configuration, every
later instance one kernel; under ncu the autotuner benchmarked a different number of times (its count depends on
timing), so instance 0's sequence differs while instances 1-3 agree.  The recorded form of the same case is in
tests/test_ncu_scope_compiler_recorded.py.
"""

from __future__ import annotations

import pytest
from join_synth import Inst, Kern, SynthRun, write

from argus_lab import join
from argus_lab.report import Report
from argus_lab.store import Store

BENCH_TIMING = ["matmul_kernel"] * 6  # the autotuner's benchmark launches in the timing run
BENCH_NCU = ["matmul_kernel"] * 3  # ... and under ncu


def _timing(run_id: str, warmup: int = 0) -> SynthRun:
    ins, ks = [], []
    for k in range(warmup + 4):
        b = k * 1_000_000
        ins.append(Inst(k + 1, "matmul", b, b + 500_000, rep=k, index=k, warmup=k < warmup))
        names = [*BENCH_TIMING, "matmul_kernel"] if k == 0 else ["matmul_kernel"]
        for j, name in enumerate(names):
            ks.append(Kern(100 * (k + 1) + j, name, b + 1_000 + j * 10_000, b + 9_000 + j * 10_000, k + 1, api=b + 500))
    return SynthRun(run_id, instances=ins, kernels=ks, repetitions=4, warmup=warmup)


def _ncu(run_id: str, ref: SynthRun, profiled: list[int]) -> tuple[SynthRun, dict[str, list[object]], dict[str, list]]:
    """The ncu run of ``ref``'s workload; ``profiled``: the instance indexes ncu replayed (payload = index)."""
    ncu = SynthRun(run_id, backends=("ncu",), plan_index=1, instances=list(ref.instances), host_metrics=False)
    nk: dict[str, list[object]] = {
        c: [] for c in ("run_id", "kernel_key", "path", "instance_index", "instance_inferred", "ordinal", "name")
    }
    mt: dict[str, list[object]] = {
        c: [] for c in ("run_id", "kernel_key", "signal", "value", "unit", "attribution", "backend", "provenance_id")
    }
    for index in profiled:
        names = [*BENCH_NCU, "matmul_kernel"] if index == 0 else ["matmul_kernel"]
        for o, name in enumerate(names):
            key = f"ncu/matmul/{index}/{o}/{name}"
            for col, v in zip(nk, (run_id, key, "matmul", index, False, o, name), strict=True):
                nk[col].append(v)
            row = (run_id, key, "hw:dram__bytes_read.sum", 1000.0 * (index + 1), "byte", "", "ncu", f"{run_id}:ncu")
            for col, v in zip(mt, row, strict=True):
                mt[col].append(v)
    return ncu, nk, mt


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    st = Store(tmp_path_factory.mktemp("inst") / "i.duckdb")
    timing = _timing("t-all")
    ncu_all, nk, mt = _ncu("n-all", timing, [0, 1, 2, 3])  # no instance range: instance 0 replayed too
    write(st, [timing, ncu_all], request_id="q-all")
    st.write({"ncu_kernels": nk, "metrics": mt})
    timing2 = _timing("t-scoped")
    ncu_scoped, nk2, mt2 = _ncu("n-scoped", timing2, [1, 2, 3])  # `instances=1:` reached ncu
    write(st, [timing2, ncu_scoped], request_id="q-scoped")
    st.write({"ncu_kernels": nk2, "metrics": mt2})
    join.attribute_request(st, ["t-all", "n-all"])
    join.attribute_request(st, ["t-scoped", "n-scoped"])
    return st


def test_a_mismatched_instance_keeps_its_difference_and_the_others_keep_their_counters(store: Store) -> None:
    classes = store.rows(
        "SELECT a.instance_id, a.class, count(*) FROM attributions a WHERE run_id = 'n-all' AND evidence = 'ncu_kernel'"
        " GROUP BY ALL ORDER BY ALL"
    )
    # before issue 15 every one of the 7 ncu kernels was `mismatch`: placed by position under the path, instance
    # 0's 4 kernels against the timing run's 7 shifted every later instance
    assert classes == [(1, "mismatch", 4), (2, "ordinal", 1), (3, "ordinal", 1), (4, "ordinal", 1)]
    reason = store.rows("SELECT any_value(reason) FROM attributions WHERE run_id = 'n-all' AND class = 'mismatch'")[0][
        0
    ]
    assert "matmul #0" in reason and "the timing run launched 7, ncu profiled 4" in reason
    dram = dict(
        store.rows(
            "SELECT instance_id, inclusive FROM instance_values WHERE run_id = 't-all' "
            "AND signal = 'hw:dram__bytes_read.sum' ORDER BY 1"
        )
    )
    assert dram == {1: None, 2: 2000.0, 3: 3000.0, 4: 4000.0}
    status = store.rows("SELECT instance_id, status FROM instance_matches WHERE run_id = 'n-all' ORDER BY instance_id")
    assert status == [(1, "mismatch"), (2, "match"), (3, "match"), (4, "match")]


def test_an_instance_range_that_reached_ncu_leaves_nothing_mismatched(store: Store) -> None:
    classes = store.rows(
        "SELECT DISTINCT class FROM attributions WHERE run_id = 'n-scoped' AND evidence = 'ncu_kernel'"
    )
    assert classes == [("ordinal",)]
    report = Report(store, ["t-scoped", "n-scoped"])
    (counter,) = [c for c in report.counters if c.signal == "hw:dram__bytes_read.sum"]
    assert counter.instances == 3 and counter.median == pytest.approx(3000.0)  # instances 1-3 carry a value


def test_the_report_says_which_instances_matched(store: Store) -> None:
    report = Report(store, ["t-all", "n-all"])
    by_status = {m.status: m for m in report.matches if m.run_id == "n-all"}
    assert by_status["match"].indexes == "1-3" and by_status["mismatch"].indexes == "0"
    text = report.text()
    assert "matmul: instances 1-3 match" in text
    assert "instance 0 mismatch" in text


def test_the_census_of_a_timing_run_counts_kernels_per_path(store: Store) -> None:
    from argus_lab.report.census import kernel_census

    census = kernel_census(store, "synthetic")
    assert census is not None and census.source.startswith("timing run t-")
    (matmul,) = census.paths
    # 4 instances over 4 executions; (7 + 1 + 1 + 1) / 4 kernels of their own each
    assert (matmul.path, matmul.instances, matmul.kernels, census.outside) == ("matmul", 1.0, 2.5, 0.0)
