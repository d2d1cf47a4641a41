"""The :class:`Recorder`: the process's one collector slot.  While it is active every boundary records an instance as
seven 64-bit integers into its columns (or the C buffer of a native boundary run); a forked child never records
into its parent's recorder.
"""

from __future__ import annotations

import os
import threading
from array import array
from collections.abc import Callable, Sequence
from typing import Any, cast

import argus_lab.regions.instance_columns as ic
from argus_lab.errors import CollectorBusyError
from argus_lab.regions.identity import (
    ABANDONED,
    INSTANCE_FIELDS,
    BoundaryHook,
    InstanceRow,
    InstanceSink,
    NativeBoundary,
    Region,
    ScopeGate,
)
from argus_lab.regions.marker import RegionMarker
from argus_lab.regions.nvtx import _nvtx, env_rank
from argus_lab.regions.sites import _publish_region, region
from argus_lab.regions.state import (
    _NATIVE_ROWS,
    _ROW_BYTES,
    _ROW_WIDTH,
    _active,
    _cpath,
    _fast,
    _generations,
    _Ids,
    _node_of,
    _nodes,
    _open_frames,
    _running_loop,
    _stack,
    _thread_names,
    _thread_time_ns,
    _time_ns,
)


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
        fast = _fast[0]
        if fast is not None and fast[3] is self:  # recording: the ids and rows of the active path (C or Python), so
            next_id, append = fast[1], fast[2]  # the instance neither repeats an id nor lands out of finishing order
        else:
            next_id, append = self._ids.__next__, self._rows.extend
        iid = next_id()
        append((iid, node, 0, _stack().ident, int(start_ns), int(end_ns), int(cpu_ns)))
        if error:
            self._errors[iid] = error
        return iid

    def count(self) -> int:
        """How many instances have finished so far."""
        native = self._native
        pending = native.boundary_pending() if native is not None else 0
        return self._spilled + len(self._rows) // _ROW_WIDTH + pending

    @property
    def regions(self) -> dict[str, Region]:
        """The regions of the finished instances, by region id."""
        import numpy as np

        self._spill()
        with self._spill_lock:
            nodes = np.unique(ic.field(self._data, _ROW_WIDTH, 1, 0, len(self._data) // _ROW_WIDTH))
        out: dict[str, Region] = {}
        for node in nodes.tolist():  # one Python value a distinct node, not an instance
            marker = _nodes.marker[node]
            if marker is not None and marker._rid not in out:
                out[marker._rid] = marker.region
        return out

    def columns(self, start: int = 0) -> dict[str, Any]:
        """The finished instances from the ``start``-th on, as columns named after :class:`InstanceRow` fields.

        Numbers are numpy int64 arrays and text (``region_id``, ``path``, ``error``) Arrow dictionary arrays: no
        Python object per instance (:mod:`argus_lab.regions.instance_columns`); :meth:`rows` gives Python values.
        ``instance_index`` (the n-th instance of its path, in order of entry) is assigned incrementally, so
        call it with increasing ``start`` values (as the driver does after each repetition) or with 0.
        """
        import numpy as np

        self._spill()
        with self._spill_lock:  # numpy reads the integers in place: no spill may resize them meanwhile
            n = len(self._data) // _ROW_WIDTH
            start = min(start, n)
            fields = [ic.field(self._data, _ROW_WIDTH, k, start, n) for k in range(_ROW_WIDTH)]
            self._assign_indices(n, fields if start == self._idx_done else None)
        iids, nodes, parents, threads, starts, ends, cpus = fields
        markers, paths = _nodes.marker, _nodes.path
        return {
            "instance_id": iids,
            "region_id": ic.by_node(nodes, lambda k: markers[k]._rid),  # type: ignore[union-attr]
            "path": ic.by_node(nodes, paths.__getitem__),
            "instance_index": np.frombuffer(self._idx, dtype=np.int64)[start:n].astype(np.int32),
            "parent_instance_id": parents,
            "repetition": ic.repetitions(self._rep_marks, start, n),
            "pid": np.full(n - start, self._pid, np.int32),
            "thread_id": threads,
            "start_ns": starts,
            "end_ns": ends,
            "cpu_ns": cpus,
            "error": ic.sparse_text(iids, self._errors),
        }

    def _assign_indices(self, n: int, fields: list[Any] | None = None) -> None:
        """Instance index of rows ``[_idx_done, n)``: per path, in order of instance id (entry order); ``fields``:
        those rows' columns when the caller holds them already."""
        import numpy as np

        done = self._idx_done
        if n <= done:
            return
        if fields is None:
            fields = [ic.field(self._data, _ROW_WIDTH, k, done, n) for k in (0, 1)]
        iids, nodes = fields[0], fields[1]
        codes = np.asarray(_nodes.path_code, dtype=np.int64)[nodes]
        self._idx.frombytes(ic.instance_indices(iids, codes, self._idx_counts).tobytes())
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
        return list(zip(*(ic.as_values(cols[name]) for name in INSTANCE_FIELDS), strict=True))

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
