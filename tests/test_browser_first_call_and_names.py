"""Issue 15 in the exported report, in headless Debian chromium: first-call heterogeneity is shown, kernel names are
demangled for reading (the recorded name on hover), instance groups appear in a region's drill-down.

SYNTHETIC evidence (tests/join_synth.py): four ``matmul`` instances; the first launches six benchmark kernels before
the one every instance launches, a C++ kernel whose recorded (mangled) name is a real one from the H200.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from join_synth import Inst, Kern, SynthRun, write
from test_browser_report import CHROMIUM, InBrowser, Page, in_browser  # noqa: F401  (fixture)

from argus_lab import join
from argus_lab.report import Report
from argus_lab.views.html_file import export

FILL = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIiEESt5arrayIPcLm1EEEEviT0_T1_"
SHOWN = "at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<…>, std::array<…> >"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"needs Debian's chromium at {CHROMIUM}"),
]


def _store(tmp_path: Path) -> Report:
    ins, ks = [], []
    for k in range(4):
        b = k * 1_000_000
        ins.append(Inst(k + 1, "matmul", b, b + 500_000, rep=k, index=k))
        names = ["bench_kernel"] * 6 + [FILL] if k == 0 else [FILL]
        ks += [Kern(100 * (k + 1) + j, n, b + 1_000 + j * 10_000, b + 9_000 + j * 10_000, k + 1, api=b + 500)
               for j, n in enumerate(names)]  # fmt: skip
    from argus_lab.store import Store

    st = Store(tmp_path / "h.duckdb")
    write(st, [SynthRun("t", instances=ins, kernels=ks, repetitions=4)])
    join.attribute_request(st, ["t"])
    return Report(st, ["t"])


def test_heterogeneity_and_readable_names_in_the_exported_report(in_browser: InBrowser, tmp_path: Path) -> None:  # noqa: F811
    report = _store(tmp_path)
    (sentence,) = report.heterogeneity()
    out = export(report, tmp_path / "report.html")
    html = out.read_text()
    assert FILL in html  # the recorded name travels with the rows (shown on hover)

    def body(browser: Any) -> None:
        pg = Page(browser)
        page = pg.page
        page.goto(out.as_uri())
        assert page.get_by_text(sentence).count() == 1  # under the summary, before any tab
        page.get_by_role("button", name="Counters").click()  # kernels by region, by ordinal
        cell = page.locator("td", has_text=SHOWN).first
        cell.wait_for(timeout=5_000)
        assert FILL in (cell.get_attribute("title") or "")
        assert page.locator("td", has_text=FILL).count() == 0  # the mangled name is never a cell's text
        page.get_by_role("button", name="Regions").click()
        page.get_by_text("matmul", exact=True).first.click()
        groups = page.locator("h4", has_text="instance groups")
        groups.wait_for(timeout=5_000)
        assert page.locator("td", has_text="a different kernel sequence").count() >= 1
        page.screenshot(path="/tmp/argus_browser_first_call.png", full_page=True)
        pg.check_clean()
        page.close()

    in_browser(body)
