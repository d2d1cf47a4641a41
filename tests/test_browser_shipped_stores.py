"""The recorded stores of tests/data exported to HTML as shipped (NOT joined again) and opened in headless chromium.

What a new user sees of the quickstart's and the walkthrough's recorded H200 evidence: the warm-up instances counted
apart (a column and a line), the main kernel-sequence group's kernels with the other groups collapsed (the autotuned
matmul), threads without a recorded name as 'main thread' (never the OS thread id), commands relative to the project,
every printed value with its own unit, and the imported Kineto run's temporal kernels drawn in their region, coloured
as temporal.  Screenshots: /tmp/argus_shipped_*.png.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import test_browser_report
from recorded_cases import shipped
from test_browser_report import InBrowser, Page

from argus_lab.app.importing import import_trace
from argus_lab.report import Report
from argus_lab.store import Store
from argus_lab.views.html_file import export
from argus_lab.views.palette import CLASS_COLORS

pytestmark = test_browser_report.pytestmark
in_browser = test_browser_report.in_browser

DATA = Path(__file__).parent / "data"
SCALED = {"ns": ("ns", "µs", "ms", "s"), "byte": ("B", "kB", "MB", "GB", "TB"), "%": ("%",)}
"""The suffixes a value of each unit prints with (argus_lab.units.fmt scales them)."""


def _shipped(tmp_path: Path, rel: str) -> Report:
    st = shipped(tmp_path, rel)
    return Report(st, [r[0] for r in st.rows("SELECT run_id FROM runs ORDER BY started_ns")])


def _table(page: Any, index: int = 0) -> list[dict[str, str]]:
    """The visible pane's ``index``-th table as header -> cell text dicts."""
    return page.evaluate(
        """(i) => {
          const t = [...document.querySelectorAll('.argus-pane')].find(p => p.offsetParent)
            .querySelectorAll('table.argus-table')[i];
          const head = [...t.querySelectorAll('thead th')].map(h => h.textContent.replace(/[▲▼]/g, '').trim());
          return [...t.querySelectorAll('tbody tr')].map(tr =>
            Object.fromEntries([...tr.children].map((td, j) => [head[j], td.textContent.trim()])));
        }""",
        index,
    )


def test_the_walkthrough_as_shipped_counts_warm_up_apart_and_prints_units_with_values(
    in_browser: InBrowser, tmp_path: Path
) -> None:
    report = _shipped(tmp_path, "notebooks/gpu_walkthrough_h200.duckdb")
    out = export(report, tmp_path / "walkthrough.html")
    units = {(r.path, r.signal): r.unit for r in report.regions}

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(out.as_uri())
        assert not page.get_by_text("older join").count()  # the shipped store holds today's join
        pane = page.locator(".argus-pane >> visible=true")
        assert "42 warm-up instance(s) ran before them" in pane.locator(".argus-warmup-line").inner_text()
        rows = _table(page)
        decode = [r for r in rows if r["region"] == "decode" and r["signal"] == "gpu.time"]
        assert decode and decode[0]["instances"] == "10" and decode[0]["warm-up (apart)"] == "3"
        assert "unit" not in rows[0]  # no unit column to disagree with the values
        for r in rows:  # each value prints with a suffix of its own unit
            unit = units[(r["region"], r["signal"])]
            for col in ("median", "p25", "p75"):
                if unit in SCALED and r[col] not in ("", "-"):
                    assert r[col].endswith(SCALED[unit]), (r, col, unit)
        counters = _table(page, 1)
        attn = next(c for c in counters if c["region"] == "decode/layer/attn" and "sm__throughput" in c["counter"])
        assert attn["median"].startswith("17.4") and attn["combined as"] == "mean (weighted by time)"
        page.screenshot(path="/tmp/argus_shipped_walkthrough_regions.png", full_page=True)
        page.locator(".argus-pane >> visible=true").get_by_text("decode/layer/attn", exact=True).first.click()
        drill = page.locator(".argus-drill")
        assert "10 measured + 12 warm-up" not in drill.inner_text()
        assert "40 measured + 12 warm-up instance(s), warm-up not in the statistics" in drill.inner_text()
        threads = {r["thread"] for r in page.evaluate(
            """() => { const t = document.querySelectorAll('.argus-drill table.argus-table')[1];
              const head = [...t.querySelectorAll('thead th')].map(h => h.textContent.replace(/[▲▼]/g, '').trim());
              return [...t.querySelectorAll('tbody tr')].map(tr =>
                Object.fromEntries([...tr.children].map((td, j) => [head[j], td.textContent.trim()]))); }"""
        )}  # fmt: skip
        assert threads == {"main thread"}, threads  # the store has no thread names: never the OS thread id
        page.screenshot(path="/tmp/argus_shipped_walkthrough_drill.png", full_page=True)
        pg.check_clean()

    in_browser(body)


def test_the_quickstart_store_as_shipped_reads_relative_commands(in_browser: InBrowser, tmp_path: Path) -> None:
    report = _shipped(tmp_path, "gpu/e2e_nested_h200.duckdb")
    out = export(report, tmp_path / "e2e.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(out.as_uri())
        page.get_by_role("button", name="Runs").click()
        text = page.locator(".argus-pane >> visible=true").inner_text()
        assert "python examples/gpu/nested_torch.py" in text
        assert "/work/main/" not in text  # the recording machine's project folder
        page.screenshot(path="/tmp/argus_shipped_e2e_runs.png", full_page=True)
        page.get_by_role("button", name="Regions").click()
        counters = _table(page, 1)
        regs = next(c for c in counters if c["region"] == "outer" and "registers_per_thread" in c["counter"])
        assert regs["median"].startswith("202") and regs["exclusive"].startswith("202")  # not 87.33 beside 202
        pg.check_clean()

    in_browser(body)


def test_the_autotuned_matmul_as_shipped_shows_the_main_group_and_collapses_the_other(
    in_browser: InBrowser, tmp_path: Path
) -> None:
    report = _shipped(tmp_path, "gpu/issue15/autotune.duckdb")
    out = export(report, tmp_path / "autotune.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(out.as_uri())
        page.get_by_role("button", name="Counters").click()
        pane = page.locator(".argus-pane >> visible=true")
        ordinals = _table(page)  # kernels by region and ordinal: the main group's (one row per timing run)
        assert len(ordinals) == 2 and {(o["#"], o["kernel"], o["launches"]) for o in ordinals} == {
            ("0", "matmul_kernel", "3")
        }, ordinals
        other = pane.locator("details.argus-other-group")
        assert other.count() == 2  # one under each kernels table: by ordinal, by region
        assert all(not d for d in other.evaluate_all("ds => ds.map(d => d.open)"))  # collapsed by default
        summary = other.first.locator("summary").inner_text()
        assert summary.startswith("matmul: another kernel sequence") and "instance 0: 1,274 kernels" in summary
        page.screenshot(path="/tmp/argus_shipped_autotune_collapsed.png", full_page=True)
        other.first.locator("summary").click()
        assert other.first.locator("tbody tr").count() > 10
        page.screenshot(path="/tmp/argus_shipped_autotune_open.png", full_page=True)
        pg.check_clean()

    in_browser(body)


def test_the_autotuned_matmuls_page_counts_the_scoped_launches_in_every_kernel_table(
    in_browser: InBrowser, tmp_path: Path
) -> None:
    """The second timing run was scoped to ``matmul; instances=1:``: the autotuner's instance 0 of that run is out of
    scope.  Both kernel tables of the Counters tab (by ordinal, by region) state the other group as Report.kernels
    counts it (1,274 launches; "kernels by region" said 2,767), and the header's record count is theirs."""
    report = _shipped(tmp_path, "gpu/issue15/autotune.duckdb")
    other = sum(k.launches for k in report.kernels if not k.main_group)
    main = sum(k.launches for k in report.kernels if k.main_group)
    assert (other, main) == (1274, 6)
    out = export(report, tmp_path / "autotune.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(out.as_uri())
        assert f" {other + main} kernel record(s) " in page.locator("body").inner_text()
        page.get_by_role("button", name="Counters").click()
        pane = page.locator(".argus-pane >> visible=true")
        summaries = pane.locator("details.argus-other-group summary").all_inner_texts()
        assert len(summaries) == 2, summaries  # by ordinal, by region
        assert all(f"({other} launch(es) of " in t for t in summaries), summaries
        tables = pane.locator("table.argus-table").count()
        by_region = _table(page, tables - 2)  # kernels by region: its main group, then its collapsed group's table
        assert [(r["region"], r["launches"]) for r in by_region] == [("matmul", str(main))], by_region
        page.screenshot(path="/tmp/argus_shipped_autotune_counts.png", full_page=True)
        pg.check_clean()

    in_browser(body)


def test_the_imported_kineto_run_draws_temporal_kernels_in_their_region_coloured_as_temporal(
    in_browser: InBrowser, tmp_path: Path
) -> None:
    st = Store(tmp_path / "k.duckdb")
    res = import_trace(DATA / "traces" / "kineto_gpt2.json.gz", st)
    report = Report(st, [res.run_id])
    out = export(report, tmp_path / "kineto.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.open_timeline(out.as_uri())
        traces = page.evaluate(
            """() => [...document.querySelectorAll('.argus-timeline')].find(p => p.offsetParent).data.map(t =>
              ({name: t.name, color: t.marker.color, hover: t.hovertext}))"""
        )
        temporal = next(t for t in traces if t["name"] == "kernels: temporal")
        assert temporal["hover"] and all("region backward" in h for h in temporal["hover"]), temporal["hover"][:3]
        assert not any("outside every region" in h for h in temporal["hover"])
        exact = next(t for t in traces if t["name"] == "kernels: exact")  # the classes' colours, as in Attribution
        assert temporal["color"] == CLASS_COLORS["temporal"] and exact["color"] == CLASS_COLORS["exact"]
        backward = next(t for t in traces if t["name"] == "backward")  # the host region keeps its own colour
        assert backward["color"] != temporal["color"]
        page.screenshot(path="/tmp/argus_shipped_kineto_timeline.png", full_page=True)
        page.locator(".argus-colour-by >> visible=true").select_option("region")
        names = page.evaluate(
            "() => [...document.querySelectorAll('.argus-timeline')].find(p => p.offsetParent).data.map(t => t.name)"
        )
        assert "kernels: temporal" not in names and "backward" in names
        pg.check_clean()

    in_browser(body)
