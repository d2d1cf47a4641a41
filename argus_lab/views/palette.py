"""The colours of every view, in one place: regions (host timeline lanes, device-region phases, the flame view) and
attribution classes.

The plotly figures of :mod:`argus_lab.views` read them here, and the report renderer
(``argus_lab/static/report-renderer.js``) reads them from the bundle it draws: each timeline and device timeline
carries its ``colors`` (one per entry of its ``regions``, from :func:`region_colors`), and the bundle's ``palette``
(:func:`palette_json`) holds the rest.  So a phase has one colour in ``views.device_timeline`` and in the report's
Device tab, and a region one colour in ``views.timeline_figure`` and in the report's Timeline tab.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

REGION_COLORS: tuple[str, ...] = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
"""Regions and device-region phases, by their index in a timeline's sorted ``regions`` (cycled past ten)."""

OUTSIDE_COLOR = "#999999"
"""Kernels outside every region."""

CLASS_COLORS: dict[str, str] = {
    "exact": "#2ca02c",
    "ordinal": "#1f77b4",
    "temporal": "#17becf",
    "ambiguous": "#ff7f0e",
    "mismatch": "#d62728",
    "unattributed": "#7f7f7f",
    "binary": "#9467bd",
}
"""Attribution classes (the ambiguity chart and the report's Attribution tab)."""

OTHER_CLASS_COLOR = "#bbbbbb"
"""A class without a colour of its own."""


def region_color(index: int) -> str:
    """The colour of the ``index``-th region of a timeline (``-1``: outside every region)."""
    return OUTSIDE_COLOR if index < 0 else REGION_COLORS[index % len(REGION_COLORS)]


def region_colors(regions: Sequence[str]) -> list[str]:
    """One colour per region name, in the given (sorted) order."""
    return [region_color(i) for i in range(len(regions))]


def class_color(name: str) -> str:
    """The colour of an attribution class."""
    return CLASS_COLORS.get(name, OTHER_CLASS_COLOR)


def palette_json() -> dict[str, Any]:
    """The palette as the report bundle carries it (``bundle["palette"]``)."""
    return {
        "regions": list(REGION_COLORS),
        "outside": OUTSIDE_COLOR,
        "classes": dict(CLASS_COLORS),
        "other_class": OTHER_CLASS_COLOR,
    }


__all__ = [
    "CLASS_COLORS",
    "OTHER_CLASS_COLOR",
    "OUTSIDE_COLOR",
    "REGION_COLORS",
    "class_color",
    "palette_json",
    "region_color",
    "region_colors",
]
