"""Evidence shards: the Parquet files a child run writes into its run folder, and reading them back.

A child process never opens the DuckDB store: it writes one ``instances-<rep>.parquet`` per finished
repetition (so a process that dies keeps what it finished), ``ev-<table>.parquet`` for each evidence table at
the end, and ``status.json``.  Rows written at other moments go to ``ev-<table>.<part>.parquet`` (a rank's
clock offsets, :func:`write_part`): they land in the same table.  The parent ingests the folder into the
store in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from argus_lab.run.columns import jsonable_columns
from argus_lab.run.protocols import Evidence

STATUS_FILE = "status.json"


def _table(cols: Mapping[str, Sequence[Any]]) -> Any:
    import pyarrow as pa

    return pa.table(jsonable_columns(cols))


def write_table(path: Path, cols: Mapping[str, Sequence[Any]]) -> None:
    """Write columns to a Parquet file atomically (write, then rename)."""
    import pyarrow.parquet as pq

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


def write_part(folder: Path, table: str, part: str, cols: Mapping[str, Sequence[Any]]) -> None:
    """Rows of one store table written apart from the evidence (``ev-<table>.<part>.parquet``)."""
    write_table(folder / f"ev-{table}.{part}.parquet", cols)


def write_status(folder: Path, status: str, cause: str, reps_done: int) -> None:
    """The child's last word."""
    (folder / STATUS_FILE).write_text(json.dumps({"status": status, "cause": cause, "reps_done": reps_done}))


def read_folder(folder: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Arrow tables of a run folder keyed by store table name, and the status (``None`` if a child died).

    A multi-rank run has one ``rank-<r>`` folder per rank; their shards are merged (every row carries its
    rank) and the run's status is the worst of the ranks' (``None`` when any rank left no status).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    ranks = sorted(p for p in folder.glob("rank-*") if p.is_dir())
    leaves = ranks or [folder]
    parts: dict[str, list[Any]] = {}
    for leaf in leaves:
        for p in sorted(leaf.glob("instances-*.parquet")):
            parts.setdefault("region_instances", []).append(pq.read_table(p))
        for p in sorted(leaf.glob("ev-*.parquet")):
            parts.setdefault(p.stem[3:].split(".")[0], []).append(pq.read_table(p))
    tables = {name: pa.concat_tables(ts, promote_options="default") for name, ts in parts.items()}
    statuses = []
    for leaf in leaves:
        status_path = leaf / STATUS_FILE
        if not status_path.exists():
            return tables, None
        statuses.append((leaf.name, json.loads(status_path.read_text())))
    if len(statuses) == 1:
        return tables, statuses[0][1]
    bad = [(name, st) for name, st in statuses if st["status"] != "ok"]
    return tables, {
        "status": bad[0][1]["status"] if bad else "ok",
        "cause": "\n".join(f"{name}: {st['cause']}" for name, st in bad),
        "reps_done": min(int(st["reps_done"]) for _, st in statuses),
    }
