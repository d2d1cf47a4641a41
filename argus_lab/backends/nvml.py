"""NVML sampling backend: clocks, power, temperature and utilization on a background thread.

Samples are timestamped with ``time.time_ns()`` (``CLOCK_REALTIME``, the clock of region instances and CUPTI),
so the join attributes them to region instances by time-window overlap (:mod:`argus_lab.join.windows`).  The
clocks at run start and end are recorded as provenance of the run.  Uses ``nvidia-ml-py`` (module ``pynvml``),
imported lazily.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from argus_lab.errors import BackendUnavailableError
from argus_lab.plan.backends import BACKENDS
from argus_lab.regions import BoundaryHook
from argus_lab.run.protocols import Columns, Evidence, RunContext

SIGNALS: dict[str, str] = {
    "sys.sm_clock": "MHz",
    "sys.mem_clock": "MHz",
    "sys.power": "W",
    "sys.temperature": "C",
    "sys.gpu_util": "%",
    "sys.mem_util": "%",
}
DEFAULT_INTERVAL_S = 0.01


def readers(nv: Any, handle: Any) -> dict[str, Callable[[], float]]:
    """One zero-argument reader per signal for an NVML device handle."""
    return {
        "sys.sm_clock": lambda: float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM)),
        "sys.mem_clock": lambda: float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM)),
        "sys.power": lambda: nv.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        "sys.temperature": lambda: float(nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU)),
        "sys.gpu_util": lambda: float(nv.nvmlDeviceGetUtilizationRates(handle).gpu),
        "sys.mem_util": lambda: float(nv.nvmlDeviceGetUtilizationRates(handle).memory),
    }


def sample_columns(rows: Sequence[tuple[int, int, str, float]], run_id: str) -> dict[str, list[Any]]:
    """Rows of the ``samples`` table from (device, t_ns, signal, value) tuples."""
    return {
        "run_id": [run_id] * len(rows),
        "device_id": [r[0] for r in rows],
        "signal": [r[2] for r in rows],
        "t_ns": [r[1] for r in rows],
        "value": [r[3] for r in rows],
        "unit": [SIGNALS.get(r[2], "") for r in rows],
    }


class NvmlSampler:
    """Samples NVML on a daemon thread while a run records."""

    info = BACKENDS["nvml"]

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._ctx: RunContext | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.rows: list[tuple[int, int, str, float]] = []
        self.clocks: dict[str, Any] = {}
        self.errors: dict[str, str] = {}
        self._nv: Any = None
        self._handles: list[tuple[int, Any]] = []

    def hooks(self) -> Sequence[BoundaryHook]:
        return ()

    def start(self, ctx: RunContext) -> None:
        try:
            import pynvml as nv
        except ImportError:
            msg = "sys.* signals need nvidia-ml-py; install it with `pip install nvidia-ml-py`"
            raise BackendUnavailableError(msg) from None
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            msg = (
                f"NVML could not start ({exc}); sys.* signals need an NVIDIA GPU and driver: run on a GPU machine "
                "or drop the sys.* signals"
            )
            raise BackendUnavailableError(msg) from None
        self._nv = nv
        self._ctx = ctx
        self.interval_s = float(ctx.settings.get("interval_s", self.interval_s))
        wanted = [s for s in ctx.signals if s in SIGNALS] or list(SIGNALS)
        devices = ctx.settings.get("devices") or range(nv.nvmlDeviceGetCount())
        self._handles = [(int(d), nv.nvmlDeviceGetHandleByIndex(int(d))) for d in devices]
        fns: list[tuple[int, str, Callable[[], float]]] = []
        for dev, h in self._handles:
            rd = readers(nv, h)
            fns.extend((dev, s, rd[s]) for s in wanted)
        self.clocks = {"start": self._clocks()}
        self.rows = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, args=(fns,), name="argus-nvml", daemon=True)
        self._thread.start()

    def _clocks(self) -> dict[str, Any]:
        nv = self._nv
        out: dict[str, Any] = {"t_ns": time.time_ns()}
        for dev, h in self._handles:
            entry: dict[str, Any] = {}
            calls: tuple[tuple[str, str, tuple[Any, ...]], ...] = (
                ("sm_mhz", "nvmlDeviceGetClockInfo", (h, nv.NVML_CLOCK_SM)),
                ("mem_mhz", "nvmlDeviceGetClockInfo", (h, nv.NVML_CLOCK_MEM)),
                ("max_sm_mhz", "nvmlDeviceGetMaxClockInfo", (h, nv.NVML_CLOCK_SM)),
                ("temperature_c", "nvmlDeviceGetTemperature", (h, nv.NVML_TEMPERATURE_GPU)),
                ("power_mw", "nvmlDeviceGetPowerUsage", (h,)),
                ("throttle_reasons", "nvmlDeviceGetCurrentClocksThrottleReasons", (h,)),
            )
            for label, fname, args in calls:
                try:
                    entry[label] = getattr(nv, fname)(*args)
                except (nv.NVMLError, AttributeError) as exc:
                    entry[label] = f"unavailable: {exc}"
            out[str(dev)] = entry
        return out

    def _loop(self, fns: list[tuple[int, str, Callable[[], float]]]) -> None:
        nv = self._nv
        rows = self.rows
        bad: set[tuple[int, str]] = set()
        while True:
            t = time.time_ns()
            for dev, name, fn in fns:
                if (dev, name) in bad:
                    continue
                try:
                    rows.append((dev, t, name, fn()))
                except nv.NVMLError as exc:
                    bad.add((dev, name))
                    self.errors[f"{dev}:{name}"] = str(exc)
            if self._stop.wait(self.interval_s):
                return

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5)
        self._thread = None
        self.clocks["end"] = self._clocks()

    def evidence(self, instances: Columns) -> Evidence:
        run_id = self._ctx.run_id if self._ctx is not None else ""
        prov_id = f"{run_id}:nvml"
        samples = sample_columns(self.rows, run_id)
        try:
            version = f"nvidia-ml-py; driver {self._nv.nvmlSystemGetDriverVersion()}"
        except Exception:
            version = "nvidia-ml-py"
        return {
            "samples": samples,
            "provenance": {
                "provenance_id": [prov_id],
                "run_id": [run_id],
                "backend": ["nvml"],
                "backend_version": [version],
                "settings": [{"interval_s": self.interval_s, "samples": len(self.rows), "errors": self.errors}],
                "clocks": [self.clocks],
                "timestamps": ["measured (host time.time_ns at each NVML read)"],
            },
        }


def make() -> NvmlSampler:
    """The backend object (see :func:`argus_lab.run.loader.load_backend`)."""
    return NvmlSampler()
