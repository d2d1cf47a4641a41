"""The device backend's collector: probe buffers for instrumented launches, read back and decoded after the run.

While an instrumented run records, :class:`DeviceCollector` is the process's probe source
(:mod:`argus_lab.device.variant`): each ``argus_lab.device.probe(kernel, ...)`` call gets a fresh zeroed buffer
(:class:`ProbeBuffer`, an ordinary pointer argument: it works with Triton's launcher, Inductor's static launcher and
CUDA graphs alike) and the collector notes, on the host, which kernel it is for, the calling thread, the region
instance open there and the ``CLOCK_REALTIME`` time once the buffer is ready.  A CUPTI activity collector runs in
the same run (the timing collector, embedded: it holds the process's CUPTI client), so that the join finds each
launch's kernel record (the first launch of that kernel on that thread after the probe) and, through the launch's
correlation id, the region instance it carried.  After the run the buffers are copied back with one
synchronisation and decoded in bulk (:mod:`argus_lab.backends.device.decode`); nothing is derived here.

Without CUPTI (no cupti-python, another profiler holding it) the run still records its device regions; they then
nest under the host instance the probe was asked in only, and the provenance says why there are no kernel records.
torch is imported only when a buffer is made.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from argus_lab.backends.device.decode import DecodedLaunch, decode
from argus_lab.device import DeviceRegions, variant
from argus_lab.device.layout import LAUNCH_HEADER_WORDS, VERSION, buffer_words, launch_header
from argus_lab.errors import ArgusError, DeviceBufferError, RegionMisuseError
from argus_lab.plan.backends import BACKENDS
from argus_lab.regions import BoundaryHook, current_instance, env_rank
from argus_lab.run.driver import merge_evidence, regions_columns
from argus_lab.run.machine import package_version
from argus_lab.run.protocols import Columns, Evidence, RunContext

MAX_BUFFER_BYTES = 4 << 30
RANK_SHIFT = 20
"""A launch's number is unique in its run: ``rank << RANK_SHIFT`` plus the rank's own launch count."""


@dataclass(frozen=True)
class ProbeBuffer:
    """One launch's probe: the int64 GPU tensor to pass as the kernel's ``probe`` argument, and its shape."""

    tensor: Any
    n_slots: int
    events_per_slot: int
    launch: int = 0
    kernel: str = ""

    @staticmethod
    def allocate(
        n_slots: int, events_per_slot: int, *, device: Any = "cuda", launch: int = 0, kernel: str = ""
    ) -> ProbeBuffer:
        """A zeroed buffer with its header written: one slot per program of the launch grid."""
        if isinstance(n_slots, bool) or not isinstance(n_slots, int) or n_slots < 1:
            msg = f"programs (n_slots) must be the number of programs the launch runs (>= 1), got {n_slots!r}"
            raise RegionMisuseError(msg)
        if isinstance(events_per_slot, bool) or not isinstance(events_per_slot, int) or events_per_slot < 1:
            msg = (
                f"events (events_per_slot) must be >= 1, got {events_per_slot!r}: give the largest number of marker "
                "calls (enter + exit) one program makes"
            )
            raise RegionMisuseError(msg)
        words = buffer_words(n_slots, events_per_slot)
        if words * 8 > MAX_BUFFER_BYTES:
            msg = (
                f"a probe of {n_slots} slots x {events_per_slot} events needs {words * 8 / 2**30:.1f} GiB "
                f"(limit {MAX_BUFFER_BYTES >> 30} GiB): mark fewer, coarser regions (e.g. per tile, not per k-step) "
                "or instrument fewer launches"
            )
            raise RegionMisuseError(msg)
        import torch

        t = torch.zeros(words, dtype=torch.int64, device=device if device is not None else "cuda")
        t[:LAUNCH_HEADER_WORDS] = torch.tensor(launch_header(n_slots, events_per_slot), dtype=torch.int64)
        return ProbeBuffer(t, n_slots, events_per_slot, launch, kernel)

    def host(self) -> np.ndarray:
        """The buffer copied to the host (synchronises with the buffer's stream)."""
        return np.asarray(self.tensor.cpu().numpy(), dtype=np.int64)


@dataclass
class Launch:
    """What the host knows of one instrumented launch: the probe request, and (after the run) its decoded buffer."""

    launch: int
    kernel: str
    regions: DeviceRegions
    thread_id: int
    instance_id: int
    probe_ns: int
    buffer: ProbeBuffer | None
    decoded: DecodedLaunch | None = None
    problems: list[str] = field(default_factory=list)


def _cupti() -> Any:
    from argus_lab.backends.cupti.collector import CuptiCollector

    return CuptiCollector()


class DeviceCollector:
    """The device backend (see the module docstring)."""

    info = BACKENDS["device"]

    def __init__(self, cupti: Any = None) -> None:
        self._cupti = cupti if cupti is not None else _cupti()
        self._cupti_started = False
        self._cupti_ran = False
        self._ctx: RunContext | None = None
        self._lock = threading.Lock()
        self.launches: list[Launch] = []
        self.notes: list[str] = []
        self.started_ns = 0
        self.stopped_ns = 0
        self.readback_s = 0.0
        self.decode_s = 0.0

    # -- Collector protocol ---------------------------------------------------------------------
    def hooks(self) -> Sequence[BoundaryHook]:
        return tuple(self._cupti.hooks()) if self._cupti is not None else ()

    def start(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self.launches, self.notes = [], []
        self._cupti_ran = False
        if self._cupti is not None:
            cupti_ctx = RunContext(ctx.run_id, ("gpu.time",), dict(ctx.settings.get("cupti", {})), ctx.out_dir)
            try:
                self._cupti.start(cupti_ctx)
                self._cupti_started = self._cupti_ran = True
            except ArgusError as exc:  # device regions are still recorded; the provenance says what is missing
                self.notes.append(
                    f"no kernel records in this run ({exc}); each launch's device regions nest under the host region "
                    "instance open when its probe was asked for, and the overhead against the clean variant is not "
                    "measured"
                )
        variant.install(self)
        self.started_ns = time.time_ns()

    def probe(self, kernel: str, programs: int, events: int, regions: DeviceRegions, device: Any) -> Any:
        """A fresh probe buffer for the next launch of ``kernel`` (see :func:`argus_lab.device.probe`)."""
        with self._lock:
            if len(self.launches) >= 1 << RANK_SHIFT:
                msg = (
                    f"this run already instrumented {len(self.launches)} launches, the most one run keeps; "
                    "measure fewer repetitions, or instrument fewer launches (probe() only where it matters)"
                )
                raise RegionMisuseError(msg)
            index = (env_rank() << RANK_SHIFT) + len(self.launches)
            buf = ProbeBuffer.allocate(programs, events, device=device, launch=index, kernel=kernel)
            self.launches.append(
                Launch(index, kernel, regions, threading.get_ident(), current_instance(), time.time_ns(), buf)
            )
        return buf.tensor

    def stop(self) -> None:
        variant.uninstall(self)
        self.stopped_ns = time.time_ns()
        if self._cupti_started:  # synchronises and flushes; stopped first so that the read-back is not traced
            self._cupti.stop()
            self._cupti_started = False
        t0 = time.perf_counter()
        hosts: list[np.ndarray | None] = []
        for launch in self.launches:
            try:
                hosts.append(launch.buffer.host() if launch.buffer is not None else None)
            except Exception as exc:  # a failed kernel poisons the context: keep the host-side record
                hosts.append(None)
                launch.problems.append(f"the probe buffer could not be read back ({exc})")
            launch.buffer = None  # the GPU memory goes back now
        self.readback_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for launch, host in zip(self.launches, hosts, strict=True):
            if host is None:
                continue
            try:
                launch.decoded = decode(host, launch.regions, launch=launch.launch, strict=False)
                launch.problems.extend(launch.decoded.problems)
            except DeviceBufferError as exc:
                launch.problems.append(str(exc))
        self.decode_s = time.perf_counter() - t0

    def evidence(self, instances: Columns) -> Evidence:
        ctx = self._ctx
        run_id = ctx.run_id if ctx is not None else ""
        parts: list[Evidence] = [self._cupti.evidence(instances)] if self._cupti_ran else []
        tables = launch_tables(run_id, self.launches, env_rank())
        declared = {r.region(n) for launch in self.launches for r in (launch.regions,) for n in r.names}
        n_iv = len(tables["device_intervals"]["run_id"])
        settings = {
            "launches": len(self.launches),
            "intervals": n_iv,
            "probe": f"argus_lab.device.probe(): one int64 GPU buffer per launch (layout version {VERSION})",
            "timebase": "%globaltimer ns (GPU-wide) for placement; %clock64 cycles at each CTA's own rate for "
            "durations; CUPTI kernel records on CLOCK_REALTIME",
            "recording": "per CTA: the markers' stores are made by the program's first thread (warp 0's view)",
            "kernel_records": "CUPTI activity (embedded timing collector)" if self._cupti_ran else "none",
            "readback_s": round(self.readback_s, 4),
            "decode_s": round(self.decode_s, 4),
            "problems": sum(len(launch.problems) for launch in self.launches),
            "notes": self.notes,
        }
        prov: dict[str, list[Any]] = {
            "provenance_id": [f"{run_id}:device"],
            "run_id": [run_id],
            "backend": ["device"],
            "backend_version": [f"argus_lab device markers (triton {package_version('triton') or '?'})"],
            "settings": [settings],
            "clocks": [{"start_ns": self.started_ns, "stop_ns": self.stopped_ns}],
            "timestamps": ["measured (GPU %globaltimer ns and %clock64 cycles per CTA; host CLOCK_REALTIME per probe)"],
        }
        regions = regions_columns(sorted(declared, key=lambda r: (r.module, r.name)))
        parts.append({**tables, "regions": regions, "provenance": prov})
        return merge_evidence(parts)


def launch_tables(run_id: str, launches: Sequence[Launch], rank: int = 0) -> dict[str, dict[str, list[Any]]]:
    """The rows of ``device_launches``, ``device_programs`` and ``device_intervals`` for some launches."""
    dl: dict[str, list[Any]] = {k: [] for k in _LAUNCH_COLUMNS}
    programs: dict[str, list[Any]] = {k: [] for k in _PROGRAM_COLUMNS}
    intervals: dict[str, list[Any]] = {k: [] for k in _INTERVAL_COLUMNS}
    for launch in launches:
        d = launch.decoded
        n_prog = len(d.programs.cta) if d is not None else 0
        n_iv = len(d.intervals) if d is not None else 0
        row = {
            "run_id": run_id,
            "launch": launch.launch,
            "kernel": launch.kernel,
            "module": launch.regions.module,
            "thread_id": launch.thread_id,
            "instance_id": launch.instance_id or None,
            "probe_ns": launch.probe_ns,
            "n_slots": d.n_slots if d is not None else None,
            "events_per_slot": d.events_per_slot if d is not None else None,
            "programs": n_prog,
            "intervals": n_iv,
            "dropped": int(d.programs.dropped.sum()) if d is not None else 0,
            "problems": json.dumps(launch.problems),
            "rank": rank,
        }
        for k in _LAUNCH_COLUMNS:
            dl[k].append(row[k])
        if d is None:
            continue
        pr = d.programs
        for k, col in (
            ("cta", pr.cta),
            ("sm", pr.sm),
            ("t_begin_ns", pr.t_begin),
            ("t_end_ns", pr.t_end),
            ("clk_begin", pr.clk_begin),
            ("clk_end", pr.clk_end),
            ("n_events", pr.n_events),
            ("dropped", pr.dropped),
            ("n_warps", pr.n_warps),
        ):
            programs[k].extend(col.tolist())
        programs["run_id"].extend([run_id] * n_prog)
        programs["launch"].extend([launch.launch] * n_prog)
        iv = d.intervals
        ids = {code: launch.regions.region(name).region_id for code, name in d.names.items()}
        intervals["region_id"].extend(ids.get(int(c), f"?{int(c):#x}") for c in iv.code.tolist())
        icols: tuple[tuple[str, np.ndarray], ...] = (
            ("cta", iv.cta),
            ("warp", iv.warp),
            ("sm", iv.sm),
            ("depth", iv.depth),
            ("seq", iv.seq),
            ("t_start_ns", iv.t_start),
            ("t_end_ns", iv.t_end),
            ("clk_start", iv.clk_start),
            ("clk_end", iv.clk_end),
            ("dur_ns", iv.dur_ns),
        )
        for k, col in icols:
            intervals[k].extend(col.tolist())
        intervals["run_id"].extend([run_id] * n_iv)
        intervals["launch"].extend([launch.launch] * n_iv)
    return {"device_launches": dl, "device_programs": programs, "device_intervals": intervals}


_LAUNCH_COLUMNS = (
    "run_id",
    "launch",
    "kernel",
    "module",
    "thread_id",
    "instance_id",
    "probe_ns",
    "n_slots",
    "events_per_slot",
    "programs",
    "intervals",
    "dropped",
    "problems",
    "rank",
)
_PROGRAM_COLUMNS = (
    "run_id",
    "launch",
    "cta",
    "sm",
    "t_begin_ns",
    "t_end_ns",
    "clk_begin",
    "clk_end",
    "n_events",
    "dropped",
    "n_warps",
)
_INTERVAL_COLUMNS = (
    "run_id",
    "launch",
    "region_id",
    "cta",
    "warp",
    "sm",
    "depth",
    "seq",
    "t_start_ns",
    "t_end_ns",
    "clk_start",
    "clk_end",
    "dur_ns",
)


def make() -> DeviceCollector:
    """The backend object (see :func:`argus_lab.run.loader.load_backend`)."""
    return DeviceCollector()
