"""The DuckDB evidence store: schema versions, bad paths, bulk writes and two writing processes."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import duckdb
import pytest

from argus_lab.errors import SchemaVersionError, StoreError
from argus_lab.store import SCHEMA_VERSION, Store


def _instances(run: str, n: int, start: int = 0) -> dict[str, list[object]]:
    return {
        "run_id": [run] * n,
        "instance_id": list(range(start + 1, start + n + 1)),
        "path": ["a"] * n,
        "start_ns": [10] * n,
        "end_ns": [20] * n,
    }


def test_new_store_gets_the_current_schema(store_path: Path) -> None:
    Store(store_path).write({"region_instances": _instances("r1", 3)})
    con = duckdb.connect(str(store_path), read_only=True)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert con.execute("SELECT count(*) FROM region_instances").fetchone() == (3,)
    con.close()


def test_newer_schema_is_refused_with_the_fix(store_path: Path) -> None:
    Store(store_path).write({"region_instances": _instances("r1", 1)})
    con = duckdb.connect(str(store_path))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    con.close()
    with pytest.raises(SchemaVersionError, match=r"newer than this argus_lab understands.*pip install -U"):
        Store(store_path).rows("SELECT 1")


def test_a_foreign_duckdb_file_is_refused(store_path: Path) -> None:
    con = duckdb.connect(str(store_path))
    con.execute("CREATE TABLE t (x INT)")
    con.close()
    with pytest.raises(SchemaVersionError, match="not an argus_lab store"):
        Store(store_path).write({"region_instances": _instances("r1", 1)})


def test_a_file_that_is_not_duckdb_is_refused(store_path: Path) -> None:
    store_path.write_text("hello")
    with pytest.raises(StoreError, match="evidence store"):
        Store(store_path).write({"region_instances": _instances("r1", 1)})


def test_unwritable_location_says_how_to_fix(tmp_path: Path) -> None:
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):  # root ignores permissions: use a path below a file instead
            target = tmp_path / "file"
            target.write_text("")
            path = target / "store.duckdb"
        else:
            path = locked / "store.duckdb"
        with pytest.raises(StoreError, match=r"choose a writable location with --store"):
            Store(path).write({"region_instances": _instances("r1", 1)})
    finally:
        locked.chmod(0o700)


def test_reading_a_missing_store(store_path: Path) -> None:
    with pytest.raises(StoreError, match="run a measurement first"):
        Store(store_path).rows("SELECT 1")


def test_failed_transaction_writes_nothing(store_path: Path) -> None:
    store = Store(store_path)
    store.write({"region_instances": _instances("r0", 1)})
    with pytest.raises(duckdb.Error):
        store.write({"region_instances": _instances("r1", 2), "runs": {"run_id": ["x"], "plan_index": ["nan?"]}})
    assert store.rows("SELECT count(*) FROM region_instances") == [(1,)]


def _writer(path: str, run: str, batches: int) -> None:
    store = Store(path)
    for b in range(batches):
        store.write({"region_instances": _instances(run, 50, start=b * 50)})


def test_two_processes_writing_one_store_lose_nothing(store_path: Path) -> None:
    Store(store_path).write({"region_instances": _instances("seed", 1)})
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(store_path), f"p{i}", 20)) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    rows = Store(store_path).rows("SELECT run_id, count(*) FROM region_instances GROUP BY run_id ORDER BY run_id")
    assert rows == [("p0", 1000), ("p1", 1000), ("seed", 1)]


def test_columns_added_within_the_schema_version_are_added_to_an_older_store(store_path: Path) -> None:
    Store(store_path).write({"region_instances": _instances("r1", 1)})
    con = duckdb.connect(str(store_path))
    con.execute("ALTER TABLE region_instances DROP COLUMN thread_name")  # a store written before the column
    con.close()
    store = Store(store_path)
    assert store.rows("SELECT count(*) FROM region_instances") == [(1,)]  # a read first: nothing changes
    store.write({"region_instances": {**_instances("r2", 1), "thread_name": ["loader"]}})
    assert store.rows("SELECT run_id, thread_name FROM region_instances ORDER BY run_id") == [
        ("r1", None),
        ("r2", "loader"),
    ]


def merge_stores(out: Path, sources: list[str]) -> Store:
    """scripts/merge_stores.py OUT SOURCES..., run as a user runs it; the merged store."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, str(root / "scripts" / "merge_stores.py"), str(out), *sources],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return Store(out)


def test_merge_stores_takes_paths_with_quotes(tmp_path: Path) -> None:
    """scripts/merge_stores.py: a store path with a quote (and SQL after it) is attached as a path, not run as SQL."""

    folder = tmp_path / "it's'; DROP TABLE runs; --"
    folder.mkdir()
    sources = []
    for n in range(2):
        st = Store(folder / f"s{n}.duckdb")
        st.write({"runs": {"run_id": [f"r{n}"], "status": ["ok"]}, "sessions": {"session_id": ["shared"]}})
        sources.append(str(st.path))
    out = tmp_path / "merged.duckdb"
    merged = merge_stores(out, sources)
    assert merged.rows("SELECT run_id FROM runs ORDER BY 1") == [("r0",), ("r1",)]
    assert merged.rows("SELECT count(*) FROM sessions") == [(1,)]  # a shared session is kept once


def test_a_version_1_store_gets_the_device_tables_and_version_2_on_its_first_write(store_path: Path) -> None:
    Store(store_path).write({"region_instances": _instances("r1", 1)})
    con = duckdb.connect(str(store_path))
    for table in ("device_launches", "device_programs", "device_intervals", "device_values", "device_sm"):
        con.execute(f"DROP TABLE {table}")  # the layout of schema version 1
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.close()
    store = Store(store_path)
    assert store.rows("SELECT value FROM meta WHERE key = 'schema_version'") == [("1",)]  # reading migrates nothing
    store.write({"device_launches": {"run_id": ["r2"], "launch": [0], "kernel": ["k"]}})
    assert store.rows("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    assert store.rows("SELECT run_id, kernel FROM device_launches") == [("r2", "k")]
    assert store.rows("SELECT count(*) FROM region_instances") == [(1,)]


def test_numpy_variable_width_strings_reach_the_store_as_fixed_width_unicode(store_path: Path) -> None:
    """The CUPTI collector builds its kernel keys as numpy StringDType arrays (no Python object per key); pyarrow
    before release 19 cannot read that dtype ("Unsupported numpy type 2056" on the H200's image), so the columns go
    to Arrow as fixed-width unicode, and the store holds the same text."""
    import numpy as np

    from argus_lab.model.columns import jsonable_columns

    keys = np.asarray(["0/1/17/0", "0/1/18/0"], dtype=np.dtypes.StringDType())
    assert jsonable_columns({"kernel_key": keys})["kernel_key"].dtype.kind == "U"  # type: ignore[union-attr]
    st = Store(store_path)
    st.write({"kernels": {"run_id": np.asarray(["r", "r"], dtype=np.dtypes.StringDType()), "kernel_key": keys}})
    assert st.rows("SELECT run_id, kernel_key FROM kernels ORDER BY kernel_key") == [
        ("r", "0/1/17/0"),
        ("r", "0/1/18/0"),
    ]
