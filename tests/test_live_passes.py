"""Live pass counts (CUPTI's profiler host API through the worker process) on this CPU machine, for real.

The host API needs no GPU, only a chip name: these tests ask the real libcupti this machine has (the
``nvidia-cuda-cupti`` wheel, or the CUDA toolkit's libcupti 13.0 when the wheel's needs a driver) for the GH100
chip and compare with the table ncu recorded on the H200 (``argus_lab/data/ncu_passes_gh100.json``).  They skip,
saying why, where no libcupti answers.  On the H200 ``tests/gpu/test_ncu_passes_gpu.py`` compares with ncu itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from argus_lab.plan import Plan, Request, plan
from argus_lab.plan import live_passes as lp
from argus_lab.plan.passes import NotedPassModel, TablePassModel, default_pass_model, recorded_model

TABLE = json.loads((Path(lp.__file__).resolve().parents[1] / "data" / "ncu_passes_gh100.json").read_text())
NO_DRIVER = not os.path.exists("/dev/nvidiactl")


def _host_api() -> dict[str, object]:
    cmd = [sys.executable, "-m", lp.WORKER_MODULE, "--chip", "GH100"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    try:
        answer: dict[str, object] = json.loads(proc.stdout)
    except ValueError:
        return {"ok": False, "error": proc.stderr[-300:]}
    return answer


HOST_API = _host_api()
needs_host_api = pytest.mark.skipif(
    not HOST_API.get("ok"), reason=f"no libcupti answers the profiler host API here: {HOST_API.get('error')}"
)


@pytest.fixture
def live_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache folder, the chip named, no live model left from another test."""
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ARGUS_GPU_CHIP", "GH100")
    monkeypatch.delenv("ARGUS_NCU_PASS_TABLE", raising=False)
    monkeypatch.delenv("ARGUS_LIVE_PASSES", raising=False)
    monkeypatch.delenv("ARGUS_LIBCUPTI", raising=False)
    lp.forget()
    yield tmp_path / "cache"
    lp.forget()


def _live() -> lp.LivePassModel:
    model = default_pass_model()
    assert isinstance(model, lp.LivePassModel), model.source
    return model


@needs_host_api
def test_live_count_equals_ncus_recorded_count_for_every_recorded_set(live_env: Path) -> None:
    model = _live()
    compared = 0
    for metric, recorded in TABLE["metrics"].items():
        if model.known(metric):
            assert model.passes([metric]) == recorded, metric
            compared += 1
    combos = 0
    for combo in TABLE["combinations"]:
        if all(model.known(m) for m in combo["metrics"]):
            assert model.passes(combo["metrics"]) == combo["passes"], combo["name"]
            combos += 1
    model.close()
    # CUPTI knows all but the two stall ratios ncu derives itself; launch__* needs no pass
    assert compared >= len(TABLE["metrics"]) - 2
    assert combos >= len(TABLE["combinations"]) - 2


@needs_host_api
def test_launch_attributes_need_no_pass_and_unknown_metrics_come_from_the_table(live_env: Path) -> None:
    model = _live()
    dram = model.passes(["dram__bytes_read.sum"])
    assert model.passes(["launch__grid_size"]) == 1
    assert model.passes(["dram__bytes_read.sum", "launch__registers_per_thread"]) == dram
    stall = "smsp__warps_issue_stalled_barrier_per_warp_active.pct"
    assert not model.known(stall)
    assert model.passes([stall, "dram__bytes_read.sum"]) >= TABLE["metrics"][stall]
    assert "not known to CUPTI" in model.origin([stall, "dram__bytes_read.sum"])
    model.close()


@needs_host_api
def test_plan_says_where_each_count_came_from(live_env: Path) -> None:
    stall = "smsp__warps_issue_stalled_barrier_per_warp_active.pct"
    names = [
        "gpu.time",
        "hw:sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "hw:dram__bytes_read.sum",
        f"hw:{stall}",
    ]
    p = plan(Request.build(names, max_passes_per_run=16))
    ncu_runs = [r for r in p.runs if r.launcher == "ncu"]
    assert ncu_runs
    for run in ncu_runs:
        assert run.passes_from.startswith("live: CUPTI profiler host API, GH100")
        assert f"    passes: {run.passes} (live: CUPTI profiler host API, GH100" in p.explain()
    assert p.pass_source.startswith("live: CUPTI profiler host API of ")
    assert f"not known to CUPTI on this chip: {stall}" in p.explain()
    assert Plan.from_json(p.to_json()) == p


@needs_host_api
def test_counts_are_cached_per_chip_and_set_and_the_worker_ends_with_the_plan(live_env: Path) -> None:
    metrics = ["lts__t_sector_hit_rate.pct", "l1tex__t_sector_hit_rate.pct"]
    p = plan(Request.build([f"hw:{m}" for m in metrics]))
    model = _live()
    assert model._worker is None  # the plan closed it
    files = list((live_env / "passes").glob("GH100-*.json"))
    assert len(files) == 1
    cached = json.loads(files[0].read_text())
    assert cached["chip"] == "GH100"
    assert cached["sets"][",".join(sorted(metrics))] + 1 == p.runs[-1].passes  # CUPTI's 2 -> ncu's 3
    lp.forget()
    again = _live()
    again.close()  # the worker started to learn the chip; the count must come from the cache file
    assert again.passes(metrics) == p.runs[-1].passes
    assert again._worker is None


def test_ncu_rule_is_monotone() -> None:
    assert [lp.ncu_passes(n) for n in range(5)] == [1, 1, 3, 4, 5]
    assert all(lp.ncu_passes(n + 1) >= lp.ncu_passes(n) for n in range(100))


@pytest.mark.skipif(not NO_DRIVER, reason="this machine has an NVIDIA driver")
def test_without_a_driver_or_a_chip_the_plan_uses_the_recorded_table_and_says_why(
    live_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARGUS_GPU_CHIP")
    assert isinstance(default_pass_model(), TablePassModel)  # no driver, no chip: no worker at all
    monkeypatch.setenv("ARGUS_LIVE_PASSES", "1")
    lp.forget()
    model = default_pass_model()
    assert isinstance(model, NotedPassModel)
    assert model.source.startswith("live count unavailable (no NVIDIA driver")
    assert "ARGUS_GPU_CHIP" in model.source
    assert "table recorded on NVIDIA H200 (GH100)" in model.source
    p = plan(Request.build("hw:dram__bytes_read.sum"))
    assert p.runs[0].passes == 1
    assert p.runs[0].passes_from.startswith("recorded")


@needs_host_api
def test_an_unknown_chip_is_refused_naming_the_known_ones(live_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARGUS_GPU_CHIP", "ZZ999")
    model = default_pass_model()
    assert isinstance(model, NotedPassModel)
    assert "chip 'ZZ999' is not known to" in model.source
    assert "GH100" in model.source


def test_a_named_library_that_does_not_load_is_named(live_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARGUS_LIBCUPTI", "/nonexistent/libcupti.so.13")
    model = default_pass_model()
    assert isinstance(model, NotedPassModel)
    assert "/nonexistent/libcupti.so.13" in model.source


def test_a_chip_without_its_own_table_borrows_gh100s_and_says_so() -> None:
    model = recorded_model("AD102")
    assert isinstance(model, NotedPassModel)
    assert model.source.startswith("no table recorded for AD102: the GH100 table stands in")
    assert isinstance(recorded_model("GH100"), TablePassModel)
