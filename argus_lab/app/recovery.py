"""Recovery: runs left ``running`` by a process that is gone are finished from what they left behind.

A run is *stale* when the store says ``running`` but the process that runs it is gone: the pid recorded with the run
no longer exists on this host (or a younger process took it over), and, for a child-process run, the child that
writes its folder (``proc.json``) is gone too.  A stale run is finished from its run folder
(``<store>.runs/<run_id>/``): every shard that can be read is stored, with the child's own status when it left one
(``ok``, ``failed``, ``interrupted``), else ``died``; its repetitions are kept.  An in-process run has no folder: it
ends ``died`` with the instances it stored (none, since an in-process run stores at its end), unless it was a long
run killed while its evidence was being stored: its complete spool (:mod:`argus_lab.store.handoff`) is stored then.

The first write of each :class:`~argus_lab.store.Store` recovers (under the writer's lock, so two processes never
recover one run twice); ``argus-lab recover --store S`` does it explicitly and also lists run folders the store has
no record of.  Runs on other hosts are never touched: their processes cannot be checked from here.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from argus_lab.errors import StoreError
from argus_lab.plan.backends import BACKENDS
from argus_lab.report.runs import all_runs, running_runs, stored_repetitions
from argus_lab.run import shards
from argus_lab.run.machine import hostname
from argus_lab.run.protocols import RunContext
from argus_lab.run.recovery import ACTIVE_RUNS, collect, process_alive
from argus_lab.store import handoff
from argus_lab.store.db import run_root
from argus_lab.store.sink import finish_statement, note_statement, run_folder

if TYPE_CHECKING:
    from argus_lab.store.db import Store


@dataclass(frozen=True)
class Recovered:
    """One stale run, finished by recovery."""

    run_id: str
    request_id: str
    status: str
    reps_done: int
    cause: str
    folder: str
    """The run folder it was read from (``""``: an in-process run, no folder)."""

    def line(self) -> str:
        """One line for a terminal."""
        first = self.cause.splitlines()[0] if self.cause else ""
        return f"{self.run_id}: {self.status}, {self.reps_done} repetition(s) kept" + (f" - {first}" if first else "")


def stale_runs(store: Store) -> list[dict[str, Any]]:
    """The runs of ``store`` marked ``running`` whose process (and child process) is gone, on this host."""
    here, me = hostname(), os.getpid()
    out = []
    for r in running_runs(store):
        if r["host"] != here or r["run_id"] in ACTIVE_RUNS or r["pid"] is None:
            continue
        if r["pid"] != me and process_alive(r["pid"], r["started_ns"]):
            continue
        proc = shards.read_proc(run_folder(store, r["run_id"]))
        if proc is not None and proc.get("host") == here and process_alive(proc.get("pid"), proc.get("started_ns")):
            continue  # the parent is gone but its child still writes the folder: recovered once it ends
        out.append(r)
    return out


def recover_stale(store: Store, *, quiet: bool = False) -> list[Recovered]:
    """Finish every stale run of ``store`` from what it left behind; say so on stderr unless ``quiet``.

    Call it under the store's write connection (the first write of a Store does).
    """
    done = []
    with store.connect(write=True):
        for r in stale_runs(store):
            try:
                done.append(_recover(store, r))
            except StoreError:
                raise
            except Exception as exc:  # one run's damage never stops the others nor the caller's write
                done.append(Recovered(r["run_id"], r["request_id"] or "", "running", 0, f"not recovered: {exc}", ""))
    if done and not quiet:
        print(
            f"argus_lab: recovered {len(done)} run(s) of {store.path} left running by a process that ended:\n  "
            + "\n  ".join(d.line() for d in done),
            file=sys.stderr,
        )
    return done


def _recover(store: Store, r: dict[str, Any]) -> Recovered:
    run_id, pid, host = r["run_id"], r["pid"], r["host"]
    folder = run_folder(store, run_id)
    owner = f"the process that ran it (pid {pid} on {host}) ended before it stored the run"
    spool = handoff.spooled(folder)
    if spool is not None:  # a long in-process run had written its evidence for the store: stored from there
        note = f"recovered from {spool}: {owner}"
        about = handoff.store_spool(store, spool, extra=[note_statement(run_id, note)])
        shutil.rmtree(spool, ignore_errors=True)
        status, cause = str(about.get("status", "ok")), str(about.get("cause", ""))
        return Recovered(
            run_id,
            r["request_id"] or "",
            status,
            int(about.get("reps_done", 0)),
            (cause + "\n" if cause else "") + note,
            str(folder),
        )
    if (folder / "spec.json").is_file():
        settings = _json(r["settings"])
        signals = tuple(r["signals"] or ())
        launcher: Any = None
        note = ""
        name = next((b for b in r["backends"] or () if b in BACKENDS and BACKENDS[b].launches_workload), None)
        if name is not None:
            try:
                from argus_lab.run.loader import load_backend

                launcher = load_backend(name)
            except Exception as exc:
                note = f"; the {name} evidence was not read ({exc})"
        ctx = RunContext(run_id, signals, settings.get(name, {}) if name else {}, folder)
        got = collect(folder, ctx, launcher, ended="stopped")
        if got.status == "died":
            cause = f"recovered: {owner}; " + got.cause
        else:
            cause = (got.cause + "\n" if got.cause else "") + f"recovered from {folder}: {owner}"
        store.write(got.tables, then=[finish_statement(run_id, got.status, cause + note, got.reps_done, _now_ns())])
        return Recovered(run_id, r["request_id"] or "", got.status, got.reps_done, cause + note, str(folder))
    reps = stored_repetitions(store, run_id)
    cause = f"died: {owner} (killed, or it called os._exit); " + (
        f"{reps} repetition(s) were stored"
        if reps
        else "an in-process run stores its evidence when it ends, so nothing of it was stored"
    )
    store.execute(*finish_statement(run_id, "died", cause, int(reps), _now_ns()))
    return Recovered(run_id, r["request_id"] or "", "died", int(reps), cause, "")


def unknown_folders(store: Store) -> list[Path]:
    """Run folders under ``<store>.runs/`` that the store has no run for (they cannot be ingested: no record)."""
    root = run_root(store.path)
    if not root.is_dir():
        return []
    known = set(all_runs(store))
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name not in known and (p / "spec.json").is_file())


def _json(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    try:
        out = json.loads(value) if value else {}
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _now_ns() -> int:
    import time

    return time.time_ns()


__all__ = ["Recovered", "recover_stale", "stale_runs", "unknown_folders"]
