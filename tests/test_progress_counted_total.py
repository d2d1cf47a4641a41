"""The total an ncu run's progress counts down from, counted in the timing run of the same plan: the kernels
launched inside the request's scope in measured repetitions, read from the recorded H200 stores of tests/data
(no join needed), and the progress line that uses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_lab.app.measure import plan
from argus_lab.report.census import scoped_kernels
from argus_lab.run.progress import RunClock, Tick
from tests.recorded_cases import shipped


@pytest.mark.parametrize(
    ("rel", "timing", "ncu", "scope"),
    [
        # every region: the ncu run profiled 52 kernels (argus-scope@in/ gate)
        ("gpu/issue15/model.duckdb", "r-5dda2aefeb", "r-b9fdfcaac8", ""),
        # the autotuned matmul without its first (autotuning) instance: 3 kernels of 957 launched
        ("gpu/issue15/autotune.duckdb", "r-c66d36a25b", "r-89ca2b2bec", "matmul; instances=1:"),
    ],
)
def test_the_kernels_counted_in_the_timing_run_are_those_the_ncu_run_of_the_plan_profiled(
    tmp_path: Path, rel: str, timing: str, ncu: str, scope: str
) -> None:
    st = shipped(tmp_path, rel)
    profiled = st.rows("SELECT count(*) FROM ncu_kernels WHERE run_id = ?", [ncu])[0][0]
    assert scoped_kernels(st, timing, scope) == profiled


def test_the_counted_kernels_leave_out_warm_up_repetitions(tmp_path: Path) -> None:
    """e2e_nested_h200 was recorded before the scope gate: its ncu runs (NVTX filter ``argus@outer/``) also profiled
    the warm-up repetition's kernels; the count is the measured repetitions' share of them (instances 2..5 of
    ``outer``: the first two are the warm-up repetition's)."""
    st = shipped(tmp_path, "gpu/e2e_nested_h200.duckdb")
    measured = st.rows(
        "SELECT count(*) FROM ncu_kernels n JOIN (SELECT DISTINCT instance_index FROM region_instances "
        "WHERE run_id = 'r-aa9a325cac' AND path = 'outer' AND NOT warmup) m USING (instance_index) "
        "WHERE n.run_id = 'r-9c39b9ab2b'"
    )
    assert scoped_kernels(st, "r-aa9a325cac", "outer/**") == measured[0][0] == 12
    assert scoped_kernels(st, "r-aa9a325cac", "outer/inner") == 8  # two kernels per inner instance, 4 measured
    assert scoped_kernels(st, "r-aa9a325cac", "nothing/**") == 0


def test_a_run_without_kernels_gives_no_total(tmp_path: Path) -> None:
    st = shipped(tmp_path, "gpu/issue15/model.duckdb")
    assert scoped_kernels(st, "r-b9fdfcaac8", "") is None  # the ncu run itself: no CUPTI kernels
    assert scoped_kernels(st, "r-unknown", "") is None


def test_an_ncu_run_given_a_counted_total_says_k_of_n_kernels_and_the_time_left() -> None:
    """No earlier timing run (no census): the plan has no estimate, and the total counted in the timing run of the
    same plan is what the line counts down from."""
    run = next(
        r for r in plan("hw:sm__throughput.avg.pct_of_peak_sustained_elapsed", repeat=2).runs if "ncu" in r.backends
    )
    ticks: list[Tick] = []
    clock = RunClock(run, 2, ticks.append, counted=52)
    clock.start()
    clock.profiled(13, 9)
    text = ticks[-1].text()
    assert "13/52 kernels profiled (9 passes each)" in text, text
    assert "left" in text and "unknown" not in text
    assert ticks[-1].to_json()["kernels_total"] == 52
    assert RunClock(run, 2, None).kernels_total is None  # without it: "of an unknown total", as before


def test_the_count_follows_ranks_as_each_ranks_scope_gate_does(tmp_path: Path) -> None:
    """The two-rank DDP run recorded on the H200: one gate per rank, so ``ranks=0`` counts rank 0's kernels only."""
    st = shipped(tmp_path, "gpu/two_ranks/ddp_train_2r.duckdb")
    per_rank = dict(
        st.rows(
            "SELECT k.rank, count(*) FROM kernels k JOIN region_instances i USING (run_id, instance_id) "
            "WHERE run_id = 'r-06747adbf4' AND NOT i.warmup AND k.kind = 'kernel' GROUP BY 1"
        )
    )
    assert scoped_kernels(st, "r-06747adbf4", "ranks=0") == per_rank[0]
    assert scoped_kernels(st, "r-06747adbf4", "ranks=1") == per_rank[1]
    assert scoped_kernels(st, "r-06747adbf4", "") == per_rank[0] + per_rank[1]
