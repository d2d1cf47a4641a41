"""The small interface every backend implements, and the declarations the planner reasons over.

A backend is described by a :class:`BackendInfo` (what it perturbs, what it cannot share a run with) and
implemented either as an in-process :class:`Collector` or as a :class:`Launcher` that starts the workload
itself as a child process (Nsight Compute).  The planner only ever reads ``BackendInfo`` values, so a new
backend needs no planner change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from argus_lab.regions import BoundaryHook

Perturbation = Literal["static", "light", "sampling", "replay", "instrumenting"]
Columns = Mapping[str, Sequence[Any]]
Evidence = dict[str, Columns]
"""Tables of evidence keyed by store table name (see :mod:`argus_lab.store.schema`)."""


@dataclass(frozen=True)
class BackendInfo:
    """What the planner knows about a backend.

    Attributes
    ----------
    name
        Short name used in plans and provenance (``host``, ``cupti``, ``ncu`` ...).
    perturbation
        ``static`` (no run of its own), ``light``, ``sampling``, ``replay`` or ``instrumenting``.
    needs_gpu
        Whether it can only collect on a machine with a CUDA driver.
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
    """

    name: str
    perturbation: Perturbation
    description: str
    needs_gpu: bool
    holds_cupti: bool = False
    launches_workload: bool = False
    exclusive: bool = False
    variant: str = ""
    conflicts: frozenset[str] = field(default_factory=frozenset)
    cost_factor: float = 1.0


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
    if a.holds_cupti and b.holds_cupti:
        return f"{a.name} and {b.name} each hold the process's only CUPTI client"
    if a.variant != b.variant:
        return f"{a.name} needs program variant {a.variant or 'plain'!r} and {b.name} needs {b.variant or 'plain'!r}"
    if b.name in a.conflicts or a.name in b.conflicts:
        return f"{a.name} declares a conflict with {b.name}"
    return None


@dataclass(frozen=True)
class RunContext:
    """What a backend is told about the run it takes part in."""

    run_id: str
    signals: tuple[str, ...]
    settings: Mapping[str, Any]
    out_dir: Path


class Collector(Protocol):
    """An in-process backend: started before the workload, stopped after it, then asked for evidence."""

    info: BackendInfo

    def hooks(self) -> Sequence[BoundaryHook]:
        """Region boundary hooks to install while the run records (may be empty)."""

    def start(self, ctx: RunContext) -> None:
        """Begin collecting; raise :class:`~argus_lab.errors.BackendUnavailableError` with a fix if it cannot."""

    def stop(self) -> None:
        """Stop collecting (called also when the workload raised)."""

    def evidence(self, instances: Columns) -> Evidence:
        """Tables to store, given the run's region instances (columns of ``region_instances``)."""


class Launcher(Protocol):
    """A backend that must start the workload itself (e.g. ``ncu`` running a child process)."""

    info: BackendInfo

    def command(self, ctx: RunContext, child: Sequence[str]) -> list[str]:
        """The full command line that runs ``child`` (the argus_lab child-run command) under the tool."""

    def evidence(self, ctx: RunContext, instances: Columns) -> Evidence:
        """Read what the tool wrote into ``ctx.out_dir`` and return tables to store."""
