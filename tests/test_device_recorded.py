"""The persistent GEMM measured on the H200 through argus_lab: gpu.time (clean) + dev.* (instrumented), one store.

Recorded by ``scripts/gpu/device_gemm.sh OUT`` (see tests/data/README.md): ``examples/gpu/persistent_gemm.py``'s
``GemmStep(3072, 3072, 1024)`` with k-step marks, ``argus_lab.measure(step, "gpu.time,dev.*", repeat=3,
warmup=1)``.  576 output tiles on 132 persistent programs: 48 programs run a fifth tile, which is the tail.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from argus_lab.report import Report
from argus_lab.store import Store
from tests.device_cases import DATA, PHASES
from tests.test_device_join import check_values_against_numpy

RECORDED = Path(os.environ.get("ARGUS_DEVICE_STORE", str(DATA / "device_gemm_h200.duckdb")))

pytestmark = pytest.mark.skipif(
    not RECORDED.exists(),
    reason=f"{RECORDED} is not there: record it on the H200 with scripts/gpu/device_gemm.sh OUT and copy "
    "OUT/issue18/device_gemm_h200.duckdb to tests/data/gpu/device/ (tests/data/README.md)",
)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    copy = tmp_path_factory.mktemp("h200") / RECORDED.name
    shutil.copy(RECORDED, copy)  # a Report never writes; the copy keeps tests/data untouched by any migration
    return Report(Store(copy))


def _run(report: Report, backend: str) -> str:
    return next(r.run_id for r in report.runs if backend in r.backends)


def test_two_runs_one_clean_one_instrumented_both_ok(report: Report) -> None:
    assert [(r.status, r.backends) for r in report.runs] == [("ok", ("cupti",)), ("ok", ("device",))]
    variants = dict(report.store.rows("SELECT run_id, variant FROM runs"))
    assert variants[_run(report, "cupti")] == "" and variants[_run(report, "device")] == "instrumented"
    assert report.store.rows("SELECT DISTINCT problems, dropped FROM device_launches") == [("[]", 0)]


def test_every_launch_nests_exactly_under_its_kernel_record_and_the_host_instance(report: Report) -> None:
    dev = _run(report, "device")
    rows = report.store.records(
        "SELECT a.class, i.path, k.name, k.instance_id AS k_instance, l.instance_id AS asked_in, k.api_start_ns, "
        "l.probe_ns, k.end_ns - k.start_ns AS kernel_ns, s.value AS span "
        "FROM attributions a JOIN region_instances i USING (run_id, instance_id) "
        "JOIN device_launches l ON l.run_id = a.run_id AND 'launch:' || l.launch = a.evidence_id "
        "JOIN device_values s ON s.run_id = l.run_id AND s.launch = l.launch AND s.signal = 'dev.span' "
        "JOIN kernels k ON k.run_id = s.run_id AND k.kernel_key = s.kernel_key "
        "WHERE a.run_id = ? AND a.evidence = 'device_launch'",
        [dev],
    )
    assert len(rows) == 4  # 1 warm-up + 3 measured launches
    for r in rows:
        assert (r["class"], r["path"], r["name"]) == ("exact", "gemm_step", "persistent_gemm")
        assert r["k_instance"] == r["asked_in"]  # the launch's CUPTI correlation and the host's region stack agree
        assert r["api_start_ns"] >= r["probe_ns"]
        assert r["span"] <= r["kernel_ns"] + 2_000  # the CTAs ran inside the kernel's own record
    ids = {r[0] for r in report.store.rows("SELECT DISTINCT region_id FROM device_intervals")}
    assert ids == {PHASES.region(n).region_id for n in ("load", "mma", "epilogue")}


def test_dev_values_equal_an_independent_numpy_computation(report: Report) -> None:
    assert check_values_against_numpy(report.store, _run(report, "device")) == 4 * (3 * 2 + 4)


def test_the_tail_is_the_fifth_tile_of_48_programs(report: Report) -> None:
    dev = _run(report, "device")
    for launch in range(4):
        fifth = report.store.rows(
            "SELECT cta FROM (SELECT d.cta, count(*) AS n FROM device_intervals d JOIN regions r USING (region_id) "
            "WHERE d.run_id = ? AND d.launch = ? AND r.name = 'epilogue' GROUP BY d.cta) WHERE n = 5",
            [dev, launch],
        )
        assert len(fifth) == 576 - 4 * 132
        last = report.store.rows(
            "SELECT cta FROM device_programs WHERE run_id = ? AND launch = ? ORDER BY t_end_ns DESC LIMIT 1",
            [dev, launch],
        )
        assert last[0] in fifth  # the last program to finish ran a fifth tile
    tail = next(d for d in report.device if d.signal == "dev.tail")
    assert tail.launches == 3 and tail.median > 0


def test_overhead_provenance_compares_the_same_launches(report: Report) -> None:
    (o,) = report.device_overhead
    assert o.kernel == "persistent_gemm" and o.launches == 3
    assert o.clean_runs == (_run(report, "cupti"),)
    pairs: Any = report.store.rows(
        "SELECT ki.end_ns - ki.start_ns, kc.end_ns - kc.start_ns "
        "FROM device_values v JOIN kernels ki ON ki.run_id = v.run_id AND ki.kernel_key = v.kernel_key "
        "JOIN region_instances i ON i.run_id = v.run_id AND i.instance_id = v.instance_id AND NOT i.warmup "
        "JOIN instance_matches m ON m.run_id = v.run_id AND m.instance_id = v.instance_id "
        "JOIN kernels kc ON kc.run_id = m.ref_run_id AND kc.instance_id = m.ref_instance_id "
        "  AND kc.name = 'persistent_gemm' "
        "WHERE v.signal = 'dev.span'"
    )
    ratios = sorted(a / b for a, b in pairs)
    assert len(ratios) == 3
    assert o.ratio_median == pytest.approx(ratios[1])


def test_gpu_time_is_the_clean_runs_and_dev_values_the_instrumented_runs(report: Report) -> None:
    rows = {(r.path, r.signal): r for r in report.regions}
    assert rows[("gemm_step", "gpu.time")].runs == _run(report, "cupti")
    assert rows[("gemm_step", "dev.tail")].runs == _run(report, "device")
    gpu_in_instrumented = report.store.rows(
        "SELECT count(*) FROM instance_values WHERE run_id = ? AND signal LIKE 'gpu.%'", [_run(report, "device")]
    )
    assert gpu_in_instrumented == [(0,)]
