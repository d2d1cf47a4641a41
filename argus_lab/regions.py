"""Region markers and the region stacks of threads and asyncio tasks.

A region is a named piece of code whose identity is stable across runs and variants.  A marker
(:func:`region`) is used as a context manager or a decorator.  Each boundary

* keeps the region stack of the calling thread, or of the calling asyncio task when an event loop runs on the
  thread (so the path ``decode/layer/attn`` and the parent instance are known, and concurrent tasks do not
  nest into each other),
* opens or closes an NVTX push/pop range in the ``argus`` domain when an NVTX tool is attached (so Nsight tools
  can filter by region),
* when a :class:`Recorder` is active, records the region instance (host start/end in ns on the ``CLOCK_REALTIME``
  clock that CUPTI also uses, the thread's CPU time, the error if the body raised) into compact integer columns,
  and tells the recorder's boundary hooks (where a CUPTI collector sets the thread's current instance id).

When the only boundary work is a native sink that also offers the boundary functions (:class:`NativeBoundary`: the
CUPTI collector's C extension while a timing run records), a boundary on a thread's stack is one C call that does
all of the above (the same frame, the same instance id counter, the same row, see ``native.c``); the Python methods
still run for asyncio tasks (a running event loop on the thread, as in a Jupyter cell), for a body that raised, and
for misuse, and append their rows through the same C buffer, so that one row definition serves both paths.  While
such a run records, ``argus_lab.region`` is the extension's C ``region`` (:func:`_publish_region`): the call-site
lookup and the ``with`` protocol of ``with argus_lab.region("attn"):`` then run in C as well.

``region(name)`` is cached per call site, so the inline idiom ``with argus_lab.region("attn"):`` costs about as
much as a marker built once.  A recorder starts with an empty stack: regions left open by earlier code (a
suspended generator, a failed cell) are never parents of its instances, and the instances it leaves open are
recorded as ``abandoned`` when it stops.  A forked child never records into its parent's recorder.

This module is imported inside measured processes: it must stay free of heavy imports (it imports asyncio's
event-loop module, which torch imports anyway, to tell a running event loop).
"""

from __future__ import annotations

import bisect
import contextvars
import functools
import hashlib
import itertools
import os
import sys
import threading
import time
from array import array
from asyncio import events as _asyncio_events
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, cast

from argus_lab.errors import CollectorBusyError, RegionMisuseError

RegionKind = Literal["host", "device"]
F = TypeVar("F", bound=Callable[..., Any])

NVTX_DOMAIN = "argus"
"""The NVTX domain every region range is opened in (ncu filters: ``argus@outer/inner/``)."""

NVTX_SCOPE_DOMAIN = "argus-scope"
"""The NVTX domain of the scope ranges (ncu runs only): each region range is paired with a range named
:data:`NVTX_SCOPE_IN` when its instance is in the request's scope, :data:`NVTX_SCOPE_OUT` otherwise, so that
``ncu --nvtx-include argus-scope@in/`` replays exactly the kernels launched inside an in-scope instance."""
NVTX_SCOPE_IN = "in"
NVTX_SCOPE_OUT = "out"
NVTX_SCOPE_ENV = "ARGUS_NVTX_SCOPE"
"""Set (to the scope's text, never empty: ``**`` for every region) by the ncu launcher: the recorder then opens the
scope ranges.  The child's driver also switches them on from the run's spec (:func:`nvtx_scope_on`), so that they
never depend on an environment variable reaching the workload through the tool."""

ScopeGate = Callable[[str, int], bool]
"""Decides at region entry whether an instance is in scope: ``gate(path, repetition)`` (see
:mod:`argus_lab.run.nvtx_scope`); it is called once per instance, in entry order."""

ABANDONED = "abandoned: the region was still open when the measurement ended"
"""The ``error`` of an instance its recorder stopped before the region exited (e.g. a suspended generator)."""


@dataclass(frozen=True)
class Region:
    """The stable identity of a region: its name, kind and the module that declares it.

    The file and line where the marker was created are kept for display; they are not part of the
    identity, so editing the code around a region keeps its evidence joined across variants.
    """

    name: str
    kind: RegionKind = "host"
    module: str = "__main__"
    file: str = ""
    line: int = 0

    @functools.cached_property
    def region_id(self) -> str:
        """A 16-hex-digit id derived from name, kind and module."""
        key = f"{self.kind}\x1f{self.name}\x1f{self.module}".encode()
        return hashlib.sha1(key, usedforsecurity=False).hexdigest()[:16]


@dataclass(frozen=True)
class InstanceRow:
    """One finished region instance, as the recorder stores it (see :meth:`Recorder.instances`)."""

    instance_id: int
    region_id: str
    path: str
    instance_index: int
    parent_instance_id: int
    repetition: int
    pid: int
    thread_id: int
    start_ns: int
    end_ns: int
    cpu_ns: int
    error: str


INSTANCE_FIELDS: tuple[str, ...] = tuple(InstanceRow.__dataclass_fields__)


class BoundaryHook(Protocol):
    """Called at every region boundary while a recorder is active.

    A hook that also has a ``current_instance(instance_id)`` method (see :class:`InstanceSink`) is called
    through that method only: with the instance id when a region is entered, with the id of its parent
    (0 = none) when it exits.  That is the cheap form a native collector uses.
    """

    def enter(self, instance_id: int) -> None:
        """Called after the instance id is assigned, before the region body runs."""

    def exit(self, instance_id: int) -> None:
        """Called after the region body finished, before the instance is recorded."""


class InstanceSink(Protocol):
    """A boundary hook that only needs the calling thread's innermost open instance (0 = none).

    A sink may also have a ``native_boundary`` attribute (a :class:`NativeBoundary`, or ``None``): when it is the
    recorder's only boundary work, its C functions then do the whole boundary (``current_instance`` included).
    """

    def current_instance(self, instance_id: int) -> object:
        """The calling thread's innermost open region instance is now ``instance_id``."""


class NativeBoundary(Protocol):
    """The C boundary functions of ``argus_lab/backends/cupti/native.c`` (``boundary_*``, documented there)."""

    def boundary_start(
        self,
        stack_of: Callable[[], list[Any]],
        node_of: Callable[[Any, int], int],
        spill: Callable[[], None],
        running_loop: Callable[[], object],
        run: int,
        first_id: int,
        capacity: int,
        region: Callable[..., Any],
        /,
    ) -> None: ...
    def boundary_stop(self) -> tuple[int, bytes]: ...
    def boundary_enter(self, marker: object, /) -> bool: ...
    def boundary_exit(self, marker: object, /) -> bool: ...
    def boundary_append(self, row: tuple[int, ...], /) -> None: ...
    def boundary_next_id(self) -> int: ...
    def boundary_take(self) -> bytes: ...
    def boundary_pending(self) -> int: ...
    def region(self, name: str, /, *, kind: RegionKind = "host", module: str | None = None) -> Any: ...


# A frame of a region stack is a plain tuple (cheaper to build than an object), read by literal index in the hot
# paths: 0 marker, 1 instance id (0 = not recorded), 2 recorder generation (0 = none), 3 thread id, 4 parent
# instance id, 5 node (the path's code), 6 host start ns, 7 thread CPU start ns; frames of asyncio tasks add
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


class _Nvtx:
    """NVTX push/pop in the ``argus`` domain, resolved on first use (after any tool was injected).

    ``mode``: 0 not resolved yet, 1 off (no ``nvtx`` package, ``ARGUS_NVTX=0``, or no tool attached: the
    package's no-op domain), 2 on, 3 on with the instance index as payload (``ARGUS_NVTX_PAYLOAD=1``, set by
    the ncu launcher, so the ncu report tells instances of one path apart).  ``gated``: every region range is
    paired with a scope range in the ``argus-scope`` domain (``ARGUS_NVTX_SCOPE`` set, by the ncu launcher).
    """

    __slots__ = ("domain", "gated", "mode", "pop", "scope_attrs", "scope_domain", "want_scope")

    def __init__(self) -> None:
        self.mode = 0
        self.gated = False
        self.want_scope = False  # set by nvtx_scope_on(): open the scope ranges whatever the environment says
        self.domain: Any = None
        self.scope_domain: Any = None
        self.scope_attrs: tuple[Any, Any] = (None, None)  # (out, in)
        self.pop: Callable[[], None] = _noop

    def resolve(self) -> None:
        self.mode = 1
        if os.environ.get("ARGUS_NVTX", "1") == "0":
            return
        try:
            import nvtx
        except ImportError:
            return
        domain = nvtx.get_domain(NVTX_DOMAIN)
        if type(domain).__name__ == "DummyDomain":  # no NVTX tool attached: every call would be a no-op
            return
        self.domain = domain
        self.pop = domain.pop_range
        self.mode = 3 if os.environ.get("ARGUS_NVTX_PAYLOAD", "0") == "1" else 2
        if self.want_scope or NVTX_SCOPE_ENV in os.environ:
            self.open_scope_domain()

    def open_scope_domain(self) -> None:
        """Pair every region range with a scope range from now on (NVTX resolved and on)."""
        import nvtx

        scope = nvtx.get_domain(NVTX_SCOPE_DOMAIN)
        self.scope_domain = scope
        self.scope_attrs = (
            scope.get_event_attributes(message=NVTX_SCOPE_OUT),
            scope.get_event_attributes(message=NVTX_SCOPE_IN),
        )
        self.gated = True
        self.pop = self._pop_both

    def _pop_both(self) -> None:
        self.scope_domain.pop_range()
        self.domain.pop_range()


def nvtx_scope_on() -> None:
    """Open the ``argus-scope`` ranges (:data:`NVTX_SCOPE_DOMAIN`) around every region range of this process: called
    by the run driver of an ncu run before the workload is loaded (no region is open then).  Without NVTX (no
    ``nvtx`` package, no tool attached, ``ARGUS_NVTX=0``) there is nothing to open."""
    nv = _nvtx
    nv.want_scope = True
    if nv.mode > 1 and not nv.gated:
        nv.open_scope_domain()


def nvtx_state() -> dict[str, Any]:
    """What the NVTX side of the markers does in this process (for an ncu run's diagnostics)."""
    nv = _nvtx
    if nv.mode == 0:
        nv.resolve()
    state = {1: "off", 2: "on", 3: "on, with instance payloads"}.get(nv.mode, "unresolved")
    if nv.mode == 1:
        if os.environ.get("ARGUS_NVTX", "1") == "0":
            why = "ARGUS_NVTX=0"
        else:
            try:
                import nvtx  # noqa: F401
            except ImportError:
                why = "the nvtx package is not importable"
            else:
                why = "no NVTX tool is attached to the process"
        state = f"off ({why})"
    return {"nvtx": state, "scope_ranges": nv.gated}


def env_rank() -> int:
    """This process's rank as set by torchrun and similar launchers (``RANK``), 0 when unset."""
    text = os.environ.get("RANK", "0").strip() or "0"
    return int(text) if text.isdigit() else 0


def _noop(*_: object) -> None:
    return None


_nvtx = _Nvtx()


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


class Recorder:
    """Collects region instances of one run in this process.

    Only one recorder may be active per process; activating a second raises
    :class:`~argus_lab.errors.CollectorBusyError`.  Finished instances are kept as seven 64-bit integers each
    (about 60 bytes an instance) and turned into columns after the run (:meth:`columns`).
    """

    def __init__(
        self,
        run_id: str = "",
        hooks: Sequence[BoundaryHook | InstanceSink] = (),
        *,
        cpu_clock: bool = True,
        nvtx_gate: ScopeGate | None = None,
    ):
        self.run_id = run_id
        self.nvtx_gate = nvtx_gate  # in ncu runs: which instances open an `in` scope range (None: all)
        self.cpu_clock = cpu_clock  # read the thread CPU clock (a system call, ~0.5 us) only when host.cpu is asked
        self._given_hooks = tuple(hooks)  # sorted into sinks and hooks at activation (collectors start first)
        self.hooks: tuple[BoundaryHook, ...] = ()
        self._sink: Callable[[int], object] | None = None
        # Instance ids are unique in the process (never restart with a new recorder) and across the ranks of a
        # multi-process run: rank r numbers from r * 2**40 + 1.
        self.rank = env_rank()
        self._ids = _Ids.for_rank(self.rank)  # taken again at each activation (a native run may have moved it)
        self._native: NativeBoundary | None = None  # the C boundary functions while a native boundary run is on
        self._pid = os.getpid()
        self.gen = 0  # this activation's generation: frames of other generations are never parents
        self.forked = False  # set in a forked child: this recorder belongs to the parent process
        self._rows: list[int] = []  # finished instances not yet moved into _data, _ROW_WIDTH integers each
        self._spill_lock = threading.Lock()
        self._data = array("q")  # _ROW_WIDTH integers per finished instance
        self._spilled = 0
        self._errors: dict[int, str] = {}
        self._rep_marks: list[tuple[int, int]] = [(0, 0)]  # (first row, repetition)
        self._idx_done = 0
        self._idx_counts: dict[int, int] = {}
        self._idx = array("q")
        self._nvtx_counts: dict[int, int] = {}

    # -- activation -------------------------------------------------------------------------------
    def activate(self) -> Recorder:
        """Make this the process's active recorder."""
        if _active[0] is not None:
            other = _active[0]
            msg = (
                f"a region recorder is already active in this process (run {other.run_id!r}); "
                "finish that measurement first (leave its `with` block or call `deactivate()`), "
                "measurements cannot be nested"
            )
            raise CollectorBusyError(msg)
        self._pid = os.getpid()
        self.gen = next(_generations)
        self._ids = _Ids.for_rank(self.rank)
        sinks: list[Callable[[int], object]] = []
        natives: list[NativeBoundary | None] = []
        plain: list[BoundaryHook] = []
        for hook in self._given_hooks:  # a hook with a callable current_instance is called through it only
            current = getattr(hook, "current_instance", None)
            if callable(current):
                sinks.append(current)
                natives.append(getattr(hook, "native_boundary", None))
            else:
                plain.append(cast("BoundaryHook", hook))
        self.hooks, self._sink = tuple(plain), _one_sink(sinks)
        if _nvtx.mode == 0:
            _nvtx.resolve()
        work = 2 if (self.hooks or self.cpu_clock or _nvtx.mode > 1) else 1 if self._sink is not None else 0
        native = natives[0] if work == 1 and len(natives) == 1 else None
        if native is not None:  # the whole boundary in one C call (see the module docstring)
            self._spill()
            native.boundary_start(
                _stack, _node_of, self._spill, _running_loop, self.gen, next(self._ids), _NATIVE_ROWS, region
            )
            self._native = native
            _publish_region(native.region)
            _active[0] = self
            _fast[0] = (self.gen, native.boundary_next_id, native.boundary_append, self, work)
            _cpath[0] = (native.boundary_enter, native.boundary_exit)
            return self
        _active[0] = self
        _fast[0] = (self.gen, self._ids.__next__, self._rows.extend, self, work)
        return self

    @property
    def native_boundaries(self) -> bool:
        """Whether this recorder's thread-stack boundaries run in C (a native boundary run is on)."""
        return self._native is not None

    def deactivate(self) -> None:
        """Stop recording.

        Instances of this recorder still open on the calling thread (or asyncio task) are recorded as
        ``abandoned``, ending now; instances still open on other threads or tasks are not recorded.
        """
        if _active[0] is not self:
            return
        _active[0] = None
        _fast[0] = None
        _cpath[0] = None
        native, self._native = self._native, None
        if native is not None:  # the rows still in the C buffer come first, then the abandoned ones
            _publish_region(region)
            next_id, rest = native.boundary_stop()
            _Ids.resume(next_id)
            with self._spill_lock:
                self._take(rest)
        now = _time_ns()
        for frame in _open_frames():
            iid = frame[1]
            if iid and frame[2] == self.gen:
                cpu = _thread_time_ns() - frame[7] if self.cpu_clock else -1
                self._rows.extend((iid, frame[5], frame[4], frame[3], frame[6], now, cpu))
                self._errors[iid] = ABANDONED

    def __enter__(self) -> Recorder:
        return self.activate()

    def __exit__(self, *_: object) -> None:
        self.deactivate()

    @property
    def active(self) -> bool:
        """Whether this recorder is the process's active one."""
        return _active[0] is self

    @property
    def thread_names(self) -> dict[int, str]:
        """Names of the threads that entered regions in this process, by thread id (the latest name of a reused id;
        :meth:`thread_names_of` names instances)."""
        return _thread_names.latest()

    @staticmethod
    def thread_names_of(thread_ids: Sequence[int], start_ns: Sequence[int]) -> list[str]:
        """The name of each instance's thread, by its thread id and start (a thread id Python reused names the thread
        that ran then, see :class:`_ThreadNames`)."""
        at = _thread_names.at
        return [at(t, s) for t, s in zip(thread_ids, start_ns, strict=True)]

    @property
    def repetition(self) -> int:
        """The repetition that instances finishing now belong to (set by the driver)."""
        return self._rep_marks[-1][1]

    @repetition.setter
    def repetition(self, rep: int) -> None:
        self._rep_marks.append((self.count(), int(rep)))

    # -- data -------------------------------------------------------------------------------------
    def _spill(self) -> None:
        """Move finished rows into the integer columns (safe while other threads append, and when several threads
        spill at once: the copy and the deletion of one batch must not interleave with another thread's, which would
        store its rows twice and lose others, so spills take a lock; appends do not)."""
        with self._spill_lock:
            rows = self._rows
            n = len(rows)  # a multiple of _ROW_WIDTH: a row is added by one list.extend call, atomic under the GIL
            if n:
                self._data.fromlist(rows[:n])
                del rows[:n]
                self._spilled += n // _ROW_WIDTH
            native = self._native
            if native is not None:
                self._take(native.boundary_take())

    def _take(self, rows: bytes) -> None:
        """Append rows handed over by the C boundary buffer (native int64, the same row layout)."""
        if rows:
            self._data.frombytes(rows)
            self._spilled += len(rows) // _ROW_BYTES

    def record_span(self, marker: RegionMarker, start_ns: int, end_ns: int, cpu_ns: int = -1, error: str = "") -> int:
        """Record a finished top-level instance of ``marker`` that the caller timed itself (no boundary hooks ran).

        The driver uses it for the first repetition of a workload that turned out to mark no region (its implicit
        region, :attr:`argus_lab.run.workload.Workload.implicit_region`).  Returns the instance id.
        """
        node = marker._nodes.get(0) or _nodes.add(marker, 0)
        native = self._native
        # while the boundaries run in C, the C buffer numbers instances: an id from the Python counter would repeat one
        # of its ids (two instances, one id: the kernels carrying it counted in both)
        iid = native.boundary_next_id() if native is not None else next(self._ids)
        self._rows.extend((iid, node, 0, _stack().ident, int(start_ns), int(end_ns), int(cpu_ns)))
        if error:
            self._errors[iid] = error
        # in the columns now, in finishing order: left in the Python list it would follow the C buffer's rows (taken
        # first when the run stops), and the repetition marks, which count rows, would give its repetition (the
        # warm-up) to another instance
        self._spill()
        return iid

    def count(self) -> int:
        """How many instances have finished so far."""
        native = self._native
        pending = native.boundary_pending() if native is not None else 0
        return self._spilled + len(self._rows) // _ROW_WIDTH + pending

    @property
    def regions(self) -> dict[str, Region]:
        """The regions of the finished instances, by region id."""
        self._spill()
        out: dict[str, Region] = {}
        for node in set(self._data[1::_ROW_WIDTH]):
            marker = _nodes.marker[node]
            if marker is not None and marker._rid not in out:
                out[marker._rid] = marker.region
        return out

    def columns(self, start: int = 0) -> dict[str, list[Any]]:
        """The finished instances from the ``start``-th on, as columns named after :class:`InstanceRow` fields.

        ``instance_index`` (the n-th instance of its path, in order of entry) is assigned incrementally, so
        call it with increasing ``start`` values (as the driver does after each repetition) or with 0.
        """
        self._spill()
        data = self._data
        n = len(data) // _ROW_WIDTH
        self._assign_indices(n)
        cols: dict[str, list[Any]] = {name: [] for name in INSTANCE_FIELDS}
        if start >= n:
            return cols
        lo = start * _ROW_WIDTH
        iids = data[lo + 0 :: _ROW_WIDTH].tolist()
        nodes = data[lo + 1 :: _ROW_WIDTH].tolist()
        markers, paths = _nodes.marker, _nodes.path
        cols["instance_id"] = iids
        cols["region_id"] = [markers[k]._rid for k in nodes]  # type: ignore[union-attr]
        cols["path"] = [paths[k] for k in nodes]
        cols["instance_index"] = self._idx[start:n].tolist()
        cols["parent_instance_id"] = data[lo + 2 :: _ROW_WIDTH].tolist()
        cols["repetition"] = self._repetitions(start, n)
        cols["pid"] = [self._pid] * (n - start)
        cols["thread_id"] = data[lo + 3 :: _ROW_WIDTH].tolist()
        cols["start_ns"] = data[lo + 4 :: _ROW_WIDTH].tolist()
        cols["end_ns"] = data[lo + 5 :: _ROW_WIDTH].tolist()
        cols["cpu_ns"] = data[lo + 6 :: _ROW_WIDTH].tolist()
        errors = self._errors
        cols["error"] = [errors.get(i, "") for i in iids] if errors else [""] * (n - start)
        return cols

    def _repetitions(self, start: int, stop: int) -> list[int]:
        out: list[int] = []
        marks = self._rep_marks
        for k, (first, rep) in enumerate(marks):
            end = marks[k + 1][0] if k + 1 < len(marks) else stop
            lo, hi = max(first, start), min(end, stop)
            if hi > lo:
                out.extend([rep] * (hi - lo))
        return out

    def _assign_indices(self, n: int) -> None:
        """Instance index of rows ``[_idx_done, n)``: per path, in order of instance id (entry order)."""
        done = self._idx_done
        if n <= done:
            return
        data, codes, counts = self._data, _nodes.path_code, self._idx_counts
        iids = data[done * _ROW_WIDTH :: _ROW_WIDTH][: n - done]
        nodes = data[done * _ROW_WIDTH + 1 :: _ROW_WIDTH][: n - done]
        order = sorted(range(n - done), key=iids.__getitem__)
        idx = [0] * (n - done)
        for i in order:
            code = codes[nodes[i]]
            k = counts.get(code, 0)
            idx[i] = k
            counts[code] = k + 1
        self._idx.extend(idx)
        self._idx_done = n

    def _nvtx_index(self, node: int) -> int:
        """The instance index of a new instance of ``node``'s path (only with NVTX payloads, for ncu)."""
        code = _nodes.path_code[node]
        k = self._nvtx_counts.get(code, 0)
        self._nvtx_counts[code] = k + 1
        return k

    @property
    def rows(self) -> list[tuple[Any, ...]]:
        """The finished instances as tuples in :data:`INSTANCE_FIELDS` order (a copy; use :meth:`columns`)."""
        cols = self.columns()
        return list(zip(*(cols[name] for name in INSTANCE_FIELDS), strict=True))

    def instances(self) -> list[InstanceRow]:
        """The finished instances as values (convenient in tests; use :meth:`columns` in bulk code)."""
        return [InstanceRow(*row) for row in self.rows]


def _one_sink(sinks: list[Callable[[int], object]]) -> Callable[[int], object] | None:
    if not sinks:
        return None
    if len(sinks) == 1:
        return sinks[0]

    def every(instance_id: int) -> None:
        for sink in sinks:
            sink(instance_id)

    return every


def active_recorder() -> Recorder | None:
    """The process's active recorder, if any."""
    return _active[0]


def _after_fork_in_child() -> None:
    """A forked child never records into its parent's recorder (its rows would be lost or duplicated)."""
    rec = _active[0]
    _cpath[0] = None
    if rec is not None:
        if rec._native is not None:
            _publish_region(region)
        rec.forked = True
        rec._native = None  # the C buffer holds the parent's rows
        _active[0] = None
        _fast[0] = None


os.register_at_fork(after_in_child=_after_fork_in_child)


class RegionMarker:
    """A context manager and decorator marking one region.  Create it with :func:`region`."""

    __slots__ = ("__weakref__", "_attr", "_idle", "_nodes", "_rid", "region")

    def __init__(self, region: Region) -> None:
        self.region = region
        self._rid = region.region_id
        self._attr: Any = None
        self._nodes: dict[int, int] = {}  # parent node -> this marker's node under it
        self._idle: _Frame = (self, 0, 0, 0, 0, 0, 0, 0)  # the frame of an instance entered with no recorder

    def __repr__(self) -> str:
        return f"region({self.region.name!r})"

    def __enter__(self) -> RegionMarker:
        cpath = _cpath[0]
        if cpath is not None and cpath[0](self):  # a native boundary run did it all
            return self
        if _running_loop() is not None:
            return self._enter_task()
        try:
            stack = _local.stack
        except AttributeError:
            stack = _stack()
        fast = _fast[0]
        if fast is None:  # no recorder: keep the stack (and the NVTX range when a tool is attached)
            if _nvtx.mode != 1:
                self._nvtx_push(0)
            stack.append(self._idle)
            return self
        gen, next_id, _, rec, work = fast
        top = stack[-1] if stack else None
        if top is not None and top[2] == gen:
            piid = top[1]
            node = self._nodes.get(top[5]) or _nodes.add(self, top[5])
        else:  # the recorder's top level: regions opened before it started are not parents
            piid = 0
            node = self._nodes.get(0) or _nodes.add(self, 0)
        iid = next_id()
        if not iid & 2047:  # every 2,048 instance ids: finished rows move into the integer columns
            rec._spill()
        cpu0 = 0
        t0 = _time_ns()  # before the boundary work: what a hook records at entry (a probe) lies inside the instance
        if work:
            if work == 1:
                rec._sink(iid)
            else:
                cpu0 = self._enter_work(rec, iid, node)
        stack.append((self, iid, gen, stack.ident, piid, node, t0, cpu0))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        cpath = _cpath[0]
        if cpath is not None and exc_type is None and cpath[1](self):  # a native boundary run did it all
            return
        if _running_loop() is not None:
            frame = self._exit_task()
        else:
            try:
                stack = _local.stack
            except AttributeError:
                stack = _stack()
            if not stack or stack[-1][0] is not self:
                _raise_misuse(self)
            frame = stack.pop()
        iid = frame[1]
        if iid:
            t1 = _time_ns()
            fast = _fast[0]
            if fast is not None and fast[0] == frame[2]:
                cpu = -1
                work = fast[4]
                if work:
                    if work == 1:
                        fast[3]._sink(frame[4])
                    else:
                        cpu = self._exit_work(fast[3], frame)
                fast[2]((iid, frame[5], frame[4], frame[3], frame[6], t1, cpu))
                if exc_type is not None:
                    fast[3]._errors[iid] = f"{exc_type.__name__}: {exc}"
                return
        if _nvtx.mode > 1:  # not recorded (no recorder, or one that has stopped since)
            _nvtx.pop()

    def _enter_work(self, rec: Recorder, iid: int, node: int) -> int:
        """The boundary work beyond the clocks: NVTX range, sink, hooks; returns the thread CPU clock (or 0)."""
        if _nvtx.mode > 1:
            self._nvtx_push(node)
        if rec._sink is not None:
            rec._sink(iid)
        for hook in rec.hooks:
            hook.enter(iid)
        return _thread_time_ns() if rec.cpu_clock else 0

    def _exit_work(self, rec: Recorder, frame: _Frame) -> int:
        """The exit side of :meth:`_enter_work`; returns the instance's thread CPU time (or -1)."""
        cpu = _thread_time_ns() - frame[7] if rec.cpu_clock else -1
        if rec._sink is not None:
            rec._sink(frame[4])
        for hook in rec.hooks:
            hook.exit(frame[1])
        if _nvtx.mode > 1:
            _nvtx.pop()
        return cpu

    # -- asyncio: a stack per task (a context variable, so a task starts inside its creator's regions) ----------
    def _enter_task(self) -> RegionMarker:
        prev = _task_top.get()
        top = prev
        if top is None:  # a region opened on this thread before the event loop started is the parent
            stack = _stack()
            top = stack[-1] if stack else None
        tid = threading.get_ident()
        fast = _fast[0]
        if fast is None:
            if _nvtx.mode != 1:
                self._nvtx_push(0)
            _task_top.set((self, 0, 0, tid, 0, 0, 0, 0, top, prev))
            return self
        gen, next_id, _, rec, work = fast
        if top is not None and top[2] == gen and top[3] == tid:
            piid, pnode = top[1], top[5]
        else:
            piid = pnode = 0
            _stack()  # a thread's first region (in a task) takes its name, as on its stack
        node = self._nodes.get(pnode) or _nodes.add(self, pnode)
        iid = next_id()
        if not iid & 2047:
            rec._spill()
        t0 = _time_ns()
        cpu0 = self._enter_work(rec, iid, node) if work else 0
        _task_top.set((self, iid, gen, tid, piid, node, t0, cpu0, top, prev))
        return self

    def _exit_task(self) -> _Frame:
        top = _task_top.get()
        if top is None:  # entered on this thread's stack before the event loop started
            stack = _stack()
            if not stack or stack[-1][0] is not self:
                _raise_misuse(self)
            return stack.pop()
        if top[0] is not self:
            _raise_misuse(self)
        _task_top.set(top[9])
        return top

    def _nvtx_push(self, node: int) -> None:
        nv = _nvtx
        if nv.mode == 0:
            nv.resolve()
            if nv.mode == 1:
                return
        if nv.mode == 3:
            rec = _active[0]
            index = rec._nvtx_index(node) if rec is not None and node else 0
            nv.domain.push_range(nv.domain.get_event_attributes(message=self.region.name, payload=index))
        else:
            attr = self._attr
            if attr is None:
                attr = self._attr = nv.domain.get_event_attributes(message=self.region.name)
            nv.domain.push_range(attr)
        if nv.gated:  # the scope range: `in` only for a recorded instance the request's scope covers
            rec = _active[0]
            inside = False
            if rec is not None and node:
                gate = rec.nvtx_gate
                inside = gate is None or bool(gate(_nodes.path[node], rec.repetition))
            nv.scope_domain.push_range(nv.scope_attrs[inside])

    def __call__(self, fn: F) -> F:
        """Use the marker as a decorator: every call of ``fn`` is one instance of the region."""

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


def _raise_misuse(marker: RegionMarker) -> None:
    name = marker.region.name
    where = "asyncio task" if _running_loop() is not None else "thread"
    frames = _open_frames()
    if not frames:
        msg = (
            f"region {name!r} was exited on thread {threading.current_thread().name!r} but is not open in this "
            f"{where}; enter it first (`with argus_lab.region(...)`), and exit it on the thread that entered it "
            "(in the same asyncio task)"
        )
    else:
        open_path = "/".join(f[0].region.name for f in reversed(frames))
        msg = (
            f"region {name!r} was exited while {open_path!r} is the innermost open region in this {where}; "
            "regions must be exited in reverse order of entry (use `with` blocks so nesting stays balanced)"
        )
    raise RegionMisuseError(msg)


# -- where a region is declared, as people know it ---------------------------------------------------------------
_source_namers: list[Callable[[str], str | None]] = []


def add_source_namer(namer: Callable[[str], str | None]) -> None:
    """Add a function that names a source file for people (e.g. a notebook kernel's temporary cell file as
    ``cell [5] of quickstart.ipynb``); it returns ``None`` for files it does not know.  Added once per function."""
    if namer not in _source_namers:
        _source_namers.append(namer)


def source_name(file: str) -> str:
    """``file`` as the first source namer that knows it names it, else unchanged (stored with each region)."""
    for namer in _source_namers:
        try:
            name = namer(file)
        except Exception:  # a namer must never break recording
            name = None
        if name:
            return name
    return file


# -- region(): one marker per call site -----------------------------------------------------------------------
# _SITES: (id of the caller's code, its instruction offset, name, kind, module) -> (marker, code); the code is kept
# so that its id is never reused while the entry exists.  _LAST: name -> (code, offset, kind, module, marker) of
# the site that used the name last, checked first (one lookup by a string, whose hash is cached).
_SITES: dict[tuple[Any, ...], tuple[RegionMarker, Any]] = {}
_LAST: dict[str, tuple[Any, int, str, str | None, RegionMarker]] = {}
_SITES_MAX = 8192  # a program that builds region names dynamically must not grow these without bound
_getframe = sys._getframe


def _caller_location(frame: Any) -> tuple[str, str, int]:
    module = str(frame.f_globals.get("__name__", "__main__"))
    file = frame.f_code.co_filename
    if module == "__main__" and file and not file.startswith("<"):
        module = os.path.splitext(os.path.basename(file))[0]
    return module, file, frame.f_lineno


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name.strip():
        msg = f"a region name must be a non-empty string, got {name!r}; e.g. `argus_lab.region('attn')`"
        raise RegionMisuseError(msg)
    if "/" in name:
        msg = (
            f"region name {name!r} contains '/', which separates levels of a region path; "
            "nest regions instead: `with region('layer'): with region('attn'): ...`"
        )
        raise RegionMisuseError(msg)


def region(name: str, *, kind: RegionKind = "host", module: str | None = None) -> RegionMarker:
    """Mark a region of code.

    The marker is made once per call site (and name, kind, module) and reused, so writing
    ``with argus_lab.region("attn"):`` inside a loop costs about as much as a marker built ahead.

    Parameters
    ----------
    name
        The region's name; ``/`` is not allowed in it because it separates the levels of a region path.
    kind
        ``"host"`` for Python code (the default), ``"device"`` for a region inside a kernel.
    module
        Overrides the declaring module that is part of the region's identity (default: the caller's).

    Examples
    --------
    >>> import argus_lab
    >>> with argus_lab.region("attn"):
    ...     pass
    >>> @argus_lab.region("step")
    ... def step() -> None: ...
    """
    frame = _getframe(1)
    try:
        last = _LAST.get(name)
    except TypeError:  # an unhashable name: _site_marker says what is wrong
        last = None
    if (
        last is not None
        and last[0] is frame.f_code
        and last[1] == frame.f_lasti
        and last[2] == kind
        and last[3] == module
    ):
        return last[4]
    return _site_marker(frame, name, kind, module)


def _publish_region(fn: Callable[..., Any]) -> None:
    """Make ``fn`` what ``argus_lab.region`` is: the C ``region`` of a native boundary run while it records (the
    same function, its call-site lookup and the ``with`` protocol in C), this module's :func:`region` otherwise.
    Code that bound the function itself (``from argus_lab import region``) keeps the Python one: same rows."""
    package = sys.modules.get("argus_lab")
    if package is not None:
        package.region = fn  # type: ignore[attr-defined]


def _site_marker(frame: Any, name: str, kind: RegionKind, module: str | None) -> RegionMarker:
    code = frame.f_code
    key = (id(code), frame.f_lasti, name, kind, module)
    try:
        hit = _SITES.get(key)
    except TypeError:
        hit = None
    if hit is not None:
        marker = hit[0]
    else:
        _check_name(name)
        if kind not in ("host", "device"):
            msg = f"a region kind must be 'host' or 'device', got {kind!r}"
            raise RegionMisuseError(msg)
        mod, file, line = _caller_location(frame)
        marker = RegionMarker(Region(name=name, kind=kind, module=module or mod, file=file, line=line))
        if len(_SITES) >= _SITES_MAX:
            _SITES.clear()
            _LAST.clear()
        _SITES[key] = (marker, code)
    _LAST[name] = (code, frame.f_lasti, kind, module, marker)
    return marker
