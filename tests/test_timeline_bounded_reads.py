"""A report's timeline is read within bounds (argus_lab.report.timeline_rows): the first ``exact_limit`` instances
as rows, the others aggregated in DuckDB (count, first and last time, region paths, each rank's clock offset), and
the kernels of a run with more than the timeline embeds read without their names, classes or ids.  The timeline
drawn from that is the one drawn from every row of the run (timeline_rows.timeline_columns), lane for lane and bin for
bin: on the two-rank H200 evidence (clock offsets, several threads and streams, kernels outside every region), in
and out of a scope, and on the synthetic views store (hostile names, an ncu run)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from views_synthetic import write_store

from argus_lab.report import Report
from argus_lab.report.timeline_rows import timeline_columns, timeline_inputs
from argus_lab.store import Store
from argus_lab.views.timeline import TimelineLimits, timeline_data

TWO_RANKS = Path(__file__).parent / "data" / "gpu" / "two_ranks" / "nccl_overlap_2r.duckdb"

LIMITS = (
    TimelineLimits(exact_limit=5, base_bins=16, bin_budget=400),  # a few instances as rows, kernels binned
    TimelineLimits(exact_limit=60, base_bins=64, bin_budget=2_000),
    TimelineLimits(),  # every instance and kernel of these small runs
)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Store]:
    folder = tmp_path_factory.mktemp("bounded")
    shutil.copy(TWO_RANKS, folder / "two_ranks.duckdb")
    return {"two_ranks": Store(folder / "two_ranks.duckdb"), "synthetic": write_store(folder / "synthetic.duckdb")}


@pytest.mark.parametrize(
    ("name", "scope"),
    [("two_ranks", ""), ("two_ranks", "ranks=1"), ("synthetic", ""), ("synthetic", "**/attn*")],
)
def test_the_bounded_timeline_is_the_timeline_of_every_row(stores: dict[str, Store], name: str, scope: str) -> None:
    report = Report(stores[name], scope=scope or None)
    compared = 0
    for run_id in report.run_ids:
        every = timeline_columns(report.store, run_id, report.scope_filter, report.kernel_scope)
        for limits in LIMITS:
            inst, kern, extent = timeline_inputs(
                report.store, run_id, limits.exact_limit, report.scope_filter, report.kernel_scope
            )
            assert extent.total == len(every[0]["instance_id"])
            if not extent.total and not len(kern.get("start_ns", ())):
                continue
            assert timeline_data(run_id, inst, kern, limits, extent) == timeline_data(run_id, *every, limits)
            compared += 1
    assert compared  # the stores have runs with a timeline in each scope


def test_a_run_larger_than_the_timeline_is_not_read_whole(stores: dict[str, Store]) -> None:
    store = stores["two_ranks"]
    report = Report(store)
    run_id = max(report.run_ids, key=lambda r: len(timeline_columns(store, r)[1]["start_ns"]))
    every_inst, every_kern = timeline_columns(store, run_id)
    limit = 5
    assert len(every_inst["instance_id"]) > limit and len(every_kern["start_ns"]) > limit
    inst, kern, extent = timeline_inputs(store, run_id, limit)
    assert len(inst["instance_id"]) == limit  # the first instances alone, in time order on rank 0's clock
    first = sorted(every_inst["start_ns"] + every_inst["offset_ns"])[:limit]
    assert sorted((inst["start_ns"] + inst["offset_ns"]).tolist()) == [int(x) for x in first]
    assert not {"name", "class", "instance_id", "kind"} & set(kern)  # what the pyramid does not draw stays behind
    assert len(kern["start_ns"]) == len(every_kern["start_ns"])
    assert extent.paths == tuple(sorted(set(every_inst["path"].tolist())))
    assert {r for r, _ in extent.offsets} == set(every_inst["rank"].tolist())


AUTOTUNE = Path(__file__).parent / "data" / "gpu" / "issue15" / "autotune.duckdb"


@pytest.mark.parametrize("scope", ["", "matmul; instances=1:"])
def test_a_page_reads_the_first_kernel_rows_and_sums_the_other_groups_in_duckdb(tmp_path: Path, scope: str) -> None:
    # the recorded autotuning matmul: its first call ran another kernel sequence (rows outside the main group)
    shutil.copy(AUTOTUNE, tmp_path / "a.duckdb")
    store = Store(tmp_path / "a.duckdb")
    runs = [r[0] for r in store.rows("SELECT run_id FROM runs ORDER BY started_ns")]  # every run (the first autotunes)
    every = Report(store, runs, scope=scope or None)
    rows = every.kernels  # the whole table, read in Python
    launches: dict[str, int] = {}
    names: dict[str, set[str]] = {}
    for k in rows:
        if not k.main_group:
            launches[k.path] = launches.get(k.path, 0) + k.launches
            names.setdefault(k.path, set()).add(k.name)
    assert any(k.main_group for k in rows) and (bool(launches) or bool(scope))  # the scope leaves out instance 0
    for n in (1, 3, len(rows), len(rows) + 5):
        fresh = Report(store, runs, scope=scope or None)
        assert fresh.first_kernels(n) == rows[:n]
        assert "kernels" not in vars(fresh)  # the whole table was not read for it
    fresh = Report(store, runs, scope=scope or None)
    assert fresh.other_kernel_groups() == {p: (n, len(names[p])) for p, n in launches.items()}
    assert list(fresh.other_kernel_groups()) == list(launches)  # in the order the table's rows come
    assert every.other_kernel_groups() == fresh.other_kernel_groups()  # from the rows once they are read
