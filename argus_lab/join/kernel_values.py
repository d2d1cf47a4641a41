"""GPU activity values of region instances, computed over numpy arrays.

Per region instance of a timed run, from its CUPTI records (kernels, copies, sets):

* ``gpu.time``, ``gpu.kernels``, ``gpu.memcpy_bytes``, ``gpu.memcpy_time``, ``gpu.memset_bytes`` -- inclusive (the
  instance and its nested instances) and exclusive (the instance alone), with the weight of each attribution class
  behind them: every exactly attributed record counts once, every candidate row of a record placed ``temporal`` or
  ``ambiguous`` counts its weight (:data:`SIGNALS`; an instance of a run that traced a kind gets its signals, 0 where
  nothing ran);
* ``gpu.span`` -- from the first start to the last end of the kernels placed in it exactly or temporally (nested
  instances included; no exclusive value);
* ``gpu.launch_overhead`` -- the host time of the launch API calls behind its exact records, one call per record
  except kernels replayed from a CUDA graph, which share their ``cudaGraphLaunch`` (one call per correlation id),
  for instances that ran an exact kernel, in runs whose records carry launch API times.

The exact records are read once (:data:`RECORDS`, which also feeds the kernel-sequence signatures) and summed per
(instance, kind) with ``bincount``; the candidate rows of the other records (``_j_ka``, a few per cent) are summed in
SQL; the sums go up the instance tree one nesting level at a time.  The values go to :class:`argus_lab.join.values.
Values` as arrays.  Run by :mod:`argus_lab.join.attribution` after the candidate attribution (``_j_ka``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from argus_lab.join.arrays import changes, floats, ints, registered, run_codes
from argus_lab.join.signatures import Levels
from argus_lab.model.asked import REQUEST_SIGNALS, asked_list, is_asked
from argus_lab.plan import catalog

if TYPE_CHECKING:
    import duckdb

    from argus_lab.join.values import Values

SIGNALS: tuple[tuple[str, str, str, str], ...] = tuple(
    (signal, kind, quantity, catalog.unit(signal))
    for signal, kind, quantity in (
        ("gpu.time", "kernel", "dur"),
        ("gpu.kernels", "kernel", "w"),
        ("gpu.memcpy_bytes", "memcpy", "bytes"),
        ("gpu.memcpy_time", "memcpy", "dur"),
        ("gpu.memset_bytes", "memset", "bytes"),
    )
)
"""(signal, record kind, summed quantity, unit from the catalog) of the additive GPU activity signals."""

INSTANCE_ROWS = "SELECT run_id, instance_id, parent_id, rank, thread_id, start_ns, end_ns FROM _j_inst"
"""The join's instances as :meth:`Nodes.of` and :meth:`argus_lab.join.timeline.Timeline.of` read them."""

# every instance of the join's runs once, numbered 0..n-1 by (run, id), with the number of its parent (-1: top
# level, or a parent the run did not record; the join cut parent cycles before) and its parent's id as stored
NODE_TABLE = "CREATE OR REPLACE TEMP TABLE _j_node AS SELECT * FROM _j_node_rows"

KINDS_OF_RECORDS = (
    "SELECT DISTINCT coalesce(kind, 'kernel') AS kind FROM kernels WHERE run_id IN (SELECT run_id FROM _j_runs) "
    "ORDER BY kind"
)

# every exactly attributed record (it carried the id of an instance its run recorded), with its instance's number
# and its kind's position in the list of kinds (the parameter)
RECORDS = """
SELECT n.idx, (list_position(?::VARCHAR[], coalesce(k.kind, 'kernel')) - 1)::BIGINT AS kind, k.start_ns AS s,
       k.end_ns, coalesce(k.graph_id, 0) AS graph_id,
       k.api_start_ns, k.api_end_ns, k.correlation_id AS c, coalesce(k.bytes, 0) AS bytes, k.rowid AS row, k.name
FROM kernels k JOIN _j_node n ON n.run_id = k.run_id AND n.instance_id = k.instance_id
WHERE k.run_id IN (SELECT run_id FROM _j_runs)
"""

# the candidate rows of the other records (temporal, ambiguous), summed per (instance, kind, class)
CANDIDATES = """
SELECT n.idx, (list_position(?::VARCHAR[], a.kind) - 1)::BIGINT AS kind, a.class, sum(a.weight) AS w,
       sum(a.weight * (a.end_ns - a.start_ns)) AS dur,
       sum(a.weight * a.bytes) AS bytes, count(*) AS n,
       min(a.start_ns) FILTER (WHERE a.class = 'temporal') AS first_ns,
       max(a.end_ns) FILTER (WHERE a.class = 'temporal') AS last_ns
FROM _j_ka a JOIN _j_node n ON n.run_id = a.run_id AND n.instance_id = a.instance_id
GROUP BY n.idx, a.kind, a.class
"""

# the kinds of records each run has (exact ones registered as _j_kx_kinds, and those of _j_ka)
KINDS = """
CREATE OR REPLACE TEMP TABLE _j_kinds AS
SELECT DISTINCT run_id, kind FROM _j_kx_kinds UNION SELECT DISTINCT run_id, kind FROM _j_ka
"""

# per timed run, the kinds whose signals its instances get: those it recorded, and 'kernel' where it traced with
# CUPTI; with the provenance its values point at
VALUE_KINDS = """
WITH kruns AS (
    SELECT run_id FROM runs WHERE run_id IN (SELECT run_id FROM _j_timed) AND list_contains(backends, 'cupti')
    UNION SELECT DISTINCT run_id FROM _j_kinds WHERE run_id IN (SELECT run_id FROM _j_timed)
), kinds AS (
    SELECT run_id, kind FROM _j_kinds WHERE run_id IN (SELECT run_id FROM _j_timed)
    UNION SELECT run_id, 'kernel' FROM kruns
)
SELECT k.run_id, k.kind, p.provenance_id FROM kinds k JOIN _j_prov p ON p.run_id = k.run_id AND p.backend = 'cupti'
ORDER BY k.run_id, k.kind
"""

TIMED_RUNS = """
SELECT t.run_id, p.provenance_id FROM _j_timed t JOIN _j_prov p ON p.run_id = t.run_id AND p.backend = 'cupti'
ORDER BY t.run_id
"""

# the signals each timing run's request named, over all runs of the request (empty: not known, e.g. an import)
ASKED_SIGNALS = f"""
SELECT r.run_id, {asked_list("q", "r")} FROM runs r
LEFT JOIN {REQUEST_SIGNALS} q ON q.request_id = r.request_id
WHERE r.run_id IN (SELECT run_id FROM _j_timed)
"""


class Asked:
    """Which signals a run's request named (the rule: :mod:`argus_lab.model.asked`).  A value nobody asked for is
    not stored, so no view shows it: ``gpu.span`` or ``gpu.kernels`` beside a requested ``gpu.time``,
    ``gpu.launch_overhead`` where the launch records would give it (API records of a fallback path, the callbacks of
    the default launch identity).  A pattern in a request (``gpu.*``) asks for what it matches; a run whose request
    names nothing (an import) keeps every value."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.signals = {str(r): [str(x) for x in s] for r, s in con.execute(ASKED_SIGNALS).fetchall()}

    def __call__(self, run: str, signal: str) -> bool:
        return is_asked(self.signals.get(run) or (), signal)


# what the join's summary says of the exact records: per (run, kind) how many and their device time
EXACT_TOTALS = "CREATE OR REPLACE TEMP TABLE _j_kxs AS SELECT run_id, kind, w, dur FROM _j_kx_totals"

_NONE = np.iinfo(np.int64).max
"""No first start (an empty minimum)."""
_NO_END = np.iinfo(np.int64).min
"""No last end (an empty maximum)."""


@dataclass(frozen=True)
class Nodes:
    """The instances of the join's runs (``_j_node``): run number, id and parent number of each."""

    run: np.ndarray
    runs: list[str]
    instance: np.ndarray
    parent: np.ndarray
    parent_id: np.ndarray
    """The parent's id as stored (0: none), recorded or not."""

    @classmethod
    def of(cls, con: duckdb.DuckDBPyConnection, rows: pa.Table) -> tuple[Nodes, bool]:
        """Number the instances ``rows`` (:data:`INSTANCE_ROWS`; an id stored twice in a run counts once), write
        ``_j_node``, and say whether a parent link is *suspect*: a parent that does not come strictly before its
        child in (start, id) order, or an id stored twice (then parent links may form a cycle: the join takes the
        guarded way, :data:`argus_lab.join.attribution_sql.ANCESTORS_GUARDED`)."""
        runs = sorted({str(r) for r in rows.column("run_id").unique().to_pylist() if r is not None})
        run = run_codes(rows.column("run_id"), runs)
        inst, parent_id = ints(rows.column("instance_id"), 0), ints(rows.column("parent_id"), 0)
        start = ints(rows.column("start_ns"), 0)
        order = np.lexsort((inst, run))
        run, inst, parent_id, start = run[order], inst[order], parent_id[order], start[order]
        first = changes(run, inst)
        twice = not first.all()
        run, inst, parent_id, start = run[first], inst[first], parent_id[first], start[first]
        found = cls(run, runs, inst, np.full(len(inst), -1, dtype=np.int64), parent_id)
        parent = np.where(parent_id != 0, found.locate(run, parent_id), -1)
        kid = np.flatnonzero(parent >= 0)
        up = parent[kid]
        late = (start[up] > start[kid]) | ((start[up] == start[kid]) & (inst[up] >= inst[kid]))
        nodes = cls(run, runs, inst, parent, parent_id)
        table = pa.table(
            {
                "run_id": nodes.run_ids(),
                "instance_id": pa.array(inst, type=pa.int64()),
                "idx": pa.array(np.arange(len(inst), dtype=np.int64)),
                "parent": pa.array(parent, type=pa.int64()),
                "parent_id": pa.array(parent_id, type=pa.int64()),
            }
        )
        with registered(con, _j_node_rows=table):
            con.execute(NODE_TABLE)
        return nodes, twice or bool(late.any())

    def run_ids(self) -> pa.Array:
        """The run id of each instance."""
        return pa.array(self.runs, type=pa.string()).take(pa.array(self.run, type=pa.int64()))

    def locate(self, run: np.ndarray, instance: np.ndarray) -> np.ndarray:
        """The number of each (run position, instance id) (-1: not an instance of the join's runs)."""
        out = np.full(len(instance), -1, dtype=np.int64)
        bounds = np.searchsorted(self.run, np.arange(len(self.runs) + 1))  # the nodes come by run, ids in order
        for r in np.unique(run[run >= 0]).tolist():
            lo, hi = int(bounds[r]), int(bounds[r + 1])
            mine = np.flatnonzero(run == r)
            at = lo + np.searchsorted(self.instance[lo:hi], instance[mine])
            ok = at < hi
            ok[ok] = self.instance[at[ok]] == instance[mine][ok]
            out[mine[ok]] = at[ok]
        return out


@dataclass(frozen=True)
class Sums:
    """Per (instance, kind), own and then inclusive of nested instances (arrays of shape (instances, kinds))."""

    w: np.ndarray
    dur: np.ndarray
    bytes: np.ndarray
    n: np.ndarray
    w_exact: np.ndarray
    w_temporal: np.ndarray
    w_ambiguous: np.ndarray
    span_n: np.ndarray
    calls: np.ndarray
    call_ns: np.ndarray
    n_exact: np.ndarray
    first: np.ndarray
    last: np.ndarray

    def up(self, tree: Levels) -> Sums:
        """The inclusive sums: each instance's own plus those of every instance nested in it."""
        added = {name: getattr(self, name).copy() for name in _ADDED}
        first, last = self.first.copy(), self.last.copy()
        for kids, parents in tree.upward():
            for arr in added.values():
                np.add.at(arr, parents, arr[kids])
            np.minimum.at(first, parents, first[kids])
            np.maximum.at(last, parents, last[kids])
        return Sums(**added, first=first, last=last)


_ADDED = (
    "w",
    "dur",
    "bytes",
    "n",
    "w_exact",
    "w_temporal",
    "w_ambiguous",
    "span_n",
    "calls",
    "call_ns",
    "n_exact",
)


@dataclass(frozen=True)
class Records:
    """The exactly attributed records of the join's runs (:data:`RECORDS`): ``kind`` is a position in ``kinds``."""

    table: pa.Table
    kinds: list[str]
    kernels: np.ndarray
    """Which records are kernels (not copies or sets)."""

    @classmethod
    def read(cls, con: duckdb.DuckDBPyConnection, nodes: Nodes) -> tuple[Records, Exact]:
        """Read them (after :meth:`Nodes.of` wrote ``_j_node``) and sum them, batch by batch over zero-copy views
        (no array the size of all records is made); the signatures keep ``idx``, ``c``, ``s``, ``row``, ``name``
        and which records are kernels."""
        kinds = [str(r[0]) for r in con.execute(KINDS_OF_RECORDS).fetchall()]
        kernel = kinds.index("kernel") if "kernel" in kinds else -2
        table = con.sql(RECORDS, params=[kinds]).to_arrow_table()
        exact = Exact.empty(kinds, len(nodes.instance))
        kernels: list[np.ndarray] = []
        replays: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for batch in table.to_batches():
            replays.append(_add_batch(exact, batch, len(kinds)))
            kernels.append(ints(batch.column("kind"), -1) == kernel)
        _add_replays(exact, replays)
        mask = np.concatenate(kernels) if kernels else np.zeros(0, dtype=bool)
        return cls(table.select(["idx", "c", "s", "row", "name"]), kinds, mask), exact


@dataclass(frozen=True)
class Exact:
    """The exact records' sums per (instance, kind), flattened (``instance * len(kinds) + kind``)."""

    kinds: list[str]
    n: np.ndarray
    dur: np.ndarray
    bytes: np.ndarray
    first: np.ndarray
    last: np.ndarray
    calls: np.ndarray
    call_ns: np.ndarray

    @classmethod
    def empty(cls, kinds: list[str], instances: int) -> Exact:
        """Sums of no record yet."""
        size = instances * len(kinds)
        return cls(
            kinds,
            np.zeros(size, dtype=np.int64),
            np.zeros(size),
            np.zeros(size),
            np.full(size, _NONE, dtype=np.int64),
            np.full(size, _NO_END, dtype=np.int64),
            np.zeros(size, dtype=np.int64),
            np.zeros(size),
        )


def derive(con: duckdb.DuckDBPyConnection, nodes: Nodes, exact: Exact, values: Values) -> None:
    """Add the candidate rows (``_j_ka``) to the exact sums and hand the GPU activity values of every timed run's
    instances to ``values``; also leave ``_j_kinds`` (the kinds each run recorded) and ``_j_kxs`` (the exact records
    per run and kind) for the join's summary."""
    kinds = exact.kinds  # every kind of the runs' records: the candidates' too
    cands = con.sql(CANDIDATES, params=[kinds]).to_arrow_table()
    own = _own(nodes, exact, cands)
    _register_kinds(con, nodes, exact)
    incl = own.up(Levels.of(nodes.parent))
    prov = {str(r): str(p) for r, p in con.execute(TIMED_RUNS).fetchall()}
    asked = Asked(con)
    for run, kind, provenance in con.execute(VALUE_KINDS).fetchall():
        sel = np.flatnonzero(nodes.run == nodes.runs.index(run)) if run in nodes.runs else np.zeros(0, np.int64)
        kc = kinds.index(kind) if kind in kinds else -1
        for signal, of_kind, col, unit in SIGNALS:
            if of_kind != kind or not asked(run, signal):
                continue
            values.add(con, (run, signal, unit, "cupti", provenance), _additive(nodes, own, incl, sel, kc, col))
    if "kernel" not in kinds:
        return
    kc = kinds.index("kernel")
    calls_by_run = np.bincount(nodes.run, weights=own.calls.sum(axis=1), minlength=len(nodes.runs))
    for r, run in enumerate(nodes.runs):
        if run not in prov:
            continue
        mine = nodes.run == r
        spans = np.flatnonzero(mine & (incl.n[:, kc] > 0) & (incl.first[:, kc] != _NONE))
        if len(spans) and asked(run, "gpu.span"):
            values.add(
                con, (run, "gpu.span", catalog.unit("gpu.span"), "cupti", prov[run]), _span(nodes, incl, spans, kc)
            )
        ran = np.flatnonzero(mine & (incl.n_exact[:, kc] > 0))
        if calls_by_run[r] > 0 and len(ran) and asked(run, "gpu.launch_overhead"):
            values.add(
                con,
                (run, "gpu.launch_overhead", catalog.unit("gpu.launch_overhead"), "cupti", prov[run]),
                _overhead(nodes, own, incl, ran),
            )


def _add_replays(out: Exact, replays: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> None:
    """The launch calls of CUDA-graph replays: one per (instance, kind, correlation id), over all batches."""
    key = np.concatenate([r[0] for r in replays]) if replays else np.zeros(0, dtype=np.int64)
    if len(key) == 0:
        return
    corr = np.concatenate([r[1] for r in replays])
    api = np.concatenate([r[2] for r in replays])
    order = np.lexsort((corr, key))
    rk, rc = key[order], corr[order]
    firsts = order[changes(rk, rc)]
    out.calls[:] += np.bincount(key[firsts], minlength=len(out.n))
    out.call_ns[:] += _sums(key[firsts], api[firsts], len(out.n))


def _add_batch(out: Exact, batch: pa.RecordBatch, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Add one batch of exact records to the sums; returns its CUDA-graph replays (key, correlation id, call ns)."""
    size = len(out.n)
    key = ints(batch.column("idx"), 0) * k + ints(batch.column("kind"), 0)
    start, end = ints(batch.column("s"), 0), ints(batch.column("end_ns"), 0)
    graph = ints(batch.column("graph_id"), 0)
    a0, a1 = batch.column("api_start_ns"), batch.column("api_end_ns")
    api = ints(a1, 0) - ints(a0, 0)
    called = api > 0
    if a0.null_count or a1.null_count:
        called &= a0.is_valid().to_numpy(zero_copy_only=False) & a1.is_valid().to_numpy(zero_copy_only=False)
    out.n[:] += np.bincount(key, minlength=size)
    out.dur[:] += _sums(key, end - start, size)
    out.bytes[:] += _sums(key, ints(batch.column("bytes"), 0), size)
    np.minimum.at(out.first, key, start)
    np.maximum.at(out.last, key, end)
    direct = called & (graph == 0)
    out.calls[:] += np.bincount(key[direct], minlength=size)
    out.call_ns[:] += _sums(key[direct], api[direct], size)
    replay = np.flatnonzero(called & (graph != 0))
    return key[replay], ints(batch.column("c"), np.iinfo(np.int64).min)[replay], api[replay]


def _own(nodes: Nodes, exact: Exact, cands: pa.Table) -> Sums:
    """Each instance's own sums per kind: its exact records and its candidate rows."""
    n, k = len(nodes.instance), len(exact.kinds)
    size = n * k
    n_e, dur_e, bytes_e = exact.n, exact.dur, exact.bytes
    first, last, calls, call_ns = exact.first.copy(), exact.last.copy(), exact.calls, exact.call_ns
    w_t = np.zeros(size)
    w_a = np.zeros(size)
    w_c = np.zeros(size)
    dur_c = np.zeros(size)
    bytes_c = np.zeros(size)
    n_c = np.zeros(size, dtype=np.int64)
    n_t = np.zeros(size, dtype=np.int64)
    if cands.num_rows:
        ckey = ints(cands.column("idx"), 0) * k + ints(cands.column("kind"), 0)
        cw = floats(cands.column("w"))
        cn = ints(cands.column("n"), 0)
        temporal = pc.equal(cands.column("class"), "temporal").to_numpy(zero_copy_only=False)
        ambiguous = pc.equal(cands.column("class"), "ambiguous").to_numpy(zero_copy_only=False)
        np.add.at(w_c, ckey, cw)
        np.add.at(dur_c, ckey, floats(cands.column("dur")))
        np.add.at(bytes_c, ckey, floats(cands.column("bytes")))
        np.add.at(n_c, ckey, cn)
        np.add.at(w_t, ckey[temporal], cw[temporal])
        np.add.at(w_a, ckey[ambiguous], cw[ambiguous])
        np.add.at(n_t, ckey[temporal], cn[temporal])
        np.minimum.at(first, ckey[temporal], ints(cands.column("first_ns"), _NONE)[temporal])
        np.maximum.at(last, ckey[temporal], ints(cands.column("last_ns"), _NO_END)[temporal])

    def shaped(a: np.ndarray) -> np.ndarray:
        return a.reshape(n, k)

    return Sums(
        w=shaped(n_e + w_c),
        dur=shaped(dur_e + dur_c),
        bytes=shaped(bytes_e + bytes_c),
        n=shaped(n_e + n_c),
        w_exact=shaped(n_e.astype(np.float64)),
        w_temporal=shaped(w_t),
        w_ambiguous=shaped(w_a),
        span_n=shaped(n_e + n_t),
        calls=shaped(calls),
        call_ns=shaped(call_ns),
        n_exact=shaped(n_e),
        first=shaped(first),
        last=shaped(last),
    )


def _register_kinds(con: duckdb.DuckDBPyConnection, nodes: Nodes, exact: Exact) -> None:
    """``_j_kinds`` and ``_j_kxs`` (see :func:`derive`)."""
    kinds = exact.kinds
    n_runs, k = len(nodes.runs), len(kinds)
    run_kind = (nodes.run[:, None] * k + np.arange(k)[None, :]).ravel()
    count = np.bincount(run_kind, weights=exact.n.astype(np.float64), minlength=n_runs * k)
    dur = np.bincount(run_kind, weights=exact.dur, minlength=n_runs * k)
    have = np.flatnonzero(count > 0)
    totals = pa.table(
        {
            "run_id": pa.array([nodes.runs[int(i) // k] for i in have], type=pa.string()),
            "kind": pa.array([kinds[int(i) % k] for i in have], type=pa.string()),
            "w": pa.array(count[have], type=pa.float64()),
            "dur": pa.array(dur[have], type=pa.float64()),
        }
    )
    with registered(con, _j_kx_totals=totals, _j_kx_kinds=totals.select(["run_id", "kind"])):
        con.execute(EXACT_TOTALS)
        con.execute(KINDS)


def _additive(nodes: Nodes, own: Sums, incl: Sums, sel: np.ndarray, kc: int, col: str) -> dict[str, np.ndarray]:
    """One additive signal of the instances ``sel`` (0 where nothing of the kind ran: ``kc`` -1)."""
    if kc < 0:
        zero = np.zeros(len(sel))
        return _columns(nodes, sel, zero, zero, zero.astype(np.int64), zero, zero, zero)
    inc = getattr(incl, col)[sel, kc].astype(np.float64)
    exc = getattr(own, col)[sel, kc].astype(np.float64)
    return _columns(
        nodes,
        sel,
        inc,
        exc,
        incl.n[sel, kc],
        incl.w_exact[sel, kc],
        incl.w_temporal[sel, kc],
        incl.w_ambiguous[sel, kc],
    )


def _span(nodes: Nodes, incl: Sums, sel: np.ndarray, kc: int) -> dict[str, np.ndarray]:
    span = (incl.last[sel, kc] - incl.first[sel, kc]).astype(np.float64)
    zero = np.zeros(len(sel))
    return _columns(
        nodes, sel, span, np.full(len(sel), np.nan), incl.span_n[sel, kc], incl.w_exact[sel, kc],
        incl.w_temporal[sel, kc], zero,
    )  # fmt: skip


def _overhead(nodes: Nodes, own: Sums, incl: Sums, sel: np.ndarray) -> dict[str, np.ndarray]:
    calls = incl.calls[sel].sum(axis=1)
    zero = np.zeros(len(sel))
    return _columns(
        nodes, sel, incl.call_ns[sel].sum(axis=1), own.call_ns[sel].sum(axis=1), calls, calls.astype(np.float64),
        zero, zero,
    )  # fmt: skip


def _columns(
    nodes: Nodes,
    sel: np.ndarray,
    inclusive: np.ndarray,
    exclusive: np.ndarray,
    evidence: np.ndarray,
    w_exact: np.ndarray,
    w_temporal: np.ndarray,
    w_ambiguous: np.ndarray,
) -> dict[str, np.ndarray]:
    zero = np.zeros(len(sel))
    return {
        "instance_id": nodes.instance[sel],
        "inclusive": inclusive,
        "exclusive": exclusive,
        "evidence": np.asarray(evidence).astype(np.int64),
        "w_exact": w_exact,
        "w_ordinal": zero,
        "w_temporal": w_temporal,
        "w_ambiguous": w_ambiguous,
        "w_mismatch": zero,
    }


def _sums(key: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """``weights`` summed per ``key`` (0 .. size - 1) as float64 (exact for integer sums below 2**53)."""
    return np.bincount(key, weights=weights.astype(np.float64), minlength=size).astype(np.float64, copy=False)


__all__ = ["NODE_TABLE", "RECORDS", "SIGNALS", "Exact", "Nodes", "Records", "Sums", "derive"]
