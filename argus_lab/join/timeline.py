"""The innermost-instance timeline of every thread, as numpy arrays: what is innermost on a thread at any moment.

A thread's timeline holds one event per region entry (the entered instance becomes innermost; key ``t * 2 + 1``) and
one per exit (its parent becomes innermost again, 0 for none; key ``t * 2``): the rule of
:mod:`argus_lab.model.innermost`, which the importers apply in SQL.  :meth:`Timeline.of` puts them in order
per thread (run, rank, thread id): by key, so that at one nanosecond an exit comes before an entry, and within one
key the entries from the outermost in and the exits from the innermost out (ids grow inwards: an instance takes its
id when it is entered), so that the last event of a key says what is innermost after it.  Used to place kernels
launched without an instance id (:mod:`argus_lab.join.candidates`) and to cut sample windows
(:mod:`argus_lab.join.windows`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from argus_lab.join.arrays import changes, ints, run_codes
from argus_lab.model.innermost import entry_key, exit_key

_NEVER = 2**61
"""The end of an instance the run never saw end (later than any clock reading)."""


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
    def of(cls, rows: pa.Table, runs: list[str]) -> Timeline:
        """The events of the instances ``rows`` (``run_id``, ``rank``, ``thread_id``, ``start_ns``, ``end_ns``,
        ``instance_id``, ``parent_id``: the join's ``_j_inst``), runs numbered by their position in ``runs``."""
        n = rows.num_rows
        run = run_codes(rows.column("run_id"), runs)
        rank = ints(rows.column("rank"))
        tid = ints(rows.column("thread_id"))
        start, end = ints(rows.column("start_ns")), ints(rows.column("end_ns"), _NEVER)
        inner = np.r_[ints(rows.column("instance_id")), ints(rows.column("parent_id"))]
        row = np.r_[np.arange(n), np.arange(n)]
        entry = np.r_[np.ones(n, dtype=bool), np.zeros(n, dtype=bool)]
        key = np.r_[entry_key(start), exit_key(end)]
        order = np.lexsort((np.where(entry, inner, -inner), key, tid[row], rank[row], run[row]))
        row, key, inner, entry = row[order], key[order], inner[order], entry[order]
        e_run, e_rank, e_tid = run[row], rank[row], tid[row]
        new = changes(e_run, e_rank, e_tid)
        starts = np.r_[np.flatnonzero(new), len(row)]
        thread_id = rows.column("thread_id").combine_chunks().take(pa.array(row, type=pa.int64()))
        t = np.where(entry, start[row], end[row])
        return cls(e_run, e_rank, thread_id, t, key, inner, np.cumsum(new) - 1, starts)

    def segment_ends(self) -> np.ndarray:
        """Where each event's stretch ends: the next event of its thread (the last one never ends)."""
        last = np.zeros(len(self.t), dtype=bool)
        last[self.starts[1:] - 1] = True
        return np.where(last, np.iinfo(np.int64).max, np.r_[self.t[1:], 0])


__all__ = ["Timeline"]
