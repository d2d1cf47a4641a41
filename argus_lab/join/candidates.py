"""GPU records launched without the id of a recorded instance, and the instances that could have launched them.

A record's candidates are the innermost open instance of every thread *of the launching rank* at launch time (its
launch API call's start, else its own start): another rank is another process on its own clock, so its instances
are never candidates.  CUPTI reports the low 32 bits of the launching pthread id, the recorder the whole id, so
threads are compared on 32 bits.  Such records are a few per cent of a run (autograd's backward thread, launches
outside every region); they are read from the kernels table on their own, and each one is looked up in every
thread's timeline (:class:`argus_lab.join.timeline.Timeline`) by binary search.

Gives ``_j_kc``: one row per (record, candidate) -- or one row without a candidate -- with ``n_cand`` (how many
threads had an instance open) and ``n_same`` (how many of those are the launching thread), from which
:data:`argus_lab.join.attribution_sql.KERNEL_OTHER` decides ``temporal``, ``ambiguous`` or ``unattributed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from argus_lab.join.arrays import ints, run_codes
from argus_lab.join.timeline import Timeline

if TYPE_CHECKING:
    import duckdb

# the records of the join's runs whose instance id (if any) names no instance the run recorded
UNCARRIED = """
SELECT k.run_id, k.kind, k.key, k.carried, k.thread_id, k.start_ns, k.end_ns, k.bytes, k.rank, k.q
FROM _j_k k
WHERE k.row IN (
    SELECT k.rowid FROM kernels k ANTI JOIN _j_node n ON n.run_id = k.run_id AND n.instance_id = k.instance_id
    WHERE k.run_id IN (SELECT run_id FROM _j_runs)
)
"""


_LOW32 = np.int64(0xFFFFFFFF)


def derive(con: duckdb.DuckDBPyConnection, timeline: Timeline, runs: list[str]) -> pa.Table:
    """The rows of ``_j_kc`` (see the module docstring); runs numbered by their position in ``runs``."""
    un = con.sql(UNCARRIED).to_arrow_table()
    run = run_codes(un.column("run_id"), runs)
    rank = ints(un.column("rank"))
    qk = ints(un.column("q")) * 2 + 1
    found_k: list[np.ndarray] = []
    found_e: list[np.ndarray] = []
    for g in range(len(timeline.starts) - 1):
        lo, hi = int(timeline.starts[g]), int(timeline.starts[g + 1])
        mine = np.flatnonzero((run == timeline.run[lo]) & (rank == timeline.rank[lo]))
        if len(mine) == 0:
            continue
        at = lo + np.searchsorted(timeline.key[lo:hi], qk[mine], side="right") - 1  # the last event at or before
        ok = at >= lo
        ok[ok] = timeline.inner[at[ok]] != 0
        found_k.append(mine[ok])
        found_e.append(at[ok])
    kern = np.concatenate(found_k) if found_k else np.zeros(0, dtype=np.int64)
    event = np.concatenate(found_e) if found_e else np.zeros(0, dtype=np.int64)
    same = (ints(un.column("thread_id"))[kern] & _LOW32) == (ints(timeline.thread_id)[event] & _LOW32)
    n_cand = np.bincount(kern, minlength=un.num_rows)
    n_same = np.bincount(kern[same], minlength=un.num_rows)
    alone = np.flatnonzero(n_cand == 0)
    rows = np.r_[kern, alone]
    at = np.r_[event, np.zeros(len(alone), dtype=np.int64)]
    none = np.r_[np.zeros(len(kern), dtype=bool), np.ones(len(alone), dtype=bool)]
    tid_type = timeline.thread_id.type
    tid = timeline.thread_id.to_numpy(zero_copy_only=False) if len(timeline.t) else np.zeros(1, dtype=np.uint64)
    inner = timeline.inner if len(timeline.t) else np.zeros(1, dtype=np.int64)
    take = pa.array(rows, type=pa.int64())
    table = pa.table(
        {
            **{c: un.column(c).take(take) for c in ("run_id", "kind", "key", "carried", "thread_id")},
            **{c: un.column(c).take(take) for c in ("start_ns", "end_ns", "bytes")},
            "r_tid": pa.array(tid[at], type=tid_type, mask=none),
            "inner_id": pa.array(inner[at], type=pa.int64(), mask=none),
            "n_cand": pa.array(n_cand[rows], type=pa.int64()),
            "n_same": pa.array(n_same[rows], type=pa.int64()),
        }
    )
    return table


__all__ = ["UNCARRIED", "derive"]
