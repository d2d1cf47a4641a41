"""The host backend: ``host.wall`` and ``host.cpu`` per region instance from the recorder's own clocks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from argus_lab.backends.rows import empty_metrics
from argus_lab.plan.backends import BACKENDS, BackendInfo
from argus_lab.regions import BoundaryHook
from argus_lab.run.protocols import Columns, Evidence, RunContext

_UNITS = {"host.wall": "ns", "host.cpu": "ns"}


class HostCollector:
    """Derives host signals from the region instances; needs no hooks of its own."""

    info: BackendInfo = BACKENDS["host"]
    per_repetition = True
    """Its values come from the instances alone: a child run writes them with each repetition's shard, so a child
    that dies keeps the values of the repetitions it finished."""

    def __init__(self) -> None:
        self._ctx: RunContext | None = None

    def hooks(self) -> Sequence[BoundaryHook]:
        """No boundary hooks: the recorder already reads the host clocks."""
        return ()

    def start(self, ctx: RunContext) -> None:
        """Remember the run."""
        self._ctx = ctx

    def stop(self) -> None:
        """Nothing to stop."""

    def evidence(self, instances: Columns) -> Evidence:
        """One ``metrics`` row per instance and requested host signal."""
        assert self._ctx is not None, "start() was not called"
        ctx = self._ctx
        wanted = [s for s in ctx.signals if s in _UNITS]
        ids = list(instances["instance_id"])
        values: dict[str, list[float]] = {
            "host.wall": [float(e - s) for s, e in zip(instances["start_ns"], instances["end_ns"], strict=True)],
            "host.cpu": [float(c) for c in instances["cpu_ns"]],
        }
        prov = f"{ctx.run_id}:host"
        cols: dict[str, list[Any]] = empty_metrics()
        for sig in wanted:
            n = len(ids)
            cols["run_id"] += [ctx.run_id] * n
            cols["instance_id"] += ids
            cols["kernel_key"] += [None] * n
            cols["signal"] += [sig] * n
            cols["value"] += values[sig]
            cols["unit"] += [_UNITS[sig]] * n
            cols["backend"] += ["host"] * n
            cols["provenance_id"] += [prov] * n
        provenance = {
            "provenance_id": [prov],
            "run_id": [ctx.run_id],
            "backend": ["host"],
            "backend_version": ["time.time_ns/thread_time_ns"],
            "settings": ["{}"],
            "clocks": ['{"host_clock": "CLOCK_REALTIME", "cpu_clock": "thread CPU time"}'],
            "timestamps": ["measured"],
        }
        return {"metrics": cols, "provenance": provenance}


def make() -> HostCollector:
    """A new host collector."""
    return HostCollector()
