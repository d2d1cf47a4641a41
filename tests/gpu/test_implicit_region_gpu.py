"""GPU test of the implicit region (run on the H200 through scripts/gpu-check).

A workload that marks no region is measured as one region named after it; its first repetition (the warm-up) is
recorded after the fact, so its kernels carry no instance id.  They must still land in the warm-up instance (on the
thread that ran it, ``temporal``), never as "outside regions", and the per-ordinal table must count the measured
instances only.  With ``OUT`` set (scripts/gpu-check sets it) the store is kept as ``OUT/data/implicit_region.duckdb``
for tests/data.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu


def test_a_workload_without_regions_has_its_warm_up_kernels_in_its_implicit_region(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    import argus_lab

    x = torch.ones(1 << 16, device="cuda")
    torch.cuda.synchronize()

    def ten_kernels() -> None:
        y = x
        for _ in range(10):
            y = y * 1.0001
        torch.cuda.synchronize()

    store = tmp_path / "implicit_region.duckdb"
    report = argus_lab.measure(ten_kernels, "gpu.time,gpu.kernels", repeat=3, warmup=1, store=str(store))
    out = os.environ.get("OUT")
    if out:  # kept for tests/data before anything is asserted
        report.store.execute("CHECKPOINT")
        (Path(out) / "data").mkdir(parents=True, exist_ok=True)
        shutil.copy(store, Path(out) / "data" / store.name)
    rows = report.store.rows(
        "SELECT coalesce(i.path, ''), coalesce(i.warmup, false), a.class, count(*) FROM attributions a "
        "LEFT JOIN region_instances i ON i.run_id = a.target_run_id AND i.instance_id = a.instance_id "
        "WHERE a.run_id IN (SELECT unnest(?::VARCHAR[])) AND a.evidence = 'kernel' GROUP BY ALL ORDER BY ALL",
        [list(report.run_ids)],
    )
    kernels = [(k.path, k.ordinal, k.launches, k.classes, k.main_group) for k in report.kernels]
    ordinals = sorted((k.ordinal, k.launches) for k in report.kernels if k.ordinal is not None)
    coverage = report.coverage()
    print("implicit region kernels (path, warm-up, class, n):", rows)
    print("kernel rows (path, ordinal, launches, class, main group):", kernels)
    print("coverage:", coverage)
    print(report.text())
    assert all(k[1] is not None for k in kernels), kernels  # every kernel of the region at its ordinal
    assert ("ten_kernels", True, "temporal", 10) in rows, rows  # the warm-up's kernels, in the warm-up instance
    assert ("ten_kernels", False, "exact", 30) in rows, rows
    assert not [r for r in rows if r[0] == ""], rows  # nothing outside regions
    assert ordinals == [(o, 3) for o in range(10)]
    assert not [c for c in coverage if "unattributed" in c], coverage
