"""The process-wide state of the markers: the region stacks (per thread, and per asyncio task in a context variable),
the active recorder's slots read by every boundary (``_active``, ``_fast``, ``_cpath``), the thread names, the
table of region paths (``_nodes``) and the instance id counter; :func:`current_path` and :func:`current_instance`.

The slots are one-element lists changed in place, never rebound, so every module of the package that imported them
reads the same state with one global lookup, as the hot paths did when they were one module.
"""

from __future__ import annotations

import bisect
import contextvars
import itertools
import threading
import time
from asyncio import events as _asyncio_events
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from argus_lab.regions.marker import RegionMarker
    from argus_lab.regions.recorder import Recorder


# 8 the parent frame and 9 the task's previous top frame.
_Frame = tuple[Any, ...]
_ROW_WIDTH = 7  # a recorded row: instance id, node, parent instance id, thread id, start ns, end ns, CPU ns
_ROW_BYTES = _ROW_WIDTH * 8  # the same row as native int64 values (array "q", native.c's ROW_WIDTH)
_NATIVE_ROWS = 4096  # rows the C boundary buffer holds before the recorder takes them (~230 KB)

_local = threading.local()
_task_top: contextvars.ContextVar[_Frame | None] = contextvars.ContextVar("argus_region_top", default=None)
_running_loop = _asyncio_events._get_running_loop
_time_ns = time.time_ns
_thread_time_ns = time.thread_time_ns
_active: list[Recorder | None] = [None]  # the process's collector slot (one recorder at a time)
# What a boundary needs of the active recorder, in one tuple: (generation, next id, append a row, recorder, work),
# work: 0 = the clocks only (host.wall), 1 = also the sink (native CUPTI), 2 = anything else (hooks, NVTX ranges,
# the thread CPU clock); None when no recorder is active.
_Fast = tuple[int, Callable[[], int], Callable[[tuple[int, ...]], None], Any, int]
_fast: list[_Fast | None] = [None]
# The C boundary functions (enter, exit) while a native boundary run is on; each returns False to let Python do it.
_cpath: list[tuple[Callable[[Any], bool], Callable[[Any], bool]] | None] = [None]
_generations = itertools.count(1)


class _ThreadNames:
    """The name of every thread that opened a region, taken when it opened its first one.

    Python reuses a thread id once its thread has ended (per-step threads, pools), so a name is kept with the time
    it was taken and an instance's thread is named by (thread id, the instance's start): the last name taken for
    that id at or before the start.  Names are taken at a thread's first region only (one lock per thread).
    """

    def __init__(self) -> None:
        self._by_id: dict[int, list[tuple[int, str]]] = {}
        self._lock = threading.Lock()

    def note(self, ident: int, name: str) -> None:
        with self._lock:
            self._by_id.setdefault(ident, []).append((_time_ns(), name))

    def at(self, ident: int, t_ns: int) -> str:
        """The name of thread ``ident`` at ``t_ns`` (its first name for times before it was taken; "" if unknown)."""
        taken = self._by_id.get(ident)
        if not taken:
            return ""
        if len(taken) == 1:
            return taken[0][1]
        k = bisect.bisect_right(taken, (t_ns, "\U0010ffff")) - 1
        return taken[max(k, 0)][1]

    def known(self, ident: int) -> bool:
        return ident in self._by_id

    def latest(self) -> dict[int, str]:
        """Thread id -> the name taken last for it."""
        with self._lock:
            return {ident: taken[-1][1] for ident, taken in self._by_id.items()}


_thread_names = _ThreadNames()


def thread_names() -> dict[int, str]:
    """The names of the threads that opened regions (or were noted) in this process, by thread id (the latest name
    of a reused id)."""
    return _thread_names.latest()


def note_thread_name(ident: int, name: str) -> None:
    """Take ``name`` as the name of thread ``ident`` from now on (a thread that starts while a run records)."""
    _thread_names.note(ident, name)


class _Stack(list[_Frame]):
    """A thread's open regions (outside asyncio tasks), innermost last; it also keeps the thread's id.

    A new thread gets a new stack at its first region (``threading.local``), which is when its name is taken."""

    __slots__ = ("ident",)

    def __init__(self) -> None:
        super().__init__()
        self.ident = threading.get_ident()
        _thread_names.note(self.ident, threading.current_thread().name)


def _stack() -> _Stack:
    try:
        return _local.stack  # type: ignore[no-any-return, unused-ignore]
    except AttributeError:
        _local.stack = _Stack()
        return _local.stack  # type: ignore[no-any-return, unused-ignore]


def _open_frames() -> list[_Frame]:
    """The open region frames of the calling asyncio task (if any) and thread, innermost first."""
    out: list[_Frame] = []
    frame = _task_top.get() if _running_loop() is not None else None
    while frame is not None and len(frame) > 8:
        out.append(frame)
        frame = frame[8]
    if frame is None and out:  # the task's chain starts at the top level
        return out
    stack = _stack()
    pos = len(stack)
    if frame is not None:  # the task's outermost region was opened inside a region of the thread's stack
        pos = next((i + 1 for i in range(len(stack) - 1, -1, -1) if stack[i] is frame), 0)
    out.extend(reversed(stack[:pos]))
    return out


def current_path() -> str:
    """The region path open on the calling thread or asyncio task (``""`` outside every region).

    While a recorder is active this is the path it records: regions left open by code before it started
    are not part of it.
    """
    frames = _open_frames()
    if not frames:
        return ""
    top = frames[0]
    rec = _active[0]
    if top[1] and rec is not None and rec.gen == top[2]:
        return _nodes.path[top[5]]
    return "/".join(f[0].region.name for f in reversed(frames))


def current_instance() -> int:
    """The id of the innermost region instance the active recorder records on the calling thread or asyncio task
    (0 outside every recorded region, or when no recorder is active)."""
    rec = _active[0]
    if rec is None:
        return 0
    for frame in _open_frames():
        if frame[1] and frame[2] == rec.gen:
            return int(frame[1])
    return 0


class _Nodes:
    """Process-wide table of region paths: node 0 is the root; a node is (parent node, marker)."""

    def __init__(self) -> None:
        self.path: list[str] = [""]
        self.marker: list[RegionMarker | None] = [None]
        self.path_code: list[int] = [0]
        self._codes: dict[str, int] = {"": 0}
        self._lock = threading.Lock()

    def add(self, marker: RegionMarker, parent: int) -> int:
        with self._lock:
            node = marker._nodes.get(parent)
            if node is not None:
                return node
            name = marker.region.name
            path = f"{self.path[parent]}/{name}" if parent else name
            node = len(self.path)
            self.path.append(path)
            self.marker.append(marker)
            self.path_code.append(self._codes.setdefault(path, len(self._codes)))
            marker._nodes[parent] = node
            return node


_nodes = _Nodes()


def _node_of(marker: RegionMarker, parent: int) -> int:
    """The node of ``marker`` opened under node ``parent`` (asked once per pair by a native boundary run)."""
    return marker._nodes.get(parent) or _nodes.add(marker, parent)


class _Ids:
    """Instance ids: unique in the process across every recorder (and across ranks: rank r from r * 2**40)."""

    rank = -1
    counter: Iterator[int] = itertools.count(1)

    @classmethod
    def for_rank(cls, rank: int) -> Iterator[int]:
        if rank != cls.rank:
            cls.rank = rank
            cls.counter = itertools.count((rank << 40) + 1)
        return cls.counter

    @classmethod
    def resume(cls, next_id: int) -> None:
        """Continue from ``next_id`` (handed back by a native boundary run, which numbered from this counter)."""
        cls.counter = itertools.count(next_id)
