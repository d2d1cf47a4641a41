"""plotly charts beside the timeline: attribution classes per region (the compare view is in ``comparison.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from argus_lab.views.escape import plotly_text
from argus_lab.views.palette import class_color

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from argus_lab.report import Report


def ambiguity_figure(report: Report) -> go.Figure:
    """Stacked bars per region path: values (metrics) and evidence items (kernels, samples) per attribution class."""
    from plotly.subplots import make_subplots

    from argus_lab.report import evidence

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
                marker_color=class_color(cls),
                row=1,
                col=col,
            )
            seen.add(cls)
    fig.update_layout(barmode="stack", height=340, margin={"l": 50, "r": 10, "t": 40, "b": 90})
    return fig
