"""Exported reports and the quickstart's HTML export in headless Debian chromium, with the network blocked.

Checks: the timeline draws, a click on a region drills down, zooming refines an aggregated timeline, no request
leaves the page, and hostile region/kernel names (tests/views_synthetic.py) never execute.  Screenshots go to
/tmp/argus_browser_*.png for a human to look at.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import views_synthetic as vs

from argus_lab.report import Report
from argus_lab.views.html_file import export

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ROOT = Path(__file__).resolve().parent.parent
InBrowser = Callable[[Callable[[Any], None]], None]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM), reason=f"needs Debian's chromium at {CHROMIUM} (apt-get install chromium)"
    ),
]


@pytest.fixture
def in_browser() -> Callable[[Callable[[Any], None]], None]:
    """Run ``body(browser)`` with a fresh chromium, in a thread of its own.

    Playwright's sync API refuses a thread with a running asyncio loop, which other tests (pytest-jupyter) can
    leave behind; a worker thread has none.
    """
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright Python package")

    def run(body: Callable[[Any], None]) -> None:
        def work() -> None:
            with sync_api.sync_playwright() as p:
                b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                try:
                    body(b)
                finally:
                    b.close()

        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(work).result()

    return run


class Page:
    """A page that aborts and records every request that is not file://, and records script errors."""

    def __init__(self, browser: Any) -> None:
        self.page = browser.new_page(viewport={"width": 1300, "height": 900})
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.route("**/*", self._route)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _route(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(("file:", "data:", "blob:", "about:")):
            route.continue_()
        else:
            self.requests.append(url)
            route.abort()

    def open_timeline(self, url: str) -> Any:
        """Open ``url`` (an exported report) on its Timeline tab, drawn; returns the playwright page."""
        self.page.goto(url)
        self.page.get_by_role("button", name="Timeline").click()
        self.page.locator(".argus-timeline .main-svg").first.wait_for(timeout=10_000)
        return self.page

    def check_clean(self) -> None:
        assert self.requests == [], f"the page tried the network: {self.requests}"
        assert self.errors == [], f"script errors: {self.errors}"
        assert self.page.evaluate("window.__argus_xss") is None, "an injected name executed"


_FIND_BAR = """([root, laneText]) => {
  // the centre of the first timeline bar that is on screen (and on the lane labelled laneText, if given)
  const scope = root ? document.querySelector(root) : document;
  let laneY = null;
  if (laneText) {
    const t = [...scope.querySelectorAll('.argus-timeline g.ytick text')].find(e => e.textContent.includes(laneText));
    if (!t) return null;
    const r = t.getBoundingClientRect(); laneY = r.y + r.height / 2;
  }
  for (const p of scope.querySelectorAll('.argus-timeline g.trace.bars g.point path')) {
    const b = p.getBoundingClientRect();
    const y = b.y + b.height / 2;
    if (b.width > 3 && b.x > 220 && b.x + b.width < 1280 && (laneY === null || Math.abs(y - laneY) < 5)) {
      return [b.x + b.width / 2, y];
    }
  }
  return null;
}"""


def _click_first_bar(page: Any, root: str = "", lane: str = "") -> None:
    """Click the first timeline bar that is on screen (the view may open on the measured repetitions)."""
    page.locator(f"{root} .argus-timeline g.trace.bars g.point path".strip()).first.wait_for(
        state="attached", timeout=10_000
    )
    xy = page.evaluate(_FIND_BAR, [root, lane])
    if xy is None:
        pytest.fail(f"no timeline bar is on screen{' on lane ' + lane if lane else ''}")
    page.mouse.click(xy[0], xy[1])


def test_exported_report_draws_drills_down_and_stays_offline(in_browser: InBrowser, tmp_path: Path) -> None:
    report = Report(vs.write_store(tmp_path / "s.duckdb"), ["r-timing", "r-ncu"])
    out = export(report, tmp_path / "report.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.open_timeline(out.as_uri())
        assert page.locator(".argus-timeline g.trace.bars").count() >= 3  # host regions and kernels
        _click_first_bar(page, "#argus-report")
        title = page.locator(".argus-drill-title")
        title.wait_for(timeout=5_000)
        assert title.inner_text().startswith("region decode")
        assert page.locator(".argus-drill table").count() >= 5
        page.screenshot(path="/tmp/argus_browser_export_timeline.png", full_page=True)
        # the hostile names are shown as text
        page.get_by_role("button", name="Counters").click()
        # the per-kernel values name a compiled binary by its kernel's name (never the store's internal key)
        assert page.get_by_text(vs.XSS_KERNEL, exact=True).count() >= 1
        assert page.get_by_text(f"bin:{vs.XSS_KERNEL}:abc").count() == 0
        page.get_by_role("button", name="Regions").click()
        page.get_by_text(f"decode/{vs.XSS_REGION}", exact=True).first.click()
        assert page.locator(".argus-drill-title").inner_text() == f"region decode/{vs.XSS_REGION}"
        page.get_by_role("button", name="Attribution").click()
        page.locator(".argus-pane .main-svg >> visible=true").first.wait_for(timeout=5_000)
        page.screenshot(path="/tmp/argus_browser_export_attribution.png", full_page=True)
        pg.check_clean()
        page.close()

    in_browser(body)


def test_aggregated_timeline_refines_on_zoom(in_browser: InBrowser, tmp_path: Path) -> None:
    report = Report(vs.write_store(tmp_path / "big.duckdb", n_kernels=25_000), ["r-timing"])
    out = export(report, tmp_path / "big.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(out.as_uri())
        page.get_by_role("button", name="Timeline").click()
        info = page.locator(".argus-timeline").locator("xpath=preceding-sibling::div[1]")
        info.wait_for(timeout=10_000)
        page.locator(".argus-timeline .main-svg").first.wait_for(timeout=10_000)
        before = info.inner_text()
        assert "25000 kernel record(s) aggregated" in before
        level_before = int(re.search(r"level (\d+) of", before).group(1))  # type: ignore[union-attr]
        zoom = (
            "() => { const d = document.querySelector('.argus-timeline'); const r = d.layout.xaxis.range;"
            " const a = r[0] + 0.3 * (r[1] - r[0]);"
            " return Plotly.relayout(d, {'xaxis.range': [a, a + (r[1] - r[0]) / 100]}); }"
        )
        page.evaluate(zoom)
        page.wait_for_function(
            "(b) => document.querySelector('.argus-timeline').previousElementSibling.textContent !== b", arg=before
        )
        after = info.inner_text()
        level_after = int(re.search(r"level (\d+) of", after).group(1))  # type: ignore[union-attr]
        assert level_after > level_before  # finer bins for the narrower window
        drawn = int(re.search(r"(\d+) bins drawn", after).group(1))  # type: ignore[union-attr]
        assert drawn > 0
        page.screenshot(path="/tmp/argus_browser_zoomed.png", full_page=True)
        pg.check_clean()
        page.close()

    in_browser(body)


def test_quickstart_html_export_is_interactive_offline(in_browser: InBrowser, tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    from argus_lab.views.notebook_html import notebook_to_html

    work = tmp_path / "notebooks"
    work.mkdir()
    shutil.copy(ROOT / "notebooks" / "quickstart.ipynb", work / "quickstart.ipynb")
    nb = nbformat.read(work / "quickstart.ipynb", as_version=4)
    os.environ["ARGUS_STORE"] = str(tmp_path / "quickstart.duckdb")
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(work)}}).execute()
    finally:
        os.environ.pop("ARGUS_STORE", None)
    page_file = tmp_path / "quickstart.html"
    page_file.write_text(notebook_to_html(nb), encoding="utf-8")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(page_file.as_uri())
        first = page.locator(".argus-report").first
        first.wait_for(timeout=10_000)
        first.get_by_role("button", name="Timeline").click()
        _click_first_bar(page, ".argus-report-host")
        title = first.locator(".argus-drill-title")
        title.wait_for(timeout=5_000)
        assert title.inner_text().startswith("region decode")
        page.screenshot(path="/tmp/argus_browser_quickstart.png", full_page=False)
        first.screenshot(path="/tmp/argus_browser_quickstart_report.png")
        pg.check_clean()
        page.close()

    in_browser(body)


H200_STORE = ROOT / "tests" / "data" / "notebooks" / "gpu_walkthrough_h200.duckdb"


@pytest.mark.skipif(not H200_STORE.exists(), reason="the recorded H200 walkthrough store is not in tests/data")
def test_recorded_h200_kernel_click_drills_into_its_region(in_browser: InBrowser, tmp_path: Path) -> None:
    from argus_lab.store import Store

    path = tmp_path / "h200.duckdb"
    shutil.copy(H200_STORE, path)
    store = Store(path)
    ids = [r[0] for r in store.rows("SELECT run_id FROM runs ORDER BY started_ns")]
    out = export(Report(store, ids), tmp_path / "h200.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.open_timeline(out.as_uri())
        # zoom on the last attention instance, then click one of its kernels on the GPU lane
        page.evaluate(
            "() => { const d = document.querySelector('.argus-timeline');"
            " const t = d.data.filter(x => x.name === 'decode/layer/attn')[0]; const i = t.base.length - 1;"
            " return Plotly.relayout(d, {'xaxis.range': [t.base[i] - t.x[i] * 0.05, t.base[i] + t.x[i] * 1.05]}); }"
        )
        page.wait_for_timeout(300)
        _click_first_bar(page, lane="GPU 0 stream")
        title = page.locator(".argus-drill-title")
        title.wait_for(timeout=5_000)
        assert title.inner_text().startswith("region decode/layer/attn · instance ")
        assert page.locator(".argus-drill").get_by_text("hw:dram__bytes_read.sum").count() >= 1
        page.screenshot(path="/tmp/argus_browser_h200_kernel_click.png", full_page=True)
        pg.check_clean()
        page.close()

    in_browser(body)


TWO_RANKS = ROOT / "tests" / "data" / "gpu" / "two_ranks" / "nccl_overlap_2r.duckdb"


def test_exported_two_rank_report_draws_a_lane_per_rank_thread_and_stream(
    in_browser: InBrowser, tmp_path: Path
) -> None:
    """The HTML export of the recorded two-H200 store: the timeline has the host and stream lanes of both ranks,
    says that both ranks are on rank 0's clock, and a report scoped to ``ranks=1`` draws rank 1's lanes only."""
    import json

    from argus_lab.store import Store

    path = tmp_path / "two.duckdb"
    shutil.copy(TWO_RANKS, path)
    runs = json.loads((TWO_RANKS.parent / "runs.json").read_text())["stores"]["nccl_overlap_2r"]["requests"]
    (run,) = next(r for r in runs if r["label"] == "train-overlapped")["runs"]
    report = Report(Store(path), [run])
    both = export(report, tmp_path / "two.html")
    one = export(report.scoped("ranks=1"), tmp_path / "rank1.html")

    def ticks(page: Any) -> list[str]:
        page.get_by_role("button", name="Timeline").click()
        page.locator(".argus-timeline .main-svg").first.wait_for(timeout=10_000)
        return [t.text_content() for t in page.locator(".argus-timeline g.ytick text").all()]

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(both.as_uri())
        labels = ticks(page)
        for rank in (0, 1):
            assert f"rank {rank} \u00b7 MainThread" in labels
            assert f"rank {rank} \u00b7 GPU {rank} stream 7" in labels  # compute
            assert f"rank {rank} \u00b7 GPU {rank} stream 17" in labels  # NCCL
        assert labels.index("rank 0 \u00b7 GPU 0 stream 17") < labels.index("rank 1 \u00b7 MainThread")
        info = page.locator(".argus-timeline").locator("xpath=preceding-sibling::div[1]").inner_text()
        assert "2 ranks, each on rank 0\u2019s clock" in info
        assert "rank 0\u2019s clock" in (page.locator(".argus-timeline .g-xtitle").text_content() or "")
        _click_first_bar(page, lane="rank 1 \u00b7 GPU 1 stream 17")  # an NCCL kernel of rank 1 opens its region
        page.locator(".argus-drill-title").wait_for(timeout=5_000)
        assert page.locator(".argus-drill-title").inner_text().startswith("region train/overlapped/allreduce")
        page.screenshot(path="/tmp/argus_browser_two_ranks.png", full_page=True)
        pg.check_clean()
        page.goto(one.as_uri())
        labels = ticks(page)
        assert labels and all(lab.startswith("rank 1 \u00b7 ") for lab in labels)
        page.screenshot(path="/tmp/argus_browser_rank1.png", full_page=True)
        pg.check_clean()
        page.close()

    in_browser(body)


def test_device_tab_draws_sm_lanes_and_the_region_drills_into_a_launch(in_browser: InBrowser, tmp_path: Path) -> None:
    """A recorded H200 probe buffer (tile marks) joined under SYNTHETIC kernel records (tests/device_cases.py)."""
    from argus_lab.store import Store
    from tests.device_cases import measure, raw

    m = measure(Store(tmp_path / "dev.duckdb"), raw("tail3072_tile"), repeat=2, warmup=0)
    out = export(m.report, tmp_path / "dev.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(out.as_uri())
        page.get_by_role("button", name="Device").click()
        page.locator(".argus-device .main-svg").first.wait_for(timeout=10_000)
        ticks = page.evaluate(
            "() => [...document.querySelectorAll('.argus-device g.ytick text')].map(e => e.textContent)"
        )
        assert len(ticks) == 44 and all(t.startswith("SM ") for t in ticks)  # 132 lanes, every third labelled
        assert page.locator(".argus-device g.trace.bars").count() == 2  # mainloop, epilogue
        info = page.locator(".argus-device").locator("xpath=preceding-sibling::div[1]").inner_text()
        assert "tail imbalance" in info and "every one drawn" in info
        page.screenshot(path="/tmp/argus_browser_device.png", full_page=True)
        # from the host region to its launch
        page.get_by_role("button", name="Regions").click()
        page.get_by_text("gemm_step", exact=True).first.click()
        drill = page.locator(".argus-drill")
        assert drill.get_by_text("device regions (instrumented launches; GPU ns)").count() == 1
        drill.get_by_role("button", name=re.compile(r"persistent_gemm · launch 1")).click()
        assert page.locator(".argus-pane >> visible=true").locator("select").input_value() == "1"
        page.locator(".argus-device .main-svg").first.wait_for(timeout=10_000)
        pg.check_clean()
        page.close()

    in_browser(body)


def _measured(tmp_path: Path, script: str, repeat: int = 3) -> Report:
    """A real host measurement of a test workload script, joined, as a Report."""
    from argus_lab.app.measure import plan, run_plan
    from argus_lab.run.workload import Workload

    workload = Workload.script(ROOT / script)
    return run_plan(plan("host.wall,host.cpu", repeat=repeat, warmup=1), workload, tmp_path / "s.duckdb").report


def test_exported_flame_view_nests_regions_and_drills_down(in_browser: InBrowser, tmp_path: Path) -> None:
    """The flame view of the offline export: a box per region path, children below and within their parent, the
    exclusive (darker) part inside, and a click opens the region's drill-down."""
    out = export(_measured(tmp_path, "examples/nested.py"), tmp_path / "flame.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(out.as_uri())
        page.get_by_role("button", name="Flame").click()
        boxes = page.locator(".argus-flame-box")
        boxes.first.wait_for(timeout=10_000)
        geo = page.evaluate(
            "() => Object.fromEntries([...document.querySelectorAll('.argus-flame-box')].map(b => {"
            " const r = b.getBoundingClientRect(); const s = b.querySelector('.argus-flame-self');"
            " return [b.dataset.path, [r.x, r.y, r.width, s ? s.getBoundingClientRect().width : null]]; }))"
        )
        assert set(geo) == {"decode", "decode/layer", "decode/layer/attn", "decode/layer/mlp"}
        for child, parent in (("decode/layer", "decode"), ("decode/layer/attn", "decode/layer")):
            cx, cy, cw, _ = geo[child]
            px, py, pw, _ = geo[parent]
            assert cy > py and cx >= px - 1 and cx + cw <= px + pw + 1  # below the parent, within its width
        _, _, w, own = geo["decode/layer"]
        assert own is not None and 0 < own < w  # a parent's exclusive time is a part of its box
        table = page.locator(".argus-pane >> visible=true").locator(".argus-table").first.inner_text()
        assert "inclusive" in table and "exclusive" in table
        page.screenshot(path="/tmp/argus_browser_flame.png", full_page=True)
        page.locator(".argus-flame-box[data-path='decode/layer/mlp']").click()
        assert page.locator(".argus-drill-title").inner_text() == "region decode/layer/mlp"
        pg.check_clean()
        page.close()

    in_browser(body)


def test_exported_timeline_lanes_are_named_after_threads(in_browser: InBrowser, tmp_path: Path) -> None:
    """Timeline lanes read `MainThread` and `loader` (the threads' names), never `pid ... thread ... depth ...`."""
    out = export(_measured(tmp_path, "tests/workloads/two_threads.py"), tmp_path / "threads.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.open_timeline(out.as_uri())
        lanes = page.locator(".argus-timeline g.ytick text").all_text_contents()
        assert "MainThread" in lanes and "loader" in lanes, lanes
        assert not any("pid" in t or "depth" in t for t in lanes)
        page.screenshot(path="/tmp/argus_browser_thread_lanes.png", full_page=True)
        page.get_by_role("button", name="Regions").click()
        page.get_by_text("step", exact=True).first.click()
        threads = page.locator(".argus-drill table").nth(1).inner_text()
        assert "MainThread" in threads
        pg.check_clean()
        page.close()

    in_browser(body)


_BARS_BY_ROW = """() => {
  // every host bar drawn, as [left, right] in pixels per lane row (by its vertical centre)
  const rows = {};
  for (const p of document.querySelectorAll('.argus-timeline g.trace.bars g.point path')) {
    const b = p.getBoundingClientRect();
    if (b.width <= 0) continue;
    const y = Math.round(b.y + b.height / 2);
    (rows[y] = rows[y] || []).push([b.x, b.x + b.width]);
  }
  return rows;
}"""


def test_exported_timeline_draws_overlapping_ranges_on_overlap_lanes(in_browser: InBrowser, tmp_path: Path) -> None:
    """SYNTHETIC import: ranges ``ts = 10 i, dur = 15`` us on one thread, each starting inside the one before (the
    import makes them siblings): the timeline draws them on the thread's row and on its overlap lane 1, as Perfetto
    does, and no bar of a row covers another of that row."""
    from faults.faultkit import ranges_trace

    from argus_lab.app.importing import import_trace
    from argus_lab.store import Store

    st = Store(tmp_path / "s.duckdb")
    res = import_trace(ranges_trace(tmp_path, [(10.0 * i, 15.0, "step") for i in range(12)]), st)
    out = export(Report(st, [res.run_id]), tmp_path / "overlap.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.open_timeline(out.as_uri())
        lanes = page.locator(".argus-timeline g.ytick text").all_text_contents()
        assert lanes == ["thread 1", "thread 1 (overlap lane 1)"], lanes
        rows = page.evaluate(_BARS_BY_ROW)
        assert sorted(len(r) for r in rows.values()) == [6, 6], rows
        for bars in rows.values():
            bars.sort()
            assert all(a[1] <= b[0] + 0.5 for a, b in itertools.pairwise(bars)), bars
        page.screenshot(path="/tmp/argus_browser_overlap_lanes.png", full_page=True)
        pg.check_clean()
        page.close()

    in_browser(body)


def test_exported_report_of_a_failed_run_keeps_the_finished_instances(in_browser: InBrowser, tmp_path: Path) -> None:
    """A workload that raised in its warm-up after region `a` finished: the export lists `a` as finished (never
    "no region instances were recorded") and the run's cause carries the script's file and line."""
    report = _measured(tmp_path, "tests/workloads/raises_after_a.py")
    assert report.runs[0].status == "failed"
    assert 'raises_after_a.py", line 7' in report.runs[0].cause
    out = export(report, tmp_path / "failed.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(out.as_uri())
        pane = page.locator(".argus-pane").first
        pane.locator(".argus-table").nth(1).wait_for(timeout=10_000)
        text = pane.inner_text()
        assert "no region instances were recorded" not in text
        assert "instances that finished before the run ended" in text
        assert re.search(r"\ba\t1\t1\t", pane.locator(".argus-table").nth(1).inner_text())
        page.get_by_role("button", name="Runs").click()
        assert 'raises_after_a.py", line 7' in page.locator(".argus-pane >> visible=true").first.inner_text()
        page.screenshot(path="/tmp/argus_browser_failed_run.png", full_page=True)
        pg.check_clean()
        page.close()

    in_browser(body)


def test_a_bidi_control_in_a_name_reverses_nothing_in_the_exported_report(
    in_browser: InBrowser, tmp_path: Path
) -> None:
    """A region named with U+202E (RIGHT-TO-LEFT OVERRIDE) shows as `st\\u202eep` in every tab and the timeline,
    and no text node of the page holds the control (it would show the rest of the line reversed)."""
    import argus_lab

    name = "st\u202eep"

    def step() -> None:
        with argus_lab.region(name), argus_lab.region("inner"):
            pass

    store = tmp_path / "bidi.duckdb"
    argus_lab.measure(step, signals="host.wall", repeat=2, warmup=0, store=str(store))
    out = export(Report(argus_lab.open_store(str(store))), tmp_path / "bidi.html")

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(out.as_uri())
        texts = []
        for tab in ("Regions", "Timeline", "Flame", "Runs"):
            page.get_by_role("button", name=tab).click()
            texts.append(page.locator("body").inner_text())
        page.get_by_role("button", name="Regions").click()
        page.get_by_text("st\\u202eep", exact=True).first.click()  # the drill-down finds the shown name
        texts.append(page.locator(".argus-drill").inner_text())
        shown = "\n".join(texts) + page.evaluate("document.documentElement.textContent")
        assert "\u202e" not in shown
        assert "st\\u202eep" in texts[0] and "st\\u202eep" in texts[-1]
        pg.check_clean()
        page.close()

    in_browser(body)
