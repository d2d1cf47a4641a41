"""Backend declarations: what the planner reasons over, and where each backend is implemented.

A backend is described by a :class:`BackendInfo` (what it perturbs, what it cannot share a run with) and
implemented in its own module under :mod:`argus_lab.backends` (named by :attr:`BackendInfo.module`), either as an
in-process collector or as a launcher that starts the workload itself (Nsight Compute).  The planner only ever
reads these declarations, so a new backend needs no planner change; the runtime imports the named module only
when a run uses the backend (:func:`argus_lab.run.loader.load_backend`), so planning never imports GPU libraries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

Perturbation = Literal["static", "light", "sampling", "replay", "instrumenting"]


@dataclass(frozen=True)
class Overhead:
    """A measured slowdown: workload executions with the backend attached against the same without any tool.

    Attributes
    ----------
    workload
        What was measured (launch-bound workloads: the worst case for a per-launch tool).
    ratio
        The median ratio, time with the backend / time without.
    low, high
        The range of the ratio over the benchmark's processes (equal to ``ratio`` for a single measurement).
    source
        Machine, date and benchmark (the figures are in docs/benchmarks.md).
    """

    workload: str
    ratio: float
    low: float
    high: float
    source: str

    def __str__(self) -> str:
        spread = "" if self.low == self.high == self.ratio else f" ({self.low:.2f}-{self.high:.2f})"
        return f"{self.ratio:.2f}x{spread} {self.workload}"


# The workloads of bench/timing_overhead.py (docs/benchmarks.md describes them): 300 regions x 4 small kernels, and
# one decode step of a Llama-1.1B-shaped transformers model with 45 regions through forward hooks (~925 kernels).
LOOP = "launch-bound loop"
DECODE = "Llama decode step"
H200_BLOCKS = "H200 2026-11-30 round 3, A B A B blocks, 3 processes x 6 pairs, docs/benchmarks.md"
DEVICE_PROBE = "H200 2026-11-30, scripts/gpu_probe_device.py, median of 20 launches, docs/benchmarks.md"
H200_ROUND10 = "H200 2026-12-02 round 10, A B A B blocks, 3 processes x 6 pairs, docs/benchmarks.md"


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
        Relative cost of one workload execution with this backend attached, on top of the backends a run of it
        always has (1.0 = plain execution).  Where ``overhead`` is declared, it is the measured worst case: the
        largest ratio of ``overhead`` divided by what the backends it always runs with cost alone.
    overhead
        Measured slowdowns with this backend attached (the figures of docs/benchmarks.md); the plan shows them.
    overhead_note
        What the overhead figures mean, or why there are none.
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
    overhead: tuple[Overhead, ...] = ()
    overhead_note: str = ""
    note: str = ""

    def overhead_text(self) -> str:
        """One line on what attaching the backend costs (measured figures, or why there are none)."""
        parts = [str(o) for o in self.overhead]
        sources = sorted({o.source for o in self.overhead})
        text = ", ".join(parts)
        if self.overhead_note:
            text = f"{text} ({self.overhead_note})" if text else self.overhead_note
        if sources:
            text += f" [{'; '.join(sources)}]"
        return text or f"not measured (cost factor {self.cost_factor:g} assumed)"

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
            cost_factor=1.17,
            overhead=(
                Overhead(LOOP, 1.167, 1.097, 1.228, H200_BLOCKS),
                Overhead(DECODE, 1.092, 1.091, 1.114, H200_BLOCKS),
            ),
            overhead_note="regions recording host.wall, the Python boundary path (no CUPTI)",
        ),
        BackendInfo(
            "cupti",
            "light",
            "CUPTI activity tracing: kernels, memcpy/memset, runtime/driver API, tagged per region instance",
            needs_gpu=True,
            module="argus_lab.backends.cupti.collector",
            holds_cupti=True,
            cost_factor=1.12,
            overhead=(
                Overhead(LOOP, 1.266, 1.212, 1.289, H200_ROUND10),
                Overhead(DECODE, 1.220, 1.152, 1.228, H200_ROUND10),
            ),
            overhead_note=(
                "the timing run, host included: the launch callback on the driver launch calls (each launch on "
                "the thread that made it), C region boundaries and C region(); kernel records alone cost 1.17x loop, "
                "1.14x decode in the same round; cost factor = the timing run over host alone"
            ),
        ),
        BackendInfo(
            "nvml",
            "light",
            "NVML sampling of clocks, power, temperature and utilization on a background thread",
            needs_gpu=True,
            module="argus_lab.backends.nvml",
            cost_factor=1.0,
            overhead_note="not measured; one background thread polls NVML (cost factor 1 assumed)",
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
            overhead_note="counted in replay passes: every profiled kernel runs once per pass",
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
            cost_factor=1.07,
            overhead=(
                Overhead("persistent GEMM, tile marks (kernel time)", 1.016, 1.016, 1.016, DEVICE_PROBE),
                Overhead("persistent GEMM, k-step marks (kernel time)", 1.067, 1.067, 1.067, DEVICE_PROBE),
            ),
            overhead_note=(
                "the instrumented kernel against the clean one, CUDA events, 3072x3072x8192; each run's own figure "
                "is its device.overhead provenance; the CUPTI records the run also takes are not in this figure"
            ),
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


TIMED_LAUNCH_SIGNALS = ("gpu.launch_overhead",)
"""Signals that time each launch call: only the CUPTI collector's launch callback supplies them."""


def cupti_launch_identity(signals: Sequence[str]) -> str:
    """How a CUPTI run ties launches to region instances (the cupti setting ``launch_identity``): ``callbacks``, the
    launch callback, which records each launch on the thread that made it, so that ``exact`` always means "launched
    by the thread whose instance it is, while it was open" (kernels of autograd's thread, of side threads, of two
    threads with regions at once are told apart), at the cost measured in docs/benchmarks.md (round 9: below
    Proton on both workloads).  ``probes`` (one driver call per region boundary, no launch callback) and ``clock``
    (each kernel's ``queued`` stamp) cost less per launch but cannot tell which thread launched; they are asked by
    the setting only (``signals`` is kept for callers that pass it)."""
    del signals
    return "callbacks"


def backend_info(name: str) -> BackendInfo:
    """The declaration of backend ``name``."""
    try:
        return BACKENDS[name]
    except KeyError:
        msg = f"unknown backend {name!r}; known backends: {', '.join(sorted(BACKENDS))}"
        raise KeyError(msg) from None


SETTING_CHOICES: dict[str, dict[str, tuple[str, ...]]] = {
    "cupti": {
        "launch_path": ("native", "python"),
        "native_callback": ("record", "empty"),
        "callback_domains": ("both", "driver"),
        "launch_clock": ("calls", "entries", "outside"),
        "launch_identity": ("clock", "probes", "callbacks"),
        "boundaries": ("native", "python"),
        "detach": ("auto", "always", "never"),
        "decode": ("incremental", "at stop"),
    },
}
"""The settings of a backend that take one of a few values, and those values: checked when a run is planned
(:func:`setting_problems`, by :class:`~argus_lab.plan.model.PlannedRun`) and again by the backend when it starts."""

_SETTING_NOTES = {("cupti", "native_callback"): " (benchmarks)"}


def setting_problem(backend: str, name: str, value: object) -> str | None:
    """Why ``value`` is not a value of the ``backend`` setting ``name`` (``None``: it is, or the setting is free)."""
    choices = SETTING_CHOICES.get(backend, {}).get(name)
    if choices is None or str(value) in choices:
        return None
    quoted = [repr(c) for c in choices]
    either = " or ".join(quoted) if len(quoted) < 3 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    note = _SETTING_NOTES.get((backend, name), "")
    return f"the {backend} setting {name} must be {either}{note}, got {value!r}"


def setting_problems(settings: Mapping[str, Mapping[str, object]]) -> list[str]:
    """Every problem of a run's per-backend settings (see :func:`setting_problem`)."""
    return [
        problem
        for backend, values in settings.items()
        for name, value in values.items()
        if (problem := setting_problem(backend, name, value)) is not None
    ]


__all__ = [
    "BACKENDS",
    "SETTING_CHOICES",
    "TIMED_LAUNCH_SIGNALS",
    "BackendInfo",
    "Overhead",
    "Perturbation",
    "backend_info",
    "conflict_reason",
    "cupti_launch_identity",
    "setting_problem",
    "setting_problems",
]
