"""The Argus panel says what each run and region is, at the default sidebar width and widened (a real ``jupyter
lab`` with this checkout's extension, in headless Debian chromium).

A store holds a script run (``scripts/work.py``, measured from the project folder) before the server starts; the
notebook then measures a ``%%argus_region`` cell alone and a ``%%argus`` cell whose ``step`` encloses ``inner``.
Checked: runs titled by their cell or script with their signals; the store picker's label complete at the default
width; a top-level region's badge says its time, a nested one its share of its parent; the widened panel shows
more columns; a region's warm-up instances are shown apart under n at the default width (a column of their own,
named as in the report, when widened); "Run in kernel" shows the repetition and the time left while it runs; the
exported report's tabs all visible at 250 px.  Screenshots: ``$ARGUS_SCREENSHOTS`` (default ``/tmp/argus-ui``),
``reads-*.png``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import labkit
import pytest

pytestmark = pytest.mark.browser
SHOT_PREFIX = "reads-"  # of a failing test's screenshot (conftest.py)

NOTEBOOK_NAME = "panel_walkthrough.ipynb"  # a realistic name: long enough that a label naming it was cut


def _cell(source: str) -> dict[str, Any]:
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}


NOTEBOOK = {
    "cells": [
        _cell("import time\nimport argus_lab\n%load_ext argus_lab"),  # 0 -> [1]
        _cell("%%argus_region attn\ntime.sleep(0.02)"),  # 1 -> [2]: measured alone, a top-level region
        _cell("%%argus_region inner\ntime.sleep(0.01)"),  # 2: never run here; `inner` is measured in cell 3
        _cell(  # 3 -> [3]: step encloses inner (about half of step's time)
            "%%argus -s host.wall,host.cpu -n 3 -w 1 --no-show\nwith argus_lab.region('step'):\n"
            "    with argus_lab.region('inner'):\n        time.sleep(0.01)\n    time.sleep(0.01)"
        ),
        _cell("%%argus_region slow\ntime.sleep(0.3)"),  # 4: measured by "Run in kernel" (repeat 8: about 3 s)
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}

SCRIPT = "import time\nimport argus_lab\n\nwith argus_lab.region('load'):\n    time.sleep(0.005)\n"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    labkit.need_browser()
    base = tmp_path_factory.mktemp("reads")
    root = base / "project"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "work.py").write_text(SCRIPT)
    (root / NOTEBOOK_NAME).write_text(json.dumps(NOTEBOOK))
    env = labkit.jupyter_env(base)
    # the script measured from the project folder, as `argus-lab run scripts/work.py` there would
    measure = (
        "import argus_lab; argus_lab.measure('scripts/work.py', 'host.wall', repeat=2, warmup=0, "
        "store='argus.duckdb', progress=False)"
    )
    subprocess.run([sys.executable, "-c", measure], cwd=root, env=env, check=True, timeout=120)
    with labkit.serve_lab(base, root, env) as served:
        yield served


@pytest.fixture(scope="module")
def page(lab: dict[str, Any]) -> Iterator[Any]:
    with labkit.browser_page() as pg:
        pg.goto(f"{lab['url']}/lab/tree/{NOTEBOOK_NAME}?token={lab['token']}")
        pg.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
        labkit.wait_idle(pg, 90_000)
        yield pg


# The room the selected option's text needs against the room the select gives it (its arrow takes about 20 px).
_PICKER_FIT = """s => {
  const cs = getComputedStyle(s);
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
  const text = s.selectedOptions[0].textContent;
  const room = s.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 20;
  return {text, need: ctx.measureText(text).width, room, scroll: s.scrollWidth, client: s.clientWidth};
}"""


def _visible_heads(panel: Any, table: str) -> list[str]:
    heads = panel.locator(f".{table} th")
    return [heads.nth(i).inner_text() for i in range(heads.count()) if heads.nth(i).is_visible()]


def test_runs_badges_and_picker_at_the_default_width(page: Any, lab: dict[str, Any]) -> None:
    for index in (0, 1, 3):
        labkit.run_cell(page, index, timeout=120_000)
    labkit.wait_idle(page)
    panel = labkit.open_panel(page)
    names = panel.locator(".jp-ArgusPanel-runName")
    names.nth(2).wait_for(timeout=30_000)
    panel.locator(".jp-ArgusPanel-runName", has_text="cell [3]").wait_for(timeout=30_000)
    titles = names.all_inner_texts()
    # each run titled by its cell or script, newest first; never a bare id
    assert titles == [f"cell [3] of {NOTEBOOK_NAME}", f"cell [2] of {NOTEBOOK_NAME}", "scripts/work.py"], titles
    assert not any(re.fullmatch(r"r-[0-9a-f]+", t) for t in titles)
    first = panel.locator(".jp-ArgusPanel-run").first
    assert first.locator(".jp-ArgusPanel-runSignals").inner_text() == "host.wall, host.cpu"
    assert re.search(r"\d s", first.inner_text())  # its duration
    assert _visible_heads(panel, "jp-ArgusPanel-runTable") == ["run", "status", "time", "started"]
    # (the section's body, which stays while a refresh replaces the table in it)
    fits = panel.locator(".jp-ArgusPanel-runs > .jp-ArgusPanel-body").evaluate("b => b.scrollWidth <= b.clientWidth")
    assert fits, "the runs table is wider than the sidebar"

    # warm-up kept apart and visible at the default width: `step` ran 3 measured instances after 1 warm-up one
    # (the report's and the text tables' "warm-up (apart)"), beside n, with what it means in its tooltip
    step = panel.locator(".jp-ArgusPanel-region[data-path='step']")
    step.wait_for(timeout=30_000)
    heads = _visible_heads(panel, "jp-ArgusPanel-regionTable")
    assert heads == ["region", "share", "median", "n"], heads
    n_cell = " ".join(step.locator("td").nth(heads.index("n")).inner_text().split())
    assert n_cell == "3 (+1 warm-up)", n_cell
    warm_tip = step.locator(".jp-ArgusPanel-warm").get_attribute("title") or ""
    assert "kept apart" in warm_tip and '"warm-up (apart)"' in warm_tip, warm_tip
    fits = panel.locator(".jp-ArgusPanel-regions > .jp-ArgusPanel-body").evaluate("b => b.scrollWidth <= b.clientWidth")
    assert fits, "the regions table is wider than the sidebar"

    # the store picker: a complete label at the default width, the full path in its tooltip
    picker = panel.locator(".jp-ArgusPanel-store")
    fit = picker.evaluate(_PICKER_FIT)
    assert fit["text"] == "argus.duckdb (kernel)", fit
    assert fit["scroll"] <= fit["client"] and fit["need"] <= fit["room"], fit
    assert f"the kernel of {NOTEBOOK_NAME}" in (picker.get_attribute("title") or "")

    # badges: the top-level region says its time, the nested one its share of its parent
    attn = page.locator(".jp-Cell .jp-ArgusBadge[data-path='attn']")
    attn.wait_for(timeout=30_000)
    assert re.fullmatch(r"attn \d+(\.\d+)? ms", attn.inner_text()), attn.inner_text()
    inner = page.locator(".jp-Cell .jp-ArgusBadge").filter(has_text=re.compile(r"^inner "))
    inner.wait_for()
    assert re.fullmatch(r"inner \d+%", inner.inner_text()), inner.inner_text()
    assert inner.inner_text() != "inner 100%"
    tip = inner.get_attribute("title") or ""
    assert "of its parent step" in tip and re.search(r"median \d+(\.\d+)? ms", tip), tip
    labkit.shot(page, "reads-1-default-width.png")
    panel.screenshot(path=str(labkit.SHOTS / "reads-1-panel-default-width.png"))
    assert page.errors == []  # type: ignore[attr-defined]


def test_the_widened_panel_shows_more_columns(page: Any) -> None:
    panel = labkit.open_panel(page)
    assert "jp-mod-wide" not in (panel.get_attribute("class") or "")
    handle = page.locator("#jp-main-split-panel > .lm-SplitPanel-handle").first
    box = handle.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 300)
    page.mouse.down()
    page.mouse.move(box["x"] + 450, box["y"] + 300, steps=8)
    page.mouse.up()
    page.locator("#argus-lab-panel.jp-mod-wide").wait_for()
    runs = _visible_heads(panel, "jp-ArgusPanel-runTable")
    assert runs == ["run", "status", "time", "started", "signals", "reps", "backends", "id"], runs
    regions = _visible_heads(panel, "jp-ArgusPanel-regionTable")
    assert regions == ["region", "share", "median", "n", "p25..p75", "of parent", "warm-up (apart)", "runs", "signal"]
    # warm-up has its column now: not repeated beside n
    step = panel.locator(".jp-ArgusPanel-region[data-path='step']")
    assert not step.locator(".jp-ArgusPanel-warm").is_visible()
    assert step.locator("td").nth(regions.index("n")).inner_text().strip() == "3"
    assert step.locator("td").nth(regions.index("warm-up (apart)")).inner_text().strip() == "1"
    # the signals have a column of their own now: not repeated under the title
    assert not panel.locator(".jp-ArgusPanel-runSignals").first.is_visible()
    inner = panel.locator(".jp-ArgusPanel-region[data-path='step/inner']")
    assert re.search(r"\d+% of step", inner.inner_text()), inner.inner_text()
    assert re.search(r"\d+(\.\d+)? ms\.\.\d+(\.\d+)? ms", inner.inner_text()), inner.inner_text()
    panel.screenshot(path=str(labkit.SHOTS / "reads-2-panel-widened.png"))
    # narrowed again, the four columns come back
    box = handle.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 300)
    page.mouse.down()
    page.mouse.move(box["x"] - 450, box["y"] + 300, steps=8)
    page.mouse.up()
    page.locator("#argus-lab-panel:not(.jp-mod-wide)").wait_for()
    assert _visible_heads(panel, "jp-ArgusPanel-runTable") == ["run", "status", "time", "started"]
    assert page.errors == []  # type: ignore[attr-defined]


def test_run_in_kernel_shows_the_repetition_and_the_time_left_while_it_runs(page: Any) -> None:
    panel = labkit.open_panel(page)
    panel.locator(".jp-ArgusPanel-pick-cell input[value='slow']").check()
    panel.locator(".jp-ArgusPanel-repeat").fill("8")
    panel.locator(".jp-ArgusPanel-warmup").fill("0")
    panel.locator(".jp-ArgusPanel-runButton").click()
    progress = panel.locator(".jp-ArgusPanel-progress")
    # mid-run: the run's one line, updated in place, names the repetition and the time left
    progress.filter(has_text=re.compile(r"argus: run 1/1 \[host\] repetition \d/8 - .*about .* left")).wait_for()
    mid = progress.inner_text()
    assert "done:" not in mid and mid.count("argus: run 1/1") == 1, mid
    progress.scroll_into_view_if_needed()
    labkit.shot(page, "reads-3-run-in-kernel-mid-run.png")
    progress.filter(has_text="done: the result is in the store").wait_for(timeout=120_000)
    done = progress.inner_text()
    assert done.count("argus: run 1/1") == 1 and "ok after" in done, done
    assert page.errors == []  # type: ignore[attr-defined]


def test_the_exported_reports_tabs_are_all_visible_at_250_px(page: Any, lab: dict[str, Any]) -> None:
    from argus_lab.app.exporting import export
    from argus_lab.store import Store

    store = Store(lab["root"] / "argus.duckdb")
    (run,) = [r for (r,) in store.rows("SELECT run_id FROM runs WHERE workload LIKE 'cell [3]%'")]
    out = export(store, lab["root"] / "report.html", fmt="html", run_ids=[run]).path
    narrow = page.context.new_page()
    try:
        narrow.set_viewport_size({"width": 250, "height": 700})
        narrow.goto(Path(out).as_uri())
        tabs = narrow.locator(".argus-tab")
        tabs.first.wait_for()
        assert tabs.count() >= 4
        width = narrow.evaluate("document.documentElement.clientWidth")
        for i in range(tabs.count()):
            box = tabs.nth(i).bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (
                tabs.nth(i).inner_text(),
                box,
            )
        row = narrow.locator(".argus-tabs").first
        assert row.evaluate("r => r.scrollWidth <= r.clientWidth")
        narrow.screenshot(path=str(labkit.SHOTS / "reads-4-report-tabs-250px.png"))
        # every tab still works: the last one opens its pane
        tabs.last.click()
        assert "argus-active" in (tabs.last.get_attribute("class") or "")
    finally:
        narrow.close()
