"""Evidence shards: the Parquet files a child run writes into its run folder, and reading them back.

A child process never opens the DuckDB store: it writes one ``instances-<rep>.parquet`` per finished
repetition (so a process that dies keeps what it finished), ``ev-<table>.parquet`` for each evidence table at
the end, and ``status.json``.  The parent ingests the folder into the store in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from argus_lab.backends.base import Evidence

STATUS_FILE = "status.json"


def _table(cols: Mapping[str, Sequence[Any]]) -> Any:
    import pyarrow as pa  # noqa: PLC0415

    data: dict[str, Sequence[Any]] = {}
    for key, col in cols.items():
        if any(isinstance(v, dict | list) for v in col[:1]) and key not in {"backends", "signals"}:
            data[key] = [json.dumps(v) for v in col]
        else:
            data[key] = col
    return pa.table(data)


def write_table(path: Path, cols: Mapping[str, Sequence[Any]]) -> None:
    """Write columns to a Parquet file atomically (write, then rename)."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    tmp = path.with_suffix(".tmp")
    pq.write_table(_table(cols), tmp)
    tmp.replace(path)


def write_instances(folder: Path, rep: int, cols: Mapping[str, Sequence[Any]]) -> None:
    """The shard of one finished repetition."""
    write_table(folder / f"instances-{rep:05d}.parquet", cols)


def write_evidence(folder: Path, evidence: Evidence) -> None:
    """The evidence tables of a finished (or failed) run, instances excluded (they are in the shards)."""
    for table, cols in evidence.items():
        if table == "region_instances":
            continue
        write_table(folder / f"ev-{table}.parquet", cols)


def write_status(folder: Path, status: str, cause: str, reps_done: int) -> None:
    """The child's last word."""
    (folder / STATUS_FILE).write_text(json.dumps({"status": status, "cause": cause, "reps_done": reps_done}))


def read_folder(folder: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Arrow tables of a run folder keyed by store table name, and the status (``None`` if the child died)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    tables: dict[str, Any] = {}
    shards = sorted(folder.glob("instances-*.parquet"))
    if shards:
        tables["region_instances"] = pa.concat_tables([pq.read_table(p) for p in shards], promote_options="default")
    for p in sorted(folder.glob("ev-*.parquet")):
        tables[p.stem[3:]] = pq.read_table(p)
    status_path = folder / STATUS_FILE
    status = json.loads(status_path.read_text()) if status_path.exists() else None
    return tables, status
