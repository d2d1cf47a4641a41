"""CUPTI PM sampling backend (``pm:<metric>``): device-wide counters sampled over time.

``cupti.pm_sampling`` exists from cupti-python 13.3 on, which needs nvidia-cuda-cupti 13.3+; torch
2.11+cu130 pins nvidia-cuda-cupti 13.0.85 (through ``cuda-toolkit[cupti]==13.0.2``), so the supported install
(cupti-python 13.0.1) lacks it.  This backend uses the module when it imports; otherwise
:func:`pm_sampling_status` says why, from what is installed: cupti-python missing, a cupti-python without the
module (with torch's pin read from the installed metadata), or the module there but failing to import (with the
import error itself and the requirements of cupti-python this environment does not meet, e.g. pyelftools).
"""

from __future__ import annotations

import importlib
import importlib.util
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from argus_lab.errors import BackendUnavailableError
from argus_lab.plan.backends import BACKENDS
from argus_lab.regions import BoundaryHook
from argus_lab.run import dists
from argus_lab.run.machine import package_version
from argus_lab.run.protocols import Columns, Evidence, RunContext

NEEDED = "cupti-python>=13.3 with nvidia-cuda-cupti>=13.3"
PRIVATE_INSTALL = (
    "`pip install --no-deps --target DIR cupti-python==13.4.0 nvidia-cuda-cupti==13.4.* pyelftools` (cupti-python "
    "13.3+ also needs cuda-pathfinder>=1.4.1 and cuda-bindings>=13.0.2, which torch's environment has) and put DIR "
    "first on PYTHONPATH in a process that does not load torch's libcupti"
)
"""How to get PM sampling next to a torch that pins an older nvidia-cuda-cupti (docs/gpu-backends.md)."""


def installed_version() -> str:
    """The installed cupti-python version ('' when absent)."""
    return package_version("cupti-python")


@dataclass(frozen=True)
class PmStatus:
    """Whether ``cupti.pm_sampling`` can be used here, and if not why and what to do."""

    module: Any
    """The imported ``cupti.pm_sampling`` (``None`` when it cannot be used)."""
    reason: str
    """``ok``, ``not installed`` (no cupti-python), ``too old`` (a cupti-python without the module) or
    ``import failed`` (the module is there and does not import)."""
    problem: str = ""
    fix: str = ""


def _module_file() -> Path | None:
    """``cupti/pm_sampling.py`` of the cupti package first on the path, found without importing the package."""
    try:
        spec = importlib.util.find_spec("cupti")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / "pm_sampling.py"
        if path.is_file():
            return path
    return None


def torch_pin_text() -> str:
    """``torch 2.11.0 requires nvidia-cuda-cupti==13.0.85.* (through cuda-toolkit[...]==13.0.2)``, read from the
    installed metadata (``""`` when torch is not installed or places no pin on it)."""
    pins = dists.pins_on("torch", "nvidia-cuda-cupti")
    return pins[0].text("nvidia-cuda-cupti") if pins else ""


def pm_sampling_status() -> PmStatus:
    """Import ``cupti.pm_sampling`` and say, when it cannot be used, which of the three reasons holds (with the
    import error's own text when the module is there) and the fix."""
    have = installed_version()
    try:
        found = importlib.util.find_spec("cupti") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        problem = f"the cupti package of cupti-python {have} is missing" if have else "cupti-python is not installed"
        return PmStatus(None, "not installed", problem, f'pip install "{NEEDED.split()[0]}"')
    if _module_file() is None:
        pin = torch_pin_text()
        if pin:
            fix = f"{pin}, so install them privately: {PRIVATE_INSTALL}"
        else:
            fix = 'pip install "cupti-python>=13.3" (it brings nvidia-cuda-cupti>=13.3)'
        return PmStatus(None, "too old", f"cupti-python {have or '?'} has no cupti.pm_sampling (needs {NEEDED})", fix)
    try:
        module = importlib.import_module("cupti.pm_sampling")
    except (ImportError, RuntimeError, OSError) as exc:
        return _import_failed(have, exc)
    return PmStatus(module, "ok")


_DIST_OF = {"elftools": "pyelftools", "cuda.pathfinder": "cuda-pathfinder", "cuda.bindings": "cuda-bindings"}
"""Modules cupti-python imports whose distribution has another name."""


def _import_failed(have: str, exc: BaseException) -> PmStatus:
    where = _module_file()
    problem = (
        f"cupti.pm_sampling of cupti-python {have or '?'} is installed ({where}) but does not import: "
        f"{type(exc).__name__}: {exc}"
    )
    unmet = dists.unmet_requirements("cupti-python")
    missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    if unmet:
        problem += f"; cupti-python {have} requires {', '.join(u.text() for u in unmet)}"
        fix = dists.pip_install([u.requirement for u in unmet], "cupti-python")
    elif missing and _DIST_OF.get(missing):
        fix = dists.pip_install([_DIST_OF[missing]], "cupti-python")
    elif missing:
        fix = (
            f"install the package that provides the module {missing!r}; "
            f'`pip install --force-reinstall "cupti-python=={have}"` brings cupti-python\'s own requirements'
        )
    else:
        fix = f'pip install --force-reinstall "cupti-python=={have}" (with its dependencies)'
    return PmStatus(None, "import failed", problem, fix)


def pm_sampling_module() -> Any:
    """``cupti.pm_sampling``, or :class:`BackendUnavailableError` saying why it cannot be used and the fix."""
    status = pm_sampling_status()
    if status.module is None:
        msg = f"pm:* signals need CUPTI PM sampling: {status.problem}; fix: {status.fix}; or use hw:* signals (ncu)"
        raise BackendUnavailableError(msg)
    return status.module


def pm_metrics(signals: Sequence[str]) -> list[str]:
    """The metric names of the run's ``pm:`` signals."""
    return [s[3:] for s in signals if s.startswith("pm:")]


DEFAULT_INTERVAL_NS = 100_000
DEFAULT_MAX_SAMPLES = 100_000


class PmSampler:
    """PM sampling collector over ``cupti.pm_sampling.Collector`` (cupti-python 13.3+).

    Samples are device-wide windows (start/end timestamps) with one value per metric; the join attributes them to
    region instances by time overlap (:mod:`argus_lab.join.windows`).  CUPTI states the sample timestamps in ns;
    the provenance records the host clock at start and stop, so the offset to ``CLOCK_REALTIME`` can be checked.
    """

    info = BACKENDS["pm"]

    def __init__(self) -> None:
        self._ctx: RunContext | None = None
        self._collector: Any = None
        self.metrics: list[str] = []
        self.rows: list[tuple[int, int, int, str, float]] = []
        self.host_ns: dict[str, int] = {}
        self.device = 0
        self.settings: dict[str, Any] = {}
        self.counts: dict[str, int] = {}

    def hooks(self) -> Sequence[BoundaryHook]:
        return ()

    def start(self, ctx: RunContext) -> None:
        pm = pm_sampling_module()
        self._ctx = ctx
        s = dict(ctx.settings)
        self.metrics = pm_metrics(ctx.signals) or list(s.get("metrics", ()))
        if not self.metrics:
            msg = "a PM sampling run needs at least one pm:<metric> signal, e.g. pm:sm__cycles_active.avg"
            raise ValueError(msg)
        self.device = int(s.get("device", 0))
        self.settings = {
            "sampling_interval_ns": int(s.get("interval_ns", DEFAULT_INTERVAL_NS)),
            "hardware_buffer_size": int(s.get("hardware_buffer_size", 512 << 20)),
            "max_samples": int(s.get("max_samples", DEFAULT_MAX_SAMPLES)),
            "metric_set": s.get("metric_set"),
        }
        c = pm.Collector(self.device)
        try:
            c.enable()
            c.configure(
                metrics=self.metrics,
                sampling_interval=self.settings["sampling_interval_ns"],
                hardware_buffer_size=self.settings["hardware_buffer_size"],
                single_pass_metric_set_name=self.settings["metric_set"],
            )
            self.host_ns["start"] = time.time_ns()
            c.start()
        except PermissionError as exc:
            msg = (
                f"PM sampling needs GPU performance counter access ({exc}); run as root or allow counters for all "
                "users (NVreg_RestrictProfilingToAdminUsers=0)"
            )
            raise BackendUnavailableError(msg) from None
        except (RuntimeError, ValueError) as exc:
            msg = (
                f"PM sampling could not start on device {self.device} with metrics {self.metrics} ({exc}); "
                "PM sampling takes only metrics that fit one pass, e.g. from the set 'TriageCompute'"
            )
            raise BackendUnavailableError(msg) from None
        self._collector = c

    def stop(self) -> None:
        c = self._collector
        if c is None:
            return
        self._collector = None
        try:
            c.stop()
            self.host_ns["stop"] = time.time_ns()
            data = c.decode(self.settings["max_samples"])
            names = list(data.metrics)
            rows = []
            for smp in data:
                if not smp.start_timestamp:  # a window whose start CUPTI did not see (the first ones)
                    continue
                for name, value in zip(names, smp.metric_values, strict=False):
                    rows.append((self.device, int(smp.start_timestamp), int(smp.end_timestamp), name, float(value)))
            self.rows = rows
            self.counts = {
                "total": int(data.num_total_samples),
                "populated": int(data.num_populated_samples),
                "completed": int(data.num_completed_samples),
            }
        finally:
            c.disable()

    def evidence(self, instances: Columns) -> Evidence:
        run_id = self._ctx.run_id if self._ctx is not None else ""
        prov_id = f"{run_id}:pm"
        samples = sample_columns(self.rows, run_id)
        return {
            "samples": samples,
            "provenance": {
                "provenance_id": [prov_id],
                "run_id": [run_id],
                "backend": ["pm"],
                "backend_version": [f"cupti-python {installed_version()} (cupti.pm_sampling)"],
                "settings": [{**self.settings, "metrics": self.metrics, "samples": self.counts}],
                "clocks": [{"host_ns": self.host_ns}],
                "timestamps": ["measured (CUPTI PM sampling sample windows, ns)"],
            },
        }


def sample_columns(rows: Sequence[tuple[int, int, int, str, float]], run_id: str) -> dict[str, list[Any]]:
    """Rows of the ``samples`` table from (device, start_ns, end_ns, metric, value) tuples (``pm:`` signals)."""
    return {
        "run_id": [run_id] * len(rows),
        "device_id": [r[0] for r in rows],
        "signal": [f"pm:{r[3]}" for r in rows],
        "t_ns": [r[1] for r in rows],
        "t_end_ns": [r[2] for r in rows],
        "value": [r[4] for r in rows],
        "unit": [""] * len(rows),
    }


def make() -> PmSampler:
    """The backend object (see :func:`argus_lab.run.loader.load_backend`)."""
    return PmSampler()
