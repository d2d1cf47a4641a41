"""GPU tests of launch identity across threads and of device launches (run on the H200 through scripts/gpu-check).

With the default launch identity (the launch callback) a kernel is ``exact`` only for an instance of the thread that
launched it; autograd's kernels go to the region of the thread in ``backward()`` (``temporal``, reason saying so); a
thread with no region is never given another thread's region; an instrumented device launch is tied to its kernel
record and host instance (``exact``) and the instrumented variant's overhead is computed.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _classes(report: Any) -> dict[tuple[str, str], int]:
    """(region path or '', class) -> kernels, over the report's timing run."""
    rows = report.store.rows(
        "SELECT coalesce(i.path, ''), a.class, count(*) FROM attributions a "
        "LEFT JOIN region_instances i ON i.run_id = a.target_run_id AND i.instance_id = a.instance_id "
        "WHERE a.run_id IN (SELECT unnest(?::VARCHAR[])) AND a.evidence = 'kernel' GROUP BY ALL",
        [list(report.run_ids)],
    )
    return {(p, c): int(n) for p, c, n in rows}


def _kernels(report: Any, path: str) -> list[float]:
    rows = report.store.rows(
        "SELECT v.inclusive FROM instance_values v JOIN region_instances i USING (run_id, instance_id) "
        "WHERE v.signal = 'gpu.kernels' AND i.path = ? AND NOT i.warmup ORDER BY i.start_ns",
        [path],
    )
    return [float(r[0]) for r in rows]


def test_a_side_thread_without_a_region_is_not_counted_in_the_main_threads_region(tmp_path: Path) -> None:
    import argus_lab
    from examples.gpu import thread_cases as tc

    report = argus_lab.measure(tc.make_side_thread(), "gpu.time,gpu.kernels", repeat=2, warmup=1,
                               store=str(tmp_path / "s.duckdb"))  # fmt: skip
    classes = _classes(report)
    per_instance = classes[("main_work", "exact")] / 3  # the main thread's own kernels (a matmul may launch two)
    assert per_instance >= 50 and _kernels(report, "main_work") == [per_instance, per_instance], classes
    assert classes[("", "unattributed")] == 3 * 50, classes  # the side thread's 50 a step
    assert not [k for k in classes if k[1] in ("temporal", "ambiguous")], classes


def test_backward_kernels_go_to_the_region_of_the_thread_in_backward_not_exactly(tmp_path: Path) -> None:
    import argus_lab
    from examples.gpu import backward

    state = backward.setup()
    report = argus_lab.measure(lambda: backward.step(state), "gpu.time,gpu.kernels", repeat=2, warmup=1,
                               store=str(tmp_path / "b.duckdb"))  # fmt: skip
    classes = _classes(report)
    assert classes.get(("train_step/backward", "temporal"), 0) > 0, classes
    assert classes.get(("train_step/backward", "exact"), 0) < classes[("train_step/backward", "temporal")], classes
    reasons = report.store.rows(
        "SELECT DISTINCT reason FROM attributions WHERE evidence = 'kernel' AND class = 'temporal'"
    )
    assert all("autograd's thread" in r[0] and "backward()" in r[0] for r in reasons), reasons
    roles = report.store.rows("SELECT DISTINCT system_name FROM threads WHERE role = 'autograd'")
    assert roles and roles[0][0].startswith("pt_autograd_"), roles
    assert report.store.rows("SELECT count(*) FROM host_calls WHERE call = 'autograd.backward'")[0][0] >= 3


def test_two_threads_with_their_own_regions_are_each_exact(tmp_path: Path) -> None:
    import argus_lab
    from examples.gpu import thread_cases as tc

    report = argus_lab.measure(tc.make_two_threads(), "gpu.time,gpu.kernels", repeat=2, warmup=1,
                               store=str(tmp_path / "t.duckdb"))  # fmt: skip
    assert _kernels(report, "t0_work") == [30.0, 30.0]
    assert _kernels(report, "t1_work") == [45.0, 45.0]
    classes = _classes(report)
    assert {c for _, c in classes} <= {"exact", "unattributed"}, classes
    names = report.store.rows("SELECT DISTINCT path, thread_name FROM region_instances ORDER BY 1")
    assert names == [("t0_work", "w0"), ("t1_work", "w1")], names


def test_device_launches_are_exact_and_the_overhead_is_computed(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    import argus_lab
    from examples.gpu import persistent_gemm as pg

    step = pg.GemmStep(3072, 3072, 1024, pg.GemmConfig(marks="kstep"))
    step()
    torch.cuda.synchronize()
    report = argus_lab.measure(step, "gpu.time,dev.*", repeat=2, warmup=1, store=str(tmp_path / "d.duckdb"))
    launches = dict(
        report.store.rows("SELECT class, count(*) FROM attributions WHERE evidence = 'device_launch' GROUP BY 1")
    )
    assert launches and set(launches) == {"exact"}, launches
    over = report.device_overhead
    assert over and all(math.isfinite(o.ratio_median) and o.ratio_median > 0.5 for o in over), over
