"""The Report's kernel summary and the panel's kernel rows read within bounds equal the same read whole.

Recorded H200 stores (tests/data/gpu) and a SYNTHETIC store of 4x10^4 kernel records whose kernel table has ~4x10^4 rows
(each kernel name varies with the launch, as bench/scale_bench.py's 3 M store does): the bounded summary, the text of
the report and the panel's drill-down equal those made from the table read whole, and the bounded reads turn into
rows only what they show (the rest counted and summed in DuckDB).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from argus_lab import join
from argus_lab.report import Report, browse
from argus_lab.report import rows as rt
from argus_lab.report.kernel_summary import KernelSummary, read_kernel_summary
from argus_lab.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from join_bench import generate

GPU = Path(__file__).resolve().parent / "data" / "gpu"
RECORDED = [
    "e2e_nested_h200.duckdb",
    "nccl/nccl_h200.duckdb",
    "issue15/autotune.duckdb",
    "issue15/model.duckdb",
    "device/device_gemm_h200.duckdb",
    "two_ranks/ddp_train_2r.duckdb",
]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """SYNTHETIC: 4x10^4 kernel records, 40 repetitions of a step with two leaf regions; kernel names vary with the
    correlation id, so (path, ordinal, name) groups are ~4x10^4."""
    st = Store(tmp_path_factory.mktemp("summary") / "synthetic.duckdb")
    generate(st, 40_000, 40, 1, 0.02, 0.01, samples=False)
    with st.connect(write=True) as con:
        con.execute("UPDATE kernels SET name = 'synthetic_kernel_' || (correlation_id % 463)")
    join.attribute_request(st, ["r-bench"])
    return st


def recorded(name: str, tmp_path: Path) -> Store:
    path = GPU / name
    if not path.exists():
        pytest.skip(f"{name} is not in this checkout")
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    return Store(copy)


def made_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A counter of the kernel rows the reads turn into Python objects."""
    made = [0]
    row = rt._Counters.row

    def counted(self: rt._Counters, r: dict[str, Any]) -> rt.KernelRow:
        made[0] += 1
        return row(self, r)

    monkeypatch.setattr(rt._Counters, "row", counted)
    return made


@pytest.mark.parametrize("name", RECORDED)
def test_the_bounded_summary_and_text_equal_the_whole_read_on_recorded_stores(name: str, tmp_path: Path) -> None:
    st = recorded(name, tmp_path)
    whole = Report(st)
    assert whole.kernels  # read whole: its summary and text come from these rows
    bounded = Report(st)
    for limit in (0, 1, 3, 200):
        assert bounded.kernel_summary(limit) == KernelSummary.of(whole.kernels, limit)
    assert "kernels" not in vars(bounded)  # the bounded report never read the table whole
    assert bounded.text() == whole.text()
    assert bounded.other_kernel_groups() == whole.other_kernel_groups()


@pytest.mark.parametrize("name", ["e2e_nested_h200.duckdb", "issue15/autotune.duckdb"])
def test_the_panel_drill_down_folds_the_same_kernel_rows(name: str, tmp_path: Path) -> None:
    st = recorded(name, tmp_path)
    report = Report(st)
    for path in sorted({k.path for k in report.kernels})[:3]:
        detail = browse.region_detail(st, path)
        if detail is None:  # no recorded instance at that path ('(outside regions)')
            continue
        runs = list(dict.fromkeys(i["run_id"] for i in detail["instances"]))
        _, scope = rt.read_scopes(st, runs)
        every = browse._kernels_by_run(path, rt.read_kernels(st, runs, scope))  # the table read whole
        expected = [k for run in runs for k in every.get(run, [])]
        expected.sort(key=lambda k: (not k["main_group"], -k["total_ns"]))
        assert detail["kernels"] == expected[: browse.MAX_ROWS]


def test_a_table_longer_than_the_bound_gives_its_first_rows_and_counts_the_rest(
    synthetic: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = ["r-bench"]
    _, scope = rt.read_scopes(synthetic, ids)
    whole = rt.read_kernels(synthetic, ids, scope)
    assert len(whole) > 20_000  # a table far longer than the bound
    made = made_rows(monkeypatch)
    summary = read_kernel_summary(synthetic, ids, scope, limit=25)
    assert made[0] == 25  # the rows shown, no other
    assert summary == KernelSummary.of(whole, 25)
    assert summary.more_rows == sum(k.main_group for k in whole) - 25 > 0


def test_the_text_of_a_long_table_reads_only_the_rows_it_shows(
    synthetic: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = Report(synthetic, ["r-bench"])
    assert whole.kernels
    expected = whole.text()
    made = made_rows(monkeypatch)
    text = Report(synthetic, ["r-bench"]).text()
    assert made[0] <= 40  # the text's kernel rows; the remainder is a count from DuckDB
    assert text == expected
    assert f"({sum(k.main_group for k in whole.kernels) - 40} more kernel rows" in text


def test_the_drill_down_of_a_long_table_folds_one_path_as_it_streams(
    synthetic: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = ["r-bench"]
    _, scope = rt.read_scopes(synthetic, ids)
    every = rt.read_kernels(synthetic, ids, scope)
    of_path = sum(k.path == "step/layer/attn" for k in every)
    monkeypatch.setattr(rt, "FETCH_ROWS", 1000)
    held: list[int] = []

    def fold(rows: Any) -> int:  # the fold gets rows a batch at a time, never the table
        assert not isinstance(rows, (list, tuple))
        n = 0
        for _ in rows:
            n += 1
        held.append(n)
        return n

    made = made_rows(monkeypatch)
    assert rt.fold_kernels(synthetic, ids, fold, scope, path="step/layer/attn") == of_path
    assert made[0] == of_path < len(every)  # the other paths' rows never became rows
    detail = browse.region_detail(synthetic, "step/layer/attn")
    assert detail is not None
    expected = browse._kernels_by_run("step/layer/attn", every)["r-bench"]
    expected.sort(key=lambda k: (not k["main_group"], -k["total_ns"]))
    assert detail["kernels"] == expected[: browse.MAX_ROWS]
