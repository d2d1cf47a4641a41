"""Formatting values with their units for tables and text reports."""

from __future__ import annotations

import math

_TIME = (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0))
_BYTES = (("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("B", 1.0))
_LARGE = (("T", 1e12), ("G", 1e9), ("M", 1e6))


def fmt(value: float | None, unit: str) -> str:
    """``value`` in a readable scale of ``unit`` (``ns`` and ``byte`` are rescaled; counts and other numbers of a
    million or more get an SI prefix: ``1.06 M``, never ``1.057e+06``).  The JupyterLab panel (extension
    ``model.ts``, ``formatValue``) and the HTML report (``report-renderer.js``, ``fmt``) print values the same way."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    table = _TIME if unit == "ns" else _BYTES if unit == "byte" else None
    if table is None:
        suffix = f" {unit}" if unit not in ("count", "") else ""
        if not math.isfinite(value) or abs(value) < 1e6:  # four significant digits, never 1.235e+05
            return f"{float(f'{value:.4g}'):g}{suffix}"
        name, scale = next((n, s) for n, s in _LARGE if abs(value) >= s)
        return f"{value / scale:.3g} {name}{suffix}"
    for name, scale in table:
        if abs(value) >= scale or scale == 1.0:
            return f"{value / scale:.3g} {name}"
    return f"{value} {unit}"


def percent(fraction: float | None) -> str:
    """A fraction as a percentage people read: ``55%``, ``1.3%``, ``0.2%`` (two significant digits below 10 %)."""
    if fraction is None or (isinstance(fraction, float) and not math.isfinite(fraction)):
        return "-"
    value = 100 * fraction
    return f"{value:.0f}%" if abs(value) >= 10 or value == 0 else f"{value:.2g}%"


def times(ratio: float | None) -> str:
    """A ratio such as a speed-up: ``x1.22`` (three decimals below x10)."""
    if ratio is None or (isinstance(ratio, float) and not math.isfinite(ratio)):
        return "-"
    return f"x{ratio:.3f}" if abs(ratio) < 10 else f"x{ratio:.1f}"
