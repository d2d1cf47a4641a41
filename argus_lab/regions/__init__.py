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
recorded as ``abandoned`` when it stops.  A forked child never records into its parent's recorder: a process
started while a run records (forked, spawned, a DataLoader worker) records into a recorder of its own and hands its
instances to the run through files (:mod:`~argus_lab.regions.worker`, merged by :mod:`~argus_lab.regions.capture`).

The package is split by concern: :mod:`~argus_lab.regions.identity` (what a region and an instance are, the NVTX
domains, the boundary protocols), :mod:`~argus_lab.regions.state` (the stacks, the recorder slots, thread names,
region paths, instance ids), :mod:`~argus_lab.regions.nvtx`, :mod:`~argus_lab.regions.marker` (the Python boundary
path), :mod:`~argus_lab.regions.sites` (``region()`` and its call-site cache) and :mod:`~argus_lab.regions.recorder`;
this module is its public face (``import argus_lab.regions`` as before).

It is imported inside measured processes: it must stay free of heavy imports (it imports asyncio's event-loop
module, which torch imports anyway, to tell a running event loop).
"""

from __future__ import annotations

from argus_lab.regions.identity import (
    ABANDONED,
    INSTANCE_FIELDS,
    NVTX_DOMAIN,
    NVTX_SCOPE_DOMAIN,
    NVTX_SCOPE_ENV,
    NVTX_SCOPE_IN,
    NVTX_SCOPE_OUT,
    BoundaryHook,
    InstanceRow,
    InstanceSink,
    NativeBoundary,
    Region,
    RegionKind,
    ScopeGate,
)
from argus_lab.regions.marker import RegionMarker
from argus_lab.regions.nvtx import _nvtx, env_rank, nvtx_scope_on, nvtx_state
from argus_lab.regions.recorder import Recorder, active_recorder
from argus_lab.regions.sites import add_source_namer, region, source_name
from argus_lab.regions.state import (
    _NATIVE_ROWS,
    _active,
    _cpath,
    _fast,
    current_instance,
    current_path,
    note_thread_name,
    thread_names,
)
from argus_lab.regions.worker import start_from_env as _start_from_env

__all__ = [
    "ABANDONED",
    "INSTANCE_FIELDS",
    "NVTX_DOMAIN",
    "NVTX_SCOPE_DOMAIN",
    "NVTX_SCOPE_ENV",
    "NVTX_SCOPE_IN",
    "NVTX_SCOPE_OUT",
    "_NATIVE_ROWS",
    "BoundaryHook",
    "InstanceRow",
    "InstanceSink",
    "NativeBoundary",
    "Recorder",
    "Region",
    "RegionKind",
    "RegionMarker",
    "ScopeGate",
    "_active",
    "_cpath",
    "_fast",
    "_nvtx",
    "active_recorder",
    "add_source_namer",
    "current_instance",
    "current_path",
    "env_rank",
    "note_thread_name",
    "nvtx_scope_on",
    "nvtx_state",
    "region",
    "source_name",
    "thread_names",
]

_start_from_env()  # a process spawned while a run records records its regions for that run
