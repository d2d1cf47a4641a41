"""Arrow columns as numpy arrays, the way the join's array passes read them, and Arrow tables handed to its SQL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    import duckdb


def ints(col: pa.ChunkedArray | pa.Array, fill: int = 0) -> np.ndarray:
    """An integer column as int64 (NULL as ``fill``; unsigned values keep their bits)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if arr.null_count:
        arr = arr.fill_null(fill)
    return arr.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def floats(col: pa.ChunkedArray | pa.Array, fill: float = 0.0) -> np.ndarray:
    """A numeric column as float64 (NULL as ``fill``)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if arr.null_count:
        arr = arr.fill_null(fill)
    return arr.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)


def changes(*keys: np.ndarray) -> np.ndarray:
    """Over rows sorted by ``keys``: True where a row starts a new group (any key differs from the row before, and
    the first row); empty for no rows."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=bool)
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for k in keys:
        new[1:] |= k[1:] != k[:-1]
    return new


def run_codes(col: pa.ChunkedArray, runs: list[str]) -> np.ndarray:
    """The position of each run id in ``runs`` (-1: not there)."""
    codes = pc.index_in(col.combine_chunks(), value_set=pa.array(runs, type=pa.string()))
    return codes.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


@contextmanager
def registered(con: duckdb.DuckDBPyConnection, **tables: pa.Table) -> Iterator[None]:
    """Arrow tables visible to the connection's SQL under the given names while the block runs."""
    for name, table in tables.items():
        con.register(name, table)
    try:
        yield
    finally:
        for name in tables:
            con.unregister(name)


__all__ = ["changes", "floats", "ints", "registered", "run_codes"]
