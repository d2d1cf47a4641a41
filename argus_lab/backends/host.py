"""The host backend: ``host.wall`` and ``host.cpu`` per region instance from the recorder's own clocks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from argus_lab.backends.rows import empty_metrics
from argus_lab.model.batches import BATCH_ROWS, TableBatches
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
        """One ``metrics`` row per instance and requested host signal, made batch by batch when the store writes them
        (:class:`TableBatches`): a run's million instances cost one batch of values, never a Python object a row."""
        import numpy as np

        assert self._ctx is not None, "start() was not called"
        ctx = self._ctx
        wanted = [s for s in ctx.signals if s in _UNITS]
        prov = f"{ctx.run_id}:host"
        ids = np.asarray(instances["instance_id"], np.int64)
        clocks = {k: np.asarray(instances[k], np.int64) for k in ("start_ns", "end_ns", "cpu_ns")}
        n = len(ids)
        metrics: Columns | TableBatches = empty_metrics()
        if n and wanted:

            def make() -> Iterator[Any]:
                for sig in wanted:
                    for lo in range(0, n, BATCH_ROWS):
                        hi = min(lo + BATCH_ROWS, n)
                        yield _batch(ctx.run_id, prov, sig, ids[lo:hi], _values(sig, clocks, lo, hi))

            metrics = TableBatches(n * len(wanted), make)
        provenance = {
            "provenance_id": [prov],
            "run_id": [ctx.run_id],
            "backend": ["host"],
            "backend_version": ["time.time_ns/thread_time_ns"],
            "settings": ["{}"],
            "clocks": ['{"host_clock": "CLOCK_REALTIME", "cpu_clock": "thread CPU time"}'],
            "timestamps": ["measured"],
        }
        return {"metrics": metrics, "provenance": provenance}


def _values(sig: str, clocks: dict[str, Any], lo: int, hi: int) -> Any:
    """Rows ``[lo, hi)`` of ``sig``'s values (ns, as float64)."""
    if sig == "host.wall":
        return (clocks["end_ns"][lo:hi] - clocks["start_ns"][lo:hi]).astype("float64")
    return clocks["cpu_ns"][lo:hi].astype("float64")


def _batch(run_id: str, prov: str, sig: str, ids: Any, values: Any) -> Any:
    """One Arrow batch of ``metrics`` rows of one signal (text columns dictionary-encoded: one value each)."""
    import pyarrow as pa

    from argus_lab.regions.instance_columns import constant

    m = len(ids)
    return pa.record_batch(
        {
            "run_id": constant(run_id, m),
            "instance_id": pa.array(ids),
            "kernel_key": pa.nulls(m, pa.string()),
            "signal": constant(sig, m),
            "value": pa.array(values),
            "unit": constant(_UNITS[sig], m),
            "backend": constant("host", m),
            "provenance_id": constant(prov, m),
        }
    )


def make() -> HostCollector:
    """A new host collector."""
    return HostCollector()
