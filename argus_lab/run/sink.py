"""Where a run's records and evidence go: the small interface the store side implements.

The runtime never opens the store (it is downstream of ``run/``): it hands every table to a :class:`Sink`, in
bulk, as soon as a run ends, and reports each run's final status to it.  :class:`argus_lab.store.sink.StoreSink`
implements it over the DuckDB evidence store.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol


class Sink(Protocol):
    """The destination of a plan's records (sessions, requests, plans, runs) and of every run's evidence."""

    def write(self, tables: Mapping[str, Any]) -> None:
        """Insert several tables in one transaction: ``{table: columns}`` (or Arrow tables), columns by name."""

    def finish_run(
        self,
        run_id: str,
        *,
        status: str,
        cause: str,
        reps_done: int,
        ended_ns: int,
        command: str | None,
        evidence: Mapping[str, Any] | None = None,
    ) -> None:
        """Record the end of run ``run_id``: its status, cause, finished repetitions, end time and (when given)
        the command that ran it, together with its ``evidence`` (tables, as for :meth:`write`) in one transaction:
        a run is never marked finished without its evidence, nor stored twice."""

    def run_folder(self, run_id: str) -> Path:
        """Where run ``run_id`` keeps its files (shards, tool reports); it may not exist yet."""


__all__ = ["Sink"]
