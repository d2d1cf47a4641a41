"""The region marker (:class:`RegionMarker`): a boundary's Python path (thread stacks, asyncio tasks, hooks, NVTX,
misuse), used as a context manager and a decorator.  Its ``__enter__``/``__exit__`` are the cost every boundary
pays when the C path is off: they read the state of :mod:`argus_lab.regions.state` as module globals.
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any

from argus_lab.errors import RegionMisuseError
from argus_lab.regions.identity import F, Region
from argus_lab.regions.nvtx import _nvtx
from argus_lab.regions.state import (
    _active,
    _cpath,
    _fast,
    _Frame,
    _local,
    _nodes,
    _open_frames,
    _running_loop,
    _stack,
    _task_top,
    _thread_time_ns,
    _time_ns,
)

if TYPE_CHECKING:
    from argus_lab.regions.recorder import Recorder


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
