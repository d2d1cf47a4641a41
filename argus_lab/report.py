"""The Report: what a measurement found, read back from the evidence store.

A report is a view over some runs of a store (usually the runs of one request).  It reads everything once
when built, so it holds no connection and can be displayed, printed or exported later.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from argus_lab.store import Store, queries
from argus_lab.units import fmt


@dataclass(frozen=True)
class RegionRow:
    """One signal of one region path, over the non-warm-up instances of the report's runs."""

    path: str
    signal: str
    n: int
    instances: int
    median: float
    p25: float
    p75: float
    min: float
    max: float
    unit: str
    runs: str
    attribution: str

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median (0 when the median is 0)."""
        return (self.p75 - self.p25) / self.median if self.median else 0.0


@dataclass(frozen=True)
class RunRow:
    """One run and its provenance."""

    run_id: str
    plan_index: int
    status: str
    backends: tuple[str, ...]
    signals: tuple[str, ...]
    repetitions: int
    warmup: int
    reps_done: int
    seconds: float | None
    workload: str
    command: str
    cause: str
    reason: str
    versions: dict[str, str]
    env: dict[str, str]
    host: str
    settings: dict[str, Any]


class Report:
    """Evidence of some runs of a store, summarised per region.

    Parameters
    ----------
    store
        The evidence store (a :class:`~argus_lab.store.Store` or a path).
    run_ids
        The runs to report on; default: the runs of the latest request in the store.
    """

    def __init__(self, store: Store | str, run_ids: tuple[str, ...] | list[str] | None = None) -> None:
        self.store = store if isinstance(store, Store) else Store(store)
        if run_ids is None:
            latest = self.store.rows(queries.LATEST_REQUEST)
            run_ids = [r[0] for r in self.store.rows(queries.RUNS_OF_REQUEST, [latest[0][0]])] if latest else []
        self.run_ids: tuple[str, ...] = tuple(run_ids)
        ids = list(self.run_ids)
        self.regions: tuple[RegionRow, ...] = tuple(RegionRow(*r) for r in self.store.rows(queries.REGION_SUMMARY,
                                                                                             [ids]))
        self.runs: tuple[RunRow, ...] = tuple(_run_row(r) for r in self.store.rows(queries.RUNS, [ids]))
        self.errors: tuple[tuple[str, int, str], ...] = tuple(self.store.rows(queries.INSTANCE_ERRORS, [ids]))

    # -- text -------------------------------------------------------------------------------------
    def region_table(self) -> str:
        """The region table as text: path, instances, median and spread per signal, unit, origin run."""
        header = ("region", "signal", "instances", "median", "p25..p75", "spread", "origin run")
        rows = [
            (
                r.path,
                r.signal,
                str(r.instances),
                fmt(r.median, r.unit),
                f"{fmt(r.p25, r.unit)}..{fmt(r.p75, r.unit)}",
                f"{100 * r.spread:.1f}%",
                r.runs,
            )
            for r in self.regions
        ]
        return _table(header, rows) if rows else "(no region instances were recorded)"

    def runs_table(self) -> str:
        """One line per run with status, backends and provenance."""
        header = ("#", "run", "status", "backends", "reps", "seconds", "why a separate run")
        rows = [
            (
                str(r.plan_index),
                r.run_id,
                r.status,
                ",".join(r.backends),
                f"{r.reps_done}/{r.repetitions + r.warmup}",
                f"{r.seconds:.2f}" if r.seconds is not None else "-",
                r.reason,
            )
            for r in self.runs
        ]
        return _table(header, rows)

    def coverage(self) -> list[str]:
        """Sentences about what was requested but not collected, and why."""
        out = []
        for r in self.runs:
            if r.status != "ok":
                first = r.cause.splitlines()[0] if r.cause else r.status
                out.append(f"run {r.plan_index} ({', '.join(r.signals)}): {r.status}: {first}")
        out.extend(f"{path}: {n} instance(s) raised: {err}" for path, n, err in self.errors)
        return out

    def provenance_text(self) -> str:
        """The provenance of each run: command, versions, environment, settings."""
        lines = []
        for r in self.runs:
            lines.append(f"run {r.plan_index} {r.run_id} on {r.host}: {r.command or r.workload}")
            lines.append("  versions: " + ", ".join(f"{k} {v}" for k, v in r.versions.items()))
            if r.env:
                lines.append("  env: " + ", ".join(f"{k}={v}" for k, v in r.env.items()))
            if r.settings:
                lines.append("  settings: " + json.dumps(r.settings, sort_keys=True))
        return "\n".join(lines)

    def text(self) -> str:
        """The whole report as text."""
        parts = [self.region_table(), "", self.runs_table()]
        cov = self.coverage()
        if cov:
            parts += ["", "missing coverage:", *(f"  {c}" for c in cov)]
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<argus_lab.Report of {len(self.run_ids)} run(s), {len({r.path for r in self.regions})} region(s)>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": self.text()}


def _run_row(r: tuple[Any, ...]) -> RunRow:
    (run_id, idx, status, backends, signals, reps, warm, done, secs, workload, command, cause, reason, vers, env,
     host, settings) = r
    return RunRow(run_id, idx, status, tuple(backends or ()), tuple(signals or ()), reps, warm, done or 0, secs,
                  workload or "", command or "", cause or "", reason or "", json.loads(vers or "{}"),
                  json.loads(env or "{}"), host or "", json.loads(settings or "{}"))


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
    return "\n".join([line(header), line(tuple("-" * w for w in widths)), *(line(r) for r in rows)])
