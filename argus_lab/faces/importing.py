"""``argus_lab.import_trace``: a trace recorded by another tool becomes a run of the store, then joined.

The importers (:mod:`argus_lab.backends.imported`) turn a file into raw evidence tables; this module gives them a
run (session, request, run row with ``variant = 'imported'`` and the command that imported it), writes them in
one transaction and runs the join, so the imported evidence has attribution classes and region values like a
measured run's, and can be compared with one.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from argus_lab.backends.imported import ImportedTrace, detect_format, read_trace
from argus_lab.join import JoinSummary, attribute_request
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
    st = store if isinstance(store, Store) else Store(store)
    kind = fmt or detect_format(path)
    run_id = f"r-{uuid.uuid4().hex[:10]}"
    t0 = time.time_ns()
    if kind == "kineto":  # staged on the store's own connection: a million kernels never leave DuckDB
        with st.connect(write=True) as con:
            imported = read_trace(path, run_id, kind, con=con, **options)
            try:
                _write(st, imported, kind, options, t0)
            finally:
                for table in imported.staged:
                    con.execute(f"DROP TABLE IF EXISTS {table}")
    else:
        imported = read_trace(path, run_id, kind, **options)
        _write(st, imported, kind, options, t0)
    summary = attribute_request(st, [run_id])
    return ImportResult(run_id, imported, summary, st.path)


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
                "status": ["ok"],
                "cause": [""],
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
