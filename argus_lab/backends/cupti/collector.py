"""CUPTI activity collector (cupti-python, global Activity API, never ``subscribe``).

While a run records, every region boundary pushes/pops the region instance id as external correlation id of
kind ``CUSTOM2``; every runtime/driver launch made inside the region then carries it.  The collector hands
CUPTI one huge buffer so that no buffer completes while the workload runs (cupti-python turns each record
of a completed buffer into a Python object holding the GIL, which is what slows traced programs down), flushes
after synchronizing at stop, and decodes the records in bulk afterwards (:mod:`argus_lab.backends.cupti.decode`).
When its own launch callback held the process's CUPTI subscriber, ``stop()`` then detaches CUPTI from the process
(``cuptiFinalize``, as Proton does), so the code that runs after a measurement runs with no tool attached.

This module runs inside measured processes: it imports numpy and cupti only, and those lazily.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from argus_lab.backends import threads as thr
from argus_lab.backends.cupti import decode as dec
from argus_lab.backends.cupti import native as nat
from argus_lab.backends.cupti.buffer_pool import POOL_BUFFER_BYTES, DecodingPool
from argus_lab.errors import BackendUnavailableError, CollectorBusyError
from argus_lab.model.batches import TableBatches
from argus_lab.model.columns import jsonable_columns
from argus_lab.plan.backends import BACKENDS, setting_problem
from argus_lab.regions import BoundaryHook, env_rank, thread_names
from argus_lab.run.machine import package_version
from argus_lab.run.memory import release_freed_memory
from argus_lab.run.protocols import Columns, Evidence, RunContext

DEFAULT_BUFFER_BYTES = 512 << 20
"""Size of the activity buffer handed to CUPTI (holds ~2.5 M kernel or ~13 M API records)."""

_ACTIVE: list[CuptiCollector | None] = [None]

# ActivityKind values (cupti.ActivityKind, stable C enum values)
_KIND_FAMILY = {1: "memcpy", 2: "memset", 3: "kernel", 10: "kernel", 4: "api", 5: "api", 39: "external", 38: "sync"}
_DTYPE_OF = {
    "kernel": "activity_kernel10_dtype",
    "memcpy": "activity_memcpy6_dtype",
    "memset": "activity_memset4_dtype",
    "api": "activity_api_dtype",
    "external": "activity_external_correlation_dtype",
    "sync": "activity_synchronization2_dtype",
}


def check_driver() -> None:
    """Raise :class:`BackendUnavailableError` unless the CUDA driver library loads."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        msg = (
            f"the CUPTI backend needs an NVIDIA GPU and driver, but libcuda.so.1 cannot be loaded ({exc}); "
            "run on a machine with a GPU (e.g. through scripts/gpu-check), or request only host.* signals, "
            "which work without a GPU"
        )
        raise BackendUnavailableError(msg) from None


def check_cupti_free() -> None:
    """Raise :class:`CollectorBusyError` when another CUPTI client visibly holds this process."""
    inj = os.environ.get("CUDA_INJECTION64_PATH", "")
    if inj:
        msg = (
            f"CUPTI is taken in this process: a profiling tool is injected (CUDA_INJECTION64_PATH={inj!r}, e.g. "
            "ncu or nsys); the CUPTI timing run must run without it: unset CUDA_INJECTION64_PATH or let the planner "
            "put ncu in its own run"
        )
        raise CollectorBusyError(msg)
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            busy = bool(torch.autograd.profiler._is_profiler_enabled)
        except AttributeError:
            busy = False
        if busy:
            msg = (
                "CUPTI is taken in this process: torch.profiler is active; leave the `torch.profiler.profile` "
                "block before measuring with gpu.* signals (they cannot share a run with torch.profiler)"
            )
            raise CollectorBusyError(msg)


def boundaries_setting(settings: Mapping[str, Any]) -> str:
    """The ``boundaries`` setting: ``native`` (the default: the recorder's thread-stack boundaries in C while the
    native launch path runs) or ``python`` (every boundary in Python; benchmarks compare both)."""
    value = str(settings.get("boundaries", "native"))
    problem = setting_problem("cupti", "boundaries", value)
    if problem is not None:
        raise BackendUnavailableError(problem)
    return value


def activity_kinds(signals: Sequence[str], settings: Any, *, api_records: bool = True) -> list[str]:
    """The CUPTI activity kinds a run needs (names of ``cupti.ActivityKind`` members).

    ``api_records=False`` when the native launch callback supplies the launch records and the instance ids
    (:mod:`argus_lab.backends.cupti.native`): CUPTI then records kernels (and copies/sets) only.
    """
    if settings.get("kinds"):  # explicit list (experiments: e.g. ["CONCURRENT_KERNEL"] alone)
        return list(settings["kinds"])
    kinds = ["CONCURRENT_KERNEL", "RUNTIME", "DRIVER", "EXTERNAL_CORRELATION"] if api_records else ["CONCURRENT_KERNEL"]
    wants = set(signals)
    if settings.get("memcpy", False) or wants & {"gpu.memcpy_bytes", "gpu.memcpy_time"}:
        kinds.append("MEMCPY")
    if settings.get("memset", False) or "gpu.memset_bytes" in wants:
        kinds.append("MEMSET")
    if settings.get("sync", False):
        kinds.append("SYNCHRONIZATION")
    return kinds


def mapped_libcupti() -> str:
    """The libcupti file mapped into this process ('' if none)."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                if "libcupti" in line:
                    return line.split()[-1]
    except OSError:
        return ""
    return ""


def _synchronize() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        for d in range(torch.cuda.device_count()):
            torch.cuda.synchronize(d)
        return
    try:
        ctypes.CDLL("libcuda.so.1").cuCtxSynchronize()
    except (OSError, AttributeError):
        return


class _CorrelationHook:
    """Pushes/pops the region instance id as external correlation id (kind CUSTOM2) from Python, or, when the
    native launch path runs, hands the recorder its C function as ``current_instance`` and the extension as
    ``native_boundary`` (set at start): the recorder then does a whole thread-stack boundary in one C call."""

    __slots__ = ("_pop", "_push", "current_instance", "native_boundary")

    def __init__(self) -> None:
        self._push: Callable[[int, int], Any] | None = None
        self._pop: Callable[[int], Any] | None = None
        self.current_instance: Callable[[int], Any] | None = None
        self.native_boundary: Any = None

    def bind(self, push: Callable[[int, int], Any] | None, pop: Callable[[int], Any] | None) -> None:
        self._push, self._pop = push, pop

    def enter(self, instance_id: int) -> None:
        if self._push is not None:
            self._push(dec.CUSTOM2, instance_id)

    def exit(self, instance_id: int) -> None:
        if self._pop is not None:
            self._pop(dec.CUSTOM2)


def decode_records(records: Sequence[Any]) -> dec.Raw:
    """Group cupti-python record objects by family and turn them into raw columns in bulk.

    Each record object wraps its bytes in the activity buffer (``_data``, a one-element structured array of
    the package's ``activity_*_dtype``); the arrays of one family are concatenated once and split into
    columns.  Kernel names are pointers into CUPTI's string table: each distinct pointer is read once.
    """
    from cupti import cupti

    groups: dict[type, list[Any]] = {}
    for r in records:
        groups.setdefault(type(r), []).append(r)
    parts: dict[str, list[dec.RawColumns]] = {f: [] for f in dec.FAMILY_FIELDS}
    for recs in groups.values():
        family = _KIND_FAMILY.get(int(recs[0].kind))
        if family is None:
            continue
        dtype = getattr(cupti, _DTYPE_OF[family])
        try:
            arr = np.concatenate([r._data for r in recs]).view(np.ndarray)
        except (AttributeError, ValueError, TypeError):
            arr = _by_attributes(recs, dtype)
        names = None
        if family == "kernel":
            if arr.dtype.names and "name" in arr.dtype.names and arr["name"].dtype.kind in "iu":
                ptrs = arr["name"].astype(np.int64)
                uniq, inv = np.unique(ptrs, return_inverse=True)
                text = [ctypes.string_at(int(p)).decode("utf-8", "replace") if p else "" for p in uniq.tolist()]
                names = [text[i] for i in inv.tolist()]
            else:
                names = [str(r.name) for r in recs]
        parts[family].append(dec.from_structured(family, arr, names))
    return {f: dec.concat_families(p, f) for f, p in parts.items()}


def _by_attributes(recs: Sequence[Any], dtype: np.dtype) -> np.ndarray:
    fields = [f for f in (dtype.names or ()) if f not in ("name", "padding", "padding3", "pad", "pad2", "reserved0")]
    arr = np.zeros(len(recs), dtype=[(f, np.int64) for f in fields])
    for f in fields:
        try:
            arr[f] = [int(getattr(r, f)) for r in recs]
        except (AttributeError, TypeError, ValueError):
            continue
    return arr


_REQ_T = ctypes.CFUNCTYPE(
    None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)
)
_DONE_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
_KEEP_ALIVE: list[Any] = []  # CUPTI may call registered callbacks until another client re-registers


class RawBuffers:
    """Activity buffers handed to libcupti directly through ctypes, so records stay bytes until decoded.

    cupti-python's own buffer callback turns every record into a Python object (6-18 us each); here CUPTI
    fills numpy-owned memory.  With a :class:`~argus_lab.backends.cupti.buffer_pool.DecodingPool` (the default)
    the buffers come from the pool and each completed one is queued to be decoded and reused; without one, the
    completed callback keeps a view of the filled part until the run stops
    (:func:`argus_lab.backends.cupti.decode.decode_buffers` then).
    """

    def __init__(self, lib: Any, size: int, pool: DecodingPool | None = None) -> None:
        self.lib = lib
        self.size = size
        self.pool = pool  # decode each buffer as it completes and hand it out again (else: keep it to the end)
        self.pending: dict[int, tuple[np.ndarray, int]] = {}
        self.filled: list[np.ndarray] = []
        self.times: list[int] = []
        self.errors: list[str] = []
        self._req = _REQ_T(self._requested)
        self._done = _DONE_T(self._completed)
        _KEEP_ALIVE.append((self._req, self._done))
        lib.cuptiActivityRegisterCallbacks.restype = ctypes.c_int
        lib.cuptiActivityFlushAll.restype = ctypes.c_int
        lib.cuptiActivityFlushAll.argtypes = [ctypes.c_uint32]
        lib.cuptiActivityGetNextRecord.restype = ctypes.c_int
        lib.cuptiActivityGetNextRecord.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]

    def register(self) -> None:
        rc = self.lib.cuptiActivityRegisterCallbacks(self._req, self._done)
        if rc != 0:
            msg = f"cuptiActivityRegisterCallbacks returned {rc}"
            raise RuntimeError(msg)

    def flush(self) -> None:
        rc = self.lib.cuptiActivityFlushAll(1)  # CUPTI_ACTIVITY_FLAG_FLUSH_FORCED; ctypes releases the GIL
        if rc != 0:
            self.errors.append(f"cuptiActivityFlushAll returned {rc}")

    def _requested(self, buf_pp: Any, size_p: Any, max_p: Any) -> None:
        try:
            if self.pool is not None:
                arr, off = self.pool.take()
                size = self.pool.size
            else:
                arr, size = np.empty(self.size + 8, dtype=np.uint8), self.size  # untouched pages cost no memory
                off = ((int(arr.ctypes.data) + 7) & ~7) - int(arr.ctypes.data)
            aligned = int(arr.ctypes.data) + off
            self.pending[aligned] = (arr, off)
            buf_pp[0] = aligned
            size_p[0] = size
            max_p[0] = 0
        except Exception as exc:
            self.errors.append(f"buffer request failed: {exc}")
            buf_pp[0] = None
            size_p[0] = 0

    def _completed(self, ctx: Any, stream: int, buf: int | None, size: int, valid: int) -> None:
        self.times.append(time.time_ns())
        entry = self.pending.pop(int(buf or 0), None)
        if entry is None:
            self.errors.append("CUPTI completed a buffer argus_lab did not hand out")
            return
        arr, off = entry
        if self.pool is not None:  # CUPTI's thread: only queued here, decoded on the pool's thread
            self.pool.completed(arr, off, valid)
        elif valid:
            self.filled.append(arr[off : off + valid])

    def offsets_of(self, buf: np.ndarray) -> np.ndarray:
        """Record offsets through ``cuptiActivityGetNextRecord`` (the slow, always-correct walk)."""
        base = int(buf.ctypes.data)
        rec = ctypes.c_void_p(None)
        out: list[int] = []
        while self.lib.cuptiActivityGetNextRecord(base, len(buf), ctypes.byref(rec)) == 0:
            out.append(int(rec.value or 0) - base)
        return np.asarray(out, dtype=np.int64)


def _layouts(cupti: Any, kinds: Sequence[int]) -> dict[int, np.dtype]:
    out = {}
    for k in kinds:
        family = _KIND_FAMILY.get(int(k))
        if family is not None:
            out[int(k)] = getattr(cupti, _DTYPE_OF[family])
    return out


_API_KEEP = re.compile(r"Launch|Memcpy|Memset|Synchronize|StreamWaitEvent|EventRecord")


def filter_api_records(cupti: Any) -> list[tuple[Any, int]]:
    """Keep runtime/driver API records only for launches, copies, sets and synchronization.

    Every other API call (``cudaGetDevice``, ``cudaStreamIsCapturing`` ...) would add an API record and one
    external-correlation record per call while a region is open: about twenty records per kernel in PyTorch
    code, which is what slows a launch-bound loop down.  Returns the (enable function, callback id) of each API
    record switched off, for :func:`restore_api_records` at stop: the switch is process-wide, and another CUPTI
    client (torch.profiler) must find its records as it left them.
    """
    off: list[tuple[Any, int]] = []
    for enum, enable in (
        (cupti.runtime_api_trace_cbid, cupti.activity_enable_runtime_api),
        (cupti.driver_api_trace_cbid, cupti.activity_enable_driver_api),
    ):
        for name, cbid in enum.__members__.items():
            v = int(cbid)
            if v <= 0 or v >= 0x7FFFFFFF or _API_KEEP.search(name):
                continue
            try:
                enable(v, 0)
            except (cupti.cuptiError, RuntimeError, ValueError):
                continue
            off.append((enable, v))
    return off


def restore_api_records(off: Sequence[tuple[Any, int]], notes: list[str]) -> None:
    """Switch the API records :func:`filter_api_records` switched off on again (the process's default)."""
    failed = 0
    for enable, cbid in off:
        try:
            enable(cbid, 1)
        except Exception:  # a failed restore is reported, never raised from stop()
            failed += 1
    if failed:
        notes.append(f"{failed} API record kinds could not be switched on again at stop")


OTHER_CLIENT = (
    "another CUPTI client holds this process's one callback subscriber (torch.profiler's Kineto keeps it after its "
    "first profile; Proton, ncu or nsys too): launches were tagged by external correlation ids with CUPTI's API "
    "records instead of argus_lab's launch callback, and that client's own callbacks still run at every launch, "
    "so kernels and launches may take longer than in a process without it; measure in a fresh process for clean "
    "numbers (`%%argus --isolate`, `argus_lab.measure(..., isolate=True)`, `argus-lab run --isolate`)"
)


def other_client_note(launch_path: str, notes: Sequence[str]) -> str:
    """:data:`OTHER_CLIENT` when the launch path fell back because CUPTI refused a subscriber, else ``""``."""
    refused = any("cuptiSubscribe" in n and ("MULTIPLE_SUBSCRIBERS" in n or "error 39" in n) for n in notes)
    if launch_path in ("native external correlation", "python") and refused:
        return OTHER_CLIENT
    return ""


class CuptiCollector:
    """The CUPTI activity collector (see the module docstring)."""

    info = BACKENDS["cupti"]

    def __init__(self, buffer_bytes: int = DEFAULT_BUFFER_BYTES) -> None:
        self.buffer_bytes = buffer_bytes
        self._hook = _CorrelationHook()
        self._records: list[Any] = []
        self._completions: list[int] = []
        self._kinds: list[int] = []
        self._kind_names: list[str] = []
        self._ctx: RunContext | None = None
        self._stopping = False
        self.raw: dec.Raw = {}
        self._rows: dec.KernelRows | None = None  # the kernels table's rows, made once by evidence()
        self.dropped = 0
        self.started_ns = 0
        self.stopped_ns = 0
        self.completed_during_run = 0
        self.decode_s = 0.0
        self.flush_s = 0.0
        self.libcupti = ""
        self.notes: list[str] = []
        self.api_kinds_off = 0
        self.buffers: list[np.ndarray] = []
        self.layouts: dict[int, np.dtype] = {}
        self._raw_buffers: RawBuffers | None = None
        self.pool: DecodingPool | None = None  # decodes CUPTI's buffers while the run records (decode=incremental)
        self.decode_mode = "incremental"  # the `decode` setting: incremental | at stop
        self.buffers_made = 0  # activity buffers the pool made (it reuses them)
        self.pool_decode_s = 0.0  # time the pool's thread spent decoding while the run recorded and at stop
        self._native: nat.NativeLaunchPath | None = None
        self.launch_path = "python"  # which path tagged the launches (provenance)
        self.native_launches = 0
        self.native_dropped = 0
        self.detach = "auto"  # the `detach` setting: auto | always | never
        self.detached = False  # whether stop() detached CUPTI (cuptiFinalize)
        self.kernel_names: dict[int, str] = {}  # kernel-name pointer -> name, read before CUPTI is detached
        self.boundaries = "native"  # the `boundaries` setting: region boundaries in C with the native launch path
        self.launch_order: dict[str, int] = {}  # how the probes or the clock placed the launches
        self._latency = False  # latency timestamps enabled (launch path "native clock")
        self._backward = thr.BackwardCalls()  # backward() calls and their threads (the join links autograd's kernels)
        self._starts = thr.ThreadStarts()  # names of the threads started during the run, taken at their start
        self.launch_threads: list[tuple[int, str]] = []  # (pthread id, system name) of the launching threads
        self.other_client = ""  # another CUPTI client seen in this process: what it is and what it does to the numbers
        # (enable function, cbid) of the API records switched off, switched on again at stop
        self._api_off: list[tuple[Any, int]] = []

    # -- Collector protocol ---------------------------------------------------------------------
    def hooks(self) -> Sequence[BoundaryHook]:
        return (self._hook,)

    def start(self, ctx: RunContext) -> None:
        if _ACTIVE[0] is not None:
            msg = (
                "a CUPTI collector is already active in this process; stop it first "
                "(one CUPTI activity client per process)"
            )
            raise CollectorBusyError(msg)
        check_driver()
        check_cupti_free()
        try:
            from cupti import cupti
        except ImportError as exc:
            msg = f"cupti-python is not installed ({exc}); install it with `pip install cupti-python==13.0.1`"
            raise BackendUnavailableError(msg) from None
        self._ctx = ctx
        self._rows = None
        self._records, self._completions, self._stopping = [], [], False
        settings = ctx.settings
        self.decode_mode = str(settings.get("decode", "incremental"))
        problem = setting_problem("cupti", "decode", self.decode_mode)
        if problem is not None:
            raise BackendUnavailableError(problem)
        pooled = self.decode_mode == "incremental" and settings.get("buffers", "raw") == "raw"
        self.buffer_bytes = int(settings.get("buffer_bytes", POOL_BUFFER_BYTES if pooled else self.buffer_bytes))
        self._raw_buffers = None
        self.pool = None
        self.api_kinds_off = 0
        self.detach = str(settings.get("detach", "auto"))
        problem = setting_problem("cupti", "detach", self.detach)
        if problem is not None:
            raise BackendUnavailableError(problem)
        self.detached = False
        self.kernel_names = {}
        self.launch_order = {}
        self.launch_threads = []
        self.other_client = ""
        self.boundaries = boundaries_setting(settings)
        try:
            cupti.get_timestamp()  # loads libcupti
            choice = nat.choose(cupti, settings, ctx.signals, mapped_libcupti())
            self._native, self.launch_path, api_records = choice.path, choice.name, choice.api_records
            self.notes.extend(choice.notes)
            self._latency = self.launch_path == "native clock"
            if self._latency:  # each kernel record then carries `queued`, the clock of its launch
                cupti.activity_enable_latency_timestamps(True)
            self._kind_names = activity_kinds(ctx.signals, settings, api_records=api_records)
            if settings.get("buffers", "raw") == "raw":
                try:
                    lib = ctypes.CDLL(mapped_libcupti() or "libcupti.so.13")
                    raw_buffers = RawBuffers(lib, self.buffer_bytes)
                    if pooled:  # each buffer decoded as CUPTI completes it, then handed out again
                        names = [getattr(cupti.ActivityKind, n) for n in self._kind_names]
                        self.pool = raw_buffers.pool = DecodingPool(
                            self.buffer_bytes,
                            _layouts(cupti, names),
                            self._name_of,
                            raw_buffers.offsets_of,
                            keep_copies=bool(settings.get("keep_buffers", False)),
                        )
                    self._raw_buffers = raw_buffers
                    self._raw_buffers.register()
                except (OSError, AttributeError, RuntimeError) as exc:
                    self.notes.append(f"raw buffers unavailable ({exc}); using cupti-python's buffer callbacks")
                    self._raw_buffers = None
                    self._close_pool()
            if self._raw_buffers is None:
                cupti.activity_register_callbacks(self._requested, self._completed)
            self._kinds = []
            for name in self._kind_names:
                kind = getattr(cupti.ActivityKind, name)
                cupti.activity_enable(kind)
                self._kinds.append(kind)
            if api_records and settings.get("api_records", "launch") == "launch":
                self._api_off = filter_api_records(cupti)
                self.api_kinds_off = len(self._api_off)
            self.other_client = other_client_note(self.launch_path, choice.notes)
        except cupti.cuptiError as exc:
            self._disable(cupti)
            self._close_pool()
            raise _busy_or_unavailable(exc) from None
        except RuntimeError as exc:
            self._disable(cupti)
            self._close_pool()
            msg = f"CUPTI could not start ({exc}); check that the NVIDIA driver works (`nvidia-smi`)"
            raise BackendUnavailableError(msg) from None
        self.libcupti = mapped_libcupti()
        if self._native is not None:  # the recorder calls the C function at every boundary
            self._hook.current_instance = self._native.set_current
            self._hook.native_boundary = self._native.module if self.boundaries == "native" else None
            self._hook.bind(None, None)
        else:
            self._hook.current_instance = None
            self._hook.native_boundary = None
            self._hook.bind(cupti.activity_push_external_correlation_id, cupti.activity_pop_external_correlation_id)
        _ACTIVE[0] = self
        if settings.get("backward_calls", True):
            self._backward.install()
        self._starts.install()
        self.started_ns = time.time_ns()

    def stop(self) -> None:
        if _ACTIVE[0] is not self:
            return
        from cupti import cupti

        self._hook.bind(None, None)
        self._hook.current_instance = None
        self._hook.native_boundary = None
        self._backward.remove()
        self._starts.remove()
        # no other CUPTI subscriber here
        subscribed = self.launch_path in ("native", "native probes", "native clock", "native empty callbacks")
        detach = self.detach == "always" or (self.detach == "auto" and subscribed)
        native = self._native_stop()  # unsubscribe first: no launch callback runs after this
        raw_buffers = self._raw_buffers
        layouts = _layouts(cupti, self._kinds)  # before _disable() forgets the kinds
        try:
            _synchronize()
            self.stopped_ns = time.time_ns()
            self._stopping = True
            t0 = time.perf_counter()
            if raw_buffers is not None:
                raw_buffers.flush()
            else:
                cupti.activity_flush_all(cupti.ActivityFlag.FLUSH_FORCED)
            self.flush_s = time.perf_counter() - t0
            self.dropped = _dropped(cupti)
        finally:
            self._disable(cupti)
            _ACTIVE[0] = None
        t0 = time.perf_counter()
        if raw_buffers is not None and self.pool is not None:  # the buffers not decoded yet, then all columns
            self.completed_during_run = sum(1 for t in raw_buffers.times if t < self.stopped_ns)
            self.raw = self.pool.finish()
            release_freed_memory()  # the pool's buffers and chunks, given back before the evidence is made
            self.notes.extend(raw_buffers.errors + self.pool.errors)
            self.buffers = self.pool.copies
            self.layouts = layouts
            self.buffers_made = self.pool.allocated
            self.pool_decode_s = self.pool.decode_s
            self.pool = raw_buffers.pool = None
        elif raw_buffers is not None:
            self.completed_during_run = sum(1 for t in raw_buffers.times if t < self.stopped_ns)
            self.notes.extend(raw_buffers.errors)
            self.buffers = list(raw_buffers.filled)
            self.raw = dec.decode_buffers(self.buffers, layouts, self._name_of, raw_buffers.offsets_of)
            self.layouts = layouts
            raw_buffers.filled = []
        else:
            self.completed_during_run = sum(1 for t in self._completions if t < self.stopped_ns)
            records, self._records = self._records, []
            self.raw = decode_records(records)
            del records
        if native is not None and (native.clock or native.probes):  # each launch's instance from the boundary rows
            if native.clock:  # rows on CUPTI's clock: each kernel by its queued stamp
                k = self.raw.get("kernel", dec.empty_family("kernel"))
                queued = k.get("queued", np.zeros(dec.count(k), dtype=np.int64))
                families, order = nat.clock_families(native, k["correlation_id"], queued, os.getpid())
                rows, beyond = "boundary rows", order["after the arrays filled"]
            else:  # probes: each launch by its correlation id
                corr = [c["correlation_id"] for f, c in self.raw.items() if f in ("kernel", "memcpy", "memset")]
                q = np.concatenate(corr) if corr else np.zeros(0, dtype=np.int64)
                families, order = nat.probe_families(native, q, os.getpid())
                rows, beyond = "boundary probes", order["after the probe arrays filled"]
            self.raw.update(families)
            self.launch_order = order
            if native.dropped:
                self.notes.append(
                    f"{native.dropped} {rows} were dropped (the arrays hold {len(native)}): the {beyond} launches "
                    "after the last recorded one are placed by their GPU time; raise the cupti setting native_capacity"
                )
        elif native is not None:  # the launches the native callback recorded: external + api families
            self.raw.update(nat.raw_families(native, os.getpid()))
        if native is not None:
            self.native_launches, self.native_dropped = len(native), native.dropped
        self.decode_s = time.perf_counter() - t0
        if detach:  # after decoding: kernel names point into CUPTI's memory
            self._finalize(cupti)

    def _close_pool(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.finish()

    def _name_of(self, ptr: int) -> str:
        name = self.kernel_names.get(ptr)
        if name is None:
            name = self.kernel_names[ptr] = _c_string(ptr)
        return name

    def _finalize(self, cupti: Any) -> None:
        """Detach CUPTI from the process (``cuptiFinalize``); the next start attaches it again."""
        try:
            cupti.finalize()
        except (cupti.cuptiError, RuntimeError, AttributeError) as exc:
            self.notes.append(f"CUPTI was not detached at stop ({exc})")
            return
        self.detached = True

    def evidence(self, instances: Columns) -> Evidence:
        ctx = self._ctx
        run_id = ctx.run_id if ctx is not None else ""
        prov_id = f"{run_id}:cupti"
        if self._rows is None or self._rows.run_id != run_id:  # the launches' instance ids may be let go below
            self._rows = dec.KernelRows(self.raw, run_id)
        kernels = self._rows
        records = {f: dec.count(c) for f, c in self.raw.items() if f != dec.NAMES}  # the table holds no record
        n_records = sum(records.values())
        keep = ctx is not None and (ctx.settings.get("keep_buffers", False) or ctx.settings.get("keep_raw", False))
        if not keep:  # joined into the rows' instances: the launches' instance ids (8 B each) are let go
            self.raw["external"] = dec.empty_family("external")
        settings = {
            "kinds": self._kind_names,
            "buffer_bytes": self.buffer_bytes,
            "api": "global Activity API" + _SUBSCRIBER.get(self.launch_path, ""),
            "detached_at_stop": self.detached,
            "launch_path": self.launch_path,
            # handed to the recorder, which runs its thread-stack boundaries in C when they are its only work
            "boundary_functions": "native.c"
            if self.launch_path.startswith("native") and self.boundaries == "native"
            else "none",
            "native_launch_records": self.native_launches,
            "native_dropped_launches": self.native_dropped,
            "launch_order": self.launch_order,
            "launching_threads": len(self.launch_threads),
            "backward_calls": {"timed": len(self._backward.calls), "how": self._backward.note},
            "other_cupti_client": self.other_client,
            "external_correlation_kind": "CUSTOM2",
            "records": records,
            "dropped_records": self.dropped,
            "buffers_completed_during_run": self.completed_during_run,
            "buffers": _buffers_note(self.layouts, self.decode_mode, self.buffers_made, self.buffer_bytes),
            "decode": self.decode_mode,
            "api_records": f"launch/copy/set/sync only ({self.api_kinds_off} API kinds off)"
            if self.api_kinds_off
            else "all",
            "flush_s": round(self.flush_s, 4),
            "notes": self.notes,
            "decode_s": round(self.decode_s, 4),
            "buffer_decode_s": round(self.pool_decode_s, 4),  # the pool's thread, buffer by buffer (incremental)
            "decode_records_per_s": round(n_records / self.decode_s) if self.decode_s > 0 else None,
            "libcupti": self.libcupti,
            "summary": kernels.summary(),
            "held_per_record": _held_per_record(self.raw, kernels),
        }
        prov: dict[str, list[Any]] = {
            "provenance_id": [prov_id],
            "run_id": [run_id],
            "backend": ["cupti"],
            "backend_version": [
                f"cupti-python {package_version('cupti-python') or '?'}; "
                f"nvidia-cuda-cupti {package_version('nvidia-cuda-cupti') or '?'}"
            ],
            "settings": [settings],
            "clocks": [{"start_ns": self.started_ns, "stop_ns": self.stopped_ns}],
            "timestamps": ["measured (CUPTI, CLOCK_REALTIME ns)"],
        }
        if ctx is None or not ctx.settings.get("keep_buffers", False):
            self.buffers = []  # decoded: CUPTI's records (~200 B each) need not stay while the evidence is stored
        release_freed_memory()
        rank, pid = env_rank(), os.getpid()
        named = {**thr.python_thread_names(), **thread_names()}
        ev: Evidence = {
            "kernels": kernel_evidence(kernels, instances.get("thread_id", ()), rank),
            "provenance": prov,
            "threads": thr.threads_table(run_id, rank, pid, self.launch_threads, named),
            "host_calls": self._backward.table(run_id, rank, pid),
        }
        if ctx is not None and ctx.settings.get("keep_raw", False):
            folder = Path(ctx.out_dir) / "cupti-raw"
            files = dec.save_raw(self.raw, folder)
            ev["artifacts"] = {
                "run_id": [run_id] * len(files),
                "kind": ["cupti-raw"] * len(files),
                "path": [str(p) for p in files],
                "sha256": [""] * len(files),
                "bytes": [p.stat().st_size for p in files],
                "note": ["raw CUPTI activity records (Parquet)"] * len(files),
            }
        return ev

    # -- CUPTI callbacks ------------------------------------------------------------------------
    def _requested(self) -> tuple[int, int]:
        return self.buffer_bytes, 0

    def _completed(self, records: Any) -> None:
        # CUPTI's thread: keep a reference only (the records keep their buffer alive); decode after the run.
        self._completions.append(time.time_ns())
        self._records.extend(records)

    def _native_stop(self) -> nat.LaunchRecords | None:
        native, self._native = self._native, None
        if native is None:
            return None
        try:
            records = native.stop()
        except RuntimeError as exc:
            self.notes.append(f"native launch path did not stop cleanly: {exc}")
            return None
        self.launch_threads = list(native.threads)
        return records

    def _disable(self, cupti: Any) -> None:
        self._native_stop()
        restore_api_records(self._api_off, self.notes)  # what another client of CUPTI gets is as it was
        self._api_off = []
        if self._latency:
            self._latency = False
            try:
                cupti.activity_enable_latency_timestamps(False)
            except (cupti.cuptiError, RuntimeError) as exc:
                self.notes.append(f"latency timestamps stayed on ({exc})")
        for kind in self._kinds:
            try:
                cupti.activity_disable(kind)
            except (cupti.cuptiError, RuntimeError):
                continue
        self._kinds = []


def kernel_evidence(rows: dec.KernelRows, instance_threads: Sequence[int], rank: int) -> Columns | TableBatches:
    """The ``kernels`` evidence of a run's rows: made and written batch by batch (:class:`TableBatches`), so that
    storing millions of kernel records holds their compact columns and one batch, never every column at once."""
    if len(rows) == 0:  # the empty columns, typed
        empty = dec.store_kernels(dec.widen_thread_ids(dec.kernel_table({}, rows.run_id), instance_threads))
        return {**empty, "rank": np.zeros(0, dtype=np.int64)}

    def make() -> Iterator[Any]:
        import pyarrow as pa

        for batch in rows.batches():
            cols = dec.store_kernels(dec.widen_thread_ids(batch, instance_threads))
            cols["rank"] = np.full(len(batch["name"]), rank, dtype=np.int64)  # ranks may share device numbers
            yield from pa.table(jsonable_columns(cols)).to_batches()

    return TableBatches(len(rows), make)


def _held_per_record(raw: dec.Raw, rows: dec.KernelRows) -> dict[str, float]:
    """Bytes a kernel-table row holds while the run's evidence is made, by raw column and run-wide array (only those
    holding any; ``decode.held_bytes``): what docs/benchmarks.md's breakdown per record reads on the GPU."""
    n = max(len(rows), 1)
    held = dec.held_bytes(raw, rows)
    return {f"{f}.{k}": round(b / n, 2) for f, cols in held.items() for k, b in cols.items() if b}


def _buffers_note(layouts: Mapping[int, Any], decode: str, made: int, size: int) -> str:
    if not layouts:
        return "cupti-python record objects"
    if decode == "incremental":
        return f"raw (ctypes), decoded as each completes; {made} buffers of {size >> 20} MiB made and reused"
    return "raw (ctypes, bulk numpy decode at stop)"


_SUBSCRIBER = {
    "native": " + a callback subscriber for launch calls, released at stop",
    "native probes": " + a callback subscriber for one driver call made at each region boundary, released at stop",
    "native clock": " + latency timestamps (each kernel's queued time) and a callback subscriber for graph launch "
    "calls only, released at stop",
}


def _c_string(ptr: int) -> str:
    return ctypes.string_at(ptr).decode("utf-8", "replace")


def _known_name(names: Mapping[int, str] | None, ptr: int) -> str:
    if names is not None:
        return names.get(ptr, "")
    return _c_string(ptr)


def save_buffers(
    buffers: Sequence[np.ndarray],
    layouts: dict[int, np.dtype],
    raw: dec.Raw,
    folder: Path,
    names: Mapping[int, str] | None = None,
) -> None:
    """Write raw activity buffers (``buffer<i>.bin``), their record layouts and the kernel names seen.

    ``names``: the collector's ``kernel_names`` (pointer -> name), needed once CUPTI was detached at stop (the
    pointers then no longer point at the names).  With these files
    :func:`argus_lab.backends.cupti.decode.decode_buffers` can be run without a GPU (tests).
    """
    import json

    folder.mkdir(parents=True, exist_ok=True)
    for i, b in enumerate(buffers):
        (folder / f"buffer{i}.bin").write_bytes(b.tobytes())
    found: dict[str, str] = {}
    sizes = {k: d.itemsize for k, d in layouts.items()}
    for b in buffers:
        kinds, offs = dec.walk_records(b, sizes)
        for k, d in layouts.items():
            if _KIND_FAMILY.get(k) == "kernel":
                ptrs = dec.field_columns(b, offs[kinds == k], d, ("name",))["name"]
                found.update({str(p): _known_name(names, int(p)) for p in set(ptrs.tolist()) if p})
    meta = {
        "layouts": {str(k): _DTYPE_OF[_KIND_FAMILY[k]] for k in layouts},
        "itemsize": {str(k): d.itemsize for k, d in layouts.items()},
        "kernel_names": found,
    }
    (folder / "layouts.json").write_text(json.dumps(meta, indent=1))


def _dropped(cupti: Any) -> int:
    val = ctypes.c_size_t(0)
    try:
        cupti.activity_get_num_dropped_records(0, 0, ctypes.addressof(val))
    except (cupti.cuptiError, RuntimeError, TypeError):
        return -1
    return int(val.value)


def _busy_or_unavailable(exc: Exception) -> Exception:
    status = getattr(exc, "status", None)
    code = int(status) if status is not None else -1
    if code == 39 or "MULTIPLE_SUBSCRIBERS" in str(exc):
        msg = (
            f"CUPTI is already taken in this process ({exc}): another profiler (torch.profiler/Kineto, Proton, "
            "ncu or nsys) holds the one CUPTI client that driver 580 allows; measure gpu.* signals in a process "
            "without it (leave the profiler's block, or for torch.profiler start Python with TEARDOWN_CUPTI=1)"
        )
        return CollectorBusyError(msg)
    if code == 14 or "NOT_COMPATIBLE" in str(exc):
        msg = (
            f"CUPTI refused the global Activity API ({exc}): another client uses the per-subscriber *_v2 API in "
            "this process; measure in a fresh process"
        )
        return CollectorBusyError(msg)
    msg = f"CUPTI could not start tracing ({exc}); check the driver (`nvidia-smi`) and the cupti-python install"
    return BackendUnavailableError(msg)


def make() -> CuptiCollector:
    """The backend object (see :func:`argus_lab.run.loader.load_backend`)."""
    return CuptiCollector()
