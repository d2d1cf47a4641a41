"""Reading the detail rows views need from the store (bounded), beyond what the Report object exposes.

Every query takes the report's run ids and a row limit; each result is a :class:`Table` that records how many
rows exist in all, so a view can say "showing 2,000 of 1,000,000 (the rest stays in the store)".  Columns that a
store of an older layout lacks are read as empty, so views keep working while the schema grows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from argus_lab.report.scope_sql import ScopeFilter, scoped
from argus_lab.views.escape import jsonable

if TYPE_CHECKING:
    from argus_lab.store import Store


@dataclass(frozen=True)
class Table:
    """Rows of one detail table: column names, row values, and the number of rows the store holds."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    total: int

    def to_json(self) -> dict[str, Any]:
        """``{"columns", "rows", "total", "shown"}``, JSON-ready."""
        return {
            "columns": list(self.columns),
            "rows": jsonable([list(r) for r in self.rows]),
            "total": self.total,
            "shown": len(self.rows),
        }

    def dicts(self) -> list[dict[str, Any]]:
        """The rows as dicts (small tables only)."""
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]


def table_columns(store: Store, table: str) -> set[str]:
    """The column names ``table`` has in this store (empty when the table does not exist)."""
    rows = store.rows("SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table])
    return {r[0] for r in rows}


def _col(have: set[str], name: str, alias: str = "", prefix: str = "") -> str:
    ref = f"{prefix}{name}" if name in have else "NULL"
    return f"{ref} AS {alias or name}"


def query(store: Store, sql: str, ids: list[str], limit: int) -> Table:
    """Run ``sql`` (``?`` = the run ids, then the row limit: it ends in ``LIMIT ?``) into a :class:`Table`.

    ``total`` counts the rows the same query gives without the limit.
    """
    body = sql.rstrip()
    if not body.endswith("LIMIT ?"):
        msg = "internal: a detail query must end in `LIMIT ?`"
        raise ValueError(msg)
    with store.connect() as con:
        res = con.execute(sql, [ids, limit])
        cols = tuple(d[0] for d in res.description)
        rows = tuple(tuple(r) for r in res.fetchall())
        total_row = con.execute(f"SELECT count(*) FROM ({body[: -len('LIMIT ?')]})", [ids]).fetchone()
    return Table(cols, rows, int(total_row[0]) if total_row else len(rows))


IN_RUNS = "run_id IN (SELECT unnest(?::VARCHAR[]))"


def with_display_names(table: Table) -> Table:
    """``table`` with a ``display_name`` column after its ``name`` column: the kernel name demangled and shortened
    for reading (:func:`argus_lab.report.names.display_name`); ``name`` stays as recorded."""
    from argus_lab.report.names import display_name

    if "name" not in table.columns:
        return table
    at = table.columns.index("name")
    cols = (*table.columns[: at + 1], "display_name", *table.columns[at + 1 :])
    rows = tuple((*r[: at + 1], display_name(str(r[at] or "")), *r[at + 1 :]) for r in table.rows)
    return Table(cols, rows, table.total)


def instances(store: Store, ids: list[str], limit: int) -> Table:
    """Region instances with their region's declaration, in start order."""
    sql = f"""
        SELECT i.run_id, i.instance_id, i.path, i.instance_index, i.parent_instance_id, i.repetition, i.pid,
               i.thread_id, i.start_ns, i.end_ns, i.end_ns - i.start_ns AS wall_ns, i.cpu_ns, i.error, i.warmup,
               r.kind, r.module, r.file, r.line
        FROM region_instances i LEFT JOIN regions r ON r.region_id = i.region_id
        WHERE i.{IN_RUNS} ORDER BY i.run_id, i.start_ns LIMIT ?"""
    return query(store, sql, ids, limit)


def kernel_groups(store: Store, ids: list[str], limit: int) -> Table:
    """Per region path and kernel name: count, total and mean device time, launch shape (from CUPTI records)."""
    have = table_columns(store, "kernels")
    kind = "coalesce(k.kind, 'kernel')" if "kind" in have else "'kernel'"
    sql = f"""
        SELECT coalesce(i.path, '(outside every region)') AS path, k.name, {kind} AS kind, count(*) AS count,
               sum(k.end_ns - k.start_ns) AS total_ns, avg(k.end_ns - k.start_ns) AS mean_ns,
               any_value(k.registers) AS registers,
               any_value(k.grid_x || 'x' || k.grid_y || 'x' || k.grid_z) AS grid,
               any_value(k.block_x || 'x' || k.block_y || 'x' || k.block_z) AS block,
               string_agg(DISTINCT k.run_id, ',') AS runs
        FROM kernels k LEFT JOIN region_instances i ON i.run_id = k.run_id AND i.instance_id = k.instance_id
        WHERE k.{IN_RUNS} GROUP BY ALL ORDER BY total_ns DESC LIMIT ?"""
    return query(store, sql, ids, limit)


def kernel_rows(store: Store, ids: list[str], limit: int) -> Table:
    """Individual kernel records (the first ``limit`` in time order) with their region instance."""
    have = table_columns(store, "kernels")
    sql = f"""
        SELECT k.run_id, {_col(have, "kernel_key", prefix="k.")}, k.correlation_id, k.instance_id, i.path,
               i.instance_index, k.name, k.start_ns, k.end_ns - k.start_ns AS duration_ns, k.device_id, k.stream_id,
               k.registers, {_col(have, "kind", prefix="k.")}
        FROM kernels k LEFT JOIN region_instances i ON i.run_id = k.run_id AND i.instance_id = k.instance_id
        WHERE k.{IN_RUNS} ORDER BY k.run_id, k.start_ns LIMIT ?"""
    return query(store, sql, ids, limit)


def counters(store: Store, ids: list[str], limit: int) -> Table:
    """Per-kernel and per-binary values (hardware counters, compiler facts) with the join's attribution of them:
    the class, and the region instance (of the timing run, for an ncu kernel matched to it) they went to."""
    sql = f"""
        SELECT coalesce(i.path, '') AS path, i.instance_index, m.kernel_key, m.signal, m.value, m.unit,
               coalesce(a.class, '') AS attribution, m.backend, m.run_id, m.provenance_id
        FROM metrics m
        LEFT JOIN attributions a ON a.run_id = m.run_id AND a.evidence_id = m.kernel_key
                                AND a.evidence IN ('ncu_kernel', 'compiler')
        LEFT JOIN region_instances i ON i.run_id = coalesce(a.target_run_id, m.run_id)
                                    AND i.instance_id = coalesce(a.instance_id, m.instance_id)
        WHERE m.{IN_RUNS} AND m.kernel_key IS NOT NULL
        ORDER BY CASE WHEN m.signal LIKE 'hw:%' THEN 0 WHEN m.signal LIKE 'compile.%' THEN 1 ELSE 2 END,
                 m.signal, path, m.kernel_key LIMIT ?"""
    return query(store, sql, ids, limit)


_CLASSES_OF_VALUE = """concat_ws(',', CASE WHEN v.w_exact > 0 THEN 'exact' END,
    CASE WHEN v.w_ordinal > 0 THEN 'ordinal' END, CASE WHEN v.w_temporal > 0 THEN 'temporal' END,
    CASE WHEN v.w_ambiguous > 0 THEN 'ambiguous' END, CASE WHEN v.w_mismatch > 0 THEN 'mismatch' END)"""


def instance_values(store: Store, ids: list[str], limit: int) -> Table:
    """The join's value of every signal per instance (the Report's ``instance_values``), warm-up included and
    flagged, with the classes of the evidence behind it and its origin."""
    sql = f"""
        SELECT v.run_id, v.instance_id, i.path, i.instance_index, coalesce(i.warmup, false) AS warmup, v.signal,
               v.inclusive AS value, v.exclusive, v.unit, {_CLASSES_OF_VALUE} AS attribution, v.backend,
               v.provenance_id
        FROM instance_values v JOIN region_instances i ON i.run_id = v.run_id AND i.instance_id = v.instance_id
        WHERE v.{IN_RUNS}
        ORDER BY i.path, v.signal, coalesce(i.warmup, false) DESC, i.instance_index LIMIT ?"""
    return query(store, sql, ids, limit)


def attribution_summary(store: Store, ids: list[str], limit: int) -> Table:
    """For each region path and signal, how many of the join's values draw on each attribution class (a value
    counts once per class behind it; ``total`` is its share of the values' sum), warm-up left out."""
    sql = f"""
        WITH v AS (
            SELECT i.path, v.signal, v.inclusive, v.unit, v.w_exact AS exact, v.w_ordinal AS ordinal,
                   v.w_temporal AS temporal, v.w_ambiguous AS ambiguous, v.w_mismatch AS mismatch,
                   v.w_exact + v.w_ordinal + v.w_temporal + v.w_ambiguous + v.w_mismatch AS w
            FROM instance_values v JOIN region_instances i ON i.run_id = v.run_id AND i.instance_id = v.instance_id
            WHERE v.{IN_RUNS} AND NOT coalesce(i.warmup, false)
        ), c AS (
            UNPIVOT v ON exact, ordinal, temporal, ambiguous, mismatch INTO NAME class VALUE wc
        )
        SELECT path, signal, class, count(*) AS n, sum(inclusive * wc / w) AS total, any_value(unit) AS unit
        FROM c WHERE wc > 0 GROUP BY ALL
        UNION ALL
        SELECT path, signal, 'no evidence', count(*), sum(inclusive), any_value(unit) FROM v WHERE w = 0 GROUP BY ALL
        ORDER BY path, signal, class LIMIT ?"""
    return query(store, sql, ids, limit)


def evidence_classes(store: Store, ids: list[str], limit: int) -> Table:
    """From the attributions table: per region path, evidence kind and class, the number of items and weight."""
    sql = f"""
        SELECT coalesce(i.path, '(outside every region)') AS path, a.evidence, a.class, count(*) AS n,
               sum(a.weight) AS weight
        FROM attributions a LEFT JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id
        WHERE a.{IN_RUNS} GROUP BY ALL ORDER BY path, a.evidence, a.class LIMIT ?"""
    return query(store, sql, ids, limit)


def ambiguous_items(store: Store, ids: list[str], limit: int) -> Table:
    """Evidence items that are ambiguous, mismatched or unattributed, each with its candidates and reason."""
    sql = f"""
        SELECT a.run_id, a.evidence, a.evidence_id, a.class,
               list(coalesce(i.path || ' #' || i.instance_index, '-') || ' (w=' || round(a.weight, 3) || ')')
                   AS candidates,
               any_value(a.reason) AS reason
        FROM attributions a LEFT JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id
        WHERE a.{IN_RUNS} AND a.class IN ('ambiguous', 'mismatch', 'unattributed')
        GROUP BY a.run_id, a.evidence, a.evidence_id, a.class ORDER BY a.class, a.evidence_id LIMIT ?"""
    return query(store, sql, ids, limit)


def provenance(store: Store, ids: list[str], limit: int) -> Table:
    """Provenance rows: backend, version, settings, clocks, whether timestamps are measured."""
    sql = f"""SELECT provenance_id, run_id, backend, backend_version, settings, clocks, timestamps
              FROM provenance WHERE {IN_RUNS} ORDER BY run_id, backend LIMIT ?"""
    return query(store, sql, ids, limit)


def run_list(store: Store, limit: int = 200) -> Table:
    """Every run of the store, newest first, with its request (for ``%argus runs``)."""
    sql = """
        SELECT r.run_id, r.plan_index, r.status, r.backends, r.signals, r.reps_done, r.workload,
               (r.ended_ns - r.started_ns) / 1e9 AS seconds, q.text AS request, r.request_id
        FROM runs r LEFT JOIN requests q ON q.request_id = r.request_id
        ORDER BY r.started_ns DESC LIMIT ?"""
    with store.connect() as con:
        res = con.execute(sql, [limit])
        cols = tuple(d[0] for d in res.description)
        rows = tuple(tuple(r) for r in res.fetchall())
        total = con.execute("SELECT count(*) FROM runs").fetchone()
    return Table(cols, rows, int(total[0]) if total else len(rows))


def timeline_columns(
    store: Store, run_id: str, scope: ScopeFilter | None = None, kernel_scope: ScopeFilter | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The region instances and kernel records of one run as numpy-friendly columns (for the timeline), with each
    row's ``rank`` and ``offset_ns``: the rank's host-clock offset against rank 0 (``rank-0 time = time +
    offset``, the rule of :mod:`argus_lab.join.skew`), so that every rank can be drawn on rank 0's clock.

    ``scope`` (over ``region_instances``, alias ``i``) keeps the instances in scope; ``kernel_scope`` (over
    ``kernels``, alias ``k``) the records of the ranks, devices and streams in scope (a report's
    :attr:`~argus_lab.report.Report.scope_filter` and ``kernel_scope``).
    """
    from argus_lab.join.skew import OFFSETS_OF_RUNS

    have_i = table_columns(store, "region_instances")
    rank_i = "coalesce(i.rank, 0)" if "rank" in have_i else "0"
    name_i = "i.thread_name" if "thread_name" in have_i else "NULL"
    inst_sql, inst_params = scoped(
        f"""WITH o AS ({OFFSETS_OF_RUNS})
        SELECT i.instance_id, i.path, i.instance_index, i.pid, i.thread_id, {name_i} AS thread_name,
               {rank_i} AS rank, coalesce(o.offset_ns, 0) AS offset_ns, i.start_ns, i.end_ns, i.error, i.warmup
        FROM region_instances i LEFT JOIN o ON o.run_id = i.run_id AND o.rank = {rank_i}
        WHERE i.run_id = ? /*SCOPE*/ ORDER BY i.start_ns""",
        scope,
    )
    inst = _fetch_columns(store, inst_sql, [*inst_params, [run_id], run_id])
    have = table_columns(store, "kernels")
    kind = "k.kind" if "kind" in have else "'kernel' AS kind"
    rank_k = "coalesce(k.rank, 0)" if "rank" in have else "0"
    where = f" AND {kernel_scope.sql}" if kernel_scope is not None else ""
    kern = _fetch_columns(
        store,
        f"""WITH o AS ({OFFSETS_OF_RUNS})
        SELECT k.instance_id, k.name, k.start_ns, k.end_ns, k.device_id, k.stream_id, {kind}, {rank_k} AS rank,
               coalesce(o.offset_ns, 0) AS offset_ns
        FROM kernels k LEFT JOIN o ON o.run_id = k.run_id AND o.rank = {rank_k}
        WHERE k.run_id = ?{where} ORDER BY k.start_ns""",
        [[run_id], run_id, *(kernel_scope.params if kernel_scope is not None else ())],
    )
    return inst, kern


def _fetch_columns(store: Store, sql: str, params: list[Any]) -> dict[str, Any]:
    """A query's result as numpy columns; NULL numbers read as 0 ("none"), NULL text as ``None``."""
    import numpy as np

    with store.connect() as con:
        raw = con.execute(sql, params).fetchnumpy()
    out: dict[str, Any] = {}
    for name, value in raw.items():
        col: Any = value
        if isinstance(col, np.ma.MaskedArray):
            filled = np.ma.filled(col, 0) if col.dtype.kind in "iuf" else np.ma.filled(col.astype(object), None)
            out[name] = np.asarray(filled)
        else:
            out[name] = np.asarray(col)
    return out
