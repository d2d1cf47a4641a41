"""Opening, locking and writing the DuckDB evidence store.

DuckDB lets one process hold a database file for writing.  argus_lab therefore never keeps a store open:
every write is one short transaction under an exclusive ``fcntl`` lock on ``<store>.lock``, and every read
takes the same lock shared.  Two processes (a notebook kernel and a CLI run, or several ranks) writing one
store queue on the lock instead of failing, and nothing is lost.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from argus_lab.errors import SchemaVersionError, StoreError
from argus_lab.run.columns import jsonable_columns
from argus_lab.store.schema import DDL, MIGRATIONS, SCHEMA_VERSION, STORED_AS, TABLES, VIEW_DDL, column_types

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

DEFAULT_STORE = "argus.duckdb"
LOCK_TIMEOUT_S = 120.0

Columns = Mapping[str, Sequence[Any]]
_SHARED_ROWS = frozenset({"regions", "sessions", "provenance"})  # rows written again (by ranks): first stays


def default_store_path() -> Path:
    """``$ARGUS_STORE`` if set, else ``./argus.duckdb``."""
    return Path(os.environ.get("ARGUS_STORE", DEFAULT_STORE))


class Store:
    """A DuckDB evidence store at ``path`` (created with the current schema on first write)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        self._tlock = threading.RLock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._depth = 0
        self._read_only = False
        self._checked = False
        self._migrated = False  # tables and columns of this schema version added (done by the first write)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    @property
    def exists(self) -> bool:
        """Whether the store file exists."""
        return self.path.exists()

    # -- connections ------------------------------------------------------------------------------
    @contextmanager
    def connect(self, *, write: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection held under the store's lock; re-entrant within one thread."""
        with self._tlock:
            if self._con is not None:
                if write and self._read_only:
                    msg = "internal: a write was nested inside a read of the store"
                    raise StoreError(msg)
                self._depth += 1
                try:
                    yield self._con
                finally:
                    self._depth -= 1
                return
            if not write and not self.path.exists():
                msg = (
                    f"no evidence store at {str(self.path)!r}; run a measurement first "
                    "(`argus-lab run SCRIPT --store PATH` or `argus_lab.measure(...)`), or pass the right --store"
                )
                raise StoreError(msg)
            lock_fd = self._lock(write)
            try:
                con = self._open(write)
                self._con, self._read_only, self._depth = con, not write, 1
                try:
                    if not self._checked or (write and not self._migrated):
                        self._check_schema(con, write)
                    yield con
                finally:
                    self._con = None
                    con.close()
            finally:
                fcntl.flock(lock_fd, fcntl.LOCK_UN)
                os.close(lock_fd)

    def _lock(self, write: bool) -> int:
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            if write:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            if not write:  # a read-only folder: reading without the lock is still safe for a finished store
                return os.open(os.devnull, os.O_RDONLY)
            msg = (
                f"cannot write the evidence store at {str(self.path)!r} ({exc.strerror}); "
                "choose a writable location with --store PATH (or the ARGUS_STORE variable)"
            )
            raise StoreError(msg) from exc
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        mode = fcntl.LOCK_EX if write else fcntl.LOCK_SH
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    msg = (
                        f"the evidence store {str(self.path)!r} stayed locked by another process for "
                        f"{LOCK_TIMEOUT_S:.0f} s; wait for that measurement to finish or use another --store"
                    )
                    raise StoreError(msg) from None
                time.sleep(0.02)

    def _open(self, write: bool) -> duckdb.DuckDBPyConnection:
        import duckdb

        try:
            return duckdb.connect(str(self.path), read_only=not write)
        except duckdb.IOException as exc:
            verb = "write" if write else "read"
            msg = (
                f"cannot {verb} the evidence store at {str(self.path)!r}: {exc}; "
                "check that the path is a writable file location (or pass another --store PATH)"
            )
            raise StoreError(msg) from exc
        except duckdb.Error as exc:
            msg = f"{str(self.path)!r} is not a DuckDB evidence store ({exc}); pass the path of an argus_lab store"
            raise StoreError(msg) from exc

    def _check_schema(self, con: duckdb.DuckDBPyConnection, write: bool) -> None:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if "meta" not in tables:
            if tables:
                msg = (
                    f"{str(self.path)!r} is a DuckDB file but not an argus_lab store (it has tables "
                    f"{sorted(tables)[:5]}); pass another --store path"
                )
                raise SchemaVersionError(msg)
            if not write:
                return
            for stmt in (*DDL, *VIEW_DDL):
                con.execute(stmt)
            con.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            self._checked = self._migrated = True
            return
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = int(row[0]) if row else -1
        if version > SCHEMA_VERSION:
            msg = (
                f"the store {str(self.path)!r} has schema version {version}, newer than this argus_lab "
                f"understands ({SCHEMA_VERSION}); upgrade argus_lab (`pip install -U argus_lab`) or use another "
                "--store path"
            )
            raise SchemaVersionError(msg)
        if version < 1:
            msg = (
                f"the store {str(self.path)!r} has an unknown schema version ({row[0] if row else 'none'}); "
                "it was not written by argus_lab: pass another --store path"
            )
            raise SchemaVersionError(msg)
        if write:  # migrate an older store, then add the tables and columns of later versions and within this one
            for v in range(version, SCHEMA_VERSION):
                for condition, stmt in MIGRATIONS.get(v, ()):
                    row = con.execute(condition).fetchone()
                    if row and row[0]:
                        con.execute(stmt)
            for stmt in DDL:
                con.execute(stmt)
            have = {
                (t, c)
                for t, c in con.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall()
            }
            for table in TABLES:
                for name, sql_type in column_types(table):
                    if (table, name) not in have:
                        con.execute(f'ALTER TABLE {table} ADD COLUMN "{name}" {sql_type}')
            if version < SCHEMA_VERSION:
                con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
            for stmt in VIEW_DDL:
                con.execute(stmt)
            self._migrated = True
        self._checked = True

    # -- writing ----------------------------------------------------------------------------------
    def write(self, tables: Mapping[str, Columns | pa.Table | str]) -> None:
        """Insert several tables in one transaction (columns by name; missing columns become NULL).

        A table given as a string is a query on the store's connection (e.g. a temporary table an importer staged
        while this thread holds :meth:`connect`): its rows are inserted without leaving DuckDB."""
        import pyarrow as pa

        with self.connect(write=True) as con:
            con.execute("BEGIN")
            try:
                for given, data in tables.items():
                    name = STORED_AS.get(given, given)
                    if name not in TABLES:
                        msg = f"internal: unknown store table {name!r}"
                        raise StoreError(msg)
                    if isinstance(data, str):
                        names = [d[0] for d in con.execute(f"SELECT * FROM ({data}) LIMIT 0").description or ()]
                        cols = ", ".join(f'"{c}"' for c in names)
                        con.execute(f"INSERT INTO {name} ({cols}) SELECT {cols} FROM ({data})")
                        continue
                    tbl = data if isinstance(data, pa.Table) else pa.table(jsonable_columns(data))
                    if tbl.num_rows == 0:
                        continue
                    con.register("_argus_in", tbl)
                    cols = ", ".join(f'"{c}"' for c in tbl.column_names)
                    verb = "INSERT OR IGNORE" if name in _SHARED_ROWS else "INSERT"
                    con.execute(f"{verb} INTO {name} ({cols}) SELECT {cols} FROM _argus_in")
                    con.unregister("_argus_in")
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one statement that changes the store (small updates such as a run's status)."""
        with self.connect(write=True) as con:
            con.execute(sql, list(params))

    # -- reading ----------------------------------------------------------------------------------
    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a query, as tuples."""
        with self.connect() as con:
            return con.execute(sql, list(params)).fetchall()

    def records(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows of a query as dicts keyed by column name (read rows by name, never by position)."""
        with self.connect() as con:
            cur = con.execute(sql, list(params))
            names = [d[0] for d in cur.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def arrow(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        """A query's result as an Arrow table."""
        with self.connect() as con:
            res: Any = con.execute(sql, list(params))
            tbl = res.fetch_arrow_table() if hasattr(res, "fetch_arrow_table") else res.arrow()
            return tbl.read_all() if hasattr(tbl, "read_all") else tbl
