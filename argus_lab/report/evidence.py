"""Reading the detail rows views need from the store (bounded), beyond what the Report object exposes.

Every query takes the report's run ids and a row limit; each result is a :class:`Table` that records how many
rows exist in all, so a view can say "showing 2,000 of 1,000,000 (the rest stays in the store)".  Columns that a
store of an older layout lacks are read as empty, so views keep working while the schema grows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from argus_lab.report.json import jsonable
from argus_lab.report.scope_sql import ScopeFilter, scoped

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

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


def query(
    store: Store,
    sql: str,
    ids: list[str],
    limit: int,
    prepare: Callable[[Any], None] | None = None,
    params: Sequence[Any] | None = None,
) -> Table:
    """Run ``sql`` (``?`` = the run ids, then the row limit: it ends in ``LIMIT ?``) into a :class:`Table`.

    ``total`` counts the rows the same query gives without the limit; ``prepare`` runs on the connection first (the
    temporary tables the query reads); ``params``, when given, are bound before the limit instead of the run ids.
    """
    body = sql.rstrip()
    if not body.endswith("LIMIT ?"):
        msg = "internal: a detail query must end in `LIMIT ?`"
        raise ValueError(msg)
    bound = [ids] if params is None else list(params)

    def fetch(con: Any) -> Table:
        if prepare is not None:
            prepare(con)
        res = con.execute(sql, [*bound, limit])
        cols = tuple(d[0] for d in res.description)
        rows = tuple(tuple(r) for r in res.fetchall())
        total_row = con.execute(f"SELECT count(*) FROM ({body[: -len('LIMIT ?')]})", bound).fetchone()
        return Table(cols, rows, int(total_row[0]) if total_row else len(rows))

    return store.read(fetch)


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
    have = table_columns(store, "region_instances")
    sql = f"""
        SELECT i.run_id, i.instance_id, i.path, i.instance_index, i.parent_instance_id, i.repetition, i.pid,
               i.thread_id, {_col(have, "thread_name", prefix="i.")}, {_col(have, "rank", prefix="i.")},
               i.start_ns, i.end_ns, i.end_ns - i.start_ns AS wall_ns,
               CASE WHEN i.cpu_ns >= 0 THEN i.cpu_ns END AS cpu_ns, i.error, i.warmup,
               r.kind, r.module, r.file, r.line, s.cwd
        FROM region_instances i LEFT JOIN regions r ON r.region_id = i.region_id
        LEFT JOIN runs u ON u.run_id = i.run_id LEFT JOIN sessions s ON s.session_id = u.session_id
        WHERE i.{IN_RUNS} ORDER BY i.run_id, i.start_ns LIMIT ?"""
    return with_source_names(query(store, sql, ids, limit))


def with_source_names(table: Table) -> Table:
    """``table`` (columns ``file`` and ``cwd``) with ``file`` as people know it (:func:`source_display`: relative to
    the folder the run was started in, an IPython input as such) and without ``cwd``."""
    cols = table.columns
    fi, ci = cols.index("file"), cols.index("cwd")
    rows = tuple(
        tuple(source_display(str(r[fi] or ""), str(r[ci] or "")) if k == fi else v for k, v in enumerate(r) if k != ci)
        for r in table.rows
    )
    return Table(tuple(c for c in cols if c != "cwd"), rows, table.total)


def run_folders(store: Store, ids: list[str]) -> dict[str, str]:
    """The folder each run was started in (its session's ``cwd``), for paths relative to the project."""
    rows = store.rows(
        f"SELECT r.run_id, s.cwd FROM runs r JOIN sessions s ON s.session_id = r.session_id WHERE r.{IN_RUNS}", [ids]
    )
    return {str(r): str(c) for r, c in rows if c}


def relative_paths(text: str, cwd: str) -> str:
    """``text`` (a command line, a workload) with the paths under ``cwd`` relative to it: ``python
    /work/main/examples/x.py`` reads ``python examples/x.py`` (the recording machine's folders mean nothing here)."""
    root = cwd.rstrip("/")
    if not root or not text:
        return text
    return re.sub(rf"(?<![\w/.-]){re.escape(root)}/", "", text)


_IPYTHON_INPUT = re.compile(r"^<ipython-input-(\d+)-[0-9a-f]+>$")


def source_display(file: str, cwd: str) -> str:
    """Where a region was declared, for people: a file under the folder the run started in relative to it (the
    recording machine's absolute paths mean nothing elsewhere), an IPython input as ``IPython input [N]``, a notebook
    cell already named by the magics (``cell [3] of quickstart.ipynb``) as it is."""
    hit = _IPYTHON_INPUT.match(file)
    if hit:
        return f"IPython input [{hit.group(1)}]"
    if cwd and file.startswith(cwd.rstrip("/") + "/"):
        return file[len(cwd.rstrip("/")) + 1 :]
    return file


def kernel_groups(store: Store, ids: list[str], limit: int, scope: ScopeFilter | None = None) -> Table:
    """Per region path, kernel name and instance group: launches of measured instances (``count``) and of warm-up
    ones (``warmup``, kept apart, as every table does), total and mean device time of the measured ones, launch shape
    (from CUPTI records); ``main_group`` is false for the launches of instances outside their path's main
    kernel-sequence group (``Report.groups``: a first call that autotuned), which views show collapsed.

    The rows are the records ``Report.kernels`` reads (:func:`argus_lab.report.sql.kernel_records`, every kind of
    record): those of the instances in ``scope`` (a report's :attr:`~argus_lab.report.Report.scope_filter`), the
    others by their attribution, so the launches of a (path, name) are the sum of ``Report.kernels``' launches."""
    from argus_lab.report.rows import minor_instances
    from argus_lab.report.sql import kernel_records

    records = kernel_records(ordinal="NULL::INTEGER", kinds="TRUE")
    sql, bound = scoped(
        records
        + """
        SELECT path, name, coalesce(kind, 'kernel') AS kind,
               round(coalesce(sum(weight) FILTER (WHERE NOT warm), 0))::BIGINT AS count,
               round(coalesce(sum(weight) FILTER (WHERE warm), 0))::BIGINT AS warmup,
               sum(dur * weight) FILTER (WHERE NOT warm) AS total_ns,
               sum(dur * weight) FILTER (WHERE NOT warm) / sum(weight) FILTER (WHERE NOT warm) AS mean_ns,
               any_value(registers) AS registers,
               any_value(grid_x || 'x' || grid_y || 'x' || grid_z) AS grid,
               any_value(block_x || 'x' || block_y || 'x' || block_z) AS block,
               string_agg(DISTINCT run_id, ',') AS runs, NOT minor AS main_group
        FROM o GROUP BY path, name, kind, minor ORDER BY main_group DESC, total_ns DESC NULLS LAST LIMIT ?""",
        scope,
    )
    return query(store, sql, ids, limit, prepare=lambda con: minor_instances(con, ids), params=[*bound, ids, ids])


def kernel_rows(store: Store, ids: list[str], limit: int, scope: ScopeFilter | None = None) -> Table:
    """Individual kernel records (the first ``limit`` in time order) with their region instance: the records of
    :func:`kernel_groups` (those ``Report.kernels`` reads in ``scope``), warm-up ones marked."""
    from argus_lab.report.rows import minor_instances
    from argus_lab.report.sql import kernel_records

    have = table_columns(store, "kernels")
    records = kernel_records(ordinal="NULL::INTEGER", kinds="TRUE")
    sql, bound = scoped(
        records
        + f"""
        SELECT k.run_id, {_col(have, "kernel_key", prefix="k.")}, k.correlation_id, k.instance_id, i.path,
               i.instance_index, k.name, k.start_ns, k.end_ns - k.start_ns AS duration_ns, k.device_id, k.stream_id,
               k.registers, {_col(have, "kind", prefix="k.")}, coalesce(i.warmup, false) AS warmup
        FROM kernels k LEFT JOIN region_instances i ON i.run_id = k.run_id AND i.instance_id = k.instance_id
        WHERE k.{IN_RUNS} AND ((i.instance_id IS NOT NULL /*SCOPE*/)
            OR (i.instance_id IS NULL AND (k.run_id, k.kernel_key) IN (SELECT run_id, kernel_key FROM other)))
        ORDER BY k.run_id, k.start_ns LIMIT ?""",
        scope,
    )
    return query(store, sql, ids, limit, prepare=lambda con: minor_instances(con, ids), params=[*bound, ids, ids, ids])


def counters(store: Store, ids: list[str], limit: int) -> Table:
    """Per-kernel and per-binary values (hardware counters, compiler facts) with the join's attribution of them:
    the class, the region instance (of the timing run, for an ncu kernel matched to it) they went to, the kernel's
    name (demangled in ``display_name``) and its ordinal within the instance, in region, instance and ordinal order
    (numbers, not text).  The store's internal key stays in ``kernel_key`` for links, not for reading."""
    sql = f"""
        SELECT coalesce(i.path, '') AS path, i.instance_index, n.ordinal,
               coalesce(n.name, f.name, regexp_extract(m.kernel_key, '^bin:(.*):[^:]*$', 1), m.kernel_key) AS name,
               m.signal, m.value, m.unit, coalesce(a.class, '') AS attribution, m.backend, m.run_id,
               coalesce(i.warmup, false) AS warmup, m.kernel_key, m.provenance_id
        FROM metrics m
        LEFT JOIN attributions a ON a.run_id = m.run_id AND a.evidence_id = m.kernel_key
                                AND a.evidence IN ('ncu_kernel', 'compiler')
        LEFT JOIN region_instances i ON i.run_id = coalesce(a.target_run_id, m.run_id)
                                    AND i.instance_id = coalesce(a.instance_id, m.instance_id)
        LEFT JOIN ncu_kernels n ON n.run_id = m.run_id AND n.kernel_key = m.kernel_key
        LEFT JOIN (SELECT DISTINCT run_id, name, 'bin:' || name || ':' || coalesce(binary_hash, '') AS key
                   FROM kernel_facts) f ON f.run_id = m.run_id AND f.key = m.kernel_key
        WHERE m.{IN_RUNS} AND m.kernel_key IS NOT NULL
        ORDER BY CASE WHEN m.signal LIKE 'hw:%' THEN 0 WHEN m.signal LIKE 'compile.%' THEN 1 ELSE 2 END,
                 m.signal, path, i.instance_index NULLS LAST, n.ordinal NULLS LAST, name LIMIT ?"""
    return with_display_names(query(store, sql, ids, limit))


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
    counts once per class behind it), warm-up left out.  ``total`` combines the values by the signal's rule
    (``agg``: the share of the values' sum for a signal that adds up, their mean for a percentage, a level or a
    rate, the largest for a maximum or a per-kernel fact): a percentage never grows by adding."""
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
        SELECT path, signal, class, count(*) AS n, sum(inclusive * wc / w) AS total, avg(inclusive) AS mean,
               max(inclusive) AS hi, min(inclusive) AS lo, any_value(unit) AS unit
        FROM c WHERE wc > 0 GROUP BY ALL
        UNION ALL
        SELECT path, signal, 'no evidence', count(*), sum(inclusive), avg(inclusive), max(inclusive), min(inclusive),
               any_value(unit)
        FROM v WHERE w = 0 GROUP BY ALL
        ORDER BY path, signal, class LIMIT ?"""
    return by_rule(query(store, sql, ids, limit))


def by_rule(table: Table) -> Table:
    """``table`` (columns ``signal``, ``total`` (a sum), ``mean``, ``hi``, ``lo``) with ``total`` taken by each signal's
    aggregation rule (``plan.catalog.aggregation``) and the rule in an ``agg`` column."""
    from argus_lab.plan.catalog import aggregation

    cols = table.columns
    at = {c: cols.index(c) for c in ("signal", "total", "mean", "hi", "lo")}
    pick = {"sum": "total", "max": "hi", "fact": "hi", "min": "lo"}
    keep = [i for i, c in enumerate(cols) if c not in ("mean", "hi", "lo")]
    rows = []
    for r in table.rows:
        rule = aggregation(str(r[at["signal"]]))
        chosen = r[at[pick.get(rule, "mean")]]
        rows.append((*(chosen if i == at["total"] else r[i] for i in keep), rule))
    return Table((*(cols[i] for i in keep), "agg"), tuple(rows), table.total)


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

    def fetch(con: Any) -> Table:
        res = con.execute(sql, [limit])
        cols = tuple(d[0] for d in res.description)
        rows = tuple(tuple(r) for r in res.fetchall())
        total = con.execute("SELECT count(*) FROM runs").fetchone()
        return Table(cols, rows, int(total[0]) if total else len(rows))

    return store.read(fetch)


def flame(store: Store, ids: list[str]) -> list[dict[str, Any]]:
    """Per region path and time signal (unit ns): summed inclusive and exclusive values of the measured (non-warm-up)
    instances, and their count, from the one run that measured the signal first (plan order), so that replay runs
    never add to the timing run.  What the flame view of a report draws."""
    rows = store.records(
        f"""
        SELECT v.run_id, i.path, v.signal, sum(v.inclusive) AS inclusive, sum(v.exclusive) AS exclusive,
               count(*) AS instances, any_value(v.unit) AS unit, any_value(r.plan_index) AS plan_index
        FROM region_instances i
        JOIN instance_values v ON v.run_id = i.run_id AND v.instance_id = i.instance_id
        JOIN runs r ON r.run_id = i.run_id
        WHERE i.{IN_RUNS} AND NOT coalesce(i.warmup, false) AND v.unit = 'ns' AND v.inclusive IS NOT NULL
        GROUP BY v.run_id, i.path, v.signal ORDER BY plan_index, i.path, v.signal
        """,
        [ids],
    )
    first: dict[str, str] = {}
    for r in rows:
        first.setdefault(r["signal"], r["run_id"])
    return [
        {k: r[k] for k in ("run_id", "path", "signal", "inclusive", "exclusive", "instances", "unit")}
        for r in rows
        if first[r["signal"]] == r["run_id"]
    ]


def _fetch_columns(store: Store, sql: str, params: list[Any]) -> dict[str, Any]:
    """A query's result as numpy columns; NULL numbers read as 0 ("none"), NULL booleans as false, NULL text as
    ``None``.  Read in batches (the result is never whole in DuckDB and in Python at once), and a text column holds
    one Python string per distinct value (a million instances of a few region paths are a million references to a
    few strings, not a million strings: ~90 MB less per million rows)."""
    import numpy as np

    def fetch(con: Any) -> dict[str, Any]:
        rel = con.sql(sql, params=params)  # a relation streams its batches (a DB-API result copies them whole)
        read = getattr(rel, "to_arrow_reader", None) or rel.record_batch  # (DuckDB 2 / earlier)
        reader = read(COLUMN_BATCH)
        parts: dict[str, list[Any]] = {name: [] for name in reader.schema.names}
        words: dict[str, dict[Any, Any]] = {name: {} for name in reader.schema.names}
        for batch in reader:
            for name, col in zip(batch.schema.names, batch.columns, strict=True):
                parts[name].append(_numpy_column(col, words[name]))
        out: dict[str, Any] = {}
        for name in list(parts):  # one column at a time, its batches let go as it is joined: never all twice
            p = parts.pop(name)
            out[name] = np.concatenate(p) if p else np.asarray([], dtype=_empty_dtype(reader.schema.field(name).type))
            del p
        return out

    return store.read(fetch)


COLUMN_BATCH = 131_072
"""Rows a batch of :func:`_fetch_columns` reads at once."""


def _numpy_column(col: Any, words: dict[Any, Any]) -> Any:
    """One Arrow column of a batch as numpy (see :func:`_fetch_columns`); ``words``: the strings seen so far."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = col.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        coded = pc.dictionary_encode(col)
        shared = [None if w is None else words.setdefault(w, w) for w in coded.dictionary.to_pylist()]
        table = np.asarray([*shared, None], dtype=object)
        return table[coded.indices.fill_null(len(shared)).to_numpy(zero_copy_only=False)]
    if pa.types.is_boolean(kind):
        return col.fill_null(False).to_numpy(zero_copy_only=False)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return col.fill_null(0).to_numpy(zero_copy_only=False)
    return np.asarray(col.to_pylist(), dtype=object)  # (lists, structs, timestamps: Python values, None as NULL)


def _empty_dtype(kind: Any) -> Any:
    import pyarrow as pa

    if pa.types.is_boolean(kind):
        return bool
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return kind.to_pandas_dtype()
    return object
