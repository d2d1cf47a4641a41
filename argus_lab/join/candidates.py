"""GPU records launched without the id of a recorded instance, and the instances that could have launched them.

A record's candidates are the innermost open instance of every thread *of the launching rank* at launch time (its
launch API call's start, else its own start): another rank is another process on its own clock, so its instances
are never candidates.  CUPTI reports the low 32 bits of the launching pthread id, the recorder the whole id, so
threads are compared on 32 bits.  Such records are a few per cent of a run (autograd's backward thread, side
threads, launches outside every region); they are read from the kernels table on their own, and each one is looked
up in every thread's timeline (:class:`argus_lab.join.timeline.Timeline`) by binary search.

Which candidates count depends on what is known of the launching thread (the record's ``thread_id``; 0 when the
launch identity could not tell, as with boundary probes), one *rule* per record:

* ``unknown`` (launching thread not known): every thread's innermost instance is a candidate;
* ``own``: the launching thread had an instance open: that one only (it launched there, but carried no id);
* ``other``: the launching thread had no instance open and the run named it (``threads``) as not autograd's: no
  candidate.  A thread with no region of its own (a data-loader, a side stream's worker) is never attributed to
  another thread's region; the instances open elsewhere are named in the reason;
* ``unnamed``: the launching thread had no instance open and the run did not name it (CUPTI's API records, a trace
  without thread names): every thread's innermost instance, as for ``unknown``, the reason saying so;
* ``backward``: autograd's device thread (``threads.role = 'autograd'``) launched it while one or more threads were
  inside a ``backward()`` call (``host_calls``): the innermost instance of each such caller thread;
* ``autograd``: autograd's thread, but no ``backward()`` call recorded covers the launch: every thread's innermost
  instance except autograd's own threads.

Gives ``_j_kc``: one row per (record, kept candidate) -- or one row without a candidate -- with ``n_cand`` (kept
candidates), ``n_same`` (of those, on the launching thread), ``n_seen`` (instances open on any thread, before the
rule), ``rule``, an example instance dropped by the rule (``ex_id``, ``ex_tid``) and a caller thread (``caller_tid``),
from which :data:`argus_lab.join.attribution_sql.KERNEL_OTHER` decides ``temporal``, ``ambiguous`` or
``unattributed`` and writes the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from argus_lab.join.arrays import ints, run_codes
from argus_lab.join.timeline import Timeline
from argus_lab.model.innermost import moment_key

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

# the threads the runs named, with their role (autograd's threads' launches go to the thread that called backward())
NAMED_THREADS = """
SELECT run_id, coalesce(rank, 0) AS rank, thread_id, max(coalesce(role, '')) AS role FROM threads
WHERE run_id IN (SELECT run_id FROM _j_runs) GROUP BY ALL
"""

# the backward() calls of the runs, by the thread that made them
BACKWARD_CALLS = """
SELECT run_id, coalesce(rank, 0) AS rank, thread_id, start_ns, end_ns FROM host_calls
WHERE run_id IN (SELECT run_id FROM _j_runs) AND call = 'autograd.backward'
ORDER BY run_id, rank, thread_id, start_ns
"""

RULES = ("unknown", "own", "other", "backward", "autograd", "unnamed")
"""The rule codes of ``_j_kc.rule`` (module docstring), by position."""
UNKNOWN, OWN, OTHER, BACKWARD, AUTOGRAD, UNNAMED = range(len(RULES))

_LOW32 = np.int64(0xFFFFFFFF)


def _thread_keys(run: np.ndarray, rank: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """(run, rank, low 32 bits of the thread id) as one comparable key (runs and ranks below 2**15 each)."""
    return ((run & 0x7FFF) << 48) | ((rank & 0x7FFF) << 33) | (tid & _LOW32)


def _in_calls(
    con: duckdb.DuckDBPyConnection,
    runs: list[str],
    run: np.ndarray,
    rank: np.ndarray,
    q: np.ndarray,
    autograd: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each record: whether some thread was inside a ``backward()`` call at ``q`` (``inside``), and, as
    (record, thread key) pairs, which threads were (calls made on autograd's own threads, reentrant ones, are not
    callers).  Each caller thread's calls are sorted once and each record looked up by binary search."""
    calls = con.sql(BACKWARD_CALLS).to_arrow_table()
    pairs_r: list[np.ndarray] = []
    pairs_t: list[np.ndarray] = []
    inside = np.zeros(len(q), dtype=bool)
    if calls.num_rows == 0:
        return inside, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    c_run = run_codes(calls.column("run_id"), runs)
    c_key = _thread_keys(c_run, ints(calls.column("rank")), ints(calls.column("thread_id")))
    start, end = ints(calls.column("start_ns")), ints(calls.column("end_ns"))
    not_autograd = ~np.isin(c_key, autograd)
    for key in np.unique(c_key[not_autograd]):
        sel = np.flatnonzero(c_key == key)
        s, e = start[sel], np.maximum.accumulate(end[sel])  # nested calls of one thread: the outer one covers
        mine = np.flatnonzero((run == int(c_run[sel[0]])) & (rank == int(key >> 33 & 0x7FFF)))
        at = np.searchsorted(s, q[mine], side="right") - 1
        hit = mine[(at >= 0) & (q[mine] <= e[np.maximum(at, 0)])]
        inside[hit] = True
        pairs_r.append(hit)
        pairs_t.append(np.full(len(hit), key, dtype=np.int64))
    return inside, np.concatenate(pairs_r), np.concatenate(pairs_t)


def derive(con: duckdb.DuckDBPyConnection, timeline: Timeline, runs: list[str]) -> pa.Table:
    """The rows of ``_j_kc`` (see the module docstring); runs numbered by their position in ``runs``."""
    un = con.sql(UNCARRIED).to_arrow_table()
    n = un.num_rows
    run = run_codes(un.column("run_id"), runs)
    rank = ints(un.column("rank"))
    q = ints(un.column("q"))
    launcher = ints(un.column("thread_id"))
    qk = moment_key(q)
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
    cand_tid = ints(timeline.thread_id)[event] if len(event) else np.zeros(0, dtype=np.int64)
    cand_key = _thread_keys(run[kern], rank[kern], cand_tid)
    same = (launcher[kern] & _LOW32) == (cand_tid & _LOW32)

    # what is known of each record's launching thread
    named = con.sql(NAMED_THREADS).to_arrow_table()
    named_keys = _thread_keys(
        run_codes(named.column("run_id"), runs), ints(named.column("rank")), ints(named.column("thread_id"))
    )
    autograd_keys = named_keys[np.asarray(named.column("role").to_pylist(), dtype=object) == "autograd"]
    rec_key = _thread_keys(run, rank, launcher)
    is_autograd = (launcher != 0) & np.isin(rec_key, autograd_keys)
    inside, call_r, call_t = _in_calls(con, runs, run, rank, q, autograd_keys)
    has_own = np.bincount(kern[same], minlength=n) > 0
    rule = np.where(np.isin(rec_key, named_keys), OTHER, UNNAMED)
    rule[is_autograd & inside] = BACKWARD
    rule[is_autograd & ~inside] = AUTOGRAD
    rule[has_own] = OWN
    rule[launcher == 0] = UNKNOWN

    # which candidate rows each rule keeps
    r = rule[kern]
    in_call = _member(kern, cand_key, call_r, call_t)
    keep = (
        (r == UNKNOWN)
        | (r == UNNAMED)
        | ((r == OWN) & same)
        | ((r == BACKWARD) & in_call)
        | ((r == AUTOGRAD) & ~np.isin(cand_key, autograd_keys))
    )
    n_seen = np.bincount(kern, minlength=n)
    dropped_first = np.full(n, -1, dtype=np.int64)
    gone = np.flatnonzero(~keep)
    dropped_first[kern[gone[::-1]]] = gone[::-1]  # the first dropped candidate row of each record
    kern_k, event_k, same_k = kern[keep], event[keep], same[keep]
    n_cand = np.bincount(kern_k, minlength=n)
    n_same = np.bincount(kern_k[same_k], minlength=n)
    caller = np.zeros(n, dtype=np.int64)
    if len(call_r):
        caller[call_r[::-1]] = call_t[::-1] & _LOW32
    alone = np.flatnonzero(n_cand == 0)
    rows = np.r_[kern_k, alone]
    at = np.r_[event_k, np.zeros(len(alone), dtype=np.int64)]
    none = np.r_[np.zeros(len(kern_k), dtype=bool), np.ones(len(alone), dtype=bool)]
    tid_type = timeline.thread_id.type
    tid = timeline.thread_id.to_numpy(zero_copy_only=False) if len(timeline.t) else np.zeros(1, dtype=np.uint64)
    inner = timeline.inner if len(timeline.t) else np.zeros(1, dtype=np.int64)
    ex = dropped_first[rows]
    ex_ok = ex >= 0
    ex_event = event[np.where(ex_ok, ex, 0)] if len(event) else np.zeros(len(rows), dtype=np.int64)
    take = pa.array(rows, type=pa.int64())
    return pa.table(
        {
            **{c: un.column(c).take(take) for c in ("run_id", "kind", "key", "carried", "thread_id", "rank")},
            **{c: un.column(c).take(take) for c in ("start_ns", "end_ns", "bytes")},
            "r_tid": pa.array(tid[at], type=tid_type, mask=none),
            "inner_id": pa.array(inner[at], type=pa.int64(), mask=none),
            "n_cand": pa.array(n_cand[rows], type=pa.int64()),
            "n_same": pa.array(n_same[rows], type=pa.int64()),
            "n_seen": pa.array(n_seen[rows], type=pa.int64()),
            "rule": pa.array(np.asarray(RULES, dtype=object)[rule[rows]], type=pa.string()),
            "ex_id": pa.array(inner[ex_event] if len(inner) else ex, type=pa.int64(), mask=~ex_ok),
            "ex_tid": pa.array(tid[ex_event], type=tid_type, mask=~ex_ok),
            "caller_tid": pa.array(caller[rows], type=pa.int64(), mask=caller[rows] == 0),
        }
    )


def _member(rec: np.ndarray, key: np.ndarray, pair_rec: np.ndarray, pair_key: np.ndarray) -> np.ndarray:
    """Whether each (record, thread key) of ``rec``/``key`` is one of the pairs ``pair_rec``/``pair_key``."""
    if len(rec) == 0 or len(pair_rec) == 0:
        return np.zeros(len(rec), dtype=bool)
    both_rec = np.r_[pair_rec, rec]
    both_key = np.r_[pair_key, key]
    order = np.lexsort((both_key, both_rec))  # stable: a pair comes before the rows equal to it
    r, k = both_rec[order], both_key[order]
    new = np.r_[True, (r[1:] != r[:-1]) | (k[1:] != k[:-1])]
    first = np.maximum.accumulate(np.where(new, np.arange(len(r)), 0))  # each row's group starts here
    is_pair = order < len(pair_rec)
    out = np.zeros(len(rec), dtype=bool)
    rows = ~is_pair
    out[order[rows] - len(pair_rec)] = is_pair[first[rows]]
    return out


__all__ = ["RULES", "UNCARRIED", "derive"]
