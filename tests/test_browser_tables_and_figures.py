"""Tables and figures a reader can read, in headless chromium on evidence recorded on the H200.

* The compiler-facts table of the recorded decode step (tests/data/notebooks/gpu_walkthrough_h200.duckdb) shows
  every kernel in its scroll box, a row a line or two tall, and each reason for missing facts once under it.
* ``views.timeline_figure`` of the two-rank run (tests/data/gpu/two_ranks/nccl_overlap_2r.duckdb) keeps every bar on
  its own lane.
* A device-region phase has one colour in ``views.device_timeline`` and in the report's Device tab (the persistent
  GEMM with k-step marks, tests/data/gpu/device/device_gemm_h200.duckdb), and a host region one colour in
  ``views.timeline_figure`` and in the report's Timeline tab.

Screenshots go to /tmp/argus_browser_readable_*.png for a human to look at.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import test_browser_report
from test_browser_report import InBrowser, Page

from argus_lab import views
from argus_lab.report import Report
from argus_lab.store import Store
from argus_lab.views.html_file import export

pytestmark = test_browser_report.pytestmark
in_browser = test_browser_report.in_browser

DATA = Path(__file__).parent / "data"
WALKTHROUGH = DATA / "notebooks" / "gpu_walkthrough_h200.duckdb"
TWO_RANKS = DATA / "gpu" / "two_ranks"
DEVICE_GEMM = DATA / "gpu" / "device" / "device_gemm_h200.duckdb"
GEMM_RUNS = ["r-e518965816", "r-a43591a64a"]  # its clean timing run and its instrumented run

_COMPILER_TABLE = """(root) => {
  // the compiler-facts table under `root`: its scroll box, each body row's height, the reasons listed under it
  const scope = document.querySelector(root);
  const head = [...scope.querySelectorAll('h4')].find(h => h.textContent.trim() === 'compiler facts');
  const tbl = head ? head.nextElementSibling.querySelector('table.argus-table') : null;
  if (!tbl) return null;
  const box = tbl.closest('.argus-table-wrap').getBoundingClientRect();
  const rows = [...tbl.querySelectorAll('tbody tr')].map(r => r.getBoundingClientRect());
  const reasons = [...head.nextElementSibling.querySelectorAll('.argus-reasons li')].map(li => li.textContent);
  return {box: box.height, top: box.top, heights: rows.map(r => r.height),
          visible: rows.filter(r => r.bottom <= box.bottom + 1).length, reasons};
}"""


def _two_rank_report(tmp_path: Path) -> Report:
    path = tmp_path / "two.duckdb"
    shutil.copy(TWO_RANKS / "nccl_overlap_2r.duckdb", path)
    requests = json.loads((TWO_RANKS / "runs.json").read_text())["stores"]["nccl_overlap_2r"]["requests"]
    (run,) = next(r for r in requests if r["label"] == "train-overlapped")["runs"]
    return Report(Store(path), [run])


def _figure_page(fig: Any, path: Path) -> Path:
    """A plotly figure as a page of its own, plotly.js inlined (opens offline)."""
    path.write_text(fig.to_html(include_plotlyjs=True, full_html=True, div_id="fig"), encoding="utf-8")
    return path


def _open_figure(page: Any, path: Path) -> None:
    """Open a page of :func:`_figure_page` and wait for its bars."""
    page.goto(path.as_uri())
    page.locator("#fig g.trace.bars").first.wait_for(timeout=10_000)


_DRAWN_COLOURS = """(sel) => {
  // name -> colour of every trace plotly drew in the plot `sel` (after plotly filled in its defaults)
  const gd = document.querySelector(sel);
  return Object.fromEntries(gd._fullData.map(t => [t.name.replace(/ \\(aggregated\\)$/, ''),
    Array.isArray(t.marker.color) ? t.marker.color[0] : t.marker.color]));
}"""


def test_compiler_facts_show_every_kernel_a_line_or_two_tall(in_browser: InBrowser, tmp_path: Path) -> None:
    shutil.copy(WALKTHROUGH, tmp_path / "gw.duckdb")
    store = Store(tmp_path / "gw.duckdb")
    ids = [r[0] for r in store.rows("SELECT run_id FROM runs ORDER BY started_ns")]
    report = Report(store, ids)
    facts = report.compiler
    assert len(facts) == 9 and all(f.unavailable for f in facts)  # library kernels: a long reason on each row
    out = export(report, tmp_path / "gw.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(out.as_uri())
        page.get_by_role("button", name="Counters").click()
        got = page.evaluate(_COMPILER_TABLE, ".argus-pane:not([style*='none'])")
        assert got is not None, "no compiler-facts table on the Counters tab"
        page.evaluate("(y) => window.scrollTo(0, y - 40)", got["top"])
        page.screenshot(path="/tmp/argus_browser_readable_compiler.png")
        # every row is a line or two of 12-px text (it was 370 px: the reason squeezed into a one-word column)
        assert max(got["heights"]) <= 50, got["heights"]
        assert got["visible"] == len(facts), f"{got['visible']} of {len(facts)} kernels visible in the scroll box"
        # each distinct reason once under the table, with how many kernels share it
        distinct = {f.unavailable for f in facts}
        assert len(got["reasons"]) == len(distinct)
        assert sum(int(t.split(" ", 1)[0]) for t in got["reasons"]) == len(facts)
        assert {t.split(": ", 1)[1] for t in got["reasons"]} == distinct
        # the row keeps the whole sentence on hover
        cell = page.locator(".argus-pane:not([style*='none']) td.argus-prose").first
        assert cell.get_attribute("title") in distinct
        # the region's drill-down shows its compiler facts the same way
        page.get_by_role("button", name="Regions").click()
        page.get_by_text("decode/layer/attn", exact=True).first.click()
        drilled = page.evaluate(_COMPILER_TABLE, ".argus-drill")
        assert drilled is not None and drilled["heights"] and max(drilled["heights"]) <= 50, drilled
        pg.check_clean()
        page.close()

    in_browser(body)


def test_timeline_figure_of_two_ranks_keeps_each_bar_on_its_lane(in_browser: InBrowser, tmp_path: Path) -> None:
    fig = views.timeline_figure(_two_rank_report(tmp_path))
    ticks = list(fig.layout.yaxis.ticktext)
    assert len(ticks) == 10 and ticks[5] == "rank 1 \u00b7 MainThread"  # 3 host lanes + 2 streams per rank
    page_file = _figure_page(fig, tmp_path / "timeline.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        _open_figure(page, page_file)
        page.screenshot(path="/tmp/argus_browser_readable_two_rank_figure.png")
        lanes = page.evaluate(
            "() => [...document.querySelectorAll('#fig g.ytick text')].map(e => {"
            "const r = e.getBoundingClientRect(); return r.y + r.height / 2; })"
        )
        bars = page.evaluate(
            "() => [...document.querySelectorAll('#fig g.trace.bars g.point path')].map(p => {"
            "const r = p.getBoundingClientRect(); return [r.y, r.height]; }).filter(b => b[1] > 0)"
        )
        assert len(lanes) == len(ticks) and bars
        pitch = min(b - a for a, b in itertools.pairwise(lanes))
        for top, height in bars:
            # a bar fills part of one lane: never taller than a lane, centred on a lane's label
            assert height < pitch, f"a bar {height:.0f} px tall over lanes {pitch:.0f} px apart"
            assert min(abs(top + height / 2 - y) for y in lanes) < pitch / 4
        pg.check_clean()
        page.close()

    in_browser(body)


def test_phases_and_regions_have_one_colour_in_python_figures_and_the_report(
    in_browser: InBrowser, tmp_path: Path
) -> None:
    shutil.copy(DEVICE_GEMM, tmp_path / "gemm.duckdb")
    gemm = Report(Store(tmp_path / "gemm.duckdb"), GEMM_RUNS)
    device_page = _figure_page(views.device_timeline(gemm), tmp_path / "device.html")
    gemm_report = export(gemm, tmp_path / "gemm.html")
    two = _two_rank_report(tmp_path)
    timeline_page = _figure_page(views.timeline_figure(two), tmp_path / "timeline.html")
    two_report = export(two, tmp_path / "two.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        _open_figure(page, device_page)
        in_python = page.evaluate(_DRAWN_COLOURS, "#fig")
        page.goto(gemm_report.as_uri())
        page.get_by_role("button", name="Device").click()
        page.locator(".argus-device .main-svg").first.wait_for(timeout=10_000)
        page.screenshot(path="/tmp/argus_browser_readable_device_tab.png", full_page=True)
        in_report = page.evaluate(_DRAWN_COLOURS, ".argus-device")
        assert set(in_python) == set(in_report) == {"load", "mma", "epilogue"}
        assert in_python == in_report
        assert len(set(in_report.values())) == 3  # three phases, three colours

        _open_figure(page, timeline_page)
        host_python = {k: v for k, v in page.evaluate(_DRAWN_COLOURS, "#fig").items() if k.startswith("train")}
        page.goto(two_report.as_uri())
        page.get_by_role("button", name="Timeline").click()
        page.locator(".argus-timeline .main-svg").first.wait_for(timeout=10_000)
        page.screenshot(path="/tmp/argus_browser_readable_two_rank_report.png", full_page=True)
        drawn = page.evaluate(_DRAWN_COLOURS, ".argus-timeline")
        host_report = {k: v for k, v in drawn.items() if k in host_python}
        assert len(host_python) == 5 and host_python == host_report
        pg.check_clean()
        page.close()

    in_browser(body)
