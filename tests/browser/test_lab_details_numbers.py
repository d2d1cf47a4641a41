"""The panel's region drill-down (a main-area tab) on the recorded autotuned matmul, as shipped, in JupyterLab with
this checkout's extension: each value says how it combines, the kernels carry their ncu counters, the main
kernel-sequence group's kernels are listed and the autotuning instance's collapsed, warm-up counted apart.
Screenshots: $ARGUS_SCREENSHOTS (default /tmp/argus-ui)/details-*.png."""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from labkit import CHROMIUM, FLAGS, free_port, jupyter_env, need_browser, open_panel, shot, wait_for_server

pytestmark = pytest.mark.browser
DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    need_browser()
    base = tmp_path_factory.mktemp("lab")
    root = base / "root"
    root.mkdir()
    shutil.copy(DATA / "gpu" / "issue15" / "autotune.duckdb", root / "argus.duckdb")
    token, port = secrets.token_hex(16), free_port()
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--IdentityProvider.token={token}",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.root_dir={root}"]  # fmt: skip
    log_path = base / "lab.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=jupyter_env(base), cwd=root)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for_server(url, token, proc, log_path)
            yield {"url": url, "token": token}
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_the_region_details_say_how_values_combine_and_collapse_the_other_kernel_group(lab: dict[str, Any]) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            page = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
            page.set_default_timeout(60_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{lab['url']}/lab?token={lab['token']}")
            panel = open_panel(page)
            region = panel.locator(".jp-ArgusPanel-region[data-path='matmul']")
            region.wait_for(timeout=60_000)
            region.click()
            drill = page.locator(".jp-ArgusDetails .jp-ArgusPanel-drill[data-path='matmul']")
            drill.wait_for()
            text = drill.inner_text()
            assert "12 measured + 0 warm-up instance(s), warm-up not in the statistics" in text
            assert "other kernel sequence: instance 0: 1,274 kernels" in text
            summary = drill.locator("table.jp-ArgusPanel-summary")
            assert "combined as" in summary.inner_text() and "largest per kernel" in summary.inner_text()
            counters = drill.locator("table.jp-ArgusPanel-counters").inner_text()
            assert "16 per kernel" in counters  # launch__grid_size: a per-kernel fact, as its range
            kernels = drill.locator("table.jp-ArgusPanel-kernels").first
            assert "counters (ncu, by ordinal)" in kernels.inner_text()
            # the counter joined by ordinal, in bytes scaled as the report scales them (not 1.057e+6 byte)
            assert "dram__bytes_read.sum=1.06 MB" in kernels.inner_text()
            assert "e+" not in drill.inner_text()
            other = drill.locator("details.jp-ArgusPanel-otherGroups")
            assert other.count() == 1 and other.evaluate("d => d.open") is False  # collapsed by default
            drill.scroll_into_view_if_needed()
            shot(page, "details-numbers.png", full_page=True)
            other.locator("summary").click()
            assert other.locator("tbody tr").count() >= 2
            shot(page, "details-numbers-other-group.png", full_page=True)
            assert errors == []
        finally:
            browser.close()
