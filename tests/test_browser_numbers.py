"""The recorded H200 end-to-end report in headless chromium: the numbers as tables show them (issue 33).

The store of `argus-lab run examples/gpu/nested_torch.py` with 18 signals (tests/data/gpu/e2e_nested_h200.duckdb),
joined again, exported to HTML and opened offline: each signal says how it combines, a per-kernel fact reads as its
range, the per-kernel values name their kernel (never the store's key), warm-up launches are counted apart, and a
click on a kernel in the timeline shows that kernel.  Screenshots: /tmp/argus_browser_numbers_*.png.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import test_browser_report
from test_browser_report import InBrowser, Page, _click_first_bar

from argus_lab import join
from argus_lab.report import Report
from argus_lab.store import Store
from argus_lab.views.html_file import export

pytestmark = test_browser_report.pytestmark
in_browser = test_browser_report.in_browser

DATA = Path(__file__).parent / "data"


def test_the_recorded_report_says_how_each_number_combines(in_browser: InBrowser, tmp_path: Path) -> None:
    shutil.copy(DATA / "gpu" / "e2e_nested_h200.duckdb", tmp_path / "e2e.duckdb")
    st = Store(tmp_path / "e2e.duckdb")
    ids = [r[0] for r in st.rows("SELECT run_id FROM runs ORDER BY started_ns")]
    join.attribute_request(st, ids)
    out = export(Report(st, ids), tmp_path / "report.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(out.as_uri())
        pane = page.locator(".argus-pane >> visible=true")
        assert pane.get_by_text("mean (weighted by time)").count() >= 1  # sys.power, sys.sm_clock: levels
        assert pane.get_by_text("largest per kernel").count() >= 1  # compile.registers, launch attributes
        assert pane.get_by_text("28..32 register/thread per kernel").count() == 1  # outer/inner's kernels
        page.screenshot(path="/tmp/argus_browser_numbers_regions.png", full_page=True)
        page.get_by_role("button", name="Counters").click()
        pane = page.locator(".argus-pane >> visible=true")
        text = pane.inner_text()
        assert "ncu/outer" not in text and "_ZN2at6native" not in text  # names for people, no internal keys
        assert "warm-up launches (apart)" in text
        page.screenshot(path="/tmp/argus_browser_numbers_counters.png", full_page=True)
        page.get_by_role("button", name="Attribution").click()
        assert page.locator(".argus-pane >> visible=true").get_by_text("combined as").count() >= 1
        page.get_by_role("button", name="Timeline").click()
        page.locator(".argus-timeline .main-svg").first.wait_for(timeout=10_000)
        _click_first_bar(page, "", "stream")
        page.locator(".argus-clicked-kernel").wait_for(timeout=5_000)
        page.screenshot(path="/tmp/argus_browser_numbers_kernel.png", full_page=True)
        pg.check_clean()

    in_browser(body)
