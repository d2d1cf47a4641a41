"""Escaping untrusted text (region and kernel names, causes, commands) for HTML, plotly labels and inline JSON."""

from __future__ import annotations

import html
import json
import re
from typing import Any

from argus_lab.report.json import jsonable

BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""The bidirectional-text controls (embeddings, overrides, isolates, marks): one in a name (U+202E) would reverse
the text shown after it.  Every view shows them as a visible escape instead (:func:`bidi_safe`), as the terminal
does (``report.text.escape``)."""
_SHOWN_BIDI = re.compile(r"\\u(061c|200e|200f|202[a-e]|206[6-9])")


def bidi_safe(text: str) -> str:
    """``text`` with each bidi control shown as its escape (U+202E as the six characters ``\\u202e``)."""
    return BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if BIDI.search(text) else text


def bidi_restored(text: str) -> str:
    """The text :func:`bidi_safe` was given (a name the panel shows, sent back to the server to look it up)."""
    return _SHOWN_BIDI.sub(lambda m: chr(int(m.group(1), 16)), text) if "\\u" in text else text


def bidi_safe_json(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings) with :func:`bidi_safe` applied to every string and key."""
    if isinstance(value, str):
        return bidi_safe(value)
    if isinstance(value, dict):
        return {bidi_safe(k) if isinstance(k, str) else k: bidi_safe_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [bidi_safe_json(v) for v in value]
    return value


def html_text(value: object) -> str:
    """``value`` as text safe inside an HTML element or a quoted attribute (bidi controls shown as escapes)."""
    return html.escape(bidi_safe(str(value)), quote=True)


def plotly_text(value: object) -> str:
    """``value`` for a plotly label or hover text: plotly reads a few HTML-like tags there, so escape them."""
    return html.escape(bidi_safe(str(value)), quote=False)


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
