"""The Report: what a measurement found, read back from the evidence store.

A report is a view over some runs of a store (usually the runs of one request).  It reads its tables when
built (the per-kernel and compiler tables, which scan every kernel record, on first use) and holds no
connection, so it can be displayed, printed or exported later.  Its tables:

``regions``      per region path and signal: inclusive and exclusive values, median and spread over instances and
                 over repetitions, unit, attribution shares, provenance ids (:class:`RegionRow`)
``kernels``      per (run, path, kernel ordinal, name): launches and durations, with ncu counters joined by
                 ordinal (:class:`KernelRow`)
``counters``     hardware counters (``hw:``/``pm:``) per region path, with the settings they were read under
``compiler``     static kernel facts and the region paths that ran each kernel
``attribution``  per evidence kind: the share that is exact/ordinal/temporal/ambiguous/unattributed/mismatch
``matches``      instance matching of each run against the reference (timing) run: which instances matched
``groups``       region paths whose instances ran different kernel sequences (first-call autotuning, lazy
                 initialisation, compilation): one row per group, the majority first, with per-group medians
``clocks``       clocks, power and temperature seen during the runs
``ranks``        multi-rank runs: per region path the cross-rank skew of its occurrences (median, max)
``clock_offsets`` each rank's host-clock offset against rank 0, before and after the workload, with uncertainty
``device``       instrumented runs: dev.* per host region path, kernel and device region, over launches
                 (:class:`DeviceRow`; :mod:`argus_lab.report.device`)
``device_overhead`` the instrumented variant's kernel time against the clean variant's, per kernel
``provenance``   every backend's provenance record (run, backend and version, settings, clocks, timestamps)
``runs``         the runs with status, backends, commands and versions

Every table is available as polars (:meth:`Report.to_polars`) and in the JSON form for agents
(:meth:`Report.to_json`, docs/report-json.md).  :meth:`Report.trace` runs the documented provenance query.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, get_args

from argus_lab.errors import StoreError
from argus_lab.model.vocabulary import CLASS_MEANINGS
from argus_lab.plan.scope import Scope
from argus_lab.report import coverage
from argus_lab.report import device as dev
from argus_lab.report import rows as rt
from argus_lab.report import runs as queries
from argus_lab.report import text as txt
from argus_lab.report.device import DeviceRow, OverheadRow
from argus_lab.report.diff import ReportDiff, compare
from argus_lab.report.kernel_summary import SUMMARY_ROWS, KernelSummary, read_kernel_summary
from argus_lab.report.rows import (
    AttributionRow,
    ClockOffsetRow,
    ClockRow,
    CompilerRow,
    CounterRow,
    InstanceGroupRow,
    KernelRow,
    MatchRow,
    ProvenanceRow,
    RankRow,
    RegionRow,
    RunRow,
)
from argus_lab.report.scope_sql import ScopeFilter, conjoin, kernel_predicate
from argus_lab.report.sql import JOINED, RUN_PATHS, TRACE
from argus_lab.store import Store

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

KERNEL_TEXT_ROWS = 40
"""Kernel rows the report's text shows (the rest are counted)."""

RENDERER = "argus_lab.views.bundle"
"""The module whose ``mimebundle(report)`` displays a Report in Jupyter, named like a backend's implementation:
the views are downstream of the report, so the report loads its renderer by name instead of importing it."""

TableName = Literal[
    "regions",
    "kernels",
    "counters",
    "compiler",
    "attribution",
    "matches",
    "groups",
    "clocks",
    "provenance",
    "runs",
    "ranks",
    "clock_offsets",
    "device",
    "device_overhead",
]
TABLES: tuple[TableName, ...] = get_args(TableName)

__all__ = [
    "TABLES",
    "AttributionRow",
    "ClockOffsetRow",
    "ClockRow",
    "CompilerRow",
    "CounterRow",
    "DeviceRow",
    "InstanceGroupRow",
    "KernelRow",
    "MatchRow",
    "OverheadRow",
    "ProvenanceRow",
    "RankRow",
    "RegionRow",
    "Report",
    "RunRow",
    "TableName",
]


class Report:
    """Evidence of some runs of a store, summarised per region.

    Parameters
    ----------
    store
        The evidence store (a :class:`~argus_lab.store.Store` or a path).
    run_ids
        The runs to report on; default: the runs of the latest request in the store.
    scope
        Scope text (docs/scopes.md) applied on top of each run's request scope, e.g. ``"ranks=1"`` or
        ``"step/**; ranks=0"``: the tables, the timeline and the views cover only the instances (and the kernels of
        the ranks, devices and streams) it selects.  :meth:`scoped` makes such a report from another one.

    A Report only reads: it never runs the join nor takes the store's write lock.  The join runs where the runs end
    (:func:`argus_lab.app.measure.run_plan`, ``argus-lab join``); runs it has not processed yet are listed in
    :attr:`pending`, and :meth:`coverage` says how to join them.
    """

    def __init__(
        self,
        store: Store | str,
        run_ids: tuple[str, ...] | list[str] | None = None,
        scope: str | Scope | None = None,
    ) -> None:
        self.store = store if isinstance(store, Store) else Store(store)
        view = Scope.parse(scope)  # a malformed scope is refused here, with its caret message
        self.view_scope: str = str(view)
        """The scope given to this report (``""`` = none), applied on top of the requests' scopes."""
        if run_ids is None:
            run_ids = queries.latest_runs(self.store)
        self.run_ids: tuple[str, ...] = tuple(run_ids)
        ids = list(self.run_ids)
        self.notes: list[str] = []
        self.warnings: tuple[str, ...] = ()
        """Sentences that change how every number of the report reads (another CUPTI client in the measured process:
        what it did to the times, and the fix); the text, JSON and HTML forms put them first."""
        self.runs: tuple[RunRow, ...] = rt.read_runs(self.store, ids)
        self.errors: tuple[tuple[str, int, str], ...] = tuple(
            (r["path"], int(r["n"]), r["error"]) for r in self.store.records(queries.INSTANCE_ERRORS, [ids])
        )
        self.finished: tuple[tuple[str, int, int, float, int], ...] = ()
        """Per region path, every instance that finished (warm-up included): ``(path, instances, warm-up
        instances, median wall ns, instances that raised)``; it shows what a run that failed early still
        measured, when the region table (measured repetitions only) is empty."""
        if ids:
            self.finished = tuple(
                (r["path"], int(r["n"]), int(r["warmup"]), float(r["wall_ns"] or 0), int(r["raised"]))
                for r in self.store.records(queries.FINISHED_INSTANCES, [ids])
            )
        self.pending: tuple[str, ...] = self._pending(ids)
        """The runs the join has not processed yet (their evidence has no values; :meth:`coverage` says how to join)."""
        joined = bool(ids) and not self.pending
        self.regions: tuple[RegionRow, ...] = ()
        self.counters: tuple[CounterRow, ...] = ()
        self._joined_ok = False
        self.attribution: tuple[AttributionRow, ...] = ()
        self.matches: tuple[MatchRow, ...] = ()
        self.clocks: tuple[ClockRow, ...] = ()
        self.provenance: tuple[ProvenanceRow, ...] = ()
        self.ranks: tuple[RankRow, ...] = ()
        self.clock_offsets: tuple[ClockOffsetRow, ...] = ()
        self._values: dict[tuple[str, str], np.ndarray] = {}
        self._units: dict[tuple[str, str], str] = {}
        self.scopes: dict[str, str] = {}
        """The scope of each run's request (canonical text; ``""`` = everything); the tables cover only it."""
        self._scope_sql: ScopeFilter | None = None
        self.kernel_scope: ScopeFilter | None = None
        """A predicate over ``kernels`` rows (alias ``k``) for the ranks, devices and streams in scope."""
        if not ids:
            return
        self.provenance = rt.read_provenance(self.store, ids)
        self.notes.extend(coverage.parent_cycles(self.provenance))
        self.warnings = tuple(coverage.other_cupti_clients(self.provenance))
        self.clock_offsets = rt.clock_offsets(self.provenance)
        requested = rt.read_scope_map(self.store, ids)
        self.scopes = {r: str(s) for r, s in requested.items()}
        self._scope_sql = rt.scope_predicate(self.store, ids, requested)
        self.kernel_scope = kernel_predicate(requested)
        if not view.is_everything:
            given = dict.fromkeys(ids, view)
            self._scope_sql = conjoin(self._scope_sql, rt.scope_predicate(self.store, ids, given))
            self.kernel_scope = conjoin(self.kernel_scope, kernel_predicate(given))
        if joined:
            summary = rt.read_summary(self.store, ids, self._scope_sql)
            self.regions = summary.regions
            self.counters = rt.with_settings(summary.counters, self.provenance)
            self._values, self._units = summary.values, summary.units
            self._joined_ok = True
            self.attribution = rt.read_attribution(self.provenance)
            self.matches = rt.read_matches(self.store, ids, self._scope_sql)
            self.clocks = rt.read_clocks(self.store, ids)
            self.ranks = rt.read_ranks(self.store, ids, self._scope_sql)

    @property
    def scope_filter(self) -> ScopeFilter | None:
        """The predicate over ``region_instances`` rows (alias ``i``) of the instances in scope (``None``: all):
        the requests' scopes and the report's own (views apply it with :func:`argus_lab.report.scope_sql.scoped`)."""
        return self._scope_sql

    def scoped(self, scope: str | Scope) -> Report:
        """The same runs with ``scope`` as the report's own scope, in place of this report's (the requests' scopes
        still apply underneath), e.g. ``report.scoped("ranks=1")``."""
        return Report(self.store, self.run_ids, scope=scope)

    @functools.cached_property
    def kernels(self) -> tuple[KernelRow, ...]:
        """The per-kernel table, every row (read on first use: it is the one table that scans every kernel record; a
        long run's table can hold hundreds of thousands of rows: the text, the views and the panel read
        :meth:`kernel_summary`, :meth:`first_kernels` or :meth:`path_kernels`, within bounds)."""
        return rt.read_kernels(self.store, list(self.run_ids), self._scope_sql) if self._joined_ok else ()

    def first_kernels(self, limit: int) -> tuple[KernelRow, ...]:
        """The first ``limit`` rows of :attr:`kernels`, read alone when the table has not been read yet (a long run's
        table can hold millions of rows; a view shows a few thousand)."""
        if "kernels" in vars(self) or not self._joined_ok:
            return self.kernels[:limit]
        return rt.read_kernels(self.store, list(self.run_ids), self._scope_sql, limit)

    def kernel_summary(self, limit: int = SUMMARY_ROWS) -> KernelSummary:
        """The first ``limit`` rows of :attr:`kernels` in the main kernel-sequence groups, how many such rows there are
        and what the other groups add up to per region path: read within bounds (the rest counted and summed in
        DuckDB) when the table has not been read whole; what the kernel table's text shows."""
        if "kernels" in vars(self) or not self._joined_ok:
            return KernelSummary.of(self.kernels, limit)
        return read_kernel_summary(self.store, list(self.run_ids), self._scope_sql, limit)

    def path_kernels(self, path: str, limit: int) -> tuple[KernelRow, ...]:
        """The first ``limit`` rows of :attr:`kernels` of one region path, read alone when the table has not been read
        whole."""
        if "kernels" in vars(self) or not self._joined_ok:
            return tuple(k for k in self.kernels if k.path == path)[:limit]
        return rt.read_kernels(self.store, list(self.run_ids), self._scope_sql, limit, path=path)

    def other_kernel_groups(self) -> dict[str, tuple[int, int]]:
        """Per region path, the launches and distinct kernels of its :attr:`kernels` rows outside its main
        kernel-sequence group (``main_group`` false): every row counted, summed in DuckDB when the table has not
        been read."""
        if "kernels" in vars(self) or not self._joined_ok:
            return KernelSummary.of(self.kernels, 0).other_groups
        return rt.read_other_kernel_groups(self.store, list(self.run_ids), self._scope_sql)

    @functools.cached_property
    def groups(self) -> tuple[InstanceGroupRow, ...]:
        """Region paths whose measured instances ran different kernel sequences, one row per group (read on first
        use); :meth:`heterogeneity` words them."""
        return rt.read_groups(self.store, list(self.run_ids), self._scope_sql) if self._joined_ok else ()

    def heterogeneity(self) -> list[str]:
        """One sentence per instance group that differs from its region's majority, e.g. ``matmul (run r-1):
        instance 0: 1,895 kernels, 364 ms, a different kernel sequence (the other 3 instances: 1 kernel, 203 µs
        each)``."""
        return [f"{g.path} (run {g.run_id}): {g.note}" for g in self.groups if not g.majority]

    @functools.cached_property
    def compiler(self) -> tuple[CompilerRow, ...]:
        """Compiler facts per kernel function (read on first use)."""
        return rt.read_compiler(self.store, list(self.run_ids), self._scope_sql) if self._joined_ok else ()

    @functools.cached_property
    def device(self) -> tuple[DeviceRow, ...]:
        """dev.* values of instrumented runs per host region path, kernel and device region (read on first use)."""
        return dev.read_device(self.store, list(self.run_ids)) if self._joined_ok else ()

    @functools.cached_property
    def device_overhead(self) -> tuple[OverheadRow, ...]:
        """The instrumented variant's overhead per kernel (from the join's provenance of each instrumented run)."""
        return dev.read_overhead(self.provenance)

    def _pending(self, ids: list[str]) -> tuple[str, ...]:
        """Runs of ``ids`` without the join's provenance row (all of them for a store older than the join)."""
        if not ids:
            return ()
        try:
            done = {r["run_id"] for r in self.store.records(JOINED, [ids])}
        except StoreError:
            raise
        except Exception as exc:  # a store written before the join existed (missing tables)
            self.notes.append(f"this store has no join results ({exc})")
            done = set()
        known = [r.run_id for r in self.runs]
        return tuple(r for r in known if r not in done)

    # -- text -------------------------------------------------------------------------------------
    def region_table(self) -> str:
        """The region table as text: path, signal, instances, median, spread, exclusive, attribution, run.

        Without measured instances it lists the instances that finished anyway (warm-up, or before a failure)."""
        if not self.regions and self.counters:
            paths = sorted({c.path for c in self.counters})
            return (
                f"(these runs measured hardware counters only, for {len(paths)} region path(s): they are in the "
                "counters table; add gpu.time or host.wall to the request for times)"
            )
        if not self.regions and self.finished and not self.pending:
            return txt.finished(self.finished)
        return txt.regions(self.regions, self.warmup_instances())

    def kernel_table(self, limit: int = KERNEL_TEXT_ROWS) -> str:
        """The per-kernel table as text (the first ``limit`` rows; the rest counted: :meth:`kernel_summary`)."""
        return txt.kernels(self.kernel_summary(limit), limit, self.warmup_instances())

    @functools.cached_property
    def _warmup_by_run(self) -> dict[tuple[str, str], int]:
        if not self.run_ids:
            return {}
        rows = self.store.records(RUN_PATHS, [list(self.run_ids)])
        return {(r["run_id"], r["path"]): int(r["warmup"]) for r in rows}

    def warmup_instances(self) -> dict[str, int]:
        """Per region path, its warm-up instances in the runs its region rows come from (every run of the report for
        a path without rows): kept apart, never in the statistics; the tables' ``warm-up`` column."""
        runs_of: dict[str, set[str]] = {}
        for r in self.regions:
            runs_of.setdefault(r.path, set()).update(x for x in r.runs.split(",") if x)
        out: dict[str, int] = {}
        for (run, path), warm in self._warmup_by_run.items():
            if path not in runs_of or run in runs_of[path]:
                out[path] = out.get(path, 0) + warm
        return out

    def counter_table(self) -> str:
        """Hardware counters per region as text."""
        return txt.counters(self.counters)

    def compiler_table(self) -> str:
        """Compiler facts per kernel function as text."""
        return txt.compiler(self.compiler)

    def attribution_table(self) -> str:
        """The attribution summary as text."""
        return txt.attribution(self.attribution)

    def device_table(self) -> str:
        """Device regions (dev.* per host region, kernel and device region) as text."""
        return dev.table(self.device)

    def rank_table(self) -> str:
        """Cross-rank skew per region and the clock offsets behind it, as text."""
        return txt.ranks(self.ranks, self.clock_offsets)

    def matching_lines(self) -> list[str]:
        """Which instances of each replay run (and of any run with a mismatch) matched the timing run."""
        replay = {r.run_id for r in self.runs if any(b in rt.REPLAY_BACKENDS for b in r.backends)}
        shown = {m.run_id for m in self.matches if m.status != "match"} | replay
        return coverage.match_lines([m for m in self.matches if m.run_id in shown])

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
        return txt.table(header, rows)

    def coverage(self) -> list[str]:
        """Sentences about what was requested but not collected or not attributed, and why (:mod:`.coverage`)."""
        return coverage.sentences(self)

    def provenance_text(self) -> str:
        """The provenance of each run: command, versions, environment, settings, and each backend's record."""
        lines = []
        by_run: dict[str, list[ProvenanceRow]] = {}
        for p in self.provenance:
            by_run.setdefault(p.run_id, []).append(p)
        for r in self.runs:
            lines.append(f"run {r.plan_index} {r.run_id} on {r.host}: {r.command or r.workload}")
            lines.append("  versions: " + ", ".join(f"{k} {v}" for k, v in r.versions.items()))
            if r.env:
                lines.append("  env: " + ", ".join(f"{k}={v}" for k, v in r.env.items()))
            if r.settings:
                lines.append("  settings: " + json.dumps(r.settings, sort_keys=True))
            for p in by_run.get(r.run_id, []):
                lines.append(f"  [{p.provenance_id}] {p.backend_version or p.backend}; timestamps: {p.timestamps}")
                if p.clocks:
                    lines.append("    clocks: " + json.dumps(p.clocks, sort_keys=True))
        if self.clocks:
            lines += ["clocks seen:", txt.clocks(self.clocks)]
        return "\n".join(txt.escape(ln) for ln in lines)

    def text(self) -> str:
        """The whole report as text."""
        scopes = sorted({s for s in self.scopes.values() if s})
        if self.view_scope:
            scopes = [f"({s}) and ({self.view_scope})" for s in scopes] if scopes else [self.view_scope]
        parts = [txt.line(f"scope: {'; or '.join(scopes)} (instances outside it are left out)"), ""] if scopes else []
        parts = [*(txt.line(f"NOTE: {s}") for s in coverage.stale_join(str(self.store.path), self.provenance)), *parts]
        for w in self.warnings:  # whole, wrapped: they say what happened to every number below, and the fix
            parts += [*txt.wrapped(f"warning: {w}"), ""]
        parts.append(self.region_table())
        differ = self.heterogeneity()
        if differ:
            parts += [
                "",
                "instances that ran a different kernel sequence (left out of the medians above, which are each "
                "region's main group; Report.groups has every group's values):",
                *(f"  {d}" for d in differ),
            ]
        shown = self.kernel_summary(KERNEL_TEXT_ROWS)
        sections: tuple[tuple[str, Any, Callable[[], str]], ...] = (
            ("kernels", shown, lambda: txt.kernels(shown, KERNEL_TEXT_ROWS, self.warmup_instances())),
            ("counters", self.counters, self.counter_table),
            ("compiler facts", self.compiler, self.compiler_table),
            ("attribution", self.attribution, self.attribution_table),
            ("ranks (skew of each occurrence: its largest lag over the ranks)", self.ranks, self.rank_table),
            ("device regions (instrumented runs; GPU ns)", self.device, self.device_table),
            ("instrumented variant overhead", self.device_overhead, lambda: dev.overhead_table(self.device_overhead)),
        )
        for title, rows, render in sections:
            if rows:
                parts += ["", f"{title}:", render()]
                if title == "attribution":
                    parts += ["classes:", *(f"  {c}: {m}" for c, m in CLASS_MEANINGS.items())]
        matching = self.matching_lines()
        if matching:
            parts += ["", "instance matching (replay runs against the timing run):", *(f"  {m}" for m in matching)]
        parts += ["", self.runs_table()]
        cov = self.coverage()
        if cov:
            parts += ["", "missing coverage:", *(f"  {txt.line(c)}" for c in cov)]
        return "\n".join(parts)

    # -- machine-readable forms -------------------------------------------------------------------
    def rows(self, table: TableName) -> tuple[Any, ...]:
        """The rows of one table (dataclass values)."""
        if table not in TABLES:
            msg = f"unknown report table {table!r}; the tables are: {', '.join(TABLES)}"
            raise ValueError(msg)
        return tuple(getattr(self, table))

    def to_polars(self, table: TableName = "regions") -> pl.DataFrame:
        """One table as a polars DataFrame (``TABLES`` lists them); nested values become structs/lists."""
        import polars as pl

        from argus_lab.report.json import clean

        rows = [clean(r) for r in self.rows(table)]
        for r in rows:  # dict columns with varying keys (shares, counters, settings) travel as JSON text
            for k, v in r.items():
                if isinstance(v, dict):
                    r[k] = json.dumps(v, sort_keys=True)
        if not rows:
            return pl.DataFrame()
        return pl.DataFrame(rows, infer_schema_length=None)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object for optimization agents (schema ``argus_lab.report-json/1``, docs/report-json.md)."""
        from argus_lab.report.json import build

        return build(self)

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False, allow_nan=False)

    def trace(self, path: str, signal: str) -> list[dict[str, Any]]:
        """Provenance of every instance value behind one region row: run, backend and version, settings,
        clocks, timestamp kind, command and the join's rules (the query is ``report.sql.TRACE``)."""
        cols = [
            "run_id",
            "instance_id",
            "repetition",
            "signal",
            "inclusive",
            "exclusive",
            "unit",
            "backend",
            "w_exact",
            "w_ordinal",
            "w_temporal",
            "w_ambiguous",
            "w_mismatch",
            "provenance_id",
            "measured_in_run",
            "backend_version",
            "settings",
            "clocks",
            "timestamps",
            "command",
            "versions",
            "host",
            "join_rules",
        ]
        return [dict(zip(cols, r, strict=True)) for r in self.store.rows(TRACE, [list(self.run_ids), path, signal])]

    def values(self, path: str, signal: str) -> np.ndarray | None:
        """The per-instance inclusive values behind one region row (warm-up excluded): what :meth:`diff` judges."""
        return self._values.get((path, signal))

    def diff(self, other: Report) -> ReportDiff:
        """What changed from this report (the base) to ``other`` beyond run-to-run noise (rule: diff.RULE)."""
        units = {**other._units, **self._units}
        return ReportDiff(self.run_ids, other.run_ids, compare(self._values, other._values, units))

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<argus_lab.Report of {len(self.run_ids)} run(s), {len({r.path for r in self.regions})} region(s)>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The argus JSON, text and HTML fallback; the views own the look (:data:`RENDERER`)."""
        renderer = importlib.import_module(RENDERER)
        bundle: dict[str, Any] = renderer.mimebundle(self)
        return bundle
