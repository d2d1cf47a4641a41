"""Shared helpers for building evidence rows in the backends."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

METRIC_COLUMNS: tuple[str, ...] = (
    "run_id",
    "instance_id",
    "kernel_key",
    "signal",
    "value",
    "unit",
    "attribution",
    "backend",
    "provenance_id",
)
"""Columns of the ``metrics`` store table."""


def empty_metrics() -> dict[str, list[Any]]:
    """Empty ``metrics`` columns to append to."""
    return {k: [] for k in METRIC_COLUMNS}


JSON_COLUMNS = frozenset({"settings", "clocks", "spec", "env", "versions"})
"""Columns stored as JSON text; list columns ``backends`` and ``signals`` stay lists."""


def jsonable_columns(data: Mapping[str, Sequence[Any]]) -> dict[str, Sequence[Any]]:
    """Columns ready for Arrow: dicts and lists in JSON columns (or in any column led by one) become JSON text.

    Merged evidence can mix dicts and JSON text in one column (one collector gives a dict, another text), so each
    value is converted on its own and text is left as it is.
    """
    out: dict[str, Sequence[Any]] = {}
    for key, col in data.items():
        if col and (isinstance(col[0], dict | list) or key in JSON_COLUMNS) and key not in {"backends", "signals"}:
            out[key] = [json.dumps(v) if isinstance(v, dict | list) else v for v in col]
        else:
            out[key] = col
    return out
