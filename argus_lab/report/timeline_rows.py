"""What a run's timeline needs from the store, read within bounds (for :func:`argus_lab.views.timeline.timeline_data`).

A timeline embeds at most ``exact_limit`` host instances (the first in time) and, for a run with more kernels than
that, only the kernels' aggregation pyramid.  So a run of a million instances or millions of kernels is never read
whole into Python:

* the instances: their extent over the whole run (count, first start, last end, region paths, each rank's clock
  offset) aggregated in DuckDB (:class:`InstanceExtent`), and the first ``exact_limit`` rows in time order;
* the kernels: every column when the run has at most ``exact_limit`` of them, else only what the pyramid bins
  (times, rank, device, stream and the region path of the instance the join put each in), as compact columns.

Each kernel row carries the ``path`` of its instance in scope (NULL outside every region or outside the scope), so
a kernel is coloured by its region without the instances being in Python.  :func:`timeline_columns` reads both whole
(every instance and every kernel column), as before, for callers that want the rows themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from argus_lab.report.evidence import _fetch_columns, table_columns
from argus_lab.report.scope_sql import ScopeFilter, scoped

if TYPE_CHECKING:
    from argus_lab.store import Store

Columns = dict[str, Any]


@dataclass(frozen=True)
class InstanceExtent:
    """What a timeline needs of every instance of a run when only the first of them are read as rows.

    ``start_ns``/``end_ns`` are on rank 0's clock (each time plus its rank's offset; NULL times count as 0, as the
    rows read them); ``offsets`` holds ``(rank, offset_ns)`` of every rank with an instance."""

    total: int
    start_ns: int | None
    end_ns: int | None
    paths: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]


def _instance_sql(store: Store, tail: str) -> str:
    """The scoped instances of one run (parameters: the scope's, ``[run_id]``, ``run_id``), with ``tail`` after."""
    from argus_lab.join.skew import OFFSETS_OF_RUNS

    have = table_columns(store, "region_instances")
    rank = "coalesce(i.rank, 0)" if "rank" in have else "0"
    name = "i.thread_name" if "thread_name" in have else "NULL"
    return f"""WITH o AS ({OFFSETS_OF_RUNS})
        SELECT i.instance_id, i.path, i.instance_index, i.pid, i.thread_id, {name} AS thread_name,
               {rank} AS rank, coalesce(o.offset_ns, 0) AS offset_ns, i.start_ns, i.end_ns, i.error, i.warmup
        FROM region_instances i LEFT JOIN o ON o.run_id = i.run_id AND o.rank = {rank}
        WHERE i.run_id = ? /*SCOPE*/ {tail}"""


def _kernel_sql(store: Store, select: str, kernel_scope: ScopeFilter | None) -> str:
    """The kernel records of one run with ``select`` (over ``k``, ``a``, ``o`` and ``ri``: the instance in scope the
    join put the record in, with its ``path``).  Parameters: the scope's, ``[run_id]``, ``run_id`` three times, the
    kernel scope's."""
    from argus_lab.join.skew import OFFSETS_OF_RUNS

    have = table_columns(store, "kernels")
    rank = "coalesce(k.rank, 0)" if "rank" in have else "0"
    where = f" AND {kernel_scope.sql}" if kernel_scope is not None else ""
    key = "coalesce(k.kernel_key, concat_ws('/', k.device_id, k.context_id, k.correlation_id, k.start_ns))"
    if "kernel_key" not in have:
        key = "concat_ws('/', k.device_id, k.context_id, k.correlation_id, k.start_ns)"
    stored = "attribution_rows" if table_columns(store, "attribution_rows") else "attributions"  # older stores
    # a kernel the join placed by time (temporal, ambiguous: its heaviest candidate) is drawn in the region the region
    # table counts it in, with its class; the stored rows hold only such (exact ones are derived, never stored)
    sql = f"""WITH o AS ({OFFSETS_OF_RUNS}), a AS (
            SELECT evidence_id, arg_max(instance_id, weight) AS iid, arg_max(class, weight) AS class
            FROM {stored} WHERE run_id = ? AND evidence IN ('kernel', 'memcpy', 'memset') AND class <> 'exact'
            GROUP BY evidence_id
        ), ri AS (SELECT i.instance_id, i.path FROM region_instances i WHERE i.run_id = ? /*SCOPE*/)
        SELECT {select.format(rank=rank)}
        FROM kernels k LEFT JOIN o ON o.run_id = k.run_id AND o.rank = {rank}
        LEFT JOIN a ON a.evidence_id = {key}
        LEFT JOIN ri ON ri.instance_id = CASE WHEN a.class IS NOT NULL THEN coalesce(a.iid, 0) ELSE k.instance_id END
        WHERE k.run_id = ?{where} ORDER BY k.start_ns"""
    return sql


EVERY_KERNEL_COLUMN = (
    "CASE WHEN a.class IS NOT NULL THEN coalesce(a.iid, 0) ELSE k.instance_id END AS instance_id, "
    "coalesce(a.class, 'exact') AS class, k.name, k.start_ns, k.end_ns, k.device_id, k.stream_id, {kind}, "
    "{{rank}} AS rank, coalesce(o.offset_ns, 0) AS offset_ns, ri.path"
)
BINNED_KERNEL_COLUMNS = (
    "k.start_ns, k.end_ns, k.device_id, k.stream_id, {rank} AS rank, coalesce(o.offset_ns, 0) AS offset_ns, ri.path"
)
"""What the pyramid of a run with more kernels than it embeds needs (no names, classes or ids)."""


def _kernels(
    store: Store, run_id: str, scope: ScopeFilter | None, kernel_scope: ScopeFilter | None, every: bool
) -> Columns:
    kind = "k.kind" if "kind" in table_columns(store, "kernels") else "'kernel' AS kind"
    select = EVERY_KERNEL_COLUMN.format(kind=kind) if every else BINNED_KERNEL_COLUMNS
    sql, bound = scoped(_kernel_sql(store, select, kernel_scope), scope)
    params = [*bound, [run_id], run_id, run_id, run_id, *(kernel_scope.params if kernel_scope is not None else ())]
    return _fetch_columns(store, sql, params)


def timeline_columns(
    store: Store, run_id: str, scope: ScopeFilter | None = None, kernel_scope: ScopeFilter | None = None
) -> tuple[Columns, Columns]:
    """The region instances and kernel records of one run as numpy columns (every row; for the timeline), with each
    row's ``rank`` and ``offset_ns``: the rank's host-clock offset against rank 0 (``rank-0 time = time +
    offset``, the rule of :mod:`argus_lab.join.skew`), so that every rank can be drawn on rank 0's clock.

    ``scope`` (over ``region_instances``, alias ``i``) keeps the instances in scope; ``kernel_scope`` (over
    ``kernels``, alias ``k``) the records of the ranks, devices and streams in scope (a report's
    :attr:`~argus_lab.report.Report.scope_filter` and ``kernel_scope``).  Each kernel row also has ``path``: that of
    the instance in scope the join put it in (NULL: none).  A view that embeds only the first instances and a
    kernel pyramid reads less (:func:`timeline_inputs`)."""
    sql, bound = scoped(_instance_sql(store, "ORDER BY i.start_ns"), scope)
    inst = _fetch_columns(store, sql, [*bound, [run_id], run_id])
    return inst, _kernels(store, run_id, scope, kernel_scope, every=True)


def instance_extent(store: Store, run_id: str, scope: ScopeFilter | None = None) -> InstanceExtent:
    """The :class:`InstanceExtent` of one run's instances in ``scope``, aggregated in DuckDB."""
    sql, bound = scoped(_instance_sql(store, ""), scope)
    per_rank = store.rows(
        f"""SELECT rank, offset_ns, count(*) AS n, min(coalesce(start_ns, 0) + offset_ns),
                   max(coalesce(end_ns, 0) + offset_ns), list(DISTINCT path)
            FROM ({sql}) GROUP BY rank, offset_ns ORDER BY rank""",
        [*bound, [run_id], run_id],
    )
    los = [int(r[3]) for r in per_rank if r[3] is not None]
    his = [int(r[4]) for r in per_rank if r[4] is not None]
    return InstanceExtent(
        total=sum(int(r[2]) for r in per_rank),
        start_ns=min(los) if los else None,
        end_ns=max(his) if his else None,
        paths=tuple(sorted({str(p) for r in per_rank for p in (r[5] or ()) if p is not None})),
        offsets=tuple((int(r[0]), int(r[1])) for r in per_rank),
    )


def timeline_inputs(
    store: Store,
    run_id: str,
    limit: int,
    scope: ScopeFilter | None = None,
    kernel_scope: ScopeFilter | None = None,
) -> tuple[Columns, Columns, InstanceExtent]:
    """What :func:`~argus_lab.views.timeline.timeline_data` needs for a timeline that embeds at most ``limit`` host
    instances and kernels: the first ``limit`` instances in time order (on rank 0's clock), the kernels (every
    column up to ``limit`` of them, else :data:`BINNED_KERNEL_COLUMNS`) and the run's :class:`InstanceExtent`."""
    extent = instance_extent(store, run_id, scope)
    sql, bound = scoped(
        _instance_sql(store, "ORDER BY coalesce(i.start_ns, 0) + coalesce(o.offset_ns, 0), i.start_ns LIMIT ?"), scope
    )
    inst = _fetch_columns(store, sql, [*bound, [run_id], run_id, limit])
    where = f" AND {kernel_scope.sql}" if kernel_scope is not None else ""
    counted = store.rows(
        f"SELECT count(*) FROM kernels k WHERE k.run_id = ?{where}",
        [run_id, *(kernel_scope.params if kernel_scope is not None else ())],
    )
    n_kernels = int(counted[0][0]) if counted else 0
    kern = _kernels(store, run_id, scope, kernel_scope, every=n_kernels <= limit)
    return inst, kern, extent


__all__ = [
    "BINNED_KERNEL_COLUMNS",
    "EVERY_KERNEL_COLUMN",
    "InstanceExtent",
    "instance_extent",
    "timeline_columns",
    "timeline_inputs",
]
