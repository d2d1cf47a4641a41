"""Shared helpers for building evidence rows in the backends."""

from __future__ import annotations

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
