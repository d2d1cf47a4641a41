"""A large run's exported page in headless chromium (network blocked): the page embeds its data and plotly.js
gzipped (it stays small) and inflates them offline; more host region instances than the renderer draws one by one
are aggregated per pixel-wide bin, and zooming in draws each instance again, clickable into its drill-down.

Input: SYNTHETIC kernels and instances (3,000 instances of ``decode/layer/{attn,mlp}``, 60,000 kernels)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_browser_report import CHROMIUM, InBrowser, Page, in_browser

from argus_lab import join
from argus_lab.report import Report
from argus_lab.store import Store
from argus_lab.views.html_file import export

__all__ = ["in_browser"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"needs Debian's chromium at {CHROMIUM}"),
]
T0 = 1_764_000_000_000_000_000


def big_store(path: Path, n_inst: int = 3_000, per: int = 20) -> Store:
    """SYNTHETIC: ``n_inst`` leaf instances on one thread, ``per`` back-to-back kernels each, on 2 streams."""
    rng = np.random.default_rng(0)
    n = n_inst * per
    dur = rng.integers(2_000, 20_000, n)
    start = T0 + np.cumsum(dur + 500) - dur
    i_start = start[::per] - 1_000
    i_end = np.append(start[per::per], start[-1] + dur[-1]) + 500
    st = Store(path)
    st.write(
        {
            "requests": {"request_id": ["q"], "session_id": ["s"], "created_ns": [T0], "text": ["big"]},
            "runs": {"run_id": ["r-big"], "request_id": ["q"], "plan_index": [0], "status": ["ok"],
                     "backends": [["cupti"]]},
            "region_instances": {
                "run_id": ["r-big"] * n_inst, "instance_id": list(range(1, n_inst + 1)),
                "path": ["decode/layer/attn" if i % 2 else "decode/layer/mlp" for i in range(n_inst)],
                "instance_index": [i // 2 for i in range(n_inst)], "pid": [1] * n_inst, "thread_id": [7] * n_inst,
                "start_ns": i_start.tolist(), "end_ns": i_end.tolist(), "repetition": [0] * n_inst,
                "warmup": [False] * n_inst, "error": [""] * n_inst,
            },
            "kernels": {
                "run_id": ["r-big"] * n, "instance_id": (np.arange(n) // per + 1).tolist(),
                "name": ["k"] * n, "start_ns": start.tolist(), "end_ns": (start + dur).tolist(),
                "device_id": [0] * n, "stream_id": (7 + np.arange(n) % 2).tolist(),
                "kernel_key": [f"0/1/{i}/0" for i in range(n)], "correlation_id": list(range(n)),
            },
        }
    )  # fmt: skip
    join.attribute_request(st, ["r-big"])
    return st


def test_large_page_is_compressed_aggregates_host_instances_and_refines_on_zoom(
    in_browser: InBrowser, tmp_path: Path
) -> None:
    out = export(Report(big_store(tmp_path / "big.duckdb"), ["r-big"]), tmp_path / "big.html")
    page_text = out.read_text()
    assert 'id="argus-data-gz"' in page_text and 'id="argus-data"' not in page_text
    assert "function(){var Plotly" not in page_text  # plotly.js is embedded gzipped, not as text

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(out.as_uri())
        page.get_by_role("button", name="Timeline").click()
        info = page.locator(".argus-timeline").locator("xpath=preceding-sibling::div[1]")
        page.locator(".argus-timeline .main-svg").first.wait_for(timeout=30_000)
        text = info.inner_text()
        assert re.search(r"3000 region instances in view, aggregated into bins of", text), text
        # zoom to 1/200 of the run: few instances in view, each drawn, and a click drills into its region
        zoom = (
            "() => { const d = document.querySelector('.argus-timeline'); const r = d.layout.xaxis.range;"
            " const a = r[0] + 0.5 * (r[1] - r[0]);"
            " return Plotly.relayout(d, {'xaxis.range': [a, a + (r[1] - r[0]) / 200]}); }"
        )
        page.evaluate(zoom)
        page.wait_for_function("(b) => document.querySelector('.argus-timeline')"
                               ".previousElementSibling.textContent !== b", arg=text)  # fmt: skip
        assert "region instances in view, aggregated" not in info.inner_text()
        hover = page.evaluate(
            "() => document.querySelector('.argus-timeline').data.map(t => t.hovertext).flat()"
            ".filter(h => h.includes('host clock') || h.includes('region instance(s)'))"
        )
        assert hover and all(re.match(r"decode/layer/(attn|mlp) #\d+<br>instance \d+", h) for h in hover), hover[:3]
        page.screenshot(path="/tmp/argus_browser_big_timeline.png", full_page=True)
        pg.check_clean()
        page.close()

    in_browser(body)
