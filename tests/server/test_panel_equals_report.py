"""The JupyterLab panel's endpoints and the Report give the same values, on evidence recorded on the H200.

The case is ``tests/data/gpu/cases/backward`` (a training step: forward, then backward): the backward kernels are
launched by autograd's thread, carry no region id, and only the join classes them (``temporal``, into
``train_step/backward``).  Before the server read the join's values, the panel showed what the CUPTI backend had
counted itself (1 kernel per backward instance) while the Report showed 15.  Here every region and signal of the
Report is compared with what the real server answers (``regions`` and ``region`` endpoints).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from argus_lab.report import Report
from tests.recorded_cases import joined_case

pytestmark = pytest.mark.filterwarnings(r"ignore:Extension endpoints without[\s\S]*GET of TermSocket registered")

RUN = "backward"
FIELDS = ("n", "instances", "median", "p25", "p75", "min", "max", "exclusive_median", "unit", "attribution", "backend")


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    return {"ServerApp": {"jpserver_extensions": {"argus_lab": True}, "allow_unauthenticated_access": False}}


@pytest.fixture
def recorded(jp_root_dir: Path) -> tuple[str, Report]:
    """The recorded case joined into a store under the server root, and the Report of its run."""
    store = joined_case(jp_root_dir, RUN)
    return f"{RUN}.duckdb", Report(store, [RUN])


async def get(jp_fetch: Any, endpoint: str, **params: str) -> Any:
    response = await jp_fetch("argus-lab", endpoint, params=params)
    assert response.code == 200
    return json.loads(response.body)


async def test_panel_endpoints_and_the_report_agree_on_every_region_and_signal(
    jp_fetch: Any, recorded: tuple[str, Report]
) -> None:
    store, report = recorded
    paths = sorted({r.path for r in report.regions})
    assert paths == ["train_step", "train_step/backward", "train_step/forward"]
    compared = 0
    for path in paths:
        detail = await get(jp_fetch, "region", store=store, path=path, run=RUN)
        panel = {row["signal"]: row for row in detail["summary"]}
        mine = {r.signal: r for r in report.regions if r.path == path}
        assert set(panel) == set(mine), path
        for signal, row in mine.items():
            for field in FIELDS:
                want, got = getattr(row, field), panel[signal][field]
                assert got == (pytest.approx(want) if isinstance(want, float) else want), (path, signal, field)
                compared += 1
            # every instance's value: the Report's provenance trace against the panel's instance table
            traced = {t["instance_id"]: t["inclusive"] for t in report.trace(path, signal)}
            shown = {i["instance_id"]: i["values"].get(signal) for i in detail["instances"]}
            assert shown == pytest.approx(traced), (path, signal)
        # the kernels the Report places in the region (exact and temporal), summed per kernel name
        kernels: dict[str, list[float]] = {}
        for k in report.kernels:
            if k.path == path:
                acc = kernels.setdefault(k.name, [0, 0.0])
                acc[0] += k.launches
                acc[1] += k.total_ns
        assert {k["name"]: [k["launches"], pytest.approx(k["total_ns"])] for k in detail["kernels"]} == kernels
        assert [c["signal"] for c in detail["counters"]] == [c.signal for c in report.counters if c.path == path]
    assert compared > 100
    # the case the panel used to get wrong: autograd's kernels count in the backward region, as in the Report
    detail = await get(jp_fetch, "region", store=store, path="train_step/backward", run=RUN)
    kernels = {row["signal"]: row for row in detail["summary"]}["gpu.kernels"]
    assert kernels["median"] == 15 and "temporal" in kernels["attribution"]
    # the region list: the mean time per instance is the mean of the Report's values of that signal
    listed = {r["path"]: r for r in await get(jp_fetch, "regions", store=store)}
    for path in paths:
        signal = listed[path]["share_signal"]
        assert signal == "gpu.time"
        values = report._values[(path, signal)]
        assert listed[path]["mean"] == pytest.approx(float(values.mean()))
