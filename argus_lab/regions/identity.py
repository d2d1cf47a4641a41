"""What a region is: its identity (:class:`Region`), a recorded instance (:class:`InstanceRow`), the NVTX domains of the
ranges, and the protocols a recorder's boundary work implements (hooks, instance sinks, the C boundary functions).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from argus_lab import config

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
NVTX_SCOPE_ENV = config.ARGUS_NVTX_SCOPE
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
