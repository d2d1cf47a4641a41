"""The store's side of a run: :class:`StoreSink` implements the runtime's :class:`~argus_lab.run.sink.Sink`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from argus_lab.store.db import Store


class StoreSink:
    """Hands a plan's records and evidence to a :class:`Store`; a run's files go to ``<store>.runs/<run_id>/``."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __repr__(self) -> str:
        return f"StoreSink({self.store!r})"

    def write(self, tables: Mapping[str, Any]) -> None:
        """Insert the tables in one transaction (see :meth:`Store.write`)."""
        self.store.write(tables)

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
        """Store the run's evidence and set its final status, cause, finished repetitions, end time and (when given)
        command, in one transaction."""
        self.store.write(evidence or {}, then=[finish_statement(run_id, status, cause, reps_done, ended_ns, command)])

    def run_folder(self, run_id: str) -> Path:
        """``<store>.runs/<run_id>/``."""
        return run_folder(self.store, run_id)


def finish_statement(
    run_id: str, status: str, cause: str, reps_done: int, ended_ns: int, command: str | None = None
) -> tuple[str, list[Any]]:
    """The UPDATE that records a run's end (SQL and bound values)."""
    return (
        "UPDATE runs SET status = ?, cause = ?, reps_done = ?, ended_ns = ?, command = coalesce(?, command) "
        "WHERE run_id = ?",
        [status, cause, reps_done, ended_ns, command, run_id],
    )


def run_folder(store: Store, run_id: str) -> Path:
    """Where a run of ``store`` keeps its files (shards, tool reports): ``<store>.runs/<run_id>/``."""
    return store.path.with_name(store.path.name + ".runs") / run_id


__all__ = ["StoreSink", "finish_statement", "run_folder"]
