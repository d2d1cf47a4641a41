"""Views of reports: the report bundle and its renderer, plotly figures, tables, standalone HTML.

Everything here is imported lazily (never inside a measured process).  Entry points::

    from argus_lab import views
    views.show(report)                    # the interactive report (argus MIME bundle + HTML fallback)
    views.export(report, "report.html")   # one standalone HTML file, opens offline
    views.timeline_figure(report)         # plotly figure of the first run's timeline
    views.device_timeline(report)         # per-SM lanes of an instrumented launch (device regions)
    views.ambiguity(report)               # attribution classes per region (plotly)
    views.compare(report_a, report_b)     # two reports side by side (plotly + table)

The ipywidgets signal panel, which plans and runs measurements, is a face: :mod:`argus_lab.faces.panel`
(``%argus panel step``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    import plotly.graph_objects as go

    from argus_lab.report import Report
    from argus_lab.views.bundle import ReportView

OFFLINE_RENDERER = "argus_notebook"
NOTEBOOK_RENDERER = f"plotly_mimetype+{OFFLINE_RENDERER}"


def init_notebook() -> None:
    """Make plotly figures survive nbconvert: add the ``notebook`` renderer, with plotly.js inlined once.

    plotly's default notebook renderer writes only ``application/vnd.plotly.v1+json``, which nbconvert drops.  This
    adds plotly's ``notebook`` renderer without its MathJax CDN script (:mod:`argus_lab.views.offline`) and writes
    plotly.js into the current cell's output once, so exported pages draw figures and argus report timelines
    offline.  A renderer the user chose is left alone.
    """
    import plotly.io as pio

    from argus_lab.views.offline import OfflineNotebookRenderer

    if str(pio.renderers.default) in ("", "plotly_mimetype"):
        pio.renderers[OFFLINE_RENDERER] = OfflineNotebookRenderer()
        pio.renderers.default = NOTEBOOK_RENDERER
        # write plotly.js into this cell's output now, as plotly's own init_notebook_mode does
        pio.renderers._activate_pending_renderers()


def show(report: Report, title: str = "") -> ReportView:
    """The report as a displayable object (the argus MIME bundle, text and a self-contained HTML fallback)."""
    from argus_lab.views.bundle import ReportView

    return ReportView(report, title=title)


def export(report: Report, path: str | Path, title: str = "") -> Path:
    """Write ``report`` as one standalone, offline HTML file."""
    from argus_lab.views.html_file import export as write

    return write(report, path, title=title)


def timeline_figure(report: Report, run: int = 0) -> go.Figure:
    """A plotly figure of the timeline of the report's ``run``-th run that has instances or kernels."""
    from argus_lab.views.bundle import build
    from argus_lab.views.timeline import figure

    tls = build(report)["timelines"]
    if not tls:
        from argus_lab.errors import ArgusError

        msg = "the report's runs recorded no region instances or kernels; measure a workload with regions first"
        raise ArgusError(msg)
    tl = tls[min(run, len(tls) - 1)]
    return figure(tl, title=f"{tl['label']} {tl['run_id']}")


def device_timeline(report: Report, launch: int | None = None, run_id: str | None = None) -> go.Figure:
    """A plotly figure of one instrumented launch: one lane per SM, its device regions, and the tail.

    ``launch`` picks a launch of ``run_id`` (default: the report's first instrumented run); by default the first
    measured launch is drawn.
    """
    from argus_lab.errors import ArgusError
    from argus_lab.report.device_launches import launch_columns, launches
    from argus_lab.views import device

    refs = launches(report.store, report.run_ids)
    if run_id is not None:
        refs = [r for r in refs if r.run_id == run_id]
    if launch is not None:
        refs = [r for r in refs if r.launch == launch]
    if not refs:
        msg = (
            "no instrumented launch to draw: measure dev.* signals of a kernel with device markers first "
            "(argus_lab.measure(step, 'gpu.time,dev.*')), or pick a launch and run that the report has"
        )
        raise ArgusError(msg)
    ref = refs[0]
    cols = launch_columns(report.store, ref.run_id, ref.launch)
    return device.figure(device.launch_data(ref, cols, device.DEVICE_EXPORT_LIMITS))


def ambiguity(report: Report) -> go.Figure:
    """Stacked bars: for each region, how many values each attribution class holds."""
    from argus_lab.views.charts import ambiguity_figure

    return ambiguity_figure(report)


def compare(a: Report, b: Report, signal: str = "") -> Any:
    """Two reports side by side: median per region and signal, and the ratio b/a."""
    from argus_lab.views.comparison import CompareView

    return CompareView(a, b, signal)


__all__ = ["ambiguity", "compare", "device_timeline", "export", "init_notebook", "show", "timeline_figure"]
