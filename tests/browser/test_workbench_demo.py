"""The workbench as a newcomer meets it (issue 12), in a live JupyterLab started the way ``make demo`` starts it.

``scripts/demo`` (what ``make demo PORT=... BROWSER=0`` runs) serves a copy of the repository's layout: the real
``notebooks/quickstart.ipynb`` and a notebook of the failure paths.  In headless Debian chromium the tests then do
what a user does: Run All on the quickstart and read the Argus panel (one store for the notebook, the panel and
"Run in kernel"), open a run and a region as main-area tabs, follow a run's workload link back to its cell, widen
the sidebar, measure a cell without regions, a cell that fails, a store in a missing folder, ``%argus show`` in a
fresh kernel, a comparison of two requests that measured different signals, and the flame view of a report.

Screenshots go to ``$ARGUS_SCREENSHOTS`` (default ``/tmp/argus-ui``), ``demo-*.png``.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import labkit
import pytest

pytestmark = pytest.mark.browser
SHOT_PREFIX = "demo-"  # of a failing test's screenshot (conftest.py)


def _cell(source: str) -> dict[str, Any]:
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}


# The failure paths and the implicit region, as a user would type them (cell numbers are the run order).
NEWCOMER = {
    "cells": [
        _cell("%load_ext argus_lab\nimport time\nimport argus_lab\nfrom argus_lab import views"),  # 0
        _cell("%argus show"),  # 1: a fresh kernel has measured nothing
        _cell("%%argus -n 3\ntime.sleep(0.01)"),  # 2: no region: the cell is the region
        _cell(  # 3: region `a` finishes, then the cell raises in its warm-up repetition
            "%%argus -n 2 -w 1 --title failing\nwith argus_lab.region('a'):\n    x = sum(range(1000))\n"
            "raise RuntimeError('oops')"
        ),
        _cell("%argus store missing/dir/s.duckdb"),  # 4: no folder is created without asking
        _cell("%%argus -s host.wall -n 3 -o A --no-show\nwith argus_lab.region('w'):\n    time.sleep(0.001)"),  # 5
        _cell("%%argus -s host.cpu -n 3 -o B --no-show\nwith argus_lab.region('w'):\n    time.sleep(0.001)"),  # 6
        _cell("views.compare(A, B)"),  # 7
        _cell("%%argus_region slow\ntime.sleep(4)"),  # 8: long enough to see the Stop button
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``scripts/demo`` (the command of ``make demo``) on a copy of the repository's notebooks."""
    labkit.need_browser()
    base = tmp_path_factory.mktemp("demo")
    root = base / "repo"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(labkit.REPO / "notebooks" / "quickstart.ipynb", root / "notebooks" / "quickstart.ipynb")
    (root / "notebooks" / "newcomer.ipynb").write_text(json.dumps(NEWCOMER))
    (root / "notebooks" / "plain.ipynb").write_text(json.dumps({**NEWCOMER, "cells": [_cell("x = 1")]}))
    env = labkit.jupyter_env(base)
    token = secrets.token_hex(16)
    port = labkit.free_port()
    env.update(PORT=str(port), BROWSER="0", DEMO_ROOT=str(root))
    bin_dir = str(Path(sys.executable).parent)
    log_path = base / "demo.log"
    log = log_path.open("wb")
    cmd = [str(labkit.REPO / "scripts" / "demo"), bin_dir, f"--IdentityProvider.token={token}"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=labkit.REPO)
    url = f"http://localhost:{port}"
    try:
        labkit.wait_for_server(url, token, proc, log_path)
        yield {"url": url, "token": token, "root": root, "log": log_path}
    finally:
        labkit.stop(proc, 20)
        log.close()


@pytest.fixture(scope="module")
def page(demo: dict[str, Any]) -> Iterator[Any]:
    with labkit.browser_page(1500, 1000) as pg:
        yield pg


def _menu(page: Any, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{menu}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()


def _stores(demo: dict[str, Any]) -> list[str]:
    return [s["path"] for s in labkit.api(demo["url"], demo["token"], "argus-lab/stores")["stores"]]


def test_make_demo_run_all_shows_the_run_in_the_panel_with_one_store(page: Any, demo: dict[str, Any]) -> None:
    """Item 2: the address scripts/demo prints opens the quickstart; after Run All the panel follows the
    quickstart kernel's store and lists its runs; "Run in kernel" writes the same store (no second file)."""
    log = demo["log"].read_text()
    assert f"JupyterLab at {demo['url']}/lab/tree/notebooks/quickstart.ipynb" in log
    assert f"evidence store {demo['root'] / 'argus.duckdb'}" in log
    assert "stop with Ctrl+C twice" in log
    # what Jupyter prints for the user (and opens, without BROWSER=0): the quickstart itself
    assert re.search(rf"{demo['url']}/lab/tree/notebooks/quickstart.ipynb\?token=", log)
    page.goto(f"{demo['url']}/?token={demo['token']}")
    page.locator(".jp-NotebookPanel-toolbar").first.wait_for(timeout=90_000)
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text="quickstart.ipynb").first.wait_for()
    labkit.wait_idle(page, 90_000)
    _menu(page, "Run", "Run All Cells")
    last = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-CodeCell").last
    last.locator(".jp-InputPrompt").filter(has_text=re.compile(r"\[\d+\]")).wait_for(timeout=400_000)
    labkit.wait_idle(page)
    assert (demo["root"] / "argus.duckdb").exists()
    assert not (demo["root"] / "notebooks" / "argus.duckdb").exists()

    panel = labkit.open_panel(page)
    # the panel refreshes by itself after the cells ran (and asks the kernel again once it is idle)
    panel.locator(".jp-ArgusPanel-region[data-path='decode/layer/attn']").wait_for(timeout=30_000)
    note = "Kernel of quickstart.ipynb: argus.duckdb (set by %argus store)"
    panel.locator(".jp-ArgusPanel-kernelStore", has_text=note).wait_for(timeout=30_000)
    panel.locator(".jp-ArgusPanel-run").nth(2).wait_for(timeout=30_000)
    store = panel.locator(".jp-ArgusPanel-store")
    assert store.input_value() == "argus.duckdb"
    # a short label (the file name), what it is in the option's tooltip
    assert store.locator("option:checked").inner_text() == "argus.duckdb (kernel)"
    assert "the kernel of quickstart.ipynb" in (store.locator("option:checked").get_attribute("title") or "")
    runs_before = panel.locator(".jp-ArgusPanel-run").count()
    assert runs_before >= 3  # argus_lab.measure, %argus_region, two %%argus cells
    paths = set(panel.locator(".jp-ArgusPanel-region").evaluate_all("rs => rs.map(r => r.dataset.path)"))
    assert {"decode", "decode/layer/attn", "prepare", "sum_table"} <= paths
    # readable at the default sidebar width: the runs table needs no horizontal scrolling, no name is cut
    # read in one step in the page (the panel may redraw the table between a locate and a read on a loaded machine)
    page.wait_for_function(
        "() => { const t = document.querySelector('.jp-ArgusPanel-runTable'); return !!(t && t.parentElement); }"
    )
    fits = panel.evaluate(
        "p => { const t = p.querySelector('.jp-ArgusPanel-runTable');"
        " return !!t && !!t.parentElement && t.scrollWidth <= t.parentElement.clientWidth; }"
    )
    if not fits:
        panel.screenshot(path=str(labkit.SHOTS / "demo-0-too-wide.png"))
    assert fits, "the runs table is wider than the sidebar"
    cut = panel.locator(".jp-ArgusPanel-seg").evaluate_all("ss => ss.filter(s => s.getClientRects().length > 1).length")
    assert cut == 0, "a region name wraps in the middle"
    assert not panel.locator(".jp-ArgusPanel-stopButton").is_visible()  # nothing runs
    panel.screenshot(path=str(labkit.SHOTS / "demo-1-panel-default-width.png"))

    # "Run in kernel" on the quickstart's region cell: the same store, one more run
    panel.locator(".jp-ArgusPanel-pick-cell input[value='prepare']").check()
    panel.locator(".jp-ArgusPanel-runButton").click()
    progress = panel.locator(".jp-ArgusPanel-progress")
    progress.filter(has_text="done: the result is in the store").wait_for(timeout=120_000)
    text = progress.inner_text()
    assert text.count("argus: run 1/1 [host] ok") == 1
    assert "20000" not in text  # the cell's own output (len(table)) is not mixed into the progress
    panel.locator(".jp-ArgusPanel-run").nth(runs_before).wait_for()
    assert _stores(demo) == ["argus.duckdb"]  # one store for the notebook, the panel and "Run in kernel"
    assert not (demo["root"] / "notebooks" / "argus.duckdb").exists()
    labkit.shot(page, "demo-2-after-run-all.png")

    # widened by dragging the sidebar's edge, the panel uses the room
    handle = page.locator("#jp-main-split-panel > .lm-SplitPanel-handle").first
    box = handle.bounding_box()
    before = panel.bounding_box()["width"]
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 300)
    page.mouse.down()
    page.mouse.move(box["x"] + 300, box["y"] + 300, steps=8)
    page.mouse.up()
    page.wait_for_timeout(300)
    assert panel.bounding_box()["width"] > before + 200
    panel.screenshot(path=str(labkit.SHOTS / "demo-3-panel-widened.png"))
    assert page.errors == []  # type: ignore[attr-defined]


def test_run_and_region_details_open_as_tabs_and_link_back_to_the_cell(page: Any, demo: dict[str, Any]) -> None:
    """Item 3: a run opens as a main-area tab with key/value provenance and its workload as "cell [n] of
    quickstart.ipynb", a link that selects that cell; a region's drill-down names its notebook cell and threads."""
    panel = labkit.open_panel(page)
    rows = panel.locator(".jp-ArgusPanel-run")
    # the newest %%argus cell of the quickstart (after the panel's own run, which is the newest of all)
    rows.nth(1).click()
    detail = page.locator(".jp-ArgusDetails .jp-ArgusPanel-runDetail")
    detail.wait_for()
    assert page.locator(".lm-TabBar-tab.lm-mod-current", has_text="Argus: run").count() == 1
    link = detail.locator(".jp-ArgusPanel-cellLink")
    assert re.fullmatch(r"cell \[\d+\] of quickstart\.ipynb", link.inner_text())
    assert detail.locator(".jp-ArgusPanel-provenance dl.jp-ArgusPanel-kv dt").count() >= 3
    assert "{" not in detail.locator(".jp-ArgusPanel-provenance").inner_text()
    assert "host.wall" in detail.locator(".jp-ArgusPanel-runFacts").inner_text()
    labkit.shot(page, "demo-4-run-details-tab.png")
    link.click()
    active = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell.jp-mod-active")
    active.filter(has_text="-o bigger").wait_for(timeout=30_000)  # a loaded 2-core machine takes over 10 s
    labkit.shot(page, "demo-5-link-jumped-to-cell.png")

    # the first run of the panel's plan: the workload is the panel's cells, linked one by one
    rows.first.click()
    page.locator(".jp-ArgusDetails .jp-ArgusPanel-cellLink", has_text="prepare").wait_for()
    assert "cell prepare of quickstart.ipynb" in page.locator(".jp-ArgusDetails .jp-ArgusPanel-workload").inner_text()

    region = panel.locator(".jp-ArgusPanel-region[data-path='decode/layer/attn']")
    assert re.search(r"declared in cell \[\d+\] of quickstart\.ipynb, line 5", region.get_attribute("title") or "")
    region.click()
    drill = page.locator(".jp-ArgusDetails .jp-ArgusPanel-drill[data-path='decode/layer/attn']")
    drill.wait_for()
    declared = drill.locator(".jp-ArgusPanel-declared").inner_text()
    assert re.fullmatch(r"declared in cell \[\d+\] of quickstart\.ipynb, line 5", declared)
    assert "ipykernel_" not in drill.inner_text()
    threads = set(drill.locator(".jp-ArgusPanel-instances tbody td:nth-child(4)").all_inner_texts())
    assert threads == {"MainThread"}
    labkit.shot(page, "demo-6-region-drill-tab.png")
    assert page.errors == []  # type: ignore[attr-defined]


def test_report_output_has_thread_lanes_and_a_flame_view_that_drills_down(page: Any) -> None:
    """Items 3 and 6 in the JupyterLab renderer: the timeline's lanes are named after threads, and the flame view
    of nested regions (inclusive and exclusive time) opens the same drill-down."""
    for details in page.locator(".lm-TabBar-tab", has_text="Argus:").all():  # the notebook gets the width back
        details.locator(".lm-TabBar-tabCloseIcon").click()
    tab = page.locator(".lm-TabBar-tab", has_text="quickstart.ipynb").first
    tab.click()
    report = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output .argus-report").first
    report.scroll_into_view_if_needed()
    report.locator(".argus-tab", has_text="Timeline").click()
    report.locator(".argus-timeline .main-svg").first.wait_for(timeout=60_000)
    lanes = report.locator(".argus-timeline g.ytick text").all_text_contents()
    assert "MainThread" in lanes and not any(t.startswith("pid ") for t in lanes)
    report.locator(".argus-tab", has_text="Flame").click()
    boxes = report.locator(".argus-flame-box")
    boxes.first.wait_for()
    paths = boxes.evaluate_all("bs => bs.map(b => b.dataset.path)")
    assert {"decode", "decode/layer", "decode/layer/attn", "decode/layer/mlp"} <= set(paths)
    attn = report.locator(".argus-flame-box[data-path='decode/layer/attn']")
    assert "inclusive" in (attn.get_attribute("title") or "") and "exclusive" in (attn.get_attribute("title") or "")
    layer = report.locator(".argus-flame-box[data-path='decode/layer']").bounding_box()
    box = attn.bounding_box()
    assert box["y"] > layer["y"] and box["x"] >= layer["x"] - 1 and box["width"] < layer["width"]
    report.locator(".argus-flame").scroll_into_view_if_needed()
    labkit.shot(page, "demo-7-flame-in-lab.png")
    attn.click()
    assert report.locator(".argus-drill-title").inner_text() == "region decode/layer/attn"
    report.locator(".argus-drill-title").scroll_into_view_if_needed()
    labkit.shot(page, "demo-7b-flame-drill.png")
    assert page.errors == []  # type: ignore[attr-defined]


def test_failure_paths_and_the_implicit_region_in_a_fresh_kernel(page: Any, demo: dict[str, Any]) -> None:
    """Items 4 and 5 as typed in a notebook: %argus show in a fresh kernel, a cell without regions measured as
    one region, a failing cell that keeps its finished instance and shows its line, no folder created for a
    store, "not measured in B" in a comparison."""
    page.goto(f"{demo['url']}/lab/tree/notebooks/newcomer.ipynb?token={demo['token']}")
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text="newcomer.ipynb").first.wait_for(timeout=90_000)
    labkit.wait_idle(page, 90_000)
    labkit.run_cell(page, 0)
    shown = labkit.run_cell(page, 1).locator(".jp-OutputArea-output")
    shown.first.wait_for()
    assert "this kernel has measured nothing yet" in shown.first.inner_text()
    assert "earlier sessions" in shown.first.inner_text()  # the quickstart's runs are there, and not shown

    cell = labkit.run_cell(page, 2)
    out = cell.locator(".jp-Cell-outputArea")
    out.locator(".argus-report").wait_for(timeout=60_000)
    number = re.search(r"\[(\d+)\]", cell.locator(".jp-InputPrompt").inner_text()).group(1)  # type: ignore[union-attr]
    assert f"the cell enters no region, so it was measured as region 'cell_{number}'" in out.inner_text()
    assert f"cell_{number}" in out.locator(".argus-report .argus-table").first.inner_text()

    failing = labkit.run_cell(page, 3).locator(".jp-Cell-outputArea")
    failing.locator(".argus-report").wait_for(timeout=60_000)
    text = failing.inner_text()
    assert "no region instances were recorded" not in text
    assert "instances that finished before the run ended" in text
    finished = failing.locator(".argus-report .argus-table").nth(1).inner_text()
    assert re.search(r"\ba\s+1\s+1\b", finished), finished  # region a: 1 finished instance, a warm-up one
    assert "RuntimeError: oops" in text
    assert re.search(r"Cell In\[\d+\], line 3", text)  # the cell and the line that raised
    assert re.search(r"----> 3\s+raise RuntimeError\('oops'\)", text)
    failing.scroll_into_view_if_needed()
    labkit.shot(page, "demo-8-failing-cell.png")

    err = labkit.run_cell(page, 4).locator(".jp-Cell-outputArea").inner_text()
    assert "the folder 'missing/dir' of the store 'missing/dir/s.duckdb' does not exist" in err
    assert not (demo["root"] / "notebooks" / "missing").exists()

    for i in (5, 6):
        labkit.run_cell(page, i)
    compare = labkit.run_cell(page, 7).locator(".jp-Cell-outputArea")
    compare.locator("table").first.wait_for()
    table = compare.inner_text()
    assert "not measured in B" in table and "not measured in A" in table
    assert "gone" not in table
    compare.scroll_into_view_if_needed()
    labkit.shot(page, "demo-9-compare-not-measured.png")
    assert page.errors == []  # type: ignore[attr-defined]


def test_run_button_says_why_and_stop_shows_only_while_running(page: Any, demo: dict[str, Any]) -> None:
    """Item 3/5: the Run button of a notebook without region cells is disabled with the reason; with one, Stop
    appears while the measurement runs and interrupts it (the finished runs stay), then hides again."""
    panel = labkit.open_panel(page)
    page.locator(".lm-TabBar-tab", has_text="newcomer.ipynb").first.click()
    run_button = panel.locator(".jp-ArgusPanel-runButton")
    stop = panel.locator(".jp-ArgusPanel-stopButton")
    panel.locator(".jp-ArgusPanel-pick-cell input[value='slow']").wait_for()
    assert run_button.is_enabled()
    assert not stop.is_visible()
    panel.locator(".jp-ArgusPanel-pick-cell input[value='slow']").check()
    run_button.click()
    stop.wait_for(state="visible", timeout=30_000)
    assert run_button.is_disabled()
    assert "a measurement is running" in (run_button.get_attribute("title") or "")
    labkit.shot(page, "demo-10-stop-while-running.png")
    page.wait_for_timeout(1500)  # inside the measured cell
    stop.click()
    panel.locator(".jp-ArgusPanel-progress", has_text="failed: KeyboardInterrupt").wait_for(timeout=60_000)
    stop.wait_for(state="hidden")
    newest = labkit.api(demo["url"], demo["token"], "argus-lab/runs?store=argus.duckdb")[0]
    assert newest["status"] == "interrupted", newest  # stopped, and stored as such (never left "running")
    # a notebook without %%argus_region cells: Run is disabled, and says why (tooltip and the line under it)
    page.goto(f"{demo['url']}/lab/tree/notebooks/plain.ipynb?token={demo['token']}")
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text="plain.ipynb").first.wait_for(timeout=90_000)
    panel = labkit.open_panel(page)
    page.wait_for_function(
        "() => document.querySelector('.jp-ArgusPanel-runButton')?.title.includes('plain.ipynb has no')"
    )
    run_button = panel.locator(".jp-ArgusPanel-runButton")
    assert run_button.is_disabled()
    title = run_button.get_attribute("title") or ""
    assert title == "plain.ipynb has no %%argus_region cells: mark a cell with %%argus_region NAME first"
    assert panel.locator(".jp-ArgusPanel-runHint").inner_text() == title
    panel.locator(".jp-ArgusPanel-runHint").scroll_into_view_if_needed()
    labkit.shot(page, "demo-11-run-disabled-says-why.png")
    assert page.errors == []  # type: ignore[attr-defined]
