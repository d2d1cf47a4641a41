"""Report bundle, timeline aggregation, HTML export, compare and panel (no browser; see test_browser_report.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import views_synthetic as vs

import argus_lab
from argus_lab.report import Report, evidence
from argus_lab.views import bundle
from argus_lab.views.escape import json_for_script
from argus_lab.views.html import fallback_html, standalone_html
from argus_lab.views.html_file import export
from argus_lab.views.timeline import TimelineLimits, pyramid, timeline_data


@pytest.fixture(scope="module")
def synthetic_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """One synthetic store for the module (the tests only read it)."""
    return Report(vs.write_store(tmp_path_factory.mktemp("views") / "s.duckdb"), ["r-timing", "r-ncu"])


def test_bundle_carries_summary_tables_and_timeline(synthetic_report: Report) -> None:
    data = bundle.build(synthetic_report)
    assert data["format"] == bundle.FORMAT
    assert data["summary"]["runs"] == 2
    assert data["summary"]["kernels"] == 40
    assert {r["path"] for r in data["regions"]} == {"decode", "decode/layer/attn", f"decode/{vs.XSS_REGION}"}
    counters = data["tables"]["counters"]
    assert counters["total"] == 10  # 8 ncu values + 2 compiler facts
    cols = counters["columns"]
    origin = {r[cols.index("signal")]: r[cols.index("run_id")] for r in counters["rows"]}
    assert origin["hw:dram__bytes_read.sum"] == "r-ncu"
    amb = data["tables"]["ambiguous"]
    assert amb["total"] == 1
    row = dict(zip(amb["columns"], amb["rows"][0], strict=True))
    assert row["class"] == "ambiguous"
    assert len(row["candidates"]) == 2
    # the timeline of the timing run: 3 host depths on one thread, kernels on two streams, every kernel exact
    tl = next(t for t in data["timelines"] if t["run_id"] == "r-timing")
    assert [lane["kind"] for lane in tl["lanes"]] == ["host"] * 3 + ["device"] * 2
    assert tl["device"]["exact"] and tl["device"]["total"] == 40
    assert min(tl["host"]["start"]) == 0  # relative to t0
    assert int(tl["t0"]) == vs.T0  # the first instance of the synthetic run starts at T0


def test_bundle_limits_bound_the_detail_rows(synthetic_report: Report) -> None:
    small = bundle.BundleLimits(instances=3, kernels=5, counters=2)
    data = bundle.build(synthetic_report, small)
    assert data["tables"]["instances"]["shown"] == 3
    assert data["tables"]["instances"]["total"] == 12
    assert data["tables"]["kernels"]["shown"] == 5
    assert data["tables"]["counters"]["shown"] == 2


def test_mimebundle_has_argus_json_text_and_html(synthetic_report: Report) -> None:
    mb = bundle.ReportView(synthetic_report)._repr_mimebundle_()
    assert set(mb) == {bundle.MIME, "text/plain", "text/html"}
    assert mb["text/plain"] == synthetic_report.text()
    json.dumps(mb[bundle.MIME], allow_nan=False)  # valid JSON, no NaN
    assert len(mb["text/html"]) < 200_000  # the renderer and data, never plotly.js


def test_names_are_escaped_in_every_html_form(synthetic_report: Report) -> None:
    data = bundle.build(synthetic_report)
    for page in (fallback_html(data), standalone_html(data, plotly_js="/* plotly */")):
        assert vs.XSS_KERNEL not in page
        assert vs.XSS_REGION not in page
        assert "&lt;img src=x onerror" in page  # the static summary table, escaped
        data_json = re.search(r'<script type="application/json"[^>]*>(.*?)</script>', page, flags=re.S)
        assert data_json is not None
        assert json.loads(data_json.group(1))["title"] == data["title"]  # the data survives the escaping


def test_json_for_script_round_trips_and_never_closes_the_script() -> None:
    value = {"name": "</script><script>alert(1)</script>", "x": float("nan"), "sep": "a\u2028b", "n": np.int64(3)}
    text = json_for_script(value)
    assert "</" not in text and "<" not in text
    back = json.loads(text)
    assert back == {"name": value["name"], "x": None, "sep": "a\u2028b", "n": 3}


def test_standalone_export_inlines_plotly_once(synthetic_report: Report, tmp_path: Path) -> None:
    out = export(synthetic_report, tmp_path / "r.html")
    page = out.read_text()
    from plotly.offline import get_plotlyjs

    marker = get_plotlyjs()[:200]
    assert page.count(marker) == 1
    assert "https://cdn" not in page.split(marker)[0]  # nothing before plotly.js points at a CDN
    assert 'id="argus-data"' in page


def test_export_refuses_a_non_html_path(synthetic_report: Report, tmp_path: Path) -> None:
    with pytest.raises(argus_lab.errors.ArgusError, match=r"should end in \.html"):
        export(synthetic_report, tmp_path / "r.pdf")


def test_cli_export(synthetic_report: Report, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from argus_lab.faces.cli import main

    out = tmp_path / "cli.html"
    rc = main(["export", "--store", str(synthetic_report.store.path), str(out), "--run", "r-timing"])
    assert rc == 0
    assert out.exists() and "wrote" in capsys.readouterr().out
    assert main(["export", "--store", str(tmp_path / "missing.duckdb"), str(out)]) == 2
    assert "no evidence store" in capsys.readouterr().err


def test_pyramid_conserves_kernels_and_time_at_every_level() -> None:
    rng = np.random.default_rng(1)
    n = 50_000
    start = np.sort(rng.integers(0, 10**9, n))
    dur = rng.integers(1_000, 20_000, n)
    lane = rng.integers(0, 3, n)
    region = rng.integers(-1, 4, n)
    limits = TimelineLimits(exact_limit=1000, base_bins=256, factor=4, bin_budget=60_000)
    levels = pyramid(start, start + dur, lane, region, int(start.max() + dur.max()), 4, limits)
    assert len(levels) >= 2
    assert sum(len(lv["bin"]) for lv in levels) <= limits.bin_budget
    for lv in levels:
        assert sum(lv["count"]) == n
        assert abs(sum(lv["busy"]) - int(dur.sum())) <= len(lv["busy"])  # rounding per bin
        assert max(lv["bin"]) < lv["bins"]
    assert levels[1]["bin_ns"] == pytest.approx(levels[0]["bin_ns"] / 4)
    # the region of a cell is the region of its longest kernel
    lv = levels[0]
    w = lv["bin_ns"]
    cell = (lv["lane"][0], lv["bin"][0])
    sel = (lane == cell[0]) & (np.minimum((start / w).astype(np.int64), lv["bins"] - 1) == cell[1])
    assert lv["region"][0] == region[sel][np.argmax(dur[sel])]


def test_timeline_switches_from_exact_to_levels_at_the_limit() -> None:
    n = 300
    start = np.arange(n) * 10_000
    kern = {
        "start_ns": start,
        "end_ns": start + 5_000,
        "device_id": np.zeros(n, dtype=np.int64),
        "stream_id": np.full(n, 7),
        "instance_id": np.zeros(n, dtype=np.int64),
        "name": np.array(["k"] * n, dtype=object),
    }
    inst: dict[str, list[object]] = {"instance_id": [], "path": [], "start_ns": [], "end_ns": []}
    exact = timeline_data("r", inst, kern, TimelineLimits(exact_limit=n))
    assert exact["device"]["exact"] and len(exact["device"]["start"]) == n
    assert exact["device"]["region"] == [-1] * n  # outside every region
    agg = timeline_data("r", inst, kern, TimelineLimits(exact_limit=n - 1, base_bins=16, bin_budget=1000))
    assert not agg["device"]["exact"]
    assert sum(agg["device"]["levels"][0]["count"]) == n


def test_live_host_measurement_reaches_the_bundle(store_path: Path) -> None:
    @argus_lab.region("step")
    def step() -> None:
        with argus_lab.region("inner"):
            sum(range(1000))

    report = argus_lab.measure(step, "host.wall,host.cpu", repeat=2, warmup=0, store=str(store_path))
    data = bundle.build(report)
    tl = data["timelines"][0]
    assert tl["host"]["total"] == 4
    assert [lane["kind"] for lane in tl["lanes"]] == ["host", "host"]
    assert data["tables"]["values"]["total"] == 8


def test_run_list_and_table_view(synthetic_report: Report) -> None:
    from argus_lab.views.tables import TableView

    view = TableView(evidence.run_list(synthetic_report.store), "runs")
    mb = view._repr_mimebundle_()
    assert "r-timing" in mb["text/plain"] and "r-ncu" in mb["text/html"]


def test_compare_view(store_path: Path, tmp_path: Path) -> None:
    from argus_lab.views import compare

    @argus_lab.region("work")
    def fast() -> None:
        sum(range(2_000))

    @argus_lab.region("work")
    def slow() -> None:
        sum(range(200_000))

    a = argus_lab.measure(fast, "host.wall", repeat=3, warmup=0, store=str(store_path))
    b = argus_lab.measure(slow, "host.wall", repeat=3, warmup=0, store=str(store_path))
    view = compare(a, b)
    row = next(r for r in view.rows if r["path"] == "work" and r["signal"] == "host.wall")
    assert row["ratio"] > 2
    assert row["verdict"] == "too few values"  # 3 instances a side: the noise rule will not call it
    assert "B / A" in view.text()
    fig = view.figure()
    assert len(fig.data) == 2
    html = view._repr_mimebundle_()["text/html"]
    assert '<details class="argus-drill"><summary>work:' in html  # a click on the region opens its drill-down
    assert a.runs[0].run_id in view.drilldown_html("work")
    assert b.runs[0].run_id in view.drilldown_html("work")


def test_compare_view_marks_changes_beyond_noise_and_escapes_names(store_path: Path) -> None:
    from argus_lab.views import compare

    hostile = "<img src=x onerror=window.__argus_xss=1>"

    def make(n: int) -> Callable[[], None]:
        @argus_lab.region(hostile)
        def work() -> None:
            sum(range(n))

        return work

    a = argus_lab.measure(make(2_000), "host.wall", repeat=8, warmup=1, store=str(store_path))
    b = argus_lab.measure(make(400_000), "host.wall", repeat=8, warmup=1, store=str(store_path))
    view = compare(a, b)
    (row,) = [r for r in view.rows if r["signal"] == "host.wall"]
    assert row["verdict"] == "higher"
    assert row["significant"]
    assert view.text().splitlines()[4].startswith("*")  # two head lines, the header, the rule, then the row
    html = view._repr_mimebundle_()["text/html"]
    assert hostile not in html
    assert "&lt;img src=x onerror=window.__argus_xss=1&gt;" in html


def test_timeline_and_ambiguity_figures(synthetic_report: Report) -> None:
    from argus_lab import views

    fig = views.timeline_figure(synthetic_report)
    assert any("kernels" in (t.name or "") for t in fig.data)
    assert all(vs.XSS_REGION not in (t.name or "") for t in fig.data)
    amb = views.ambiguity(synthetic_report)
    assert {t.name for t in amb.data} >= {"exact", "ambiguous"}


def test_panel_plans_as_the_user_picks() -> None:
    from argus_lab.faces.panel import SignalPanel

    p = SignalPanel()
    assert p.selected() == ["host.wall"]
    assert "1 run(s)" in p.status.value
    p.boxes["gpu.time"].value = True
    p.families["hw:"].value = "dram__bytes_read.sum"
    assert p.selected() == ["host.wall", "gpu.time", "hw:dram__bytes_read.sum"]
    assert len(p.plan().runs) == 2
    assert "2 run(s)" in p.status.value
    assert any("ncu" in c for c in p.conflicts())
    assert p.line_box.value == "%%argus -s host.wall,gpu.time,hw:dram__bytes_read.sum"
    p.families["hw:"].value = "not a metric"
    assert "not a valid hw: signal" in p.status.value


def test_panel_runs_its_target(store_path: Path) -> None:
    from argus_lab.faces.panel import SignalPanel

    @argus_lab.region("job")
    def job() -> None:
        sum(range(1000))

    p = SignalPanel(target=job, store=str(store_path))
    p.repeat.value = 2
    report = p.run()
    assert report is not None
    assert p.progress.value == 3 == p.progress.max  # the bar counts repetitions: 1 warm-up + 2
    assert p.progress_label.value.startswith("run 1/1 [host] ok after")
    assert {r.path for r in report.regions} == {"job"}


H200_STORE = Path(__file__).parent / "data" / "notebooks" / "gpu_walkthrough_h200.duckdb"


@pytest.mark.skipif(not H200_STORE.exists(), reason="the recorded H200 walkthrough store is not in tests/data")
def test_bundle_of_the_recorded_h200_walkthrough(tmp_path: Path) -> None:
    import shutil

    from argus_lab.store import Store

    path = tmp_path / "h200.duckdb"  # a copy: reading takes a lock file next to the store
    shutil.copy(H200_STORE, path)
    store = Store(path)
    ids = [r[0] for r in store.rows("SELECT run_id FROM runs ORDER BY started_ns")]
    data = bundle.build(Report(store, ids))
    timing = next(t for t in data["timelines"] if t["device"]["total"])
    assert timing["device"]["exact"] and timing["device"]["total"] == 650  # CUPTI records of 13 decode steps
    assert any(lane["label"].startswith("GPU 0 stream") for lane in timing["lanes"])
    assert -1 not in timing["device"]["region"]  # every kernel of the step was launched inside a region
    counters = {(c["path"], c["signal"]) for c in data["joined"]["counters"]}
    assert ("decode/layer/attn", "hw:dram__bytes_read.sum") in counters  # ncu, joined to regions
    assert any(r["registers"] for r in data["joined"]["compiler"])
    groups = data["tables"]["kernel_groups"]
    names = [r[groups["columns"].index("name")] for r in groups["rows"]]
    assert any(n.startswith("nvjet_sm90") for n in names)  # cuBLAS kernels of the H200


def test_panel_names_only_the_gpu_signals_it_cannot_collect(monkeypatch: pytest.MonkeyPatch) -> None:
    from argus_lab.faces import panel as panel_module

    monkeypatch.setattr(panel_module, "gpu_available", lambda: False)
    p = panel_module.SignalPanel(selected=("host.wall", "gpu.time"))
    assert "need a GPU" in p.status.value
    assert "gpu.time" in p.status.value.split("need a GPU")[1]
    assert "host.wall" not in p.status.value.split("need a GPU")[1]


def test_notebook_html_template_loads_nothing_from_the_network() -> None:
    import nbformat

    from argus_lab.views.notebook_html import ArgusHTMLExporter, notebook_to_html

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# t"), nbformat.v4.new_code_cell("1 + 1")]
    page = notebook_to_html(nb)
    assert page.count("jp-CodeCell") >= 1 and "<h1" in page
    assert re.findall(r"<script[^>]*\bsrc=", page) == []  # no require.js, MathJax or widget manager
    assert ArgusHTMLExporter().template_name == "argus"
