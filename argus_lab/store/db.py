"""Opening, locking and writing the DuckDB evidence store.

DuckDB lets one process hold a database file for writing, and locks the file itself (a POSIX record lock: exclusive
for a read-write connection, shared for a read-only one).  argus_lab never keeps a store open: every write is one
short connection, and every read another.

* **Writers** queue on an exclusive ``flock`` on ``<store>.lock`` (created beside the store: a writer creates files
  there anyway), then open the file read-write, retrying while a reader holds DuckDB's shared lock.  Two processes
  writing one store (a notebook kernel and a CLI run, or several ranks) wait for each other instead of failing,
  and nothing is lost.
* **Readers** (``show``, ``export``, the Jupyter server) create nothing: no lock file, no WAL replay written back.
  They open the file read-only and retry while a writer holds DuckDB's exclusive lock (DuckDB refuses a read-only
  open while a writer holds the file), up to :data:`LOCK_TIMEOUT_S`.  A store on a read-only disk, in a folder the
  reader may not write, or on a full disk is read all the same.

The first write of a :class:`Store` also recovers what an earlier process left behind (runs still marked ``running``
whose process is gone, and their run folders): see :mod:`argus_lab.app.recovery`.  Errors that mean the disk is
full or the file is damaged become :class:`~argus_lab.errors.StoreError` messages naming the cause and the fix
(:func:`explain_error`).  docs/reliability.md explains the design.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import importlib
import os
import re
import shutil
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from argus_lab import config
from argus_lab.errors import QueryError, SchemaVersionError, StoreError
from argus_lab.model.batches import TableBatches
from argus_lab.model.columns import jsonable_columns
from argus_lab.model.memory_limits import same_memory_limit
from argus_lab.model.schema import (
    DDL,
    MIGRATIONS,
    REQUIRED,
    SCHEMA_VERSION,
    STORED_AS,
    TABLES,
    VIEW_DDL,
    column_types,
)

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

DEFAULT_STORE = config.VARIABLES[config.ARGUS_STORE].default
LOCK_TIMEOUT_S = 120.0
RETRY_S = 0.02

Columns = Mapping[str, Sequence[Any]]
T = TypeVar("T")
_SHARED_ROWS = frozenset({"regions", "sessions", "provenance"})  # rows written again (by ranks): first stays

_BUSY = ("Could not set lock on file", "Conflicting lock is held")
"""DuckDB's words for "another process holds this file"."""
_SAME_PROCESS = "different configuration than existing"
"""DuckDB's words for "this process already has the file open with other settings" (e.g. the user's own
``duckdb.connect(path, read_only=True)`` in the notebook that measures): waiting never helps."""
_PID = re.compile(r"\(PID (\d+)\)")


def open_connections(path: Path) -> list[str]:
    """The names of the user's variables (in ``__main__``: a notebook's or a script's namespace) that hold an open
    DuckDB connection to the database file ``path``; [] when none is found there."""
    import sys

    import duckdb

    main = sys.modules.get("__main__")
    names = []
    target = os.path.realpath(path)
    for name, value in list(vars(main).items() if main is not None else ()):
        if name.startswith("_") or not isinstance(value, duckdb.DuckDBPyConnection):
            continue
        try:
            cur = value.cursor()  # a cursor of its own: the user's pending result stays as it is
            try:
                paths = [
                    p for (p,) in cur.execute("SELECT path FROM duckdb_databases() WHERE path IS NOT NULL").fetchall()
                ]
            finally:
                cur.close()
        except duckdb.Error:  # closed, or busy on another thread
            continue
        if any(os.path.realpath(p) == target for p in paths):
            names.append(name)
    return names


_DAMAGED = (
    "not a valid DuckDB database file",
    "Could not read enough bytes",
    "Corrupt database file",
    "checksum",
    "Invalid Input Error: Failed to deserialize",
    "database has been invalidated",
)
"""DuckDB's words for a truncated or damaged database file."""
_FULL = {
    errno.ENOSPC: "No space left on device",
    errno.EFBIG: "File too large",
    errno.EDQUOT: "Disk quota exceeded",
}


def default_store_path() -> Path:
    """``$ARGUS_STORE`` if set, else ``./argus.duckdb``."""
    return Path(config.get(config.ARGUS_STORE))


def _busy(exc: BaseException) -> bool:
    return any(w in str(exc) for w in _BUSY)


def explain_error(path: Path, exc: BaseException, *, write: bool) -> StoreError | None:
    """A :class:`StoreError` naming the cause and the fix when ``exc`` means a full disk or a damaged store file,
    else ``None`` (the error is someone else's: a query bug, a bad value)."""
    text = str(exc)
    code = exc.errno if isinstance(exc, OSError) else None
    full = next((words for num, words in _FULL.items() if code == num or words in text), None)
    if full is not None:
        return StoreError(disk_full_message(path, full))
    if any(w in text for w in _DAMAGED):
        first = text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__
        verb = "written" if write else "read"
        return StoreError(
            f"the evidence store {str(path)!r} is damaged and cannot be {verb} ({first}); it may be truncated or "
            "overwritten: restore it from a copy, or measure into a new store with --store NEW.duckdb (the run "
            f"folders in {str(run_root(path))!r} still hold the shards of child-process runs)"
        )
    return None


def disk_full_message(path: Path, words: str = "No space left on device") -> str:
    """What to say when the disk (or the process's file-size limit) stops a write to the store at ``path``."""
    where = path.resolve().parent if path.parent.exists() else Path.cwd()
    try:
        free = f"{shutil.disk_usage(where).free / 1e6:.1f} MB free"
    except OSError:
        free = "free space unknown"
    runs = run_root(path)
    held = _folder_mb(runs)
    parts = [
        f"cannot write the evidence store {str(path)!r}: {words} ({where}: {free})",
    ]
    if words == "File too large":
        parts.append("the store reached this process's file-size limit (`ulimit -f`); raise the limit")
    else:
        parts.append(f"free space on the disk that holds {str(where)!r}: delete stores you no longer need")
    if held:
        parts.append(
            f"or the run folders of runs already stored ({str(runs)!r}, {held:.1f} MB; the store keeps their evidence)"
        )
    parts.append("or write to another disk with --store PATH (or $ARGUS_STORE); what was measured before is kept")
    return "; ".join(parts)


def _folder_mb(folder: Path, limit: int = 20_000) -> float:
    total = 0
    try:
        for k, (root, _, files) in enumerate(os.walk(folder)):
            if k > limit:
                break
            for f in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(root, f)).st_size
    except OSError:
        return 0.0
    return total / 1e6


READ_MEMORY = "128MB"
"""DuckDB's first memory limit for a read (``$ARGUS_READ_MEMORY`` overrides it): a report over millions of instances
spills to a private temporary folder (as large as the disk allows: DuckDB's ``max_temp_directory_size`` defaults to
90% of its free space) instead of growing without bound.  A read that still runs out of it (what DuckDB cannot
spill: a sort's or a list aggregate's working set) is taken again with a larger limit (:func:`read_memory_steps`),
up to most of this machine's memory, so no store is too large for a fixed limit.  128 MB: every read of an HTML
export of 10^6 region instances fits in it (docs/benchmarks.md), and a read's peak is the process's plus about
this much, so the first limit is what keeps an export's memory low."""
READ_MEMORY_SHARE = 0.75
"""The largest limit a read is taken again with: this share of the machine's physical memory."""


def read_memory_steps() -> list[str]:
    """The memory limits a read tries in turn: ``$ARGUS_READ_MEMORY`` alone when set, else 128 MB, then 1 GB and four
    times more each time (4 GB, 16 GB, ...) below :data:`READ_MEMORY_SHARE` of this machine's memory, and that share
    last (e.g. 128 MB, 1 GB, 4 GB, 16 GB, 18 GB on 24 GB of memory; 128 MB, 1 GB, 4 GB, 16 GB, 64 GB, 96 GB on
    128 GB).  (A read that outgrows 128 MB goes to 1 GB at once: each step is the whole read again.)"""
    given = config.value(config.ARGUS_READ_MEMORY)
    if given:
        return [given]
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        physical = 2 << 30
    top_mb = int(physical * READ_MEMORY_SHARE) >> 20
    steps = [READ_MEMORY]
    mb = 1024
    while mb < top_mb:
        steps.append(f"{mb}MB")
        mb *= 4
    if top_mb > 128:
        steps.append(f"{top_mb}MB")
    return steps


def reader_config(memory: str | None = None) -> dict[str, str | bool | int | float | list[str]]:
    """The DuckDB settings of a read-only connection: bounded memory (``memory``, else the first of
    :func:`read_memory_steps`), a temporary folder of the user's own (never beside the store: a reader creates
    nothing there).  (DuckDB's own progress bar is turned off on each connection: :meth:`Store._open`.)"""
    # $TMPDIR as it is: tempfile.gettempdir() would probe by writing a file, and fail on a full disk
    base = os.environ.get("TMPDIR") or ("/tmp" if os.name == "posix" else os.environ.get("TEMP", "."))
    tmp = Path(base) / f"argus-duckdb-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    limit = memory or read_memory_steps()[0]
    return {"memory_limit": limit, "temp_directory": str(tmp)}


WRITE_MEMORY_LIMIT = "64MB"
"""DuckDB's memory limit while a run's evidence with a streamed table (:class:`TableBatches`: a timing run's kernel
records) is inserted: without it DuckDB keeps every inserted row in memory until the commit (about 340 B a kernel
record); with it the rows it cannot keep go to the store file (docs/benchmarks.md, "memory per kernel record")."""


@contextmanager
def _memory_limit(con: duckdb.DuckDBPyConnection, limit: str | None) -> Iterator[None]:
    """``SET memory_limit`` on ``con`` for the block (nothing when ``limit`` is None); the connection's own limit is
    restored afterwards."""
    if limit is None:
        yield
        return
    got = con.execute("SELECT current_setting('memory_limit')").fetchall()
    before = str(got[0][0]) if got else ""
    con.execute(f"SET memory_limit = '{limit}'")
    try:
        yield
    finally:
        if before:
            with contextlib.suppress(Exception):
                con.execute(f"SET memory_limit = '{same_memory_limit(before)}'")


_OWN: dict[str, int] = {}
"""Connections argus_lab holds open in this process, per store file: another connection with other settings is then
argus_lab's own (a read on another thread), which ends soon, rather than the user's."""
_OWN_LOCK = threading.Lock()


def _own(path: Path, step: int) -> None:
    with _OWN_LOCK:
        key = str(path)
        _OWN[key] = _OWN.get(key, 0) + step
        if _OWN[key] <= 0:
            del _OWN[key]


def one_file(path: Path) -> Path:
    """The path a store is known by: ``path`` itself, or the file it leads to when a symbolic link is on the way
    (``lk.duckdb -> real.duckdb``), so that run folders, the writers' lock and recovery belong to the file whatever
    name opened it.  A path that cannot be resolved (a loop of links) stays as given; opening it then says why."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return path
    return real if real != Path(os.path.abspath(path)) else path


def run_root(path: Path) -> Path:
    """``<store>.runs``: where the runs of the store at ``path`` keep their folders."""
    return path.with_name(path.name + ".runs")


Recover = Callable[["Store"], list[Any]]
"""What a store's first write runs to finish the runs dead processes left behind (returns what it recovered)."""

RECOVERY_MODULE = "argus_lab.app.recovery"
"""The module whose ``recover_stale(store)`` a store runs by default.  Recovery reads run folders and loads
backends, so it belongs to the application; the store holds its name, never an import of it."""


def _application_recovery(store: Store) -> list[Any]:
    return importlib.import_module(RECOVERY_MODULE).recover_stale(store)


class Store:
    """A DuckDB evidence store at ``path`` (created with the current schema on first write)."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, recover: bool | Recover = True) -> None:
        self.path = one_file(Path(path) if path is not None else default_store_path())
        self._tlock = threading.RLock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._depth = 0
        self._read_only = False
        self._checked = False
        self._migrated = False  # tables and columns of this schema version added (done by the first write)
        # the first write recovers runs left behind by dead processes: with the recovery handed in, or (True) the
        # application's, loaded by the name RECOVERY_MODULE holds
        self._recover: Recover | None = _application_recovery if recover is True else (recover or None)
        self._read_memory: str | None = None  # the limit of this thread's read (read() raises it on OOM)
        self.recovered: list[Any] = []
        """What the first write recovered (:class:`argus_lab.app.recovery.Recovered` values)."""

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    @property
    def exists(self) -> bool:
        """Whether the store file exists."""
        return self.path.exists()

    # -- connections ------------------------------------------------------------------------------
    @contextmanager
    def connect(self, *, write: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection to the store (read-only unless ``write``); re-entrant within one thread.

        A full disk or a damaged file raises :class:`StoreError` with the cause and the fix, whether it shows
        when the file is opened, while a statement runs, or when the connection closes.
        """
        import duckdb

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
            self._check_kind()
            if not write:
                self._check_readable()
            deadline = time.monotonic() + LOCK_TIMEOUT_S  # one wait for the lock and the file together
            lock_fd = self._writer_lock(deadline) if write else -1
            try:
                con = self._open(write, deadline)
                self._con, self._read_only, self._depth = con, not write, 1
                _own(self.path, 1)
                try:
                    try:
                        if not self._checked or (write and not self._migrated):
                            self._check_schema(con, write)
                        if write and self._recover is not None:
                            recover, self._recover = self._recover, None
                            self.recovered = recover(self)
                        yield con
                    finally:
                        self._con = None
                        _own(self.path, -1)
                        con.close()
                except (duckdb.Error, OSError) as exc:
                    mapped = explain_error(self.path, exc, write=write)
                    if mapped is None:
                        raise
                    raise mapped from exc
            finally:
                if lock_fd >= 0:
                    fcntl.flock(lock_fd, fcntl.LOCK_UN)
                    os.close(lock_fd)

    def _check_kind(self) -> None:
        """Refuse a path that is there but is no regular file (a FIFO would block the open forever, a device or a
        socket is no store)."""
        try:
            mode = self.path.stat().st_mode
        except OSError:
            return  # absent (a write creates it) or unreadable: the open says which
        if stat.S_ISREG(mode):
            return
        kind = (
            "a folder"
            if stat.S_ISDIR(mode)
            else "a named pipe (FIFO)"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a device"
        )
        msg = f"{str(self.path)!r} is {kind}, not an evidence store file; pass the path of a .duckdb file with --store"
        raise StoreError(msg)

    def _check_readable(self) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            msg = (
                f"no evidence store at {str(self.path)!r}; run a measurement first "
                "(`argus-lab run SCRIPT --store PATH` or `argus_lab.measure(...)`), or pass the right --store"
            )
            raise StoreError(msg) from None
        except OSError as exc:
            msg = f"cannot read the evidence store at {str(self.path)!r} ({exc.strerror}); pass another --store"
            raise StoreError(msg) from exc
        if not self.path.is_file():
            msg = f"{str(self.path)!r} is not a file; pass the path of an argus_lab store (a .duckdb file)"
            raise StoreError(msg)
        if size == 0:
            msg = (
                f"{str(self.path)!r} is an empty file (0 bytes), not an evidence store: it holds no measurement; "
                "pass the path of an argus_lab store, or delete the empty file and measure again"
            )
            raise StoreError(msg)

    def _writer_lock(self, deadline: float) -> int:
        """An exclusive ``flock`` on ``<store>.lock``: writers of one store queue here (readers never take it)."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError as exc:
            if exc.errno in _FULL:
                raise StoreError(disk_full_message(self.path, _FULL[exc.errno])) from exc
            if exc.errno == errno.ELOOP:
                msg = (
                    f"{str(lock_path)!r} is a symbolic link; argus_lab does not follow it (it would create a file "
                    "wherever it points): remove the link, or use another --store"
                )
                raise StoreError(msg) from exc
            msg = (
                f"cannot write the evidence store at {str(self.path)!r} ({exc.strerror}); "
                "choose a writable location with --store PATH (or the ARGUS_STORE variable)"
            )
            raise StoreError(msg) from exc
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise StoreError(self._locked_message("another argus_lab measurement writes it")) from None
                time.sleep(RETRY_S)

    def _locked_message(self, detail: str = "") -> str:
        return (
            f"the evidence store {str(self.path)!r} stayed locked by another process for {LOCK_TIMEOUT_S:.0f} s"
            + (f" ({detail})" if detail else "")
            + "; wait for that process to finish (or close its connection to the store), or use another --store"
        )

    def _same_process_message(self, write: bool) -> str:
        what = "write to" if write else "read"
        names = open_connections(self.path)
        if names:
            held = ", ".join(f"`{n}`" for n in names)
            which = f"the DuckDB connection {held} of this notebook (or script) holds it open with other settings"
            close = " and ".join(f"`{n}.close()`" for n in names)
        else:
            which = (
                "this process already has it open through another DuckDB connection with other settings (e.g. "
                f"`con = duckdb.connect({str(self.path)!r}, read_only=True)` in this notebook)"
            )
            close = "`con.close()`"
        return (
            f"cannot {what} the evidence store {str(self.path)!r}: {which}. Close that connection ({close}) and run "
            'this again; to query the store next to your measurements use `argus_lab.sql("SELECT ...")` (or '
            "`%argus sql`), which shares argus_lab's access and never holds the file between queries"
        )

    def _reuse(self, write: bool) -> duckdb.DuckDBPyConnection | None:
        """For a read, a connection with the settings a connection this process already holds may have (DuckDB
        refuses a second connection with other settings, and reuses its database with the same ones)."""
        import duckdb

        if write:
            return None
        for read_only in (True, False):
            try:
                return duckdb.connect(str(self.path), read_only=read_only)
            except duckdb.Error:
                continue
        return None

    def _open(self, write: bool, deadline: float) -> duckdb.DuckDBPyConnection:
        """Open the file, retrying while another connection holds DuckDB's lock on it."""
        import duckdb

        if write and self.path.is_file() and self.path.stat().st_size == 0:
            msg = (
                f"{str(self.path)!r} is an empty file (0 bytes), not an evidence store; delete it (it holds nothing) "
                "or pass another --store"
            )
            raise StoreError(msg)
        config: dict[str, str | bool | int | float | list[str]] = {} if write else reader_config(self._read_memory)
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=not write, config=config)
                con.execute("SET enable_progress_bar = false")  # no bar of DuckDB's own in the user's terminal
                return con
            except duckdb.Error as exc:
                held = _PID.search(str(exc))
                if _SAME_PROCESS in str(exc) or (held is not None and int(held.group(1)) == os.getpid()):
                    if _OWN.get(str(self.path)) and time.monotonic() < deadline:
                        time.sleep(RETRY_S)  # argus_lab's own connection on another thread: it ends soon
                        continue
                    shared = self._reuse(write)
                    if shared is not None:
                        return shared
                    raise StoreError(self._same_process_message(write)) from None
                if _busy(exc):
                    if time.monotonic() > deadline:
                        raise StoreError(self._locked_message(str(exc).splitlines()[0][:200])) from exc
                    time.sleep(RETRY_S)
                    continue
                mapped = explain_error(self.path, exc, write=write)
                if mapped is not None and "damaged" in str(mapped) and "not a valid DuckDB" in str(exc):
                    msg = (
                        f"{str(self.path)!r} is not a DuckDB evidence store ({str(exc).splitlines()[0]}); "
                        "pass the path of an argus_lab store"
                    )
                    raise StoreError(msg) from exc
                if mapped is not None:
                    raise mapped from exc
                if isinstance(exc, duckdb.IOException):
                    verb = "write" if write else "read"
                    msg = (
                        f"cannot {verb} the evidence store at {str(self.path)!r}: {exc}; "
                        "check that the path is a writable file location (or pass another --store PATH)"
                    )
                    raise StoreError(msg) from exc
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
        raw = row[0] if row else None
        try:
            version = int(str(raw).strip()) if raw is not None else -1
        except ValueError:
            version = -1
        if version > SCHEMA_VERSION:
            msg = (
                f"the store {str(self.path)!r} has schema version {version}, newer than this argus_lab "
                f"understands ({SCHEMA_VERSION}); upgrade argus_lab (`pip install -U argus_lab`) or use another "
                "--store path"
            )
            raise SchemaVersionError(msg)
        if version < 1:
            shown = "none" if raw is None else repr(str(raw)[:40])
            msg = (
                f"the store {str(self.path)!r} has an unknown schema version ({shown}); "
                "it was not written by argus_lab, or its meta table was edited: pass another --store path"
            )
            raise SchemaVersionError(msg)
        self._check_required(con)
        if write:  # migrate an older store, then add the tables and columns of later versions and within this one
            con.execute("BEGIN")  # all of a migration or none of it (a store half moved would lose or double rows)
            try:
                for v in range(version, SCHEMA_VERSION):
                    for condition, stmt in MIGRATIONS.get(v, ()):
                        row = con.execute(condition).fetchone()
                        if row and row[0]:
                            con.execute(stmt)
                con.execute("COMMIT")
            except BaseException:
                rollback(con)
                raise
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

    def _check_required(self, con: duckdb.DuckDBPyConnection) -> None:
        """Refuse a store that lacks a table or column every store has (:data:`argus_lab.model.schema.REQUIRED`)."""
        have = {
            (t, c) for t, c in con.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall()
        }
        tables = {t for t, _ in have}
        missing = [t for t in REQUIRED if t not in tables]
        missing += [f"{t}.{c}" for t, cols in REQUIRED.items() if t in tables for c in cols if (t, c) not in have]
        if missing:
            msg = (
                f"the store {str(self.path)!r} lacks {', '.join(missing[:6])}"
                f"{f' and {len(missing) - 6} more' if len(missing) > 6 else ''}, which every argus_lab store has: it "
                "was changed outside argus_lab (a DROP or ALTER TABLE), so the rows they held are gone and argus_lab "
                "will not recreate them empty; restore the file from a copy, or measure into another --store"
            )
            raise SchemaVersionError(msg)

    # -- writing ----------------------------------------------------------------------------------
    def write(
        self,
        tables: Mapping[str, Columns | pa.Table | TableBatches | str],
        then: Sequence[tuple[str, Sequence[Any]]] = (),
    ) -> None:
        """Insert several tables in one transaction (columns by name; missing columns become NULL).

        A table given as a string is a query on the store's connection (e.g. a temporary table an importer staged
        while this thread holds :meth:`connect`): its rows are inserted without leaving DuckDB.  ``then`` holds
        statements (SQL, parameters) run in the same transaction after the inserts (a run's final status goes with
        its evidence, so that a run is never stored twice nor marked finished without it).
        """
        import duckdb

        streamed = any(isinstance(t, TableBatches) and t.num_rows for t in tables.values())
        if not streamed:
            self._write(tables, then, None)
            return
        try:  # a long run's kernel records: DuckDB's insert bounded too (it spills to the store file beyond it)
            self._write(tables, then, WRITE_MEMORY_LIMIT)
        except duckdb.OutOfMemoryException:  # rolled back: the batches are made again, without DuckDB's bound
            self._write(tables, then, None)

    def _write(
        self,
        tables: Mapping[str, Columns | pa.Table | TableBatches | str],
        then: Sequence[tuple[str, Sequence[Any]]],
        memory_limit: str | None,
    ) -> None:
        import pyarrow as pa

        with self.connect(write=True) as con, _memory_limit(con, memory_limit):
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
                    if isinstance(data, TableBatches):  # streamed: one batch of rows in memory at a time
                        if data.num_rows == 0:
                            continue
                        tbl: Any = data.reader()
                        names = tbl.schema.names
                    else:
                        tbl = data if isinstance(data, pa.Table) else pa.table(jsonable_columns(data))
                        if tbl.num_rows == 0:
                            continue
                        names = tbl.column_names
                    con.register("_argus_in", tbl)
                    cols = ", ".join(f'"{c}"' for c in names)
                    verb = "INSERT OR IGNORE" if name in _SHARED_ROWS else "INSERT"
                    con.execute(f"{verb} INTO {name} ({cols}) SELECT {cols} FROM _argus_in")
                    con.unregister("_argus_in")
                for sql, params in then:
                    con.execute(sql, list(params))
                con.execute("COMMIT")
            except BaseException:
                rollback(con)
                raise

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one statement that changes the store (small updates such as a run's status)."""
        with self.connect(write=True) as con:
            con.execute(sql, list(params))

    # -- reading ----------------------------------------------------------------------------------
    def read(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """``fn`` on a read connection; when DuckDB runs out of the read's memory limit, ``fn`` runs again on a
        connection with the next limit of :func:`read_memory_steps` (a store of millions of kernels reads on a
        small machine too), and past the last one a :class:`StoreError` says how to raise it.  Inside an open
        connection ``fn`` runs on that one."""
        import duckdb

        with self._tlock:  # this thread's open connection (another thread's is waited for by connect())
            if self._con is not None:
                return fn(self._con)
        steps = read_memory_steps()
        for k, limit in enumerate(steps):
            self._read_memory = limit
            try:
                with self.connect() as con:
                    return fn(con)
            except duckdb.OutOfMemoryException as exc:
                if k + 1 < len(steps):
                    continue
                msg = (
                    f"reading the evidence store {str(self.path)!r} needed more memory than DuckDB's limit for reads "
                    f"({limit}; {str(exc).splitlines()[0][:160]}); set ARGUS_READ_MEMORY to more (e.g. "
                    "ARGUS_READ_MEMORY=8GB), or report a smaller scope (--scope, --run)"
                )
                raise StoreError(msg) from None
            finally:
                self._read_memory = None
        raise AssertionError("unreachable")  # pragma: no cover

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a query, as tuples."""
        return self.read(lambda con: con.execute(sql, list(params)).fetchall())

    def records(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows of a query as dicts keyed by column name (read rows by name, never by position)."""

        def fetch(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
            cur = con.execute(sql, list(params))
            names = [d[0] for d in cur.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

        return self.read(fetch)

    def arrow(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        """A query's result as an Arrow table."""
        return self.read(lambda con: self._arrow(con, sql, params))

    def _arrow(self, con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any]) -> pa.Table:
        res: Any = con.execute(sql, list(params))
        fetch = next(getattr(res, n) for n in ("to_arrow_table", "fetch_arrow_table", "arrow") if hasattr(res, n))
        with warnings.catch_warnings():  # DuckDB 2 warns that this copies the rows once: a query's answer is small
            warnings.simplefilter("ignore", UserWarning)
            tbl = fetch()  # DuckDB 2 names it to_arrow_table; 1.x fetch_arrow_table
        return tbl.read_all() if hasattr(tbl, "read_all") else tbl

    def sql(self, query: str, params: Sequence[Any] = ()) -> Any:
        """The answer to ``query`` as a polars DataFrame, read through argus_lab's own access to the store: it
        opens the file read-only for the query alone (never held between queries, so measurements in this process
        can write in between).  A query DuckDB refuses raises :class:`~argus_lab.errors.QueryError` with its words
        and where to find the tables; a statement that would change the store is refused the same way."""
        import duckdb
        import polars as pl

        try:
            return pl.from_arrow(self.arrow(query, params))
        except duckdb.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if "read-only" in str(exc) or "read only" in str(exc):
                hint = "queries read the store; only argus_lab writes it (measure, import, join)"
            else:
                hint = (
                    "`SHOW TABLES` lists the store's tables and `DESCRIBE <table>` their columns; "
                    "docs/report-json.md and docs/join.md say what they hold"
                )
            msg = f"the store {str(self.path)!r} refused the query: {first}; {hint}"
            raise QueryError(msg) from None


def rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back the open transaction; an error of the rollback itself (the transaction was already aborted, e.g. by
    a full disk) never hides the error that caused it."""
    with contextlib.suppress(Exception):
        con.execute("ROLLBACK")
