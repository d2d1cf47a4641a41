"""The native per-launch path of the CUPTI timing run: build it, start it, and turn its launches into raw records.

``native.c`` is compiled at first use with the system C compiler into a per-user cache, keyed by the hash of the
source, the Python version and the platform (the way Triton builds its driver module), and loaded as the
extension module ``_argus_cupti_native``.  While a timing run records:

* each region boundary calls ``set_current(instance id)`` (one C call: a thread-local store);
* a CUPTI callback, subscribed only to the kernel-launch API calls (and to copies/sets when their signals are
  asked), appends (correlation id, current instance id, thread id, CLOCK_REALTIME ns at entry and exit, callback
  id, domain) to preallocated arrays; no Python runs per launch.  Only the outermost subscribed call of a thread
  is recorded: the driver launch that a runtime launch makes inside it is skipped (the kernel carries the runtime
  call's correlation id; CUPTI's activity API does not record such nested calls either);
* CUPTI's activity API records only kernels (plus copies, sets, synchronization when asked).

That is the ``callbacks`` launch identity, the default of a timing run: every launch is recorded on the thread
that made it, with that thread's own innermost instance, so ``exact`` means what the join says it means (launched
by the thread that opened the instance, while it was open), and every launching thread is named (:func:`threads`
of the extension: its pthread id and the name the system gave it, e.g. ``pt_autograd_0``).

The ``probes`` identity (asked by the setting) subscribes no launch call: each ``set_current`` calls one cheap
driver function (:data:`PROBES`, e.g. ``cuDriverGetVersion``) whose callback, the only one subscribed, records (its
correlation id, the thread's new current instance, thread, time).  CUPTI numbers every API call from one
process-wide counter, so after the run :func:`probe_families` knows which instances were open on which threads when
a kernel's launch call got its correlation id, but not which thread launched: each launch gets an ``api`` row at
the last probe's time on no thread, and the join places it among the instances open then (``temporal`` when one
was, ``ambiguous`` among several, never ``exact``).  The per-launch cost is CUPTI's kernel record alone;
``gpu.launch_overhead`` (the launch calls' host time) needs the callbacks.

The ``clock`` identity (asked by the setting, never picked by the planner) makes no call at a boundary: each
``set_current`` appends (the thread's new current instance, thread, ``cuptiGetTimestamp()``), CUPTI's latency
timestamps stamp every kernel record with ``queued`` (read inside the launch call, on the same clock), and
:func:`clock_families` places each kernel by that stamp, as the probes do (never ``exact``); graph launches, whose
kernels carry no stamp, are subscribed with the launch callback.  On the H200 its rows cost 89 ns a region against
349 ns for two probes, but the latency timestamps cost more per launch than that saves (docs/benchmarks.md round 6).

After the run :func:`raw_families` turns the launch arrays into the record families the decoder already joins:
``external`` rows (correlation id -> instance id, kind ``CUSTOM2``) for launches made inside a region, and ``api``
rows (thread, entry and exit time) for every launch, so that kernels launched on threads with no region open are
attributed by time as before.  When the callback API cannot be used (another CUPTI subscriber, e.g. a
torch.profiler session earlier in the process), :meth:`NativeLaunchPath.start` can fall back to pushing the
instance id as external correlation id from C; when the module cannot be built at all, the collector uses the
Python path (``cupti_backend``).  The provenance of the run says which path ran.

This module runs inside measured processes: numpy, the standard library and the backend declarations
(``argus_lab.plan.backends``, which the collector imports anyway).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import numpy as np

from argus_lab import config
from argus_lab.errors import BackendUnavailableError
from argus_lab.plan.backends import SETTING_CHOICES, TIMED_LAUNCH_SIGNALS, setting_problem

SOURCE = Path(__file__).with_name("native.c")
MODULE_NAME = "_argus_cupti_native"
CUSTOM2 = 5  # CUpti_ExternalCorrelationKind CUSTOM2: the kind region instance ids are stored with
KIND_OF_DOMAIN = {1: 4, 2: 5}  # callback domain (driver 1, runtime 2) -> activity kind of an API record
PROBES = ("cuDriverGetVersion", "cuDeviceGetCount", "cuCtxGetCurrent")
"""Driver functions a boundary may call as its probe, in order of preference: one pointer argument each, cheap,
no work on the GPU.  The first one CUPTI calls back for is used."""
IDENTITIES = SETTING_CHOICES["cupti"]["launch_identity"]
"""The ``launch_identity`` setting: how a timing run ties launches to region instances (module docstring)."""
DEFAULT_CAPACITY = 4_000_000
CLOCK_READS = {"calls": 2, "entries": 1, "outside": 0}
"""The ``launch_clock`` setting -> what the launch callback reads the clock for (``native.c`` ``set_clock_reads``):
the entry and exit of every launch call (``calls``: ``gpu.launch_overhead`` and the export's launch slices), the
entries only, or only the entries of launches made outside every region of their thread (``outside``, the default
otherwise: a launch inside a region carries its instance and needs no time; one outside needs its time for the join's
rules, e.g. autograd's kernels by the ``backward()`` call they fall in).  On the H200 one launch of a small PyTorch
kernel costs 200-290 ns more than CUPTI's kernel record alone with ``calls`` and 64-119 ns with ``outside``
(``bench/launch_cost.py --toggle``, docs/benchmarks.md)."""
"""Launches the arrays hold (41 bytes each, of which only touched pages are backed: 25 for a launch inside a region
whose entry is not timed); more are counted as dropped."""
PROBE_CAPACITY = 16_000_000
"""Boundary probes the arrays hold (two a region instance: 8 M instances); launches after the last recorded probe
of a run whose probes overflowed get no instance from the probes (:func:`probe_families`)."""

_LAUNCH = {
    "runtime": re.compile(r"^(cudaLaunch|cudaGraphLaunch)(?!HostFunc)"),
    "driver": re.compile(r"^(cuLaunch|cuGraphLaunch)(?!HostFunc)"),
}
_GRAPH = {"runtime": re.compile(r"^cudaGraphLaunch"), "driver": re.compile(r"^cuGraphLaunch")}
_COPY = {"runtime": re.compile(r"^cudaMemcpy"), "driver": re.compile(r"^cuMemcpy")}
_SET = {"runtime": re.compile(r"^cudaMemset"), "driver": re.compile(r"^cuMemset")}


class NativeUnavailable(RuntimeError):
    """The native path cannot run here; the message says why (the collector then uses the Python path)."""


@dataclass(frozen=True)
class Build:
    """The outcome of building/loading the extension: the module, or ``None`` and why not."""

    module: ModuleType | None
    path: str
    note: str


# -- build --------------------------------------------------------------------------------------------------
def cache_dir() -> Path:
    """Where built modules are kept: ``$ARGUS_NATIVE_CACHE``, else ``$XDG_CACHE_HOME/argus_lab/native``."""
    explicit = config.get(config.ARGUS_NATIVE_CACHE)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME", "") or str(Path.home() / ".cache")
    return Path(base) / "argus_lab" / "native"


def build_key(source: bytes) -> str:
    """The cache key: the source, the Python version and ABI, the platform."""
    h = hashlib.sha256(source)
    for part in (sys.version, sysconfig.get_config_var("SOABI") or "", sysconfig.get_platform()):
        h.update(b"\x1f" + str(part).encode())
    return h.hexdigest()[:16]


def compiler() -> str | None:
    """The C compiler to use: ``$CC``, else ``cc`` or ``gcc`` on PATH."""
    cc = os.environ.get("CC", "").split()
    if cc and shutil.which(cc[0]):
        return cc[0]
    return shutil.which("cc") or shutil.which("gcc")


def compile_module(dest: Path, *, timeout_s: float = 120.0) -> float:
    """Compile ``native.c`` into ``dest`` (atomically: a temporary file is renamed); returns the seconds taken.

    Raises :class:`NativeUnavailable` naming what is missing (compiler, Python headers) or the compiler's error.
    """
    cc = compiler()
    if cc is None:
        msg = "no C compiler (cc, gcc or $CC) on PATH"
        raise NativeUnavailable(msg)
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        msg = f"Python.h is not in {include} (install the Python development headers)"
        raise NativeUnavailable(msg)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=dest.name, suffix=".tmp.so", dir=dest.parent)
    os.close(fd)
    cmd = [cc, "-O2", "-shared", "-fPIC", "-pthread", f"-I{include}", str(SOURCE), "-o", tmp, "-ldl"]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        os.unlink(tmp)
        msg = f"compiling {SOURCE.name} failed ({exc})"
        raise NativeUnavailable(msg) from None
    if proc.returncode != 0:
        os.unlink(tmp)
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        msg = f"compiling {SOURCE.name} with {cc} failed (status {proc.returncode}): {tail}"
        raise NativeUnavailable(msg)
    os.replace(tmp, dest)
    return time.perf_counter() - t0


def load_module(path: Path) -> ModuleType:
    """Import the built extension from ``path``."""
    loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, str(path))
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path, loader=loader)
    if spec is None:
        msg = f"cannot import {path}"
        raise NativeUnavailable(msg)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@functools.cache
def build() -> Build:
    """The extension module, built once per source/Python version and cached (``ARGUS_NATIVE=0`` disables it)."""
    if config.get(config.ARGUS_NATIVE) == "0":
        return Build(None, "", "disabled by ARGUS_NATIVE=0")
    try:
        source = SOURCE.read_bytes()
        path = cache_dir() / f"{MODULE_NAME}-{build_key(source)}.so"
        how = "cached"
        if not path.exists():
            how = f"compiled in {compile_module(path):.1f} s"
        module = load_module(path)
    except (NativeUnavailable, OSError, ImportError) as exc:
        return Build(None, "", f"native launch path unavailable: {exc}")
    return Build(module, str(path), f"{path} ({how})")


# -- callback ids -------------------------------------------------------------------------------------------
def callback_ids(
    cupti: Any, *, copies: bool = False, sets: bool = False, graphs_only: bool = False
) -> tuple[list[int], list[int]]:
    """(runtime, driver) callback ids of the kernel launches (and copies, sets when asked; only the graph launches
    with ``graphs_only``), read from cupti-python's enums ``runtime_api_trace_cbid`` and ``driver_api_trace_cbid``."""
    out: dict[str, list[int]] = {}
    for domain, enum in (("runtime", cupti.runtime_api_trace_cbid), ("driver", cupti.driver_api_trace_cbid)):
        wanted = (
            [_GRAPH[domain]]
            if graphs_only
            else [_LAUNCH[domain]] + ([_COPY[domain]] if copies else []) + ([_SET[domain]] if sets else [])
        )
        ids = set()
        for name, value in enum.__members__.items():
            v = int(value)
            if 0 < v < 0x7FFFFFFF and any(p.search(name) for p in wanted):
                ids.add(v)
        out[domain] = sorted(ids)
    return out["runtime"], out["driver"]


# -- launch records -> raw record families ------------------------------------------------------------------
@dataclass(frozen=True)
class LaunchRecords:
    """The launches the callback recorded (one row per outermost launch API call of a thread)."""

    correlation: np.ndarray
    instance: np.ndarray
    thread: np.ndarray
    start: np.ndarray
    end: np.ndarray
    cbid: np.ndarray
    domain: np.ndarray
    dropped: int = 0
    probes: bool = False  # rows are boundary probes (mode 4), not launches
    clock: bool = False  # rows are boundary rows on CUPTI's clock (cbid 0) and graph launches (mode 5)

    @classmethod
    def from_export(cls, exported: Sequence[Any], *, probes: bool = False, clock: bool = False) -> LaunchRecords:
        """From the tuple the extension's ``export()`` returns: each column a read-only view of its bytes (already a
        copy: the extension's arrays are released next), a column exported as one value (every launch had it: the
        entry and exit of untimed launches, one thread, one callback id) a broadcast of it, which holds no bytes a
        launch."""
        n, dropped, corr, inst, thread, start, end, cbid, domain = exported
        count = int(n) if n is not None else len(corr) // 4
        return cls(
            _column(corr, np.uint32, count),
            _column(inst, np.int64, count),
            _column(thread, np.uint64, count),
            _column(start, np.int64, count),
            _column(end, np.int64, count),
            _column(cbid, np.uint32, count),
            _column(domain, np.uint8, count),
            int(dropped),
            probes,
            clock,
        )

    def subset(self, keep: np.ndarray) -> LaunchRecords:
        """The rows selected by the boolean mask ``keep`` (same flags; nothing counted as dropped)."""
        return LaunchRecords(
            self.correlation[keep],
            self.instance[keep],
            self.thread[keep],
            self.start[keep],
            self.end[keep],
            self.cbid[keep],
            self.domain[keep],
            0,
            self.probes,
            self.clock,
        )

    def __len__(self) -> int:
        return len(self.correlation)


def _column(data: bytes, dtype: type, n: int) -> np.ndarray:
    """One exported column as ``n`` values: a view of its bytes, or a broadcast when it holds one value."""
    col: np.ndarray = np.frombuffer(data, dtype=dtype)
    if len(col) == 1 and n != 1:
        return np.broadcast_to(col[0], (n,))
    return col


def raw_families(records: LaunchRecords, pid: int) -> dict[str, dict[str, np.ndarray]]:
    """The ``external`` and ``api`` raw families (``backends.cupti.decode.FAMILY_FIELDS``) of the recorded launches.

    ``external``: one ``CUSTOM2`` row per launch made while a region instance was open on its thread.
    ``api``: one row per launch API call, with its thread (the full ``pthread_self()`` value, which the decoder's
    32-bit thread matching accepts) and its entry and exit times (a call whose exit was not seen ends at entry).
    """
    inside = records.instance != 0
    n = len(records)
    exited = records.end > 0
    if exited.all():
        end = records.end
    elif not exited.any():  # no exit timed (launch_clock 'outside' or 'entries', the default): the entries, no copy
        end = records.start
    else:
        end = np.where(exited, records.end, records.start)
    every = bool(inside.all())  # every launch made in a region: the arrays themselves, no copies
    if n and records.domain.strides == (0,):  # one domain: one kind, no byte a launch
        kind = np.broadcast_to(np.int8(KIND_OF_DOMAIN[2 if int(records.domain[0]) == 2 else 1]), (n,))
    else:
        kind = np.where(records.domain == 2, KIND_OF_DOMAIN[2], KIND_OF_DOMAIN[1]).astype(np.int8)
    # the launch arrays' own columns where they fit, constants as read-only broadcasts: a long run's launches
    # cost their arrays once, not again as eight int64 columns
    return {
        "external": {
            "external_kind": np.broadcast_to(np.int64(CUSTOM2), (int(inside.sum()),)),
            "external_id": records.instance if every else records.instance[inside],
            "correlation_id": records.correlation if every else records.correlation[inside],
        },
        "api": {
            "kind": kind,
            "cbid": records.cbid,
            "start": records.start,
            "end": end,
            "process_id": np.broadcast_to(np.int64(pid), (n,)),
            "thread_id": records.thread.view(np.int64) if records.thread.dtype.itemsize == 8 else records.thread,
            "correlation_id": records.correlation,
            "return_value": np.broadcast_to(np.int64(0), (n,)),
        },
    }


@dataclass(frozen=True)
class LaunchOrder:
    """What the boundary probes say about each launch (arrays aligned with the correlation ids asked about)."""

    instance: np.ndarray  # the one instance open at the launch (0 where none or several were open)
    open_threads: np.ndarray  # how many threads had a region instance open at the launch
    probe_ns: np.ndarray  # the time of the last probe before the launch (0 if none): a lower bound of its time
    probe_thread: np.ndarray  # the thread that made that probe (0 if none)


def launch_order(probes: LaunchRecords, correlation_ids: np.ndarray) -> LaunchOrder:
    """For each correlation id, every thread's current instance at that point of CUPTI's call numbering.

    A thread's current instance at correlation id ``k`` is the one its last probe with a smaller id recorded
    (0 before its first probe); the time and thread of the last probe of any thread before ``k`` bound the launch.
    """
    return _order(probes, probes.correlation, correlation_ids, "left")


def clock_order(boundaries: LaunchRecords, queued: np.ndarray) -> LaunchOrder:
    """For each ``queued`` stamp (CUPTI's clock), every thread's current instance at that time: the one its last
    boundary row at or before the stamp recorded (0 before its first row)."""
    return _order(boundaries, boundaries.start, queued, "right")


def _order(rows: LaunchRecords, key: np.ndarray, points: np.ndarray, side: Literal["left", "right"]) -> LaunchOrder:
    """Each thread's current instance at each of ``points``, the rows ordered by ``key`` (probe correlation ids or
    boundary times); ``side`` "left": a row at a point comes after it, "right": at or before it."""
    q = np.asarray(points, dtype=np.int64)
    n = len(q)
    instance = np.zeros(n, dtype=np.int64)
    open_threads = np.zeros(n, dtype=np.int64)
    probe_ns = np.zeros(n, dtype=np.int64)
    probe_thread = np.zeros(n, dtype=np.int64)
    if n == 0 or len(rows) == 0:
        return LaunchOrder(instance, open_threads, probe_ns, probe_thread)
    for thread in np.unique(rows.thread):
        sel = np.flatnonzero(rows.thread == thread)
        order = sel[np.argsort(key[sel], kind="stable")]
        pos = np.searchsorted(key[order], q, side=side) - 1  # the thread's last row before the point
        seen = pos >= 0
        at = order[np.maximum(pos, 0)]
        current = np.where(seen, rows.instance[at], 0)
        is_open = current != 0
        open_threads += is_open
        instance = np.where(is_open, current, instance)
        when = np.where(seen, rows.start[at], 0)
        later = when > probe_ns
        probe_ns = np.where(later, when, probe_ns)
        probe_thread = np.where(later, np.int64(int(thread)), probe_thread)
    instance = np.where(open_threads == 1, instance, 0)
    return LaunchOrder(instance, open_threads, probe_ns, probe_thread)


def probe_families(
    probes: LaunchRecords, correlation_ids: np.ndarray, pid: int
) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, int]]:
    """The ``api`` raw family for the launches of ``correlation_ids`` (kernels, copies, sets), from the boundary
    probes, and counts of how each launch was placed.

    Each launch gets a zero-length ``api`` row at the time of the last probe before it on no thread (0): the probes
    cannot tell which thread launched, so the join finds the instances open then and never calls one ``exact``
    (``exact`` needs the launching thread): one open (``temporal``), several (``ambiguous``), none
    (``unattributed``).  Launches before the first probe get no row, nor do launches after the last recorded probe
    when probes were dropped (the arrays filled): the join places those by their GPU time.
    """
    q = np.unique(np.asarray(correlation_ids, dtype=np.int64))
    placed = launch_order(probes, q)
    # the probes after the arrays filled are lost: what a thread had open after the last recorded one is unknown
    beyond = q > int(probes.correlation.max()) if probes.dropped and len(probes) else np.zeros(len(q), dtype=bool)
    one = (placed.open_threads == 1) & ~beyond
    placed_at = ~beyond & (placed.probe_ns > 0)
    families = _placed_families(q[placed_at], placed.probe_ns[placed_at], pid)
    counts = {
        "probes": len(probes),
        "launches": len(q),
        "in one open region": int(one.sum()),
        "with no region open": int((placed.open_threads == 0).sum()),
        "with regions open on several threads": int((placed.open_threads > 1).sum()),
        "before the first probe": int((~one & ~beyond & (placed.probe_ns == 0)).sum()),
        "after the probe arrays filled": int(beyond.sum()),
        "probes dropped": int(probes.dropped),
    }
    return families, counts


def _placed_families(other: np.ndarray, other_ns: np.ndarray, pid: int) -> dict[str, dict[str, np.ndarray]]:
    """The families of launches placed without a launch callback: a zero-length ``api`` row at ``other_ns`` on no
    thread (0) for each correlation id of ``other``, from which the join finds the instances open then (no
    ``external`` row: without its launching thread a launch is never ``exact``)."""
    m = len(other)
    return {
        "external": {
            "external_kind": np.zeros(0, dtype=np.int64),
            "external_id": np.zeros(0, dtype=np.int64),
            "correlation_id": np.zeros(0, dtype=np.int64),
        },
        "api": {
            "kind": np.full(m, KIND_OF_DOMAIN[1], dtype=np.int64),
            "cbid": np.zeros(m, dtype=np.int64),
            "start": np.asarray(other_ns, dtype=np.int64),
            "end": np.asarray(other_ns, dtype=np.int64),
            "process_id": np.full(m, pid, dtype=np.int64),
            "thread_id": np.zeros(m, dtype=np.int64),
            "correlation_id": np.asarray(other, dtype=np.int64),
            "return_value": np.zeros(m, dtype=np.int64),
        },
    }


def clock_families(
    rows: LaunchRecords, correlation_ids: np.ndarray, queued: np.ndarray, pid: int
) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, int]]:
    """The ``external`` and ``api`` raw families for the kernels of ``correlation_ids`` with their ``queued`` stamps
    (CUPTI's clock; 0 or negative where CUPTI has none), from the boundary rows and graph launches of mode 5, and
    counts of how each kernel was placed.

    A kernel launched by a subscribed graph launch takes that call's rows (:func:`raw_families`: its thread's
    instance, ``exact``).  Any other kernel with a stamp: a zero-length ``api`` row at the stamp on no thread (0),
    from which the join finds the instances open then (``temporal`` when one was, never ``exact``: the stamp does
    not say which thread launched).  Kernels with no stamp and no graph launch,
    stamps before the first boundary row, and stamps after the last recorded row when rows were dropped get no row:
    the join places those by their GPU time, never as ``exact``.
    """
    corr = np.asarray(correlation_ids, dtype=np.int64)
    stamp = np.asarray(queued, dtype=np.int64)
    is_boundary = rows.cbid == 0
    graphs = rows.subset(~is_boundary)
    boundaries = rows.subset(is_boundary)
    by_graph = np.isin(corr, graphs.correlation) if len(graphs) else np.zeros(len(corr), dtype=bool)
    stamped = (stamp > 0) & ~by_graph
    q, c = stamp[stamped], corr[stamped]
    placed = clock_order(boundaries, q)
    last = int(boundaries.start.max()) if len(boundaries) else 0
    beyond = q > last if rows.dropped else np.zeros(len(q), dtype=bool)
    seen = placed.probe_ns > 0
    one = (placed.open_threads == 1) & ~beyond
    by_stamp = _placed_families(c[~beyond & seen], q[~beyond & seen], pid)
    by_call = raw_families(graphs, pid)
    families = {f: {k: np.concatenate([by_call[f][k], v]) for k, v in cols.items()} for f, cols in by_stamp.items()}
    counts = {
        "boundary rows": len(boundaries),
        "kernels": len(corr),
        "in one open region": int(one.sum()),
        "with no region open": int((~beyond & seen & (placed.open_threads == 0)).sum()),
        "with regions open on several threads": int((~beyond & (placed.open_threads > 1)).sum()),
        "before the first boundary row": int((~beyond & ~seen).sum()),
        "launched by a graph launch": int(by_graph.sum()),
        "graph launches": len(graphs),
        "without a queued stamp": int(((stamp <= 0) & ~by_graph).sum()),
        "after the arrays filled": int(beyond.sum()),
        "rows dropped": int(rows.dropped),
    }
    return families, counts


# -- the path a collector drives ----------------------------------------------------------------------------
class NativeLaunchPath:
    """Start/stop of the native path for one run (see the module docstring)."""

    def __init__(self, built: Build) -> None:
        if built.module is None:
            raise NativeUnavailable(built.note)
        self.module = built.module
        self.build_note = built.note
        self.mode = ""  # "clock" | "probes" | "callbacks" | "external correlation" | "empty callbacks" (benchmarks)
        self.probe = ""  # the driver function the probes call (mode "probes")
        self.callbacks = (0, 0)  # runtime, driver callback ids enabled
        self.refused: list[tuple[int, ...]] = []  # (domain, cbid, CUPTI result) of ids CUPTI did not enable
        self.graph_note = ""  # mode "clock": why graph launches are not subscribed ("" when they are)
        self.threads: list[tuple[int, str]] = []  # (pthread id, system name) of the threads that launched (stop())
        self.clock = "calls"  # mode "callbacks": what the launch callback reads the clock for (CLOCK_READS)

    @property
    def set_current(self) -> Any:
        """The C function a region boundary calls with the calling thread's innermost open instance id."""
        return self.module.set_current

    def start(
        self,
        libcupti: str,
        cupti: Any,
        *,
        copies: bool,
        sets: bool,
        capacity: int = DEFAULT_CAPACITY,
        record: bool = True,
        domains: str = "both",
        clock: str = "calls",
    ) -> None:
        """Subscribe the launch callback; raises :class:`NativeUnavailable` with CUPTI's answer if it cannot.

        ``record=False`` (benchmarks only) subscribes a callback that returns at once and records nothing: what
        CUPTI's callback dispatch costs by itself.  ``domains="driver"`` (the default of :func:`choose` unless
        gpu.launch_overhead is asked) subscribes the driver launch
        calls only: half the callback invocations of a runtime launch, correct only if the driver call a runtime
        launch makes carries the kernel's correlation id (the benchmark's kernels-in-a-region count tells).
        ``clock``: what the callback reads the clock for (:data:`CLOCK_READS`).
        """
        _need_mapped(libcupti)
        runtime, driver = callback_ids(cupti, copies=copies, sets=sets)
        if domains == "driver":
            runtime = []
        if not runtime and not driver:
            msg = "cupti-python lists no launch callback ids"
            raise NativeUnavailable(msg)
        self.module.set_clock_reads(CLOCK_READS[clock])
        self.clock = clock
        try:
            n_runtime, n_driver, refused = self.module.start(
                libcupti, runtime, driver, int(capacity) if record else 1, 1 if record else 3
            )
        except RuntimeError as exc:
            raise NativeUnavailable(str(exc)) from None
        self.mode = "callbacks" if record else "empty callbacks"
        self.callbacks = (n_runtime, n_driver)
        self.refused = [tuple(r) for r in refused]

    def start_probes(self, libcupti: str, cupti: Any, *, capacity: int = PROBE_CAPACITY) -> None:
        """Subscribe only the probe's callback (the first of :data:`PROBES` CUPTI calls back for); raises
        :class:`NativeUnavailable` with every candidate's answer if none works."""
        _need_mapped(libcupti)
        tried: list[str] = []
        members = cupti.driver_api_trace_cbid.__members__
        for name in PROBES:
            if name not in members:
                tried.append(f"{name}: cupti-python has no callback id for it")
                continue
            try:
                self.module.set_clock_reads(CLOCK_READS["calls"])
                self.module.start_probes(libcupti, name, int(members[name]), int(capacity))
            except RuntimeError as exc:
                tried.append(f"{name}: {exc}")
                continue
            self.mode, self.probe = "probes", name
            return
        raise NativeUnavailable("no boundary probe works (" + "; ".join(tried) + ")")

    def start_clock(self, libcupti: str, cupti: Any, *, capacity: int = PROBE_CAPACITY) -> None:
        """Record boundary rows on CUPTI's clock and subscribe the graph launch calls only (mode 5); raises
        :class:`NativeUnavailable` when CUPTI's clock cannot be read.  A refused subscriber is not an error: the
        graph launches' kernels are then placed by GPU time (``graph_note`` says why)."""
        _need_mapped(libcupti)
        runtime, driver = callback_ids(cupti, graphs_only=True)
        try:
            self.module.set_clock_reads(CLOCK_READS["calls"])  # graph launches: timed as before
            n_runtime, n_driver, refused, error = self.module.start_clock(libcupti, runtime, driver, int(capacity))
        except RuntimeError as exc:
            raise NativeUnavailable(str(exc)) from None
        self.mode = "clock"
        self.callbacks = (n_runtime, n_driver)
        self.refused = [tuple(r) for r in refused]
        self.graph_note = str(error) if error is not None else ""
        if not runtime and not driver:
            self.graph_note = "cupti-python lists no graph launch callback ids"

    def start_external(self, libcupti: str) -> None:
        """Push/pop the instance id as external correlation id from C instead (no subscriber needed)."""
        _need_mapped(libcupti)
        try:
            self.module.start(libcupti, (), (), 1, 2)
        except RuntimeError as exc:
            raise NativeUnavailable(str(exc)) from None
        self.mode = "external correlation"

    def stop(self) -> LaunchRecords | None:
        """Unsubscribe (no callback runs after this returns) and return the launches (``None`` unless recorded)."""
        mode, self.mode = self.mode, ""
        self.module.stop()
        if mode == "empty callbacks":
            self.module.release()
        if mode not in ("callbacks", "probes", "clock"):
            return None
        records = LaunchRecords.from_export(self.module.export(), probes=mode == "probes", clock=mode == "clock")
        self.threads = [(int(t), n.decode("utf-8", "replace")) for t, n in self.module.threads()]
        self.module.release()
        return records


def _need_mapped(libcupti: str) -> None:
    """Raise :class:`NativeUnavailable` when no libcupti file is mapped (the extension takes the one that is)."""
    if not libcupti:
        msg = "no libcupti is mapped in this process (cupti-python loads it on its first call)"
        raise NativeUnavailable(msg)


@dataclass(frozen=True)
class Choice:
    """Which launch path a timing run uses, and what it needs from CUPTI's activity API."""

    path: NativeLaunchPath | None
    name: str  # "native clock" | "native probes" | "native" | "native external correlation" | "python"
    api_records: bool  # whether CUPTI's runtime/driver API and external-correlation records are needed
    notes: tuple[str, ...]


def choose(cupti: Any, settings: Any, signals: Sequence[str], libcupti: str) -> Choice:
    """Start the native launch path if it can run here (called by the CUPTI collector after libcupti loaded).

    ``settings["launch_path"]``: ``"native"`` (the default) or ``"python"`` (external correlation ids pushed from
    Python).  On the native path ``settings["launch_identity"]`` picks ``"callbacks"`` (the default: the launch
    callback, which knows each launch's thread and times each launch call), ``"probes"`` (boundary probes, no
    per-launch callback; the launching thread is not known, so nothing it places is ``exact``) or ``"clock"``
    (boundary rows on CUPTI's clock against each kernel's ``queued`` stamp: no call at a boundary, but CUPTI's
    latency timestamps cost more per launch than the probes save; copies and sets carry no such stamp, so a run that
    records them takes ``"probes"``); if CUPTI refuses a subscriber (another client holds it), external correlation
    ids are pushed from C.
    An explicit ``settings["kinds"]`` list (experiments) keeps the Python path.  ``settings["native_callback"]``
    ``"empty"`` (benchmarks only) subscribes a callback that records nothing: kernels then carry no region.
    """
    wanted = str(settings.get("launch_path", "native"))
    problem = setting_problem("cupti", "launch_path", wanted)
    if problem is not None:
        raise BackendUnavailableError(problem)
    if wanted == "python" or settings.get("kinds"):
        return Choice(None, "python", True, ())
    callback = str(settings.get("native_callback", "record"))
    problem = setting_problem("cupti", "native_callback", callback)
    if problem is not None:
        raise BackendUnavailableError(problem)
    asked_domains = settings.get("callback_domains")
    timed = any(s in TIMED_LAUNCH_SIGNALS for s in signals)
    # the driver calls alone by default: every runtime launch makes one, and the kernel carries its correlation id,
    # so each launch costs two callback invocations instead of four; with gpu.launch_overhead asked both domains, so
    # that it times the runtime call the user made
    domains = str(asked_domains) if asked_domains is not None else ("both" if timed else "driver")
    problem = setting_problem("cupti", "callback_domains", domains)
    if problem is not None:
        raise BackendUnavailableError(problem)
    # the launch calls' times: every call's when a signal times them, else only launches outside every region
    clock = str(settings.get("launch_clock", "calls" if timed else "outside"))
    problem = setting_problem("cupti", "launch_clock", clock)
    if problem is not None:
        raise BackendUnavailableError(problem)
    if timed and clock != "calls":
        msg = (
            f"the cupti setting launch_clock {clock!r} does not time the launch calls that "
            f"{', '.join(s for s in signals if s in TIMED_LAUNCH_SIGNALS)} needs; leave launch_clock unset or set "
            "it to 'calls'"
        )
        raise BackendUnavailableError(msg)
    identity = str(settings.get("launch_identity", "callbacks"))
    problem = setting_problem("cupti", "launch_identity", identity)
    if problem is not None:
        raise BackendUnavailableError(problem)
    wants = set(signals)
    copies = bool(settings.get("memcpy", False)) or bool(wants & {"gpu.memcpy_bytes", "gpu.memcpy_time"})
    sets = bool(settings.get("memset", False)) or "gpu.memset_bytes" in wants
    needs_callbacks = [
        why
        for why, yes in (
            *((f"{s} times each launch call", s in wants) for s in TIMED_LAUNCH_SIGNALS),
            ("native_callback 'empty'", callback != "record"),
            ("callback_domains 'driver'", asked_domains == "driver"),
        )
        if yes
    ]
    built = build()
    if built.module is None:
        return Choice(None, "python", True, (f"{built.note}; region instance ids are pushed from Python",))
    path = NativeLaunchPath(built)
    first_notes: list[str] = []
    row_capacity = int(settings.get("native_capacity", PROBE_CAPACITY))
    if identity == "clock" and not needs_callbacks and not (copies or sets):
        try:
            path.start_clock(libcupti, cupti, capacity=row_capacity)
        except NativeUnavailable as exc:
            first_notes.append(f"CUPTI's clock unavailable ({exc}); boundary probes instead")
            identity = "probes"
        else:
            note = (
                f"native launch path: {built.note}; boundary rows on CUPTI's clock (no call at a boundary, no launch "
                "callback): a kernel belongs to the instance current when CUPTI stamped its launch `queued`"
            )
            if path.graph_note:
                note += f"; graph launches not subscribed ({path.graph_note}): their kernels are placed by GPU time"
            else:
                runtime, driver = path.callbacks
                note += f"; graph launches through callbacks on {runtime} runtime + {driver} driver ids"
            return Choice(path, "native clock", False, (note,))
    elif identity == "clock" and not needs_callbacks:
        first_notes.append("boundary probes instead of CUPTI's clock: copies and sets carry no queued stamp")
        identity = "probes"
    if identity == "probes" and not needs_callbacks:
        try:
            path.start_probes(libcupti, cupti, capacity=row_capacity)
        except NativeUnavailable as exc:
            first_notes.append(f"boundary probes unavailable ({exc}); launch callbacks instead")
        else:
            note = (
                f"native launch path: {built.note}; boundary probes through {path.probe} (no launch callback): "
                "a launch belongs to the instance open when it was numbered"
            )
            return Choice(path, "native probes", False, (*first_notes, note))
    elif identity in ("probes", "clock"):
        first_notes.append(f"launch callbacks instead of the {identity} launch identity: " + ", ".join(needs_callbacks))
    try:
        path.start(
            libcupti,
            cupti,
            copies=copies,
            sets=sets,
            capacity=int(settings.get("native_capacity", DEFAULT_CAPACITY)),
            record=callback == "record",
            domains=domains,
            clock=clock,
        )
    except NativeUnavailable as exc:
        first = f"native launch callback unavailable ({exc})"
        try:
            path.start_external(libcupti)
        except NativeUnavailable as exc2:
            return Choice(None, "python", True, (first, f"native external correlation unavailable ({exc2})"))
        return Choice(
            path, "native external correlation", True, (*first_notes, f"{first}; external correlation pushed from C")
        )
    runtime, driver = path.callbacks
    note = f"native launch path: {built.note}; callbacks on {runtime} runtime + {driver} driver API ids"
    note += {
        "calls": "; every launch call timed (entry and exit)",
        "entries": "; launch calls timed at entry",
        "outside": "; only launches outside every region timed (launch_clock 'calls' times them all)",
    }[clock]
    if path.refused:
        note += f"; CUPTI refused (domain, cbid, result): {path.refused}"
    if callback == "empty":
        return Choice(
            path, "native empty callbacks", False, (*first_notes, f"{note}; the callback records nothing (benchmark)")
        )
    return Choice(path, "native", False, (*first_notes, note))
