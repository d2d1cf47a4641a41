"""The measuring side of regions recorded in started processes (:mod:`argus_lab.regions.worker`): the run's spool
while it records, and the merge of the chunks its processes wrote into the run's instances.

The merge gives every instance of a started process a new instance id from the measuring process's counter (after
the run's own: no collision, ranks keep their id ranges), keeps nesting inside each process (a parent id is
remapped with its instance), leaves the top-level instances of a process without a parent, numbers each path's
instances after the measuring process's own (``instance_index``, in order of start) and gives each instance the
repetition that was running when it started.  ``pid`` is the started process's, ``thread_name`` its name
(:func:`argus_lab.regions.worker.process_name`; ``<process>/<thread>`` for its other threads).

``thread_id`` is a number of the merge's (:func:`worker_thread_id`), not the process's pthread id: a forked child's
thread has its parent's pthread id, and the join tells threads apart by thread id (the low 32 bits, as CUPTI reports
them), so a worker's regions would otherwise lie on the measuring thread's timeline.  Its low 32 bits are odd (a
pthread id is an aligned address: even) and hold the pid and the thread's number in the process.
"""

from __future__ import annotations

import bisect
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from argus_lab.regions.identity import INSTANCE_FIELDS, Region
from argus_lab.regions.state import _ROW_WIDTH, _Ids
from argus_lab.regions.worker import CHUNK_GLOB, OPEN_FILE, SPOOL_ENV, Spool, arm_children

WORKERS_DIR = "workers"
"""The spool's folder inside the run's folder."""


@dataclass(frozen=True)
class WorkerInstances:
    """What the processes started during a run recorded, ready to join the run's instances."""

    columns: dict[str, list[Any]]
    """Columns named after :data:`INSTANCE_FIELDS`, and ``thread_name``."""
    regions: tuple[Region, ...]
    unreadable: tuple[str, ...]
    """Chunk files that could not be read, each with the error."""


class WorkerCapture:
    """While entered (inside the run's active recorder): processes started now record their regions into
    ``folder``; :meth:`collect` reads them back afterwards."""

    def __init__(self, folder: Path, run_id: str, *, cpu_clock: bool = False) -> None:
        self.folder = Path(folder)
        self.run_id = run_id
        self.cpu_clock = cpu_clock
        self._marks: list[tuple[int, int]] = []  # (start ns, repetition)
        self._env_before: str | None = None
        self._made: list[Path] = []  # folders this capture created (removed again when nothing was written)
        self.on = False

    def __enter__(self) -> WorkerCapture:
        made = [p for p in (*reversed(self.folder.parents), self.folder) if not p.exists()]  # outermost first
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / OPEN_FILE).write_text(self.run_id)
        except OSError:  # no folder to spool into: started processes record nothing, the run goes on
            return self
        self._made = made
        spool = Spool(str(self.folder), self.run_id, os.getpid(), self.cpu_clock)
        self._env_before = os.environ.get(SPOOL_ENV)
        os.environ[SPOOL_ENV] = spool.to_env()
        arm_children(spool)
        self.on = True
        return self

    def __exit__(self, *_: object) -> None:
        if not self.on:
            return
        self.on = False
        arm_children(None)
        if self._env_before is None:
            os.environ.pop(SPOOL_ENV, None)
        else:
            os.environ[SPOOL_ENV] = self._env_before
        (self.folder / OPEN_FILE).unlink(missing_ok=True)
        for folder in reversed(self._made):  # nothing was written: leave no trace
            try:
                folder.rmdir()
            except OSError:
                break

    def note_repetition(self, rep: int) -> None:
        """Repetition ``rep`` starts now (instances of started processes take it by their start)."""
        self._marks.append((time.time_ns(), rep))

    def collect(self, parent_paths: Callable[[], Iterable[str]], rank: int = 0) -> WorkerInstances | None:
        """The instances the started processes wrote (``None`` when none wrote any).  ``parent_paths()``: the paths
        of the measuring process's instances as Python strings (their count per path starts each path's
        ``instance_index``; asked only when some process wrote)."""
        try:
            files = sorted(self.folder.glob(CHUNK_GLOB), key=_chunk_order)
        except OSError:
            return None
        if not files:
            return None
        chunks: list[dict[str, Any]] = []
        bad: list[str] = []
        for path in files:
            try:
                chunks.append(json.loads(path.read_text()))
            except (OSError, ValueError) as exc:
                bad.append(f"{path.name}: {type(exc).__name__}: {exc}")
        return _merge(chunks, self._marks, Counter(parent_paths()), rank, tuple(bad))


def _chunk_order(path: Path) -> tuple[int, int]:
    pid, _, seq = path.stem.partition("-")
    return (int(pid), int(seq)) if pid.isdigit() and seq.isdigit() else (-1, 0)


def worker_thread_id(pid: int, number: int) -> int:
    """The ``thread_id`` of the ``number``-th thread (0: the first that finished a region) of started process
    ``pid``: low 32 bits ``(pid, number mod 256) * 2 + 1``, the rest of ``number`` above them."""
    low = ((((pid & 0x3FFFFF) << 8) | (number & 0xFF)) << 1) | 1
    return ((number >> 8) << 32) | low


def _merge(
    chunks: list[dict[str, Any]],
    marks: list[tuple[int, int]],
    path_counts: Counter[Any],
    rank: int,
    unreadable: tuple[str, ...],
) -> WorkerInstances | None:
    found: list[tuple[Any, ...]] = []  # (start, pid, iid, parent, path, region id, thread, end, cpu, thread name)
    errors: dict[tuple[int, int], str] = {}
    regions: dict[str, Region] = {}
    for chunk in chunks:
        pid, rows, names, name_of = int(chunk["pid"]), chunk["rows"], chunk["names"], chunk["thread_name"]
        nodes: dict[int, tuple[str, str]] = {}
        for key, node in chunk["nodes"].items():
            if "name" not in node:
                continue
            region = Region(node["name"], node["kind"], node["module"], node["file"], int(node["line"]))
            regions.setdefault(region.region_id, region)
            nodes[int(key)] = (node["path"], region.region_id)
        for i, k in enumerate(range(0, len(rows), _ROW_WIDTH)):
            iid, node, parent, tid, start, end, cpu = rows[k : k + _ROW_WIDTH]
            if node in nodes:
                path, rid = nodes[node]
                found.append((start, pid, iid, parent, path, rid, tid, end, cpu, names[name_of[i]]))
        for iid, text in chunk.get("errors", {}).items():
            errors[(pid, int(iid))] = text
    if not found:
        return None
    found.sort(key=lambda r: (r[0], r[1], r[2]))
    ids = _Ids.for_rank(rank)
    new_id = {(r[1], r[2]): next(ids) for r in found}
    starts = [t for t, _ in marks]
    cols: dict[str, list[Any]] = {name: [] for name in (*INSTANCE_FIELDS, "thread_name")}
    counts = Counter(path_counts)
    threads: dict[tuple[int, int], int] = {}
    per_pid: Counter[int] = Counter()
    for start, pid, iid, parent, path, rid, tid, end, cpu, tname in found:
        thread = threads.get((pid, tid))
        if thread is None:
            thread = threads[(pid, tid)] = worker_thread_id(pid, per_pid[pid])
            per_pid[pid] += 1
        cols["instance_id"].append(new_id[(pid, iid)])
        cols["region_id"].append(rid)
        cols["path"].append(path)
        cols["instance_index"].append(counts[path])
        counts[path] += 1
        cols["parent_instance_id"].append(new_id.get((pid, parent), 0))  # a parent never written: top level
        k = bisect.bisect_right(starts, start) - 1
        cols["repetition"].append(marks[max(k, 0)][1] if marks else 0)
        cols["pid"].append(pid)
        cols["thread_id"].append(thread)
        cols["start_ns"].append(start)
        cols["end_ns"].append(end)
        cols["cpu_ns"].append(cpu)
        cols["error"].append(errors.get((pid, iid), ""))
        cols["thread_name"].append(tname)
    return WorkerInstances(cols, tuple(regions.values()), unreadable)
