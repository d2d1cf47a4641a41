"""Backend declarations: what the planner reasons over, and where each backend is implemented.

A backend is described by a :class:`BackendInfo` (what it perturbs, what it cannot share a run with) and
implemented in its own module under :mod:`argus_lab.backends` (named by :attr:`BackendInfo.module`), either as an
in-process collector or as a launcher that starts the workload itself (Nsight Compute).  The planner only ever
reads these declarations, so a new backend needs no planner change; the runtime imports the named module only
when a run uses the backend (:func:`argus_lab.run.loader.load_backend`), so planning never imports GPU libraries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Perturbation = Literal["static", "light", "sampling", "replay", "instrumenting"]


@dataclass(frozen=True)
class BackendInfo:
    """What the planner knows about a backend.

    Attributes
    ----------
    name
        Short name used in plans and provenance (``host``, ``cupti``, ``ncu`` ...).
    perturbation
        ``static`` (no run of its own), ``light``, ``sampling``, ``replay`` or ``instrumenting``.
    description
        One sentence for humans.
    needs_gpu
        Whether it can only collect on a machine with a CUDA driver.
    module
        The module that implements it; its ``make()`` returns the collector or launcher (default
        ``argus_lab.backends.<name>``).
    holds_cupti
        Whether it holds the process's one CUPTI client while active.
    launches_workload
        Whether it must start the workload itself as a child process (a tool such as ``ncu``).
    exclusive
        Whether it shares its run with no other run-time backend (counter replay).
    variant
        The program variant it needs (``""`` = the unmodified program); different variants never share a run.
    conflicts
        Further backend names it must not share a run with.
    cost_factor
        Relative cost of one workload execution with this backend attached (1.0 = plain execution).
    note
        A sentence the plan's explanation adds to every run this backend takes part in (e.g. what its variant
        means for the other runs).
    """

    name: str
    perturbation: Perturbation
    description: str
    needs_gpu: bool
    module: str = ""
    holds_cupti: bool = False
    launches_workload: bool = False
    exclusive: bool = False
    variant: str = ""
    conflicts: frozenset[str] = field(default_factory=frozenset)
    cost_factor: float = 1.0
    note: str = ""

    @property
    def implementation(self) -> str:
        """The module implementing the backend (``module``, or ``argus_lab.backends.<name>``)."""
        return self.module or f"argus_lab.backends.{self.name}"


def conflict_reason(a: BackendInfo, b: BackendInfo) -> str | None:
    """Why ``a`` and ``b`` cannot share a run, or ``None`` when they can.  Derived from declarations only."""
    if a.name == b.name:
        return None
    if "static" in (a.perturbation, b.perturbation):
        return None
    for x, y in ((a, b), (b, a)):
        if x.exclusive:
            return (
                f"{x.name} ({x.perturbation}) serializes and replays kernels, which would distort what "
                f"{y.name} measures, so it runs alone"
            )
    if a.variant != b.variant:
        return f"{a.name} needs program variant {a.variant or 'plain'!r} and {b.name} needs {b.variant or 'plain'!r}"
    if a.holds_cupti and b.holds_cupti:
        return f"{a.name} and {b.name} each hold the process's only CUPTI client"
    if b.name in a.conflicts or a.name in b.conflicts:
        return f"{a.name} declares a conflict with {b.name}"
    return None


BACKENDS: dict[str, BackendInfo] = {
    info.name: info
    for info in (
        BackendInfo(
            "host",
            "light",
            "host wall-clock and CPU time per region instance",
            needs_gpu=False,
            module="argus_lab.backends.host",
        ),
        BackendInfo(
            "cupti",
            "light",
            "CUPTI activity tracing: kernels, memcpy/memset, runtime/driver API, tagged per region instance",
            needs_gpu=True,
            module="argus_lab.backends.cupti.collector",
            holds_cupti=True,
            cost_factor=1.2,
        ),
        BackendInfo(
            "nvml",
            "light",
            "NVML sampling of clocks, power, temperature and utilization on a background thread",
            needs_gpu=True,
            module="argus_lab.backends.nvml",
            cost_factor=1.0,
        ),
        BackendInfo(
            "pm",
            "sampling",
            "CUPTI PM sampling: device-wide hardware counters sampled over time",
            needs_gpu=True,
            module="argus_lab.backends.pm",
            holds_cupti=True,
            cost_factor=1.1,
        ),
        BackendInfo(
            "ncu",
            "replay",
            "Nsight Compute: per-kernel hardware counters by kernel replay, filtered to the regions' NVTX ranges",
            needs_gpu=True,
            module="argus_lab.backends.ncu.launcher",
            launches_workload=True,
            exclusive=True,
            cost_factor=1.0,
        ),
        BackendInfo(
            "device",
            "instrumenting",
            "device regions: the instrumented variant of Triton kernels with device markers records a timestamp per "
            "marker, SM and CTA into a per-launch probe buffer; CUPTI kernel records of the same run place each launch",
            needs_gpu=True,
            module="argus_lab.backends.device.collector",
            holds_cupti=True,
            variant="instrumented",
            cost_factor=1.3,
            note=(
                "dev.* signals need the instrumented variant (argus_lab.device.probe() hands each launch a probe "
                "buffer and its markers read the GPU timers), which perturbs kernel timing, so gpu.* stay on the "
                "clean variant of the other runs; device regions keep one identity (kind 'device', name, module) in "
                "both variants, and each instrumented launch nests under its CUPTI kernel record and the host region "
                "instance that launched it, exactly, through the launch's correlation id; its overhead (instrumented "
                "against clean kernel time of the same launch) is stored as provenance when a clean timing run "
                "(gpu.time) is in the plan"
            ),
        ),
        BackendInfo(
            "compiler",
            "static",
            "compiler facts of the kernels a run loaded: registers, spills, shared memory, SASS mix",
            needs_gpu=True,
            module="argus_lab.backends.compiler.collector",
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


__all__ = ["BACKENDS", "BackendInfo", "Perturbation", "backend_info", "conflict_reason"]
