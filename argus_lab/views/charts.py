"""plotly charts beside the timeline: attribution classes per region, and the comparison of two reports."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from argus_lab.units import fmt
from argus_lab.views.escape import html_text, plotly_text
from argus_lab.views.tables import html_table, text_table

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from argus_lab.report import Report

CLASS_COLORS = {
    "exact": "#2ca02c",
    "ordinal": "#1f77b4",
    "temporal": "#17becf",
    "ambiguous": "#ff7f0e",
    "mismatch": "#d62728",
    "unattributed": "#7f7f7f",
    "binary": "#9467bd",
}


def ambiguity_figure(report: Report) -> go.Figure:
    """Stacked bars per region path: values (metrics) and evidence items (kernels, samples) per attribution class."""
    from plotly.subplots import make_subplots

    from argus_lab.views import evidence

    ids = list(report.run_ids)
    sources = (
        ("values", evidence.attribution_summary(report.store, ids, 10_000).dicts() if ids else [], "n"),
        ("evidence items", evidence.evidence_classes(report.store, ids, 10_000).dicts() if ids else [], "n"),
    )
    fig = make_subplots(rows=1, cols=2, subplot_titles=[name for name, _, _ in sources])
    seen: set[str] = set()
    for col, (_, rows, key) in enumerate(sources, start=1):
        paths: list[str] = []
        counts: dict[tuple[str, str], int] = {}
        for r in rows:
            if r["path"] not in paths:
                paths.append(r["path"])
            counts[(r["path"], r["class"])] = counts.get((r["path"], r["class"]), 0) + int(r[key])
        for cls in sorted({c for _, c in counts}):
            fig.add_bar(
                name=plotly_text(cls or "(none)"),
                legendgroup=cls,
                showlegend=cls not in seen,
                x=[plotly_text(p) for p in paths],
                y=[counts.get((p, cls), 0) for p in paths],
                customdata=paths,
                marker_color=CLASS_COLORS.get(cls, "#bbbbbb"),
                row=1,
                col=col,
            )
            seen.add(cls)
    fig.update_layout(barmode="stack", height=340, margin={"l": 50, "r": 10, "t": 40, "b": 90})
    return fig


class CompareView:
    """Two reports side by side: per region path and signal, the medians and the ratio ``b / a``."""

    def __init__(self, a: Report, b: Report, signal: str = "") -> None:
        self.a, self.b = a, b
        left = {(r.path, r.signal): r for r in a.regions}
        right = {(r.path, r.signal): r for r in b.regions}
        keys = (
            [k for k in left if k in right] + [k for k in left if k not in right] + [k for k in right if k not in left]
        )
        self.rows: list[dict[str, Any]] = []
        for path, sig in keys:
            ra, rb = left.get((path, sig)), right.get((path, sig))
            ma = ra.median if ra is not None else math.nan
            mb = rb.median if rb is not None else math.nan
            unit = (ra or rb).unit if (ra or rb) is not None else ""  # type: ignore[union-attr]
            ratio = mb / ma if ma and not math.isnan(ma) and not math.isnan(mb) else math.nan
            self.rows.append({"path": path, "signal": sig, "unit": unit, "a": ma, "b": mb, "ratio": ratio})
        self.signal = signal or (self.rows[0]["signal"] if self.rows else "")

    def figure(self, signal: str = "") -> go.Figure:
        """Grouped bars of the medians of ``signal`` (default: the first common signal) per region."""
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
                hovertext=[f"{plotly_text(r['path'])}: {fmt(r[side], r['unit'])}" for r in rows],
                customdata=[r["path"] for r in rows],
            )
        unit = rows[0]["unit"] if rows else ""
        fig.update_layout(barmode="group", yaxis_title=f"median {plotly_text(sig)} ({unit})", height=320)
        return fig

    def _cells(self) -> tuple[list[str], list[list[Any]]]:
        cols = ["region", "signal", "A median", "B median", "B / A"]
        rows = [
            [r["path"], r["signal"], fmt(r["a"], r["unit"]), fmt(r["b"], r["unit"]), _ratio(r["ratio"])]
            for r in self.rows
        ]
        return cols, rows

    def text(self) -> str:
        """The comparison table as text."""
        cols, rows = self._cells()
        return text_table(cols, rows)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        cols, rows = self._cells()
        head = f"A = runs {', '.join(self.a.run_ids)}; B = runs {', '.join(self.b.run_ids)}"
        return {
            "text/plain": head + "\n" + self.text(),
            "text/html": f"<p>{html_text(head)}</p>" + html_table(cols, rows),
        }

    def __repr__(self) -> str:
        return self.text()


def _ratio(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.3f}x"
