"""Escaping untrusted text (region and kernel names, causes, commands) for HTML, plotly labels and inline JSON."""

from __future__ import annotations

import html
import json
import math
from typing import Any


def html_text(value: object) -> str:
    """``value`` as text safe inside an HTML element or a quoted attribute."""
    return html.escape(str(value), quote=True)


def plotly_text(value: object) -> str:
    """``value`` for a plotly label or hover text: plotly reads a few HTML-like tags there, so escape them."""
    return html.escape(str(value), quote=False)


def json_for_script(data: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&`` or line separators.

    The replacements are JSON string escapes, so ``JSON.parse`` returns the original text.
    """
    try:
        text = json.dumps(data, separators=(",", ":"), allow_nan=False, default=_item)
    except ValueError:  # NaN or infinity somewhere: clean the whole value (slower, rare)
        text = json.dumps(jsonable(data), separators=(",", ":"), allow_nan=False, default=_item)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _item(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    msg = f"cannot put a {type(value).__name__} into a report bundle"
    raise TypeError(msg)


def jsonable(value: Any) -> Any:
    """``value`` with NaN and infinities turned into ``None`` and tuples into lists (JSON.parse rejects NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):  # numpy scalars
        return jsonable(value.item())
    return value
