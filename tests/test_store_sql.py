"""The store as the notebook's database: ``argus_lab.sql`` / ``Store.sql`` / ``%argus sql`` answer through
argus_lab's own access, and a DuckDB connection of the user's own in the same process is named at once with the
fix, never waited on as if another process held the file (it used to wait 240 s, then blame "another process").
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

import argus_lab
from argus_lab.errors import QueryError
from argus_lab.store import Store

ROOT = Path(__file__).resolve().parents[1]


def _measured(path: Path) -> Path:
    def step() -> None:
        with argus_lab.region("work"):
            sum(range(1000))

    argus_lab.measure(step, "host.wall", repeat=3, warmup=1, store=str(path), progress=False)
    return path


def test_sql_answers_with_a_dataframe_and_holds_nothing_between_queries(tmp_path: Path) -> None:
    store = _measured(tmp_path / "s.duckdb")
    df = argus_lab.sql(
        "SELECT path, count(*) AS n FROM region_instances WHERE NOT warmup GROUP BY path", store=str(store)
    )
    assert isinstance(df, pl.DataFrame) and df.to_dicts() == [{"path": "work", "n": 3}]
    _measured(store)  # a measurement right after a query writes: nothing was left open
    n = Store(store).sql("SELECT count(*) AS n FROM runs WHERE run_id LIKE ?", ["r-%"])
    assert n["n"][0] == 2


def test_a_query_the_store_refuses_says_why_and_where_the_tables_are(tmp_path: Path) -> None:
    store = _measured(tmp_path / "s.duckdb")
    with pytest.raises(QueryError, match=r"SHOW TABLES.*DESCRIBE"):
        argus_lab.sql("SELECT * FROM no_such_table", store=str(store))
    with pytest.raises(QueryError, match="queries read the store; only argus_lab writes it"):
        argus_lab.sql("DELETE FROM runs", store=str(store))
    assert Store(store).rows("SELECT count(*) FROM runs")[0][0] == 1


_SAME_PROCESS = textwrap.dedent(
    """
    import sys, duckdb, argus_lab
    from argus_lab.errors import StoreError
    store = sys.argv[1]
    con = duckdb.connect(store, read_only=True)  # what a user types next to the measurements
    print("read", argus_lab.sql("SELECT count(*) AS n FROM runs", store=store)["n"][0])
    try:
        argus_lab.measure(lambda: None, "host.wall", repeat=1, warmup=0, store=store, progress=False)
    except StoreError as exc:
        print("refused:", exc)
    con.close()
    argus_lab.measure(lambda: None, "host.wall", repeat=1, warmup=0, store=store, progress=False)
    print("after close", argus_lab.sql("SELECT count(*) AS n FROM runs", store=store)["n"][0])
    """
)


def test_a_users_own_read_only_connection_is_named_at_once_with_the_fix(tmp_path: Path) -> None:
    """In a process of its own, as a notebook kernel is; the timeout only turns a wait on the lock (120 s, the old
    behaviour) into a failure instead of a hang."""
    store = _measured(tmp_path / "s.duckdb")
    out = subprocess.run(
        [sys.executable, "-c", _SAME_PROCESS, str(store)],
        capture_output=True,
        text=True,
        timeout=100,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        check=True,
    ).stdout
    assert "read 1" in out  # reading goes through the user's connection's settings
    refused = next(line for line in out.splitlines() if line.startswith("refused:"))
    # the open connection is named (the user's variable), with the store's path and the exact fix
    assert "the DuckDB connection `con` of this notebook (or script) holds it open" in refused
    assert repr(str(store)) in refused
    assert "`con.close()`" in refused and "argus_lab.sql" in refused and "another process" not in refused
    assert "after close 2" in out


def test_with_a_users_read_write_connection_measuring_and_reading_still_work(tmp_path: Path) -> None:
    store = _measured(tmp_path / "s.duckdb")
    con = duckdb.connect(str(store))  # the same settings as argus_lab's writer: DuckDB shares the database
    try:
        _measured(store)
        assert argus_lab.sql("SELECT count(*) AS n FROM runs", store=str(store))["n"][0] == 2
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (2,)
    finally:
        con.close()


def test_the_sql_magic_answers_a_line_and_a_cell(ipython_shell: Any, tmp_path: Path) -> None:
    store = _measured(tmp_path / "s.duckdb")
    ip = ipython_shell
    line = ip.run_line_magic("argus", f"sql --store {store} SELECT count(*) AS n FROM region_instances")
    assert line["n"][0] == 4  # warm-up included: the table as stored
    cell = ip.run_cell_magic("argus", f"sql --store {store}", "SELECT name\nFROM regions\nORDER BY name")
    assert cell["name"].to_list() == ["work"]
    res = ip.run_cell("%argus sql")
    assert not res.success
