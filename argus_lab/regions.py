"""Region markers and the per-thread region stack.

A region is a named piece of code whose identity is stable across runs and variants.  A marker
(:func:`region`) is used as a context manager or a decorator.  Each boundary

* keeps the per-thread region stack (so the path ``decode/layer/attn`` and the parent instance are known),
* opens or closes an NVTX push/pop range in the ``argus`` domain (so Nsight tools can filter by region),
* when a :class:`Recorder` is active, records the region instance (host start/end in ns on the
  ``CLOCK_REALTIME`` clock that CUPTI also uses, the thread's CPU time, the error if the body raised) and
  calls the recorder's boundary hooks, which is where a CUPTI collector pushes and pops the instance's
  external correlation id.

With no recorder active a boundary only touches the thread's stack and NVTX, which costs next to nothing.
This module is imported inside measured processes: it must stay free of heavy imports.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from argus_lab.errors import CollectorBusyError, RegionMisuseError

RegionKind = Literal["host", "device"]
F = TypeVar("F", bound=Callable[..., Any])

NVTX_DOMAIN = "argus"
"""The NVTX domain every region range is opened in (ncu filters: ``argus@outer/inner/``)."""


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
    """One finished region instance, as the recorder stores it (see :meth:`Recorder.rows`)."""

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
    """Called at every region boundary while a recorder is active (e.g. CUPTI external correlation)."""

    def enter(self, instance_id: int) -> None:
        """Called after the instance id is assigned, before the region body runs."""

    def exit(self, instance_id: int) -> None:
        """Called after the region body finished, before the instance is recorded."""


# A frame on the per-thread stack is a plain tuple (cheaper to build than an object):
# (marker, path, instance_id, instance_index, host start ns, thread CPU start ns)
_Frame = tuple[Any, str, int, int, int, int]
_MARKER, _PATH, _IID, _INDEX, _T0, _CPU0 = range(6)


_local = threading.local()
_active: list[Recorder | None] = [None]  # the process's collector slot (one recorder at a time)


class _Stack(list[_Frame]):
    """A thread's open regions, innermost last; it also keeps the thread's id (read once per thread)."""

    __slots__ = ("ident",)

    def __init__(self) -> None:
        super().__init__()
        self.ident = threading.get_ident()


def _stack() -> _Stack:
    try:
        return _local.stack  # type: ignore[no-any-return, unused-ignore]
    except AttributeError:
        _local.stack = _Stack()
        return _local.stack  # type: ignore[no-any-return, unused-ignore]


def current_path() -> str:
    """The region path open on the calling thread (``""`` outside every region)."""
    stack = _stack()
    return str(stack[-1][_PATH]) if stack else ""


class _Nvtx:
    """NVTX push/pop in the ``argus`` domain, resolved on first use (after any tool was injected)."""

    __slots__ = ("domain", "payload", "pop", "ready")

    def __init__(self) -> None:
        self.ready = False
        self.domain: Any = None
        self.pop: Callable[[], None] = _noop
        self.payload = False

    def resolve(self) -> None:
        self.ready = True
        # ARGUS_NVTX_PAYLOAD=1 (set by the ncu launcher): ranges carry the instance index as payload, so the
        # ncu report tells instances of one path apart (costs an attribute build per boundary).
        self.payload = os.environ.get("ARGUS_NVTX_PAYLOAD", "0") == "1"
        if os.environ.get("ARGUS_NVTX", "1") == "0":
            return
        try:
            import nvtx
        except ImportError:
            return
        self.domain = nvtx.get_domain(NVTX_DOMAIN)
        self.pop = self.domain.pop_range


def env_rank() -> int:
    """This process's rank as set by torchrun and similar launchers (``RANK``), 0 when unset."""
    text = os.environ.get("RANK", "0").strip() or "0"
    return int(text) if text.isdigit() else 0


def _noop(*_: object) -> None:
    return None


_nvtx = _Nvtx()


class Recorder:
    """Collects region instances of one run in this process.

    Only one recorder may be active per process; activating a second raises
    :class:`~argus_lab.errors.CollectorBusyError`.  Rows are appended to a plain list during the run
    and converted to columns in bulk afterwards (:meth:`columns`).
    """

    def __init__(self, run_id: str = "", hooks: Sequence[BoundaryHook] = (), *, cpu_clock: bool = True) -> None:
        self.run_id = run_id
        self.cpu_clock = cpu_clock  # read the thread CPU clock (a system call, ~0.5 us) only when host.cpu is asked
        self.hooks: tuple[BoundaryHook, ...] = tuple(hooks)
        self.repetition = 0
        self.rows: list[tuple[Any, ...]] = []
        self.regions: dict[str, Region] = {}
        self.thread_names: dict[int, str] = {}
        # Instance ids stay unique across the ranks of a multi-process run: rank r numbers from r * 2**40 + 1.
        self.rank = env_rank()
        self._ids = itertools.count((self.rank << 40) + 1)
        self._index: dict[str, Iterator[int]] = {}
        self._pid = os.getpid()

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
        _active[0] = self
        return self

    def deactivate(self) -> None:
        """Stop recording; region instances still open are recorded with an error by their own exit."""
        if _active[0] is self:
            _active[0] = None

    def __enter__(self) -> Recorder:
        return self.activate()

    def __exit__(self, *_: object) -> None:
        self.deactivate()

    @property
    def active(self) -> bool:
        """Whether this recorder is the process's active one."""
        return _active[0] is self

    # -- data -------------------------------------------------------------------------------------
    def columns(self) -> dict[str, list[Any]]:
        """The finished instances as columns named after :class:`InstanceRow` fields."""
        rows = list(self.rows)
        if not rows:
            return {name: [] for name in INSTANCE_FIELDS}
        return {name: list(col) for name, col in zip(INSTANCE_FIELDS, zip(*rows, strict=True), strict=True)}

    def instances(self) -> list[InstanceRow]:
        """The finished instances as values (convenient in tests; use :meth:`columns` in bulk code)."""
        return [InstanceRow(*row) for row in self.rows]


def active_recorder() -> Recorder | None:
    """The process's active recorder, if any."""
    return _active[0]


class RegionMarker:
    """A context manager and decorator marking one region.  Create it with :func:`region`."""

    __slots__ = ("_attr", "_rid", "region")

    def __init__(self, region: Region) -> None:
        self.region = region
        self._rid = region.region_id
        self._attr: Any = None

    def __repr__(self) -> str:
        return f"region({self.region.name!r})"

    def __enter__(self) -> RegionMarker:
        try:
            stack = _local.stack
        except AttributeError:
            stack = _stack()
        name = self.region.name
        path = f"{stack[-1][_PATH]}/{name}" if stack else name
        nv = _nvtx
        if not nv.ready:
            nv.resolve()
        rec = _active[0]
        if rec is None:
            if nv.domain is not None:
                attr = self._attr
                if attr is None:
                    attr = self._attr = nv.domain.get_event_attributes(message=name)
                nv.domain.push_range(attr)
            stack.append((self, path, 0, 0, 0, 0))
            return self
        if self._rid not in rec.regions:
            rec.regions[self._rid] = self.region
        if not stack and stack.ident not in rec.thread_names:  # remember the thread's name, once per thread
            rec.thread_names[stack.ident] = threading.current_thread().name
        counter = rec._index.get(path)
        if counter is None:
            counter = rec._index.setdefault(path, itertools.count())
        iid, index = next(rec._ids), next(counter)
        if nv.domain is not None:
            if nv.payload:
                nv.domain.push_range(nv.domain.get_event_attributes(message=name, payload=index))
            else:
                attr = self._attr
                if attr is None:
                    attr = self._attr = nv.domain.get_event_attributes(message=name)
                nv.domain.push_range(attr)
        stack.append((self, path, iid, index, time.time_ns(), time.thread_time_ns() if rec.cpu_clock else 0))
        for hook in rec.hooks:
            hook.enter(iid)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        try:
            stack = _local.stack
        except AttributeError:
            stack = _stack()
        if not stack or stack[-1][0] is not self:
            _raise_misuse(self, stack)
        _marker, path, iid, index, t0, cpu0 = stack.pop()
        _nvtx.pop()
        if iid == 0:
            return
        rec = _active[0]
        if rec is None:
            return
        t1 = time.time_ns()
        cpu = time.thread_time_ns() - cpu0 if rec.cpu_clock else -1
        for hook in rec.hooks:
            hook.exit(iid)
        rec.rows.append(
            (
                iid,
                self._rid,
                path,
                index,
                stack[-1][_IID] if stack else 0,
                rec.repetition,
                rec._pid,
                stack.ident,
                t0,
                t1,
                cpu,
                "" if exc_type is None else f"{exc_type.__name__}: {exc}",
            )
        )

    def __call__(self, fn: F) -> F:
        """Use the marker as a decorator: every call of ``fn`` is one instance of the region."""

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


def _raise_misuse(marker: RegionMarker, stack: _Stack) -> None:
    name = marker.region.name
    if not stack:
        msg = (
            f"region {name!r} was exited on thread {threading.current_thread().name!r} but is not open there; "
            "enter it first (`with argus_lab.region(...)`), and exit it on the thread that entered it"
        )
    else:
        msg = (
            f"region {name!r} was exited while {stack[-1][_PATH]!r} is the innermost open region on this thread; "
            "regions must be exited in reverse order of entry (use `with` blocks so nesting stays balanced)"
        )
    raise RegionMisuseError(msg)


def _caller_location(depth: int) -> tuple[str, str, int]:
    frame = sys._getframe(depth)
    module = str(frame.f_globals.get("__name__", "__main__"))
    file = frame.f_code.co_filename
    if module == "__main__" and file and not file.startswith("<"):
        module = os.path.splitext(os.path.basename(file))[0]
    return module, file, frame.f_lineno


def region(name: str, *, kind: RegionKind = "host", module: str | None = None) -> RegionMarker:
    """Mark a region of code.

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
    if not isinstance(name, str) or not name.strip():
        msg = f"a region name must be a non-empty string, got {name!r}; e.g. `argus_lab.region('attn')`"
        raise RegionMisuseError(msg)
    if "/" in name:
        msg = (
            f"region name {name!r} contains '/', which separates levels of a region path; "
            "nest regions instead: `with region('layer'): with region('attn'): ...`"
        )
        raise RegionMisuseError(msg)
    mod, file, line = _caller_location(2)
    return RegionMarker(Region(name=name, kind=kind, module=module or mod, file=file, line=line))
