"""The store of an `argus-lab run` on the H200 (tests/data/gpu/e2e_nested_h200.duckdb, recorded): one request,
three planned runs, and per region the timing, counters, compiler facts and clocks the issue asks for."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import argus_lab

RECORDED = Path(__file__).parent / "data" / "gpu" / "e2e_nested_h200.duckdb"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> argus_lab.Report:
    local = tmp_path_factory.mktemp("e2e") / RECORDED.name
    shutil.copy(RECORDED, local)
    local.chmod(0o644)
    return argus_lab.Report(str(local), None)


def test_three_runs_all_ok(report: argus_lab.Report) -> None:
    assert [(r.plan_index, r.status, r.backends) for r in report.runs] == [
        (0, "ok", ("cupti", "nvml", "compiler")),
        (1, "ok", ("ncu",)),
        (2, "ok", ("ncu",)),
    ]


def test_each_region_has_timing_counters_facts_and_clocks(report: argus_lab.Report) -> None:
    signals: dict[str, set[str]] = {}
    for row in report.regions:
        signals.setdefault(row.path, set()).add(row.signal)
    counters: dict[str, set[str]] = {}
    for c in report.counters:
        counters.setdefault(c.path, set()).add(c.signal)
    for path in ("outer", "outer/inner"):
        assert {"gpu.time", "gpu.kernels", "sys.sm_clock", "sys.power"} <= signals[path]
        assert len(counters[path]) == 11, counters[path]
    # the SGEMM of `outer`: 128 blocks (ncu, joined by ordinal) and 202 registers per thread (compiler facts)
    sgemm = next(k for k in report.kernels if k.path == "outer" and "sgemm" in k.name)
    assert sgemm.counters["hw:launch__grid_size"][0] == 128
    facts = next(f for f in report.compiler if f.registers == 202 and "sgemm" in f.name)
    assert "not extracted" in facts.unavailable  # cuBLAS: what the records cannot tell is said, not left blank
    assert "not available" in report.compiler_table()


def test_counter_values_joined_by_ordinal_are_the_real_ones(report: argus_lab.Report) -> None:
    counters = {(c.path, c.signal): c for c in report.counters}
    inner_inst = counters["outer/inner", "hw:smsp__inst_executed.sum"]
    assert inner_inst.median == pytest.approx(1.360e6, rel=1e-3)
    assert "clock_control=base" in inner_inst.settings
    rows = {(r.path, r.signal): r for r in report.regions}
    assert rows["outer", "gpu.kernels"].median == 3
    assert rows["outer/inner", "gpu.kernels"].median == 2
