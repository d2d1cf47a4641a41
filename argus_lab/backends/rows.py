"""Shared helpers for building evidence rows in the backends.

A backend's ``metrics`` rows are raw evidence: a value measured of a region instance itself (host clocks), of a
kernel (``kernel_key``: ncu counters) or of a binary (compiler facts).  They carry no attribution: the store's
``attribution`` column is left empty, and the join alone decides how each piece of evidence is attributed.
"""

from __future__ import annotations

from typing import Any

METRIC_COLUMNS: tuple[str, ...] = (
    "run_id",
    "instance_id",
    "kernel_key",
    "signal",
    "value",
    "unit",
    "backend",
    "provenance_id",
)
"""Columns of the ``metrics`` store table."""


def empty_metrics() -> dict[str, list[Any]]:
    """Empty ``metrics`` columns to append to."""
    return {k: [] for k in METRIC_COLUMNS}
