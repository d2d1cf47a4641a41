"""Trimming a store for recorded evidence that travels: keep some runs, drop raw device intervals of others.

An instrumented launch of a persistent kernel records up to hundreds of thousands of device-region occurrences
(``device_intervals``); a store of a dozen such launches is tens of megabytes even compacted.  What the Report and
the evidence read of a launch (``device_values``, ``device_sm``, ``device_programs``, ``device_launches``) stays
when its raw intervals go; only the per-SM timeline of that launch (views/device.py) needs them.

:func:`keep_runs` deletes every row of every run not kept (and the runs' folders); :func:`drop_device_intervals`
deletes the raw intervals of some runs, or only their nested ones (``min_depth``).  Both write under the store's
lock; :func:`argus_lab.store.compact.compact` afterwards gives the space back.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from argus_lab.store.db import Store
from argus_lab.store.sink import run_folder


def _store(store: Store | str | Path) -> Store:
    st = store if isinstance(store, Store) else Store(store)
    if not st.path.exists():
        msg = f"no store at {str(st.path)!r} to trim; give the path of an existing .duckdb file"
        raise FileNotFoundError(msg)
    return st


RUN_TABLES_SQL = (
    "SELECT DISTINCT c.table_name FROM information_schema.columns c JOIN information_schema.tables t "
    "ON t.table_name = c.table_name AND t.table_schema = c.table_schema "
    "WHERE c.column_name = 'run_id' AND t.table_type = 'BASE TABLE' ORDER BY 1"
)


ORPHAN_VALUES = "DELETE FROM instance_value_rows WHERE series NOT IN (SELECT series FROM value_series)"
"""The instance values whose series is gone (the run they belong to was deleted)."""


def run_tables(store: Store | str | Path) -> list[str]:
    """The base tables of ``store`` that have a ``run_id`` column (views such as ``attributions`` follow them)."""
    return [r[0] for r in _store(store).rows(RUN_TABLES_SQL)]


def keep_runs(store: Store | str | Path, run_ids: Iterable[str]) -> list[str]:
    """Delete every run of ``store`` not in ``run_ids``: its rows in every table with a ``run_id`` column and its
    run folder (``<store>.runs/<run_id>``).  Returns the runs removed."""
    st = _store(store)
    keep = sorted(set(run_ids))
    with st.connect(write=True) as con:
        # read under the write connection: opening it may migrate an older store (attributions become a view)
        tables = [r[0] for r in con.execute(RUN_TABLES_SQL).fetchall()]
        gone = [
            r[0]
            for r in con.execute(
                "SELECT run_id FROM runs WHERE run_id NOT IN (SELECT unnest(?::VARCHAR[])) ORDER BY run_id", [keep]
            ).fetchall()
        ]
        if gone:
            con.execute("BEGIN")
            try:
                for table in tables:
                    con.execute(f'DELETE FROM "{table}" WHERE run_id IN (SELECT unnest(?::VARCHAR[]))', [gone])
                con.execute(ORPHAN_VALUES)  # instance values carry their run through their series
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
    for run_id in gone:
        folder = run_folder(st, run_id)
        if folder.is_dir():
            shutil.rmtree(folder)
    return gone


def device_interval_counts(store: Store | str | Path) -> dict[str, int]:
    """Raw device intervals per run (runs without any are absent)."""
    st = _store(store)
    if "device_intervals" not in run_tables(st):
        return {}
    return {r[0]: int(r[1]) for r in st.rows("SELECT run_id, count(*) FROM device_intervals GROUP BY run_id")}


def drop_device_intervals(
    store: Store | str | Path, run_ids: Iterable[str] | None = None, *, min_depth: int | None = None
) -> int:
    """Delete the raw device intervals of ``run_ids`` (``None``: of every run), or only those nested at
    ``min_depth`` or deeper (``min_depth=1`` keeps each program's outermost regions).  Returns the rows deleted."""
    st = _store(store)
    if "device_intervals" not in run_tables(st):
        return 0
    where: list[str] = []
    params: list[Any] = []
    if run_ids is not None:
        where.append("run_id IN (SELECT unnest(?::VARCHAR[]))")
        params.append(sorted(set(run_ids)))
    if min_depth is not None:
        where.append("depth >= ?")
        params.append(int(min_depth))
    clause = " WHERE " + " AND ".join(where) if where else ""
    with st.connect(write=True) as con:
        row = con.execute(f"SELECT count(*) FROM device_intervals{clause}", params).fetchone()
        n = int(row[0]) if row else 0
        if n:
            con.execute(f"DELETE FROM device_intervals{clause}", params)
    return n


__all__ = ["device_interval_counts", "drop_device_intervals", "keep_runs", "run_tables"]
