"""The per-SM lane timeline of instrumented launches: its data (exact and aggregated), the bundle, the plotly figure,
the HTML export, and escaping of device region names; over the recorded H200 probe buffers (kernel records
SYNTHETIC, see tests/device_cases.py) and a SYNTHETIC buffer with a hostile region name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import argus_lab
from argus_lab import views
from argus_lab.store import Store
from argus_lab.views import device as dv
from argus_lab.views.bundle import EXPORT, build
from argus_lab.views.html_file import export
from tests.device_cases import FakeCupti, GemmStep, measure, raw
from tests.device_synth import build as synth

XSS_DEVICE = "<img src=x onerror=window.__argus_xss=3>"
HOSTILE = argus_lab.device.regions(XSS_DEVICE, "epilogue", module="tests.hostile")


@pytest.fixture(scope="module")
def tile(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return measure(Store(tmp_path_factory.mktemp("v") / "tile.duckdb"), raw("tail3072_tile"), repeat=2, warmup=0)


@pytest.fixture(scope="module")
def kstep(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return measure(Store(tmp_path_factory.mktemp("v") / "kstep.duckdb"), raw("tail3072_kstep"), repeat=1, warmup=0)


def test_a_small_launch_embeds_every_occurrence_on_lanes_ordered_by_sm_end(tile: Any) -> None:
    store = tile.report.store
    (ref, *_) = dv.launches(store, tile.report.run_ids)
    data = dv.launch_data(ref, dv.launch_columns(store, ref.run_id, ref.launch))
    assert data["exact"] and data["total"] == 1152 and len(data["start"]) == 1152
    assert data["regions"] == ["epilogue", "mainloop"] and len(data["lanes"]) == 132
    ends = data["sm"]["end"]
    assert ends == sorted(ends)  # the last SMs to finish at the bottom
    tail = store.rows("SELECT value FROM device_values WHERE run_id = ? AND launch = ? AND signal = 'dev.tail'",
                      [ref.run_id, ref.launch])  # fmt: skip
    assert data["tail"]["imbalance"] == pytest.approx(tail[0][0])
    assert (data["path"], data["kernel"], data["attribution"]) == ("gemm_step", "persistent_gemm", "exact")
    # every bar sits on its SM's lane
    lanes = {f"SM {s}": i for i, s in enumerate(data["sm"]["sm"])}
    sm_of = dict(store.rows("SELECT cta, sm FROM device_programs WHERE run_id = ? AND launch = ?",
                            [ref.run_id, ref.launch]))  # fmt: skip
    assert all(lanes[f"SM {sm_of[c]}"] == lane for c, lane in zip(data["cta"], data["lane"], strict=True))


def test_a_large_launch_embeds_the_pyramid_within_its_budget(kstep: Any) -> None:
    store = kstep.report.store
    (ref, *_) = dv.launches(store, kstep.report.run_ids)
    cols = dv.launch_columns(store, ref.run_id, ref.launch)
    data = dv.launch_data(ref, cols, dv.DEVICE_LIMITS)
    assert not data["exact"] and data["total"] == 148_032
    levels = data["levels"]
    assert sum(len(lv["bin"]) for lv in levels) <= dv.DEVICE_LIMITS.bin_budget + len(levels[0]["bin"])
    for lv in levels:  # nothing is lost by aggregating: every occurrence is counted once per level
        assert sum(lv["count"]) == 148_032
        busy = np.asarray(cols["intervals"]["t_end_ns"]) - np.asarray(cols["intervals"]["t_start_ns"])
        assert sum(lv["busy"]) == pytest.approx(float(busy.sum()), rel=1e-6, abs=len(lv["busy"]))
    finer = dv.launch_data(ref, cols, dv.DEVICE_EXPORT_LIMITS)["levels"]
    assert len(finer) > len(levels)


def test_bundle_carries_the_device_table_the_overhead_and_bounded_timelines(kstep: Any, tile: Any) -> None:
    b = build(tile.report)
    assert len(b["device_timelines"]) == 1  # a notebook output carries one launch
    assert {d["signal"] for d in b["joined"]["device"]} >= {"dev.time", "dev.tail"}
    assert b["joined"]["device_overhead"][0]["kernel"] == "persistent_gemm"
    assert len(build(tile.report, EXPORT)["device_timelines"]) == 2
    assert len(json.dumps(build(kstep.report))) < 600_000


def test_plotly_figure_of_a_launch_has_the_regions_and_the_tail_marks(tile: Any) -> None:
    fig = views.device_timeline(tile.report)
    assert {t.name for t in fig.data} == {"epilogue", "mainloop"}
    store = tile.report.store
    (ref, *_) = dv.launches(store, tile.report.run_ids)
    lanes = dv.launch_data(ref, dv.launch_columns(store, ref.run_id, ref.launch))["lanes"]
    assert len(fig.layout.shapes) == 2
    assert fig.layout.yaxis.ticktext == tuple(lanes[::3])  # 132 lanes drawn, every third labelled
    with pytest.raises(argus_lab.errors.ArgusError, match="no instrumented launch to draw"):
        views.device_timeline(tile.report, launch=99)


def test_device_region_names_are_escaped_everywhere(tmp_path: Path) -> None:
    """SYNTHETIC buffer: a device region named like an HTML tag."""
    events = [(XSS_DEVICE, False, 0), (XSS_DEVICE, True, 40), ("epilogue", False, 40), ("epilogue", True, 60)]
    buf = synth([(0, 0, events), (1, 1, events)], events_per_slot=8)
    step = GemmStep(FakeCupti(), buf, regions=HOSTILE)
    m = measure(Store(tmp_path / "x.duckdb"), buf, repeat=1, warmup=0, step=step)
    fig = views.device_timeline(m.report)
    assert all("<img" not in (t.name or "") for t in fig.data)
    html = export(m.report, tmp_path / "x.html", title="device").read_text()
    assert "<img src=x onerror" not in html
    assert XSS_DEVICE in json.loads(_embedded(html))["device_timelines"][0]["regions"]


def _embedded(html: str) -> str:
    start = html.index('<script type="application/json" id="argus-data">') + len(
        '<script type="application/json" id="argus-data">'
    )
    return html[start : html.index("</script>", start)]
