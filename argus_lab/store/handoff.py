"""A long run's evidence stored by a fresh process, so that the measured process never holds DuckDB's insert.

Inserting millions of rows costs DuckDB its write limit of buffers (about 78 MB at
:data:`~argus_lab.store.db.WRITE_MEMORY_LIMIT`, whatever the run's length) in the process that writes them.  For
``argus_lab.measure`` that is the measured process, whose memory the workload needs.  So when a run's evidence holds a
table of at least :data:`FRESH_PROCESS_ROWS` rows travelling as :class:`~argus_lab.model.batches.TableBatches` (a long
timing run's kernel records, a run of many region instances), :class:`~argus_lab.store.sink.StoreSink` hands it here:

1. every table is written to ``<run folder>/store-spool/`` as Parquet, a batch at a time (each file to a temporary
   name, then renamed), with the statements that finish the run (``then.json``, written last);
2. ``python -m argus_lab.store.handoff SPOOL`` opens the store and makes the same :meth:`Store.write` the measured
   process would have made (every table and the run's final status in one transaction), then writes
   ``stored.json``;
3. the spool is removed.  When the fresh process fails, the measured process stores the evidence itself, as before,
   unless ``stored.json`` says it was stored.

A spool left by a process that was killed on the way is complete once ``then.json`` exists:
:func:`store_spool` stores it (``argus-lab recover`` does), so a kill during the store write loses nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from argus_lab.model.batches import BATCH_ROWS, TableBatches, rows
from argus_lab.model.files import write_json, write_parquet
from argus_lab.store.db import Store

if TYPE_CHECKING:
    import pyarrow as pa

FRESH_PROCESS_ROWS = 200_000
"""Rows of one streamed table from which a run's evidence is stored by a fresh process (below it, starting one costs
more than the memory it saves)."""

SPOOL = "store-spool"
THEN_FILE = "then.json"
STORED_FILE = "stored.json"

Statement = tuple[str, Sequence[Any]]


def worth_a_fresh_process(tables: Mapping[str, Any]) -> bool:
    """Whether ``tables`` hold a streamed table of at least :data:`FRESH_PROCESS_ROWS` rows and nothing that only this
    process can insert (a table given as a query on its connection)."""
    if any(isinstance(t, str) for t in tables.values()):
        return False
    return any(isinstance(t, TableBatches) and t.num_rows >= FRESH_PROCESS_ROWS for t in tables.values())


def write_in_fresh_process(
    store: Store,
    run_folder: Path,
    tables: Mapping[str, Any],
    then: Sequence[Statement],
    about: Mapping[str, Any] | None = None,
) -> bool:
    """Store ``tables`` and run ``then`` in one transaction from a fresh process (module docstring); ``about`` (the
    run's status, cause and finished repetitions) is kept in the spool for recovery to report.  Returns whether they
    were stored; False leaves the write to the caller, with nothing of it in the store."""
    made = [p for p in (run_folder.parent, run_folder) if not p.exists()]
    spool = run_folder / SPOOL
    try:
        write_spool(spool, store, tables, then, about)
    except Exception:  # no room for the spool (a full disk, a read-only folder): the caller writes as before
        _remove(spool, made)
        return False
    stored = _run_fresh_process(spool) or (spool / STORED_FILE).exists()
    _remove(spool, made)
    return stored


def write_spool(
    spool: Path,
    store: Store,
    tables: Mapping[str, Any],
    then: Sequence[Statement],
    about: Mapping[str, Any] | None = None,
) -> None:
    """Write every non-empty table of ``tables`` to ``spool`` (``NN-<table>.parquet``, in order), then ``then.json``
    (the statements, the store's file and ``about``): a spool is complete once ``then.json`` exists."""
    if spool.exists():  # a spool of an earlier attempt at this run that was never stored: made again
        shutil.rmtree(spool)
    spool.mkdir(parents=True)
    for k, (name, data) in enumerate(tables.items()):
        n = data.num_rows if hasattr(data, "num_rows") else rows(data)  # an Arrow table, batches or columns
        if n:  # an empty table is left out, as Store.write leaves it out
            write_parquet(spool / f"{k:02d}-{name}.parquet", data)
    statements = [[sql, list(params)] for sql, params in then]
    write_json(spool / THEN_FILE, {"store": str(store.path), "then": statements, "about": dict(about or {})})


def spooled(run_folder: Path) -> Path | None:
    """The complete spool of ``run_folder`` (one whose ``then.json`` was written), if any."""
    spool = run_folder / SPOOL
    return spool if (spool / THEN_FILE).is_file() else None


def store_spool(store: Store, spool: Path, extra: Sequence[Statement] = ()) -> dict[str, Any]:
    """Insert a complete spool's tables into ``store`` and run its statements (then ``extra``) in one transaction, a
    batch of rows at a time; then write ``stored.json``.  Returns what the spool says about the run (``about``)."""
    spec = json.loads((spool / THEN_FILE).read_text())
    then = [(str(sql), list(params)) for sql, params in spec["then"]]
    with store.connect(write=True):  # under the writer's lock: recovery and the fresh process never both store it
        if not (spool / STORED_FILE).exists():
            store.write(read_spool(spool), then=[*then, *extra])
            write_json(spool / STORED_FILE, {"stored": True})
    about = spec.get("about")
    return dict(about) if isinstance(about, dict) else {}


def read_spool(spool: Path) -> dict[str, TableBatches]:
    """The spool's tables, in the order written, each read back a batch at a time."""
    import pyarrow.parquet as pq

    tables: dict[str, TableBatches] = {}
    for path in sorted(spool.glob("*.parquet")):
        name = path.stem.split("-", 1)[1]
        n = pq.ParquetFile(path).metadata.num_rows

        def make(p: Path = path) -> Iterator[pa.RecordBatch]:
            yield from pq.ParquetFile(p).iter_batches(batch_size=BATCH_ROWS)

        tables[name] = TableBatches(n, make)
    return tables


def _run_fresh_process(spool: Path) -> bool:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "argus_lab.store.handoff", str(spool)]
    try:  # Ctrl-C ends the child too (subprocess.run kills it before the interrupt goes on)
        done = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except OSError:
        return False
    return done.returncode == 0


def _remove(spool: Path, made: Sequence[Path]) -> None:
    """Remove the spool and the folders made for it (when nothing else was put there meanwhile)."""
    shutil.rmtree(spool, ignore_errors=True)
    for folder in reversed(made):
        with contextlib.suppress(OSError):
            folder.rmdir()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m argus_lab.store.handoff SPOOL_FOLDER", file=sys.stderr)
        return 2
    spool = Path(args[0])
    spec = json.loads((spool / THEN_FILE).read_text())
    store_spool(Store(spec["store"], recover=False), spool)
    return 0


if __name__ == "__main__":
    sys.exit(main())
