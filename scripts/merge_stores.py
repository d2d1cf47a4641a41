#!/usr/bin/env python3
"""Merge argus_lab stores of the same schema version into one (used to keep recorded evidence in one file).

    python scripts/merge_stores.py OUT.duckdb IN1.duckdb IN2.duckdb ...

Rows are copied table by table; rows whose primary key is already there (schema metadata, a shared session)
are kept once.  A store of another schema version is refused.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from argus_lab.model.schema import SCHEMA_VERSION, TABLES, store_values_sql  # noqa: E402
from argus_lab.store import Store  # noqa: E402

if TYPE_CHECKING:
    import duckdb


def sql_string(text: str) -> str:
    """A SQL string literal of ``text`` (quotes doubled): ATTACH takes its path as a literal, not a parameter."""
    return "'" + text.replace("'", "''") + "'"


VALUE_TABLES = ("value_series", "instance_value_rows")
"""Instance values: numbered by series, which each merged store numbers from 1 (:func:`_merge_values`)."""

LARGEST_SERIES = "(SELECT coalesce(max(series), 0) FROM main.value_series)"


def _merge_values(con: duckdb.DuckDBPyConnection, alias: str, have: set[str]) -> None:
    """The instance values of the attached store ``alias``, their series renumbered after the merged store's
    largest (a store before schema 4 keeps them wide, in an ``instance_values`` table)."""
    if "value_series" in have:
        row = con.execute(f"SELECT {LARGEST_SERIES}").fetchone()
        offset = int(row[0]) if row else 0
        for table in VALUE_TABLES:
            cols = [r[0] for r in con.execute(f"DESCRIBE {alias}.{table}").fetchall()]
            names = ", ".join(f'"{c}"' for c in cols)
            picked = ", ".join(f'"{c}" + {offset}' if c == "series" else f'"{c}"' for c in cols)
            con.execute(f"INSERT INTO main.{table} ({names}) SELECT {picked} FROM {alias}.{table}")
    elif "instance_values" in have:
        for stmt in store_values_sql(f"{alias}.instance_values", LARGEST_SERIES):
            con.execute(stmt)


def merge(out: Path, inputs: list[Path]) -> None:
    if out.exists():
        raise SystemExit(f"{out} exists; pass a new path for the merged store")
    store = Store(out)
    store.write({})  # creates the schema
    with store.connect(write=True) as con:
        for i, src in enumerate(inputs):
            alias = f"src{i}"
            con.execute(f"ATTACH {sql_string(str(src))} AS {alias} (READ_ONLY)")
            row = con.execute(f"SELECT value FROM {alias}.meta WHERE key = 'schema_version'").fetchone()
            if row is None or not str(row[0]).isdigit() or not 1 <= int(row[0]) <= SCHEMA_VERSION:
                raise SystemExit(f"{src}: schema version {row[0] if row else '?'}, expected 1..{SCHEMA_VERSION}")
            listed = con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = ?", [alias]).fetchall()
            have = {r[0] for r in listed}
            _merge_values(con, alias, have)
            for table in TABLES:
                if table not in have or table in VALUE_TABLES:
                    continue
                cols = [r[0] for r in con.execute(f"DESCRIBE {alias}.{table}").fetchall()]
                names = ", ".join(f'"{c}"' for c in cols)
                keyed = con.execute(
                    "SELECT count(*) FROM duckdb_constraints() WHERE database_name = current_database() "
                    "AND table_name = ? AND constraint_type = 'PRIMARY KEY'",
                    [table],
                ).fetchone()
                verb = "INSERT OR IGNORE" if keyed and keyed[0] else "INSERT"
                con.execute(f"{verb} INTO main.{table} ({names}) SELECT {names} FROM {alias}.{table}")
            con.execute(f"DETACH {alias}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    merge(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
