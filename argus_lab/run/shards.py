"""Evidence shards: the Parquet files a child run writes into its run folder, and reading them back.

A child process never opens the DuckDB store: it writes one ``instances-<rep>.parquet`` per finished
repetition, with the values derived from the instances alone (host clocks) in ``ev-<table>.rep<rep>.parquet``, so
a process that dies keeps what it finished; ``ev-<table>.parquet`` for each evidence table at the end, and
``status.json``.  Rows written at other moments go to ``ev-<table>.<part>.parquet`` (a rank's clock offsets,
:func:`write_part`; the instances of the processes the workload started, :func:`write_parts`): they land in the same
table.  ``proc.json`` (written by the parent) names the process that writes the folder, so that recovery never
ingests a folder still being written.

Every file is written to a temporary name and renamed into place, so a reader never sees half a file.  Reading
tolerates damage: a file that cannot be read is named in :attr:`FolderRead.problems` and the others are kept.
The parent ingests the folder into the store in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from argus_lab.model.batches import TableBatches, rows
from argus_lab.model.columns import jsonable_columns
from argus_lab.model.files import write_json
from argus_lab.model.files import write_parquet as write_table
from argus_lab.run.protocols import Evidence

STATUS_FILE = "status.json"
PROC_FILE = "proc.json"


def _table(cols: Mapping[str, Sequence[Any]]) -> Any:
    import pyarrow as pa

    return pa.table(jsonable_columns(cols))


def write_instances(folder: Path, rep: int, cols: Mapping[str, Sequence[Any]] | TableBatches) -> None:
    """The shard of one finished repetition."""
    write_table(folder / f"instances-{rep:05d}.parquet", cols)


def write_repetition(folder: Path, rep: int, evidence: Evidence) -> None:
    """One finished repetition: its instances (``instances-<rep>.parquet``), then what was derived from them alone
    (``ev-<table>.rep<rep>.parquet``: the host clocks' values), each file complete or absent."""
    write_instances(folder, rep, evidence["region_instances"])
    for table, cols in evidence.items():
        if table != "region_instances" and cols and rows(cols):
            write_table(folder / f"ev-{table}.rep{rep:05d}.parquet", cols)


def write_evidence(folder: Path, evidence: Evidence) -> None:
    """The evidence tables of a finished (or failed) run, instances excluded (they are in the shards)."""
    for table, cols in evidence.items():
        if table == "region_instances":
            continue
        write_table(folder / f"ev-{table}.parquet", cols)


def write_part(folder: Path, table: str, part: str, cols: Mapping[str, Sequence[Any]] | TableBatches) -> None:
    """Rows of one store table written apart from the evidence (``ev-<table>.<part>.parquet``)."""
    write_table(folder / f"ev-{table}.{part}.parquet", cols)


def write_parts(folder: Path, part: str, evidence: Evidence) -> None:
    """Every table of ``evidence`` as a part (``ev-<table>.<part>.parquet``): the region instances of the processes
    a run started, merged when it stopped, land in ``region_instances`` as the shards do."""
    for table, cols in evidence.items():
        if cols and rows(cols):
            write_part(folder, table, part, cols)


def write_status(folder: Path, status: str, cause: str, reps_done: int) -> None:
    """The child's last word (written atomically)."""
    write_json(folder / STATUS_FILE, {"status": status, "cause": cause, "reps_done": reps_done})


def write_proc(folder: Path, pid: int, host: str, started_ns: int) -> None:
    """Which process writes the folder (the parent writes it once the child started)."""
    write_json(folder / PROC_FILE, {"pid": pid, "host": host, "started_ns": started_ns})


def read_proc(folder: Path) -> dict[str, Any] | None:
    """The process that writes the folder, if the parent recorded it."""
    try:
        value = json.loads((folder / PROC_FILE).read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class FolderRead:
    """What a run folder holds."""

    tables: dict[str, Any]
    """Arrow tables keyed by store table name (from every file that could be read)."""
    status: dict[str, Any] | None
    """The child's status (the worst rank's for several ranks); ``None`` when a status is missing or unreadable."""
    problems: tuple[str, ...] = field(default=())
    """Files that could not be read, each with the error (``instances-00003.parquet: Couldn't deserialize ...``)."""

    @property
    def repetitions(self) -> int:
        """Distinct repetitions among the instances read."""
        inst = self.tables.get("region_instances")
        if inst is None or "repetition" not in inst.column_names:
            return 0
        return len(set(inst.column("repetition").to_pylist()))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def plain_text(table: Any) -> Any:
    """``table`` with its dictionary-encoded text columns (the recorder's paths, the host values' signal names) as
    plain text: shards of one table may encode a column differently (or not at all), and Arrow concatenates only
    columns of one type."""
    import pyarrow as pa

    fields = [
        pa.field(f.name, f.type.value_type, f.nullable) if pa.types.is_dictionary(f.type) else f for f in table.schema
    ]
    if all(a.type == b.type for a, b in zip(fields, table.schema, strict=True)):
        return table
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))


def read_folder(folder: Path) -> FolderRead:
    """Every table of a run folder and the child's status, keeping whatever can be read.

    A multi-rank run has one ``rank-<r>`` folder per rank; their shards are merged (every row carries its
    rank) and the run's status is the worst of the ranks' (``None`` when any rank left no readable status).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    ranks = sorted(p for p in folder.glob("rank-*") if p.is_dir())
    leaves = ranks or [folder]
    parts: dict[str, list[Any]] = {}
    problems: list[str] = []

    def name(p: Path) -> str:
        return p.relative_to(folder).as_posix()

    for leaf in leaves:
        files = [("region_instances", p) for p in sorted(leaf.glob("instances-*.parquet"))]
        files += [(p.stem[3:].split(".")[0], p) for p in sorted(leaf.glob("ev-*.parquet"))]
        for table, p in files:
            try:
                parts.setdefault(table, []).append(plain_text(pq.read_table(p)))
            except Exception as exc:  # a damaged shard: name it, keep the others
                problems.append(f"{name(p)}: {_first_line(exc)}")
    tables: dict[str, Any] = {}
    for table, ts in parts.items():
        try:
            tables[table] = pa.concat_tables(ts, promote_options="permissive")
        except Exception as exc:
            problems.append(f"{table} shards do not fit together: {_first_line(exc)}")
    statuses: list[tuple[str, dict[str, Any]]] = []
    missing = False
    for leaf in leaves:
        status_path = leaf / STATUS_FILE
        if not status_path.exists():
            missing = True
            continue
        try:
            st = json.loads(status_path.read_text())
            if not isinstance(st, dict) or not {"status", "cause", "reps_done"} <= set(st):
                msg = "not a status object"
                raise ValueError(msg)
            statuses.append((leaf.name, st))
        except (OSError, ValueError) as exc:
            problems.append(f"{name(status_path)}: {_first_line(exc)}")
            missing = True
    if missing:
        return FolderRead(tables, None, tuple(problems))
    if len(statuses) == 1:
        return FolderRead(tables, statuses[0][1], tuple(problems))
    bad = [(leaf, st) for leaf, st in statuses if st["status"] != "ok"]
    return FolderRead(
        tables,
        {
            "status": bad[0][1]["status"] if bad else "ok",
            "cause": "\n".join(f"{leaf}: {st['cause']}" for leaf, st in bad),
            "reps_done": min(int(st["reps_done"]) for _, st in statuses),
        },
        tuple(problems),
    )
