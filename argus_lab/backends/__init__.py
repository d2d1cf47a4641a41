"""Backend declarations (what the planner reasons over) and lazy loading of their implementations.

Each implementation lives in its own module (``argus_lab.backends.<name>``) and is imported only when a run
uses it, so planning and the light in-process path never import GPU libraries.
"""

from __future__ import annotations

import importlib
from typing import Any

from argus_lab.backends.base import BackendInfo, conflict_reason

BACKENDS: dict[str, BackendInfo] = {
    info.name: info
    for info in (
        BackendInfo(
            "host",
            "light",
            "host wall-clock and CPU time per region instance",
            needs_gpu=False,
        ),
        BackendInfo(
            "cupti",
            "light",
            "CUPTI activity tracing: kernels, memcpy/memset, runtime/driver API, tagged per region instance",
            needs_gpu=True,
            holds_cupti=True,
            cost_factor=1.2,
        ),
        BackendInfo(
            "nvml",
            "light",
            "NVML sampling of clocks, power, temperature and utilization on a background thread",
            needs_gpu=True,
            cost_factor=1.0,
        ),
        BackendInfo(
            "pm",
            "sampling",
            "CUPTI PM sampling: device-wide hardware counters sampled over time",
            needs_gpu=True,
            holds_cupti=True,
            cost_factor=1.1,
        ),
        BackendInfo(
            "ncu",
            "replay",
            "Nsight Compute: per-kernel hardware counters by kernel replay, filtered to the regions' NVTX ranges",
            needs_gpu=True,
            launches_workload=True,
            exclusive=True,
            cost_factor=1.0,
        ),
        BackendInfo(
            "compiler",
            "static",
            "compiler facts of the kernels a run loaded: registers, spills, shared memory, SASS mix",
            needs_gpu=True,
        ),
    )
}


def backend_info(name: str) -> BackendInfo:
    """The declaration of backend ``name``."""
    try:
        return BACKENDS[name]
    except KeyError:
        msg = f"unknown backend {name!r}; known backends: {', '.join(sorted(BACKENDS))}"
        raise KeyError(msg) from None


def load_backend(name: str) -> Any:
    """Import ``argus_lab.backends.<name>`` and return its ``make()`` result (a Collector or Launcher)."""
    backend_info(name)
    module = importlib.import_module(f"argus_lab.backends.{name}_backend")
    return module.make()


__all__ = ["BACKENDS", "BackendInfo", "backend_info", "conflict_reason", "load_backend"]
