"""UI test: a real ``jupyter lab`` (started here) in headless Debian chromium, with the argus extension.

A region of a notebook is planned, run in the notebook's kernel and drilled into from the Argus panel; its cell
gets a badge; a ``%%argus`` cell's report is drawn by the MIME renderer.  Screenshots go to
``$ARGUS_SCREENSHOTS`` (default ``/tmp/argus-ui``).

Needs ``/usr/bin/chromium`` (``apt-get install chromium``; Playwright never downloads a browser here) and the
built labextension in ``argus_lab/labextension`` (``cd extension && jlpm build``).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import labkit
import pytest

pytestmark = pytest.mark.browser
SHOT_PREFIX = ""  # of a failing test's screenshot (conftest.py)

REPO = Path(__file__).resolve().parents[2]
LABEXTENSION = REPO / "argus_lab" / "labextension"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
SHOTS = Path(os.environ.get("ARGUS_SCREENSHOTS", "/tmp/argus-ui"))


def _cell(source: str) -> dict[str, Any]:
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}


NOTEBOOK = {
    "cells": [
        _cell("import time"),
        _cell("%%argus_region attn\ntime.sleep(0.03)"),
        _cell("%%argus_region mlp\ntime.sleep(0.01)"),
        _cell("%load_ext argus_lab"),
        _cell(
            "%%argus -s host.wall -n 2 -w 0 --store mime.duckdb --title 'mime check'\n"
            "with __import__('argus_lab').region('mime_step'):\n"
            "    time.sleep(0.002)"
        ),
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def _saved_notebook() -> dict[str, Any]:
    """A notebook with a saved report output (never trusted here): the recorded bundle of the jest fixture."""
    bundle = json.loads((REPO / "extension" / "src" / "__tests__" / "fixtures" / "report-bundle.json").read_text())
    bundle["title"] = "saved report <img src=x onerror=\"document.title='pwned'\">"
    output = {
        "output_type": "display_data",
        "metadata": {},
        "data": {
            "application/vnd.argus.report+json": bundle,
            "text/html": "<div class='fallback-html'>static fallback</div>",
            "text/plain": "<argus report>",
        },
    }
    cell = {**_cell("# output saved by an earlier session"), "outputs": [output], "execution_count": 1}
    return {**NOTEBOOK, "cells": [cell]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}: `apt-get install -y chromium` (or set CHROMIUM_PATH)")
    if not (LABEXTENSION / "package.json").exists():
        pytest.fail("the labextension is not built: run `cd extension && jlpm install && jlpm build` first")
    base = tmp_path_factory.mktemp("lab")
    root = base / "root"
    root.mkdir()
    (root / "demo.ipynb").write_text(json.dumps(NOTEBOOK))
    (root / "saved.ipynb").write_text(json.dumps(_saved_notebook()))
    # the freshly built labextension takes precedence over an installed copy
    ext_dir = base / "labextensions"
    ext_dir.mkdir()
    (ext_dir / "argus-lab").symlink_to(LABEXTENSION)
    config = base / "config"
    config.mkdir()
    settings = {
        "ServerApp": {"jpserver_extensions": {"argus_lab": True}},
        "LabApp": {"extra_labextensions_path": [str(ext_dir)]},
    }
    (config / "jupyter_server_config.json").write_text(json.dumps(settings))
    token = secrets.token_hex(16)
    port = _free_port()
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(config),
        JUPYTERLAB_SETTINGS_DIR=str(base / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
    )
    env.pop("ARGUS_STORE", None)
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    log = (base / "lab.log").open("wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("jupyter lab did not start:\n" + (base / "lab.log").read_text()[-3000:])
            time.sleep(0.3)
        yield {"url": url, "token": token, "root": root, "log": base / "lab.log"}
    finally:
        labkit.stop(proc, 15)
        log.close()


@pytest.fixture(scope="module")
def page(lab: dict[str, Any]) -> Iterator[Any]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with labkit.browser_page(1500, 1000) as pg:
        pg.goto(f"{lab['url']}/lab/tree/demo.ipynb?token={lab['token']}")
        pg.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
        pg.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)
        yield pg


def _run_cell(page: Any, index: int) -> None:
    """Select cell ``index``, run it (Shift+Enter), and wait until its prompt shows an execution count."""
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    for _ in range(3):
        cell.locator(".jp-InputPrompt").click()
        page.wait_for_function(
            "i => document.querySelectorAll('.jp-Notebook .jp-Cell')[i]?.classList.contains('jp-mod-active')", arg=index
        )
        page.keyboard.press("Shift+Enter")
        try:
            cell.locator(".jp-InputPrompt").filter(has_text=re.compile(r"\[\d+\]")).wait_for(timeout=20_000)
            return
        except Exception:  # the key press was lost while the notebook was still settling: select and run again
            continue
    pytest.fail(f"cell {index} did not run after three attempts")


def _open_panel(page: Any) -> Any:
    tab = page.locator(".jp-SideBar .lm-TabBar-tab[data-id='argus-lab-panel']")
    tab.click()
    panel = page.locator("#argus-lab-panel")
    panel.wait_for(state="visible")
    return panel


def test_plan_run_and_drill_into_a_region_from_the_panel(page: Any, lab: dict[str, Any]) -> None:
    # the setup cell first (the panel measures the region cells only)
    _run_cell(page, 0)
    panel = _open_panel(page)
    picks = panel.locator(".jp-ArgusPanel-pick-cell")
    picks.first.wait_for()
    assert picks.all_inner_texts() == ["attn (cell 2 of demo.ipynb)", "mlp (cell 3 of demo.ipynb)"]
    panel.locator(".jp-ArgusPanel-pick-cell input[value='attn']").check()
    panel.locator(".jp-ArgusPanel-pick-cell input[value='mlp']").check()
    panel.locator(".jp-ArgusPanel-repeat").fill("3")
    panel.locator(".jp-ArgusPanel-previewButton").click()
    preview = panel.locator(".jp-ArgusPanel-preview")
    preview.filter(has_text="plan: 1 run(s)").wait_for()
    assert "host" in preview.inner_text()
    page.screenshot(path=str(SHOTS / "1-plan-preview.png"))

    panel.locator(".jp-ArgusPanel-runButton").click()
    progress = panel.locator(".jp-ArgusPanel-progress")
    progress.filter(has_text="done: the result is in the store").wait_for(timeout=120_000)
    text = progress.inner_text()
    assert "argus: run 1/1 [host] ok" in text
    assert (lab["root"] / "argus.duckdb").exists()
    # the report of the run, drawn by the shared renderer inside the panel
    panel.locator(".jp-ArgusPanel-result .argus-report").wait_for()
    assert "attn" in panel.locator(".jp-ArgusPanel-result").inner_text()
    # the run is listed with its status; its details show provenance and plan
    run_row = panel.locator(".jp-ArgusPanel-run").first
    assert " ok" in run_row.inner_text() or "\tok" in run_row.inner_text()
    run_row.click()
    detail = page.locator(".jp-ArgusDetails .jp-ArgusPanel-runDetail")  # a main-area tab, not the sidebar
    detail.wait_for()
    assert "CLOCK_REALTIME" in detail.inner_text()
    assert "plan: 1 run(s)" in detail.inner_text()
    page.screenshot(path=str(SHOTS / "2-run-detail.png"))

    region = panel.locator(".jp-ArgusPanel-region[data-path='attn']")
    region.wait_for()
    assert "%" in region.inner_text()
    region.click()
    drill = page.locator(".jp-ArgusDetails .jp-ArgusPanel-drill[data-path='attn']")
    drill.wait_for()
    drill_text = drill.inner_text()
    assert "Instances (4)" in drill_text  # 1 warm-up + 3 measured
    assert "(warm-up)" in drill_text
    assert "host.wall" in drill_text
    drill.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "3-drill-down.png"))

    # badges on the region cells: top-level regions, so each says its median time; a click opens the drill-down
    badge = page.locator(".jp-Cell .jp-ArgusBadge[data-path='mlp']")
    badge.wait_for()
    assert re.fullmatch(r"mlp \d+(\.\d+)? ms", badge.inner_text()), badge.inner_text()
    attn_ms = float(page.locator(".jp-ArgusBadge[data-path='attn']").inner_text().split()[1])
    mlp_ms = float(badge.inner_text().split()[1])
    assert attn_ms > mlp_ms  # 30 ms against 10 ms
    badge.click()
    page.locator(".jp-ArgusDetails .jp-ArgusPanel-drill[data-path='mlp']").wait_for()
    page.screenshot(path=str(SHOTS / "4-badges.png"))
    assert page.errors == []  # type: ignore[attr-defined]


def test_mime_renderer_draws_a_report_output(page: Any) -> None:
    cells = page.locator(".jp-Notebook .jp-Cell")
    for index in (3, 4):
        _run_cell(page, index)
    output = cells.nth(4).locator(".jp-OutputArea-output .argus-report")
    output.wait_for(timeout=120_000)
    assert "mime check" in output.inner_text()
    assert "mime_step" in output.inner_text()
    assert page.locator(".jp-ArgusReportRenderer").count() >= 1
    # the timeline is drawn by plotly.js, loaded once from the labextension's own chunk (no CDN)
    output.locator(".argus-tab", has_text="Timeline").click()
    output.locator(".argus-timeline .main-svg").first.wait_for(timeout=60_000)
    assert "needs plotly.js" not in output.inner_text()
    output.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "5-mime-report.png"))
    assert page.errors == []  # type: ignore[attr-defined]


def test_saved_report_renders_in_an_untrusted_notebook(page: Any, lab: dict[str, Any]) -> None:
    """The renderer is safe: JupyterLab uses it for a saved output of a notebook that was never trusted."""
    page.goto(f"{lab['url']}/lab/tree/saved.ipynb?token={lab['token']}")
    output = page.locator(".jp-OutputArea-output .argus-report")
    output.wait_for(timeout=90_000)
    text = output.inner_text()
    assert "saved report <img src=x" in text  # the hostile title is shown as text
    assert output.locator("img").count() == 0
    assert page.locator(".fallback-html").count() == 0
    assert "step/attn" in text
    assert page.title() != "pwned"
    page.screenshot(path=str(SHOTS / "6-untrusted-saved-report.png"))


def test_two_rank_report_draws_a_lane_per_rank_in_jupyterlab(page: Any, lab: dict[str, Any]) -> None:
    """A report of the recorded two-H200 store (tests/data/gpu/two_ranks), saved as a notebook output: JupyterLab's
    argus renderer draws the host and stream lanes of both ranks, on rank 0's clock."""
    import shutil

    from argus_lab.report import Report
    from argus_lab.store import Store
    from argus_lab.views.bundle import build

    data = REPO / "tests" / "data" / "gpu" / "two_ranks"
    store = lab["root"] / "two.duckdb"
    shutil.copy(data / "nccl_overlap_2r.duckdb", store)
    requests = json.loads((data / "runs.json").read_text())["stores"]["nccl_overlap_2r"]["requests"]
    (run,) = next(r for r in requests if r["label"] == "train-overlapped")["runs"]
    bundle = build(Report(Store(store), [run]), title="two ranks on two H200s")
    output = {"output_type": "display_data", "metadata": {}, "data": {"application/vnd.argus.report+json": bundle}}
    cell = {**_cell("# a two-rank report"), "outputs": [output], "execution_count": 1}
    (lab["root"] / "two.ipynb").write_text(json.dumps({**NOTEBOOK, "cells": [cell]}))
    page.goto(f"{lab['url']}/lab/tree/two.ipynb?token={lab['token']}")
    # other notebooks of this module stay open in hidden tabs: pick this report by its title
    report = page.locator(".jp-OutputArea-output .argus-report").filter(has_text="two ranks on two H200s").first
    report.wait_for(timeout=90_000)
    report.locator(".argus-tab", has_text="Timeline").click()
    report.locator(".argus-timeline .main-svg").first.wait_for(timeout=60_000)
    labels = [t.text_content() for t in report.locator(".argus-timeline g.ytick text").all()]
    for rank in (0, 1):
        assert f"rank {rank} \u00b7 MainThread" in labels
        assert f"rank {rank} \u00b7 GPU {rank} stream 17" in labels
    assert "2 ranks, each on rank 0\u2019s clock" in report.inner_text()
    report.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "7-two-ranks.png"))
    assert page.errors == []  # type: ignore[attr-defined]
