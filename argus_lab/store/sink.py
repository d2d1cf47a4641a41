"""The store's side of a run: :class:`StoreSink` implements the runtime's :class:`~argus_lab.run.sink.Sink`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from argus_lab.store import handoff
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
        command, in one transaction; a long run's (:func:`~argus_lab.store.handoff.worth_a_fresh_process`) from a
        fresh process, so that the measured process never holds DuckDB's insert."""
        tables = evidence or {}
        then = [finish_statement(run_id, status, cause, reps_done, ended_ns, command)]
        if handoff.worth_a_fresh_process(tables):
            about = {"status": status, "cause": cause, "reps_done": reps_done}
            if handoff.write_in_fresh_process(self.store, self.run_folder(run_id), tables, then, about):
                return
            if self._finished(run_id):  # the fresh process stored it, then failed: never stored twice
                return
        self.store.write(tables, then=then)

    def _finished(self, run_id: str) -> bool:
        rows = self.store.rows("SELECT status FROM runs WHERE run_id = ?", [run_id])
        return bool(rows) and rows[0][0] != "running"

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


def note_statement(run_id: str, note: str) -> tuple[str, list[Any]]:
    """The UPDATE that adds a line to a run's cause (SQL and bound values)."""
    return (
        "UPDATE runs SET cause = CASE WHEN coalesce(cause, '') = '' THEN ? ELSE cause || chr(10) || ? END "
        "WHERE run_id = ?",
        [note, note, run_id],
    )


def run_folder(store: Store, run_id: str) -> Path:
    """Where a run of ``store`` keeps its files (shards, tool reports): ``<store>.runs/<run_id>/``."""
    return store.path.with_name(store.path.name + ".runs") / run_id


__all__ = ["StoreSink", "finish_statement", "note_statement", "run_folder"]
