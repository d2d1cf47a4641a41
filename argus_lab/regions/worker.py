"""Regions in the processes a measurement starts: DataLoader workers, ``multiprocessing`` children, forks.

While a run records, the measuring process names a *spool* (:class:`Spool`: the run's ``workers/`` folder, the run
id, its own pid).  A process started then records its own region instances into a :class:`WorkerRecorder`:

* a forked child (``os.fork``, the ``fork`` start method) at the fork (``os.register_at_fork``), from the spool of
  the process it was forked from;
* a spawned child (``spawn``, ``forkserver``, a Python subprocess) when it imports :mod:`argus_lab.regions`, from
  the spool named by the environment variable ``ARGUS_REGION_SPOOL`` (set while the run records), and only while
  the spool's ``OPEN`` file exists (a forkserver that outlives the run keeps the variable, not the file).

The recorder writes what finished to chunk files ``<pid>-<seq>.json`` in the spool (a temporary name, then a
rename: a reader never sees half a chunk): every :data:`FLUSH_EVERY_S` seconds from a thread of its own, whenever
:data:`CHUNK_ROWS` instances are waiting, and when the process exits (``atexit``, and a ``multiprocessing``
finalizer, since a ``multiprocessing`` child leaves through ``os._exit``).  Memory stays bounded: written rows are
dropped.  A child killed with SIGKILL keeps the chunks it wrote.  The measuring process merges the chunks into its
run (:mod:`argus_lab.regions.capture`).

A forked child starts with an empty record: the regions its parent had open at the fork belong to another
generation, so they are never its parents nor recorded by it.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from argus_lab import config
from argus_lab.regions.recorder import Recorder
from argus_lab.regions.state import _ROW_WIDTH, _active, _nodes, _thread_names

SPOOL_ENV = config.ARGUS_REGION_SPOOL
OPEN_FILE = "OPEN"
CHUNK_GLOB = "*-*.json"
FLUSH_EVERY_S = 0.25
CHUNK_ROWS = 4096


@dataclass(frozen=True)
class Spool:
    """Where the processes started during a run write their instances, and how they record."""

    folder: str
    run_id: str
    owner: int  # pid of the measuring process
    cpu_clock: bool = False

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, text: str | None) -> Spool | None:
        """The spool an environment value names (``None`` when unset or unreadable)."""
        if not text:
            return None
        try:
            raw = json.loads(text)
            return cls(str(raw["folder"]), str(raw["run_id"]), int(raw["owner"]), bool(raw.get("cpu_clock")))
        except (ValueError, KeyError, TypeError):
            return None

    @property
    def open(self) -> bool:
        return os.path.exists(os.path.join(self.folder, OPEN_FILE))


_spool: list[Spool | None] = [None]  # the spool this process's forked children record into
_worker: list[WorkerRecorder | None] = [None]  # this process's own worker recorder


def process_name() -> str:
    """How this process is named in its instances' ``thread_name``: ``DataLoader worker <id>`` in a torch
    DataLoader worker, else the ``multiprocessing`` process name, else ``process <pid>``."""
    torch_worker = sys.modules.get("torch.utils.data._utils.worker")
    info = getattr(torch_worker, "_worker_info", None)
    if info is not None:
        return f"DataLoader worker {info.id}"
    mp = sys.modules.get("multiprocessing.process")
    if mp is not None:
        proc = mp.current_process()
        if proc.name != "MainProcess":
            return str(proc.name)
    return f"process {os.getpid()}"


class WorkerRecorder(Recorder):
    """The recorder of a process started during a run: it writes its finished instances to chunk files."""

    def __init__(self, spool: Spool) -> None:
        super().__init__(spool.run_id, cpu_clock=spool.cpu_clock)
        self.spool = spool
        self.pid = os.getpid()
        self._seq = 0
        self._write_lock = threading.Lock()
        self._done = threading.Event()

    def _spill(self) -> None:
        """Called by the boundaries every 2,048 instance ids: write a chunk once enough rows wait."""
        if len(self._rows) >= CHUNK_ROWS * _ROW_WIDTH:
            self.flush()

    def flush(self) -> None:
        """Write the instances finished since the last chunk (nothing in another process, e.g. a forked child)."""
        if os.getpid() != self.pid:
            return
        with self._write_lock:
            with self._spill_lock:
                rows = self._rows
                n = len(rows)
                taken = rows[:n]
                del rows[:n]
            errors, self._errors = self._errors, {}
            if not taken and not errors:
                return
            self._write(taken, errors)

    def _write(self, rows: list[int], errors: dict[int, str]) -> None:
        name = process_name()
        main = threading.main_thread().ident
        nodes: dict[str, dict[str, Any]] = {}
        names: dict[str, int] = {}
        name_of: list[int] = []
        for k in range(0, len(rows), _ROW_WIDTH):
            node, tid = rows[k + 1], rows[k + 3]
            if str(node) not in nodes:
                marker = _nodes.marker[node]
                region = marker.region if marker is not None else None
                nodes[str(node)] = {"path": _nodes.path[node], **(asdict(region) if region is not None else {})}
            thread = name if tid == main else f"{name}/{_thread_names.at(tid, rows[k + 4])}"
            name_of.append(names.setdefault(thread, len(names)))
        chunk = {
            "pid": self.pid,
            "run_id": self.spool.run_id,
            "rows": rows,
            "nodes": nodes,
            "names": list(names),
            "thread_name": name_of,
            "errors": {str(i): e for i, e in errors.items()},
        }
        folder = Path(self.spool.folder)
        path = folder / f"{self.pid}-{self._seq:06d}.json"
        self._seq += 1
        tmp = path.with_name(path.name + ".tmp")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tmp.open("w") as f:
                json.dump(chunk, f, separators=(",", ":"))
            tmp.replace(path)
        except OSError:  # the run's folder is gone (the store was removed): nothing to deliver to
            tmp.unlink(missing_ok=True)

    def finish(self) -> None:
        """Stop recording (instances open on the calling thread are ``abandoned``) and write the rest."""
        self._done.set()
        if os.getpid() != self.pid:
            return
        self.deactivate()
        self.flush()

    def _flush_loop(self) -> None:
        while not self._done.wait(FLUSH_EVERY_S):
            if not self.spool.open:  # the run has ended: what this process records now goes nowhere
                self._done.set()
                self.deactivate()
                with self._spill_lock:
                    del self._rows[:]
                return
            self.flush()


def start_worker(spool: Spool) -> WorkerRecorder | None:
    """Record this process's regions into ``spool`` (a process started while a run records)."""
    if _active[0] is not None:  # this process measures (or records) already
        return None
    rec = WorkerRecorder(spool)
    rec.activate()
    _worker[0] = rec
    _spool[0] = spool  # its own forked children record too
    _arm_exit()
    threading.Thread(target=rec._flush_loop, name="argus-region-spool", daemon=True).start()
    return rec


def stop_worker() -> None:
    """Stop this process's worker recorder, if it has one (its last chunk is written)."""
    rec, _worker[0] = _worker[0], None
    if rec is not None:
        rec.finish()


def _final_flush() -> None:
    rec = _worker[0]
    if rec is not None and rec.pid == os.getpid():
        stop_worker()


class _ExitHook:
    """The object a ``multiprocessing`` after-fork hook is registered with (it must be weakly referable)."""


_EXIT_HOOK = _ExitHook()
_armed = [0]  # the pid whose exit hooks are registered


def _arm_exit() -> None:
    """Write the last chunk when this process exits: ``atexit`` (normal exits), and a ``multiprocessing`` finalizer
    (its children end with ``os._exit`` after running the finalizers registered after their start)."""
    if _armed[0] == os.getpid():
        return
    _armed[0] = os.getpid()
    atexit.register(_final_flush)
    import multiprocessing.util as mp_util

    mp_util.Finalize(None, _final_flush, exitpriority=100)  # registered after a multiprocessing child's start
    mp_util.register_after_fork(_EXIT_HOOK, _arm_finalizer)  # children forked later: their registry is cleared


def _arm_finalizer(_hook: object) -> None:
    import multiprocessing.util as mp_util

    mp_util.Finalize(None, _final_flush, exitpriority=100)


def arm_children(spool: Spool | None) -> None:
    """Make the processes this one forks from now on record into ``spool`` (``None``: no longer)."""
    _spool[0] = spool
    if spool is not None:
        _arm_exit()


def _after_fork_in_child() -> None:
    _worker[0] = None  # the parent's worker recorder (if any) is not this process's
    _armed[0] = 0
    spool = _spool[0]
    if spool is not None:
        start_worker(spool)


def start_from_env() -> WorkerRecorder | None:
    """At import: a spawned process of a run that records starts recording (see the module docstring)."""
    spool = Spool.from_env(os.environ.get(SPOOL_ENV))
    if spool is None or spool.owner == os.getpid() or _worker[0] is not None or not spool.open:
        return None
    return start_worker(spool)


os.register_at_fork(after_in_child=_after_fork_in_child)
