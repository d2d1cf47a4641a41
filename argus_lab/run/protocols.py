"""The small interface every backend implements: what a run tells a backend, and what it asks of it.

A backend is either an in-process :class:`Collector` (started before the workload, stopped after it, then asked
for evidence) or a :class:`Launcher` that starts the workload itself as a child process (Nsight Compute).  The
declarations the planner reasons over live upstream, in :mod:`argus_lab.plan.backends`; the implementations live
downstream, in :mod:`argus_lab.backends`, and import this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from argus_lab.model.batches import TableBatches
from argus_lab.plan.backends import BackendInfo
from argus_lab.regions import BoundaryHook

Columns = Mapping[str, Sequence[Any]]
Evidence = dict[str, Columns | TableBatches]
"""Tables of evidence keyed by store table name (see :mod:`argus_lab.model.schema`): columns, or rows made in batches
(a timing run's kernel records, :class:`~argus_lab.model.batches.TableBatches`)."""


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
        """Tables to store, given the run's region instances (columns of ``region_instances``).

        A collector whose evidence depends on the instances alone may say so with a class attribute
        ``per_repetition = True``: a child run then asks it once per finished repetition (for that repetition's
        instances) and writes the result with the repetition's shard, and not again at the end.
        """


class Launcher(Protocol):
    """A backend that must start the workload itself (e.g. ``ncu`` running a child process)."""

    info: BackendInfo

    def command(self, ctx: RunContext, child: Sequence[str]) -> list[str]:
        """The full command line that runs ``child`` (the argus_lab child-run command) under the tool."""

    def evidence(self, ctx: RunContext, instances: Columns) -> Evidence:
        """Read what the tool wrote into ``ctx.out_dir`` and return tables to store."""


__all__ = ["Collector", "Columns", "Evidence", "Launcher", "RunContext"]
