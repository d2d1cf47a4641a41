"""``argus_lab.import_trace``: a trace recorded by another tool becomes a run of the store, then joined.

The importers (:mod:`argus_lab.importers`) turn a file into raw evidence tables; this module gives them a
run (session, request, run row with ``variant = 'imported'`` and the command that imported it), writes them in
one transaction and runs the join, so the imported evidence has attribution classes and region values like a
measured run's, and can be compared with one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from argus_lab.app.commands import command
from argus_lab.errors import ImportFormatError, StoreError
from argus_lab.importers import ImportedTrace, check_trace_file, detect_format, read_trace
from argus_lab.join import JoinSummary, attribute_request
from argus_lab.report.runs import RUN_COUNT
from argus_lab.run.runtime import session_columns
from argus_lab.store import Store

BACKEND_OF = {"kineto": "cupti", "nsys": "cupti", "ncu": "ncu"}
"""The backend whose evidence each format holds (what the join and the report read it as)."""


@dataclass(frozen=True)
class ImportResult:
    """An imported run: what was read and what the join attributed."""

    run_id: str
    imported: ImportedTrace
    join: JoinSummary
    store_path: Path

    def text(self) -> str:
        """What was imported, then the join's summary."""
        return f"{self.imported.text()}\n{self.join.text()}"


def import_trace(
    path: str | Path, store: Store | str | Path | None = None, *, fmt: str | None = None, **options: Any
) -> ImportResult:
    """Import a Kineto JSON, an Nsight Systems report or an ``.ncu-rep`` into ``store`` as one run, and join it.

    ``fmt`` is ``kineto``, ``nsys`` or ``ncu`` (detected from the file when not given); ``options`` go to the
    importer (e.g. ``cross_check=True`` for Kineto, ``nsys="/path/to/nsys"``).
    """
    if fmt is not None:
        check_trace_file(path)
    kind = fmt or detect_format(path)
    if options.get("domain") and kind == "kineto":
        msg = (
            "--domain applies to Nsight files (nsys, ncu); a torch.profiler trace's regions are its "
            "record_function annotations: leave --domain out"
        )
        raise ImportFormatError(msg)
    st = store if isinstance(store, Store) else Store(store)
    existed = os.path.lexists(st.path)
    try:
        return _import(st, path, kind, options)
    except BaseException:
        if not existed:  # a failed import leaves no empty store behind (an existing one is left as it was)
            _remove_new_store(st)
        raise


def _import(st: Store, path: str | Path, kind: str, options: dict[str, Any]) -> ImportResult:
    run_id = f"r-{uuid.uuid4().hex[:10]}"
    t0 = time.time_ns()
    if kind == "kineto":  # staged on the store's own connection: a million kernels never leave DuckDB
        with st.connect(write=True) as con:
            imported = read_trace(path, run_id, kind, con=con, **options)
            try:
                _write(st, imported, kind, options, t0)
            except BaseException:
                with contextlib.suppress(Exception):  # the write's own error is the one to tell
                    _drop(con, imported.staged)
                raise
            _drop(con, imported.staged)
    else:
        imported = read_trace(path, run_id, kind, **options)
        _write(st, imported, kind, options, t0)
    try:
        summary = attribute_request(st, [run_id])
    except StoreError as exc:  # the run is stored: say so, and how to join it once the store can be written
        msg = (
            f"{exc}\nthe trace is stored as run {run_id} but not joined; once the store can be written, "
            f"`{command('join', '--run', run_id, store=st.path)}` attributes its evidence"
        )
        raise StoreError(msg) from exc
    return ImportResult(run_id, imported, summary, st.path)


def _drop(con: Any, tables: tuple[str, ...]) -> None:
    for table in tables:
        con.execute(f"DROP TABLE IF EXISTS {table}")


def _remove_new_store(st: Store) -> None:
    """Remove a store this import created, with its lock, WAL and spill folder, unless it holds a run (another
    process wrote to it meanwhile)."""
    try:
        with st.connect() as con:
            row = con.execute(RUN_COUNT).fetchone()
        if row and row[0]:
            return
    except Exception:  # unreadable (written to a full disk): it holds nothing to keep
        pass
    for suffix in ("", ".wal", ".lock"):
        with contextlib.suppress(OSError):
            st.path.with_name(st.path.name + suffix).unlink()
    shutil.rmtree(st.path.with_name(st.path.name + ".tmp"), ignore_errors=True)


def _write(st: Store, imported: ImportedTrace, kind: str, options: dict[str, Any], t0: int) -> None:
    """The imported tables with their session, request and run rows, in one transaction."""
    run_id = imported.run_id
    sessions = session_columns()
    session_id = sessions["session_id"][0]
    request_id = f"q-{uuid.uuid4().hex[:10]}"
    source = imported.source
    spec = {"import": {"path": source.path, "format": source.format, "sha256": source.sha256, "options": options}}
    command = f"argus-lab import {source.path} --format {kind}"
    st.write(
        {
            "sessions": sessions,
            "requests": {
                "request_id": [request_id],
                "session_id": [session_id],
                "created_ns": [t0],
                "text": [f"import {kind} {source.path}"],
                "spec": [json.dumps(spec, default=str)],
            },
            "runs": {
                "run_id": [run_id],
                "session_id": [session_id],
                "request_id": [request_id],
                "plan_index": [0],
                "variant": ["imported"],
                "backends": [[BACKEND_OF[kind]]],
                "signals": [[]],
                "settings": [json.dumps(imported.settings, default=str, sort_keys=True)],
                "workload": [source.path],
                "command": [command],
                "env": ["{}"],
                "versions": [json.dumps({"source": source.tool_version or source.tool})],
                "status": ["partial" if imported.damage else "ok"],
                "cause": [imported.cause()],
                "repetitions": [1],
                "warmup": [0],
                "reps_done": [1],
                "started_ns": [imported.started_ns or t0],
                "ended_ns": [imported.ended_ns or t0],
                "host": [""],
                "pid": [0],
                "reason": [f"imported from {source.tool}: {source.path}"],
            },
            **imported.tables,
        }
    )


__all__ = ["ImportResult", "import_trace"]
