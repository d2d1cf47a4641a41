"""The compare view of two reports: per region and signal the medians, the ratio and whether the change exceeds
run-to-run noise (:meth:`argus_lab.report.Report.diff`), and for every region a drill-down that opens on click.

The drill-down is plain HTML ``<details>`` elements: it opens in a live notebook, in an untrusted notebook, in
nbconvert's HTML export and in a browser without a kernel, and needs no script.  Every name is escaped.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from argus_lab.units import fmt
from argus_lab.views.escape import html_text, plotly_text
from argus_lab.views.tables import html_table, text_table

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from argus_lab.report import Report

MAX_DRILL_ROWS = 30
"""Kernels and counters listed per region and side in the drill-down (the rest stays in the store)."""


class CompareView:
    """Two reports side by side (A = base, B = the other one).

    ``rows`` holds one dict per region path and signal: ``path``, ``signal``, ``unit``, ``a``, ``b`` (medians),
    ``ratio`` (``b / a``), ``verdict`` (``higher``, ``lower``, ``same``, ``too few values``, ``new``, ``gone``,
    ``not measured in A``, ``not measured in B``)
    and ``significant`` (the change exceeds run-to-run noise by the rule of :mod:`argus_lab.report.diff`).
    """

    def __init__(self, a: Report, b: Report, signal: str = "") -> None:
        self.a, self.b = a, b
        self.diff = a.diff(b)
        self.rows: list[dict[str, Any]] = []
        for d in self.diff.rows:
            ma = math.nan if d.base_median is None else d.base_median
            mb = math.nan if d.other_median is None else d.other_median
            ratio = mb / ma if ma and not math.isnan(ma) and not math.isnan(mb) else math.nan
            self.rows.append(
                {
                    "path": d.path,
                    "signal": d.signal,
                    "unit": d.unit,
                    "a": ma,
                    "b": mb,
                    "ratio": ratio,
                    "verdict": d.verdict,
                    "significant": d.significant or d.verdict in ("new", "gone"),
                }
            )
        self.signal = signal or (self.rows[0]["signal"] if self.rows else "")

    # -- figure -----------------------------------------------------------------------------------
    def figure(self, signal: str = "") -> go.Figure:
        """Grouped bars of the medians of ``signal`` (default: the first signal) per region."""
        import plotly.graph_objects as go

        sig = signal or self.signal
        rows = [r for r in self.rows if r["signal"] == sig]
        x = [plotly_text(r["path"]) for r in rows]
        fig = go.Figure()
        for side, name in (("a", "A"), ("b", "B")):
            fig.add_bar(
                name=f"{name}: {len(getattr(self, side).run_ids)} run(s)",
                x=x,
                y=[r[side] for r in rows],
                hovertext=[f"{plotly_text(r['path'])}: {fmt(r[side], r['unit'])} ({r['verdict']})" for r in rows],
                customdata=[r["path"] for r in rows],
            )
        unit = rows[0]["unit"] if rows else ""
        fig.update_layout(barmode="group", yaxis_title=f"median {plotly_text(sig)} ({unit})", height=320)
        return fig

    # -- tables -----------------------------------------------------------------------------------
    def _cells(self) -> tuple[list[str], list[list[Any]]]:
        cols = ["", "region", "signal", "A median", "B median", "B / A", "verdict"]
        rows = [
            [
                "*" if r["significant"] else "",
                r["path"],
                r["signal"],
                fmt(r["a"], r["unit"]),
                fmt(r["b"], r["unit"]),
                _ratio(r["ratio"]),
                r["verdict"],
            ]
            for r in self.rows
        ]
        return cols, rows

    def _head(self) -> str:
        return (
            f"A = runs {', '.join(self.a.run_ids)}; B = runs {', '.join(self.b.run_ids)}\n"
            f"* = the change exceeds run-to-run noise ({self.diff.rule})"
        )

    def text(self) -> str:
        """The comparison table as text."""
        cols, rows = self._cells()
        return self._head() + "\n" + text_table(cols, rows)

    def __repr__(self) -> str:
        return self.text()

    # -- drill-down -------------------------------------------------------------------------------
    def drilldown_html(self, path: str) -> str:
        """What each report holds about region ``path``: signals, kernels, counters, compiler facts, runs."""
        sides = [_side_html(report, path, name) for name, report in (("A", self.a), ("B", self.b))]
        return '<div class="argus-compare-sides">' + "".join(sides) + "</div>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        cols, rows = self._cells()
        paths = list(dict.fromkeys(r["path"] for r in self.rows))
        details = "".join(
            f'<details class="argus-drill"><summary>{html_text(p)}: signals per instance, kernels, counters, '
            f"compiler facts, runs</summary>{self.drilldown_html(p)}</details>"
            for p in paths
        )
        head = "<br>".join(html_text(line) for line in self._head().splitlines())
        return {
            "text/plain": self.text(),
            "text/html": f"<div class='argus-compare'><p>{head}</p>{html_table(cols, rows)}"
            f"<p>Click a region to drill down:</p>{details}</div>",
        }


def _side_html(report: Report, path: str, name: str) -> str:
    regions = [r for r in report.regions if r.path == path]
    kernels = report.path_kernels(path, MAX_DRILL_ROWS)  # read within bounds: a long run has millions
    counters = [c for c in report.counters if c.path == path][:MAX_DRILL_ROWS]
    facts = [f for f in report.compiler if path in (f.paths or "").split(", ")]
    runs = {run for r in regions for run in r.runs.split(",") if run} | {k.run_id for k in kernels}
    parts = [f"<h4>{html_text(name)}</h4>"]
    parts.append(
        html_table(
            ["signal", "instances", "median", "p25", "p75", "unit"],
            [
                [r.signal, r.instances, fmt(r.median, r.unit), fmt(r.p25, r.unit), fmt(r.p75, r.unit), r.unit]
                for r in regions
            ],
        )
        if regions
        else "<p>no instances of this region in these runs</p>"
    )
    if kernels:
        parts.append(
            html_table(
                ["kernel", "ordinal", "launches", "median", "registers", "class"],
                [
                    [k.display_name or k.name, k.ordinal, k.launches, fmt(k.median_ns, "ns"), k.registers, k.classes]
                    for k in kernels
                ],
            )
        )
    if counters:
        parts.append(
            html_table(
                ["counter", "median", "settings"], [[c.signal, fmt(c.median, c.unit), c.settings] for c in counters]
            )
        )
    if facts:
        parts.append(
            html_table(
                ["kernel", "source", "registers", "spill words", "shared", "not available"],
                [[f.name, f.source, f.registers, f.spill_words, f.shared_bytes, f.unavailable] for f in facts],
            )
        )
    run_rows = [
        [r.run_id, r.status, ",".join(r.backends), r.command or r.workload] for r in report.runs if r.run_id in runs
    ]
    if run_rows:
        parts.append(html_table(["run", "status", "backends", "command"], run_rows))
    return '<div class="argus-compare-side">' + "".join(parts) + "</div>"


def _ratio(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.3f}x"
