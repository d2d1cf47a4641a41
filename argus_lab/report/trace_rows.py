"""The rows the trace and Parquet exports stream out of the store (:mod:`argus_lab.views.perfetto`).

One run at a time, on the connection of a :meth:`Store.read <argus_lab.store.Store.read>`: its region instances
with their values (:data:`INSTANCES`), its GPU records with their attribution (:data:`KERNELS`), its time samples
(:data:`SAMPLES`), where its evidence starts (:func:`trace_start`), the pid of each rank (:func:`rank_pids`) and the
names of its launching threads (:func:`launch_thread_names`); and every table copied out as Parquet
(:func:`copy_tables`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from argus_lab.model.schema import BEHIND_VIEWS, TABLES, VIEWS

INSTANCES = """
SELECT i.instance_id, i.path, i.instance_index, i.repetition, coalesce(i.pid, 0) AS pid, coalesce(i.rank, 0) AS rank,
       coalesce(i.thread_id, 0) AS tid, i.start_ns, i.end_ns, coalesce(i.error, '') AS error,
       coalesce(i.thread_name, '') AS thread_name, regexp_extract(i.path, '[^/]*$') AS name,
       v.vals
FROM region_instances i
LEFT JOIN (SELECT instance_id, map(list(signal), list(inclusive)) AS vals FROM instance_values
           WHERE run_id = $1 AND instance_id IN (SELECT instance_id FROM region_instances
                                                 WHERE run_id = $1 AND start_ns >= $2 AND start_ns < $3)
           GROUP BY instance_id) v ON v.instance_id = i.instance_id
WHERE i.run_id = $1 AND i.start_ns >= $2 AND i.start_ns < $3 AND i.end_ns IS NOT NULL
ORDER BY i.start_ns, i.end_ns DESC
"""
"""A run's region instances (``$1``) that start in ``[$2, $3)`` ns, with their values, in Perfetto's order."""

KERNELS = """
WITH a AS (
    SELECT evidence_id, arg_max(class, weight) AS class, max(weight) AS weight, count(*) AS candidates,
           arg_max(instance_id, weight) AS instance_id, arg_max(reason, weight) AS reason
    FROM attributions WHERE run_id = $1 AND evidence IN ('kernel', 'memcpy', 'memset')
    AND evidence_id IN (SELECT kernel_key FROM kernels WHERE run_id = $1 AND start_ns >= $2 AND start_ns < $3)
    GROUP BY evidence_id
)
SELECT coalesce(k.kind, 'kernel') AS kind, k.name, k.kernel_key, k.correlation_id, coalesce(k.device_id, 0) AS device,
       coalesce(k.stream_id, 0) AS stream, k.start_ns, k.end_ns, k.thread_id, k.api_start_ns, k.api_end_ns,
       coalesce(k.rank, 0) AS rank, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.bytes,
       coalesce(a.class, 'unattributed') AS class, a.weight, a.candidates, a.reason, i.path
FROM kernels k
LEFT JOIN a ON a.evidence_id = k.kernel_key
LEFT JOIN region_instances i ON i.run_id = k.run_id AND i.instance_id = a.instance_id
WHERE k.run_id = $1 AND k.start_ns >= $2 AND k.start_ns < $3
ORDER BY k.start_ns, k.end_ns DESC
"""
"""A run's GPU records (``$1``) that start in ``[$2, $3)`` ns, each with its heaviest attribution, in Perfetto's
order (by start, longest first)."""

SAMPLES = """
SELECT coalesce(device_id, 0) AS device, signal, unit, t_ns, value FROM samples
WHERE run_id = $1 AND t_ns >= $2 AND t_ns < $3 AND value IS NOT NULL ORDER BY t_ns
"""
"""A run's time samples (``$1``) taken in ``[$2, $3)`` ns, in time order."""

WINDOW_ROWS = 65_536
"""The most rows one window of :func:`windows` holds (unless they all start at one ns): DuckDB sorts and joins one
window at a time, within the first read limit (128 MB) for any number of windows (docs/benchmarks.md, "the
Perfetto export in windows")."""

BOUNDS = """
SELECT min(t) FROM (
    SELECT min(start_ns) AS t FROM region_instances WHERE run_id = $1
    UNION ALL SELECT min(least(start_ns, coalesce(nullif(api_start_ns, 0), start_ns))) FROM kernels WHERE run_id = $1
    UNION ALL SELECT min(t_ns) FROM samples WHERE run_id = $1
)
"""


def trace_start(con: Any, runs: Sequence[str]) -> int:
    """The earliest time (ns) of any instance, launch or sample of ``runs`` (0 when they hold none)."""
    starts = [row[0] for r in runs if (row := con.execute(BOUNDS, [r]).fetchone()) and row[0] is not None]
    return int(min(starts)) if starts else 0


def rank_pids(con: Any, run_id: str) -> list[tuple[Any, Any]]:
    """(rank, one pid of it) for each rank whose instances the run recorded."""
    rows = con.execute(
        "SELECT coalesce(rank, 0), any_value(pid) FROM region_instances WHERE run_id = ? GROUP BY ALL", [run_id]
    ).fetchall()
    return [(rk, pid) for rk, pid in rows]


def launch_thread_names(con: Any, run_id: str) -> dict[tuple[int, int], str]:
    """(rank, 32-bit thread id) -> the name the run noted for a launching thread (its ``threads`` rows; stores
    written before that table have none): autograd's threads keep their system name, so an import of the export
    still knows them."""
    have = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'threads'").fetchone()
    if not have or not have[0]:
        return {}
    rows = con.execute(
        "SELECT coalesce(rank, 0), thread_id % 4294967296, "
        "CASE WHEN coalesce(role, '') <> '' THEN coalesce(nullif(system_name, ''), name) "
        "ELSE coalesce(nullif(name, ''), system_name) END FROM threads WHERE run_id = ?",
        [run_id],
    ).fetchall()
    return {(int(rk), int(t)): str(n) for rk, t, n in rows if n}


def windows(con: Any, table: str, column: str, run_id: str, per: int | None = None) -> list[tuple[int, int]]:
    """Half-open ranges ``[lo, hi)`` of ``column`` (ns) that together hold every row of ``run_id`` in ``table`` whose
    ``column`` is set, in order, each at most ``per`` rows (:data:`WINDOW_ROWS` when not given; more only where that
    many rows share one ns).  Counted in DuckDB (a histogram of at most 65,536 buckets, finer where a bucket holds
    too many): no row comes to Python."""
    got = con.execute(
        f"SELECT min({column}), max({column}), count({column}) FROM {table} WHERE run_id = $1", [run_id]
    ).fetchone()
    if not got or not got[2]:
        return []
    return list(_split(con, table, column, run_id, int(got[0]), int(got[1]) + 1, int(got[2]), per or WINDOW_ROWS))


def _split(
    con: Any, table: str, column: str, run_id: str, lo: int, hi: int, n: int, per: int
) -> Iterator[tuple[int, int]]:
    """The windows of ``[lo, hi)``, which holds ``n`` rows."""
    if n <= per or hi - lo <= 1:
        yield lo, hi
        return
    width = -(-(hi - lo) // min(hi - lo, max(2, 16 * n // per), 1 << 16))  # ceil: the buckets cover [lo, hi)
    counts = con.execute(
        f"SELECT ({column} - $2) // $4 AS b, count(*) FROM {table} "
        f"WHERE run_id = $1 AND {column} >= $2 AND {column} < $3 GROUP BY b ORDER BY b",
        [run_id, lo, hi, width],
    ).fetchall()
    start, held = lo, 0
    for b, count in counts:
        b_lo = lo + int(b) * width
        b_hi = min(hi, b_lo + width)
        if held and held + count > per:
            yield start, b_lo
            start, held = b_lo, 0
        if count > per:  # one bucket alone holds too many: its own windows, finer
            yield from _split(con, table, column, run_id, b_lo, b_hi, int(count), per)
            start = b_hi
        else:
            held += int(count)
    if held:
        yield start, hi


def stream_rows(
    con: Any, sql: str, run_id: str, ranges: Sequence[tuple[int, int]], batch: int = 65_536
) -> Iterator[dict[str, Any]]:
    """The rows of ``sql`` (one of :data:`INSTANCES`, :data:`KERNELS`, :data:`SAMPLES`) for one run as dicts, one
    window of ``ranges`` (:func:`windows`) after the other, fetched ``batch`` at a time (never all held at once)."""
    for lo, hi in ranges:
        res = con.execute(sql, [run_id, lo, hi])
        names = [d[0] for d in res.description]
        while chunk := res.fetchmany(batch):
            for row in chunk:
                yield dict(zip(names, row, strict=True))


def copy_tables(con: Any, folder: Path, run_ids: Sequence[str] | None) -> list[str]:
    """Copy every table and view of the store (the tables behind views left out) to ``<folder>/<table>.parquet``,
    only ``run_ids``' rows where a table has runs; returns the file names written."""
    names = []
    present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    for table in [*(t for t in TABLES if t not in BEHIND_VIEWS), *VIEWS]:
        if table not in present:
            continue
        cols = {d[0] for d in con.execute(f"SELECT * FROM {table} LIMIT 0").description or ()}
        where = ""
        params: list[Any] = []
        if run_ids is not None and "run_id" in cols:
            where = " WHERE run_id IN (SELECT unnest(?::VARCHAR[]))"
            params = [list(run_ids)]
        elif run_ids is not None and table == "requests":
            where = " WHERE request_id IN (SELECT request_id FROM runs WHERE run_id IN (SELECT unnest(?::VARCHAR[])))"
            params = [list(run_ids)]
        target = folder / f"{table}.parquet"
        sql = f"COPY (SELECT * FROM {table}{where}) TO '{_sql_path(target)}' (FORMAT parquet, COMPRESSION zstd)"
        con.execute(sql, params)
        names.append(target.name)
    return names


def _sql_path(p: Path) -> str:
    return str(p).replace("'", "''")


__all__ = ["INSTANCES", "KERNELS", "SAMPLES", "WINDOW_ROWS", "copy_tables", "launch_thread_names", "rank_pids",
           "stream_rows", "trace_start", "windows"]  # fmt: skip
