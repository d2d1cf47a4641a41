"""UI test: the Argus panel's export button downloads a run as a Perfetto trace (real jupyter lab, chromium).

The store in the lab's root holds one run imported from a SYNTHETIC torch.profiler trace (tests/kineto_synth.py);
the panel shows it, the run's detail has the export button, and the browser saves the file the server exported:
Chrome-trace JSON with the run's region slices and kernels, each kernel carrying its attribution class.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kineto_synth import KinetoTrace
from test_lab_panel import SHOTS, _open_panel, lab, page

__all__ = ["lab", "page"]

pytestmark = pytest.mark.browser
E = 1_795_938_194_000_000_000


def test_export_button_downloads_the_run_as_a_perfetto_trace(page: Any, lab: dict[str, Any], tmp_path: Path) -> None:
    from argus_lab.app.importing import import_trace

    trace = KinetoTrace()
    trace.annotation("step", E + 1_000, E + 90_000)
    trace.launch("gemm", E + 2_000, E + 10_000, E + 30_000)
    trace.launch("tiny", E + 3_000, E + 31_000, E + 31_400)
    src = trace.write(tmp_path / "t.json")
    result = import_trace(src, lab["root"] / "imported.duckdb")
    panel = _open_panel(page)
    panel.locator(".jp-ArgusPanel-refresh").click()
    # the panel shows the store the notebook's kernel writes; the imported store is picked from the store list
    panel.locator(".jp-ArgusPanel-store option[value='imported.duckdb']").wait_for(state="attached")
    panel.locator(".jp-ArgusPanel-store").select_option("imported.duckdb")
    run_row = panel.locator(".jp-ArgusPanel-run", has_text=result.run_id)
    run_row.wait_for()
    run_row.click()
    # the run's details open as a main-area tab next to the panel; the export button is in its header
    button = page.locator(".jp-ArgusDetails .jp-ArgusPanel-runDetail .jp-ArgusPanel-exportButton")
    button.wait_for()
    with page.expect_download() as info:
        button.click()
    download = info.value
    assert download.suggested_filename == f"argus-{result.run_id}.json"
    exported = json.loads(Path(download.path()).read_text())
    events = exported["traceEvents"]
    kernels = {e["name"]: e for e in events if e.get("cat") == "kernel"}
    assert set(kernels) == {"gemm", "tiny"}
    assert {e["args"]["class"] for e in kernels.values()} == {"exact"}
    assert kernels["tiny"]["dur"] == 0.4  # 400 ns kept
    assert [e["name"] for e in events if e.get("cat") == "user_annotation"] == ["step"]
    panel.locator(".jp-ArgusPanel-status", has_text="exported run").wait_for()
    page.screenshot(path=str(SHOTS / "7-export-button.png"))
    assert page.errors == []  # type: ignore[attr-defined]
