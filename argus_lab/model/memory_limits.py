"""DuckDB memory limits as text (the store's writes and the join set a limit for a while, then restore the
connection's own)."""

from __future__ import annotations

import math

_SMALLER_UNIT = {"TiB": "GiB", "GiB": "MiB", "MiB": "KiB", "KiB": "B"}


def same_memory_limit(printed: str) -> str:
    """A memory limit that DuckDB prints back as ``printed`` (``'18.8 GiB'``): DuckDB prints a limit truncated to a
    tenth of a unit, so setting the printed text itself gives a smaller limit (18.7 GiB) each time; the same amount
    counted up in the next smaller unit does not."""
    amount, _, unit = printed.partition(" ")
    try:
        value = float(amount)
    except ValueError:
        return printed
    smaller = _SMALLER_UNIT.get(unit)
    if smaller is None:
        return printed
    return f"{math.ceil(value * 1024)}{'B' if smaller == 'B' else ' ' + smaller}"
