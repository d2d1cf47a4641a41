"""The innermost-instance timeline of every thread, as numpy arrays: what is innermost on a thread at any moment.

``_j_seg`` (:data:`argus_lab.join.attribution_sql.TIMELINE`) holds one event per region entry (the entered instance
becomes innermost; key ``t * 2 + 1``) and one per exit (its parent becomes innermost again, 0 for none; key ``t * 2``).
:meth:`Timeline.read` reads them in order per thread (run, rank, thread id): by key, so that at one nanosecond an exit
comes before an entry, and within one key the entries from the outermost in and the exits from the innermost out
(ids grow inwards: an instance takes its id when it is entered), so that the last event of a key says what is
innermost after it.  Used to place kernels launched without an instance id (:mod:`argus_lab.join.candidates`) and to
cut sample windows (:mod:`argus_lab.join.windows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    import duckdb

EVENTS = """
SELECT s.run_id, s.rank, s.thread_id, s.t, s.key, s.inner_id
FROM _j_seg s
ORDER BY s.run_id, s.rank, s.thread_id, s.key, CASE WHEN s.key % 2 = 1 THEN s.inner_id ELSE -s.inner_id END
"""


@dataclass(frozen=True)
class Timeline:
    """Every thread's events in order (see the module docstring); ``thread`` numbers the threads 0.., ``starts``
    holds where each thread's events begin (and their count at the end)."""

    run: np.ndarray
    rank: np.ndarray
    thread_id: pa.Array
    t: np.ndarray
    key: np.ndarray
    inner: np.ndarray
    thread: np.ndarray
    starts: np.ndarray

    @classmethod
    def read(cls, con: duckdb.DuckDBPyConnection, runs: list[str]) -> Timeline:
        """The events of ``_j_seg``, runs numbered by their position in ``runs``."""
        tbl = con.sql(EVENTS).to_arrow_table()
        run = run_codes(tbl.column("run_id"), runs)
        rank = ints(tbl.column("rank"))
        tid = tbl.column("thread_id").combine_chunks()
        tid_i = ints(tbl.column("thread_id"))
        new = np.r_[True, (run[1:] != run[:-1]) | (rank[1:] != rank[:-1]) | (tid_i[1:] != tid_i[:-1])]
        starts = np.r_[np.flatnonzero(new), len(run)] if len(run) else np.zeros(1, dtype=np.int64)
        return cls(
            run, rank, tid, ints(tbl.column("t")), ints(tbl.column("key")), ints(tbl.column("inner_id")),
            np.cumsum(new) - 1, starts,
        )  # fmt: skip

    def segment_ends(self) -> np.ndarray:
        """Where each event's stretch ends: the next event of its thread (the last one never ends)."""
        last = np.zeros(len(self.t), dtype=bool)
        last[self.starts[1:] - 1] = True
        return np.where(last, np.iinfo(np.int64).max, np.r_[self.t[1:], 0])


def run_codes(col: pa.ChunkedArray, runs: list[str]) -> np.ndarray:
    """The position of each run id in ``runs`` (-1: not there)."""
    codes = pc.index_in(col.combine_chunks(), value_set=pa.array(runs, type=pa.string()))
    return codes.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


def ints(col: pa.ChunkedArray | pa.Array, fill: int = 0) -> np.ndarray:
    """An integer column as int64 (NULL as ``fill``; unsigned values keep their bits)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if arr.null_count:
        arr = arr.fill_null(fill)
    return arr.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


__all__ = ["EVENTS", "Timeline", "ints", "run_codes"]
