"""Every face plans as ``argus_lab.measure`` does: with the kernel census of the workload's newest joined timing run
(``app.measure.plan`` given the workload), so an ncu run is costed by the kernels it replays.  Read from the
recorded H200 store ``tests/data/gpu/issue15/autotune.duckdb`` (timing run r-c66d36a25b of
``autotuned_matmul:step``)."""

from __future__ import annotations

from pathlib import Path

from recorded_cases import shipped

from argus_lab.app.measure import plan
from argus_lab.faces.panel import SignalPanel
from argus_lab.run.workload import Workload

SIGNALS = "hw:dram__bytes_read.sum"
SCOPE = "matmul; instances=1:"
CENSUS = "(timing run r-c66d36a25b)"
"""How the plan names the census it costed the ncu run by: the recorded store's newest joined timing run."""


def step() -> None:
    """Stands for the recorded workload: a callable described as ``autotuned_matmul:step``."""


step.__module__ = "autotuned_matmul"


def test_the_plan_costs_the_ncu_run_by_the_census_of_this_workload_only(tmp_path: Path) -> None:
    store = shipped(tmp_path, "gpu/issue15/autotune.duckdb")
    recorded = Workload.from_target(step)
    assert recorded.describe() == "autotuned_matmul:step"
    with_census = plan(SIGNALS, scope=SCOPE, repeat=4, warmup=0, workload=recorded, store=store).explain()
    assert CENSUS in with_census
    other = Workload.from_target("another_module:step")
    assert CENSUS not in plan(SIGNALS, scope=SCOPE, repeat=4, warmup=0, workload=other, store=store).explain()
    assert CENSUS not in plan(SIGNALS, scope=SCOPE, repeat=4, warmup=0, workload=None, store=store).explain()


def test_the_panel_plans_its_target_with_the_census_as_measure_does(tmp_path: Path) -> None:
    store = shipped(tmp_path, "gpu/issue15/autotune.duckdb")
    panel = SignalPanel(target=step, store=str(store.path), selected=())
    panel.families["hw:"].value = "dram__bytes_read.sum"
    panel.scope.value = SCOPE
    panel.repeat.value, panel.warmup.value = 4, 0
    workload = panel.workload()
    assert workload is not None
    shown = panel.plan(workload).explain()
    assert CENSUS in shown
    assert shown == plan(SIGNALS, scope=SCOPE, repeat=4, warmup=0, workload=workload, store=store).explain()
    assert CENSUS not in panel.plan().explain()  # the status line plans without reading the store
