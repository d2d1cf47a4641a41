"""The rows of the Report's tables (frozen dataclasses) and how they are read from the store.

Each ``read_*`` function takes the store and the report's run ids and returns a tuple of rows; nothing here
keeps a connection.  Shares are fractions (0..1) of the evidence weight behind a value, by attribution class.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa

from argus_lab.join.skew import RANKS
from argus_lab.model.vocabulary import CLASSES
from argus_lab.plan.backends import BACKENDS
from argus_lab.plan.catalog import aggregation
from argus_lab.plan.scope import Scope
from argus_lab.report import sql as q
from argus_lab.report.runs import RUNS
from argus_lab.report.scope_sql import ScopeFilter, conjoin, predicate, scoped
from argus_lab.store import Store

Shares = dict[str, float]
T = TypeVar("T")


@dataclass(frozen=True)
class RegionRow:
    """One signal of one region path, over the non-warm-up instances of its run of record.

    ``median``/``p25``/``p75``/``min``/``max`` are over instances of the *inclusive* value (the instance with
    its nested instances); ``exclusive_*`` leave nested instances out (``None`` for non-additive signals);
    ``rep_*`` are over repetitions of the per-repetition total (sum over the path's instances in a
    repetition; mean for levels such as W or MHz).
    """

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
    exclusive_median: float | None = None
    exclusive_p25: float | None = None
    exclusive_p75: float | None = None
    reps: int = 0
    rep_median: float | None = None
    rep_p25: float | None = None
    rep_p75: float | None = None
    shares: Shares = field(default_factory=dict)
    backend: str = ""
    provenance: tuple[str, ...] = ()
    agg: str = "sum"
    """How the signal combines over kernels and instances (``plan.catalog.Aggregation``): ``rep_*`` follow it."""

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


@dataclass(frozen=True)
class KernelRow:
    """Launches of one kernel at one place: (run, region path, ordinal within the instance, name)."""

    run_id: str
    path: str
    ordinal: int | None
    name: str
    launches: int
    median_ns: float
    p25_ns: float
    p75_ns: float
    min_ns: float
    max_ns: float
    total_ns: float
    grid: str
    block: str
    registers: int | None
    classes: str
    counters: dict[str, tuple[float, str]] = field(default_factory=dict)
    """``{hw signal: (median over matched ncu kernels, unit)}``, joined by ordinal."""
    display_name: str = ""
    """The name as tables show it (demangled, shortened: :func:`argus_lab.report.names.display_name`); ``name`` is
    the name exactly as recorded (mangled for C++ kernels)."""
    main_group: bool = True
    """False for launches of instances outside their path's main kernel-sequence group (``Report.groups``: e.g. a
    first call that autotuned): tables show them collapsed, apart from the main group's."""


@dataclass(frozen=True)
class CounterRow:
    """A hardware counter (``hw:`` from ncu, ``pm:`` from PM sampling) of one region path."""

    path: str
    signal: str
    instances: int
    median: float | None
    p25: float | None
    p75: float | None
    exclusive_median: float | None
    unit: str
    shares: Shares
    runs: str
    provenance: tuple[str, ...]
    settings: str
    """The measuring backend's settings that change what the counter reads (replay, clocks, caches)."""
    agg: str = "sum"
    """How the counter combines over kernels and instances (``plan.catalog.Aggregation``)."""
    kernel_range: tuple[float, float] | None = None
    """For a per-kernel fact (``agg == "fact"``: a launch attribute): its smallest and largest value over the path's
    measured kernels."""


@dataclass(frozen=True)
class CompilerRow:
    """Static facts of one compiled kernel binary, with where it ran.

    Triton kernels have one row per binary (name + hash: an autotuner's configurations are separate rows); the join
    links each launch to the binary that ran by the launch record's registers, shared memory and block size.
    ``spill_words`` is local memory in 4-byte words per thread (spills and local arrays).  ``ran_in`` says where
    the binary ran (``matmul #1-3`` = measured instances 1 to 3 of ``matmul``; ``+1 other`` = instances outside
    the measured scope, e.g. the autotuner's benchmarks in a skipped first instance); ``measured`` is whether it
    ran in a measured instance of the report's scope (``None`` when the join linked no launch to it).
    """

    name: str
    source: str
    registers: int | None
    spill_words: int | None
    shared_bytes: int | None
    num_warps: int | None
    num_stages: int | None
    sass_instructions: int | None
    unavailable: str
    run_id: str
    paths: str
    display_name: str = ""
    binary_hash: str = ""
    config: dict[str, Any] | None = None
    sass_mix: dict[str, int] | None = None
    origin: str = ""
    threads: int | None = None
    ran_in: str = ""
    measured: bool | None = None


@dataclass(frozen=True)
class AttributionRow:
    """How one kind of evidence was attributed: items, and shares of its weight per class."""

    evidence: str
    signals: str
    items: int
    shares: Shares
    time_shares: Shares | None = None
    """For kernel records: shares of kernel *time* per class."""


@dataclass(frozen=True)
class ProvenanceRow:
    """One provenance record: who measured (backend, version), how (settings), clocks, timestamp kind."""

    provenance_id: str
    run_id: str
    backend: str
    backend_version: str
    settings: dict[str, Any]
    clocks: dict[str, Any]
    timestamps: str


@dataclass(frozen=True)
class ClockRow:
    """Clocks, power and temperature seen during a run (NVML samples)."""

    run_id: str
    signal: str
    samples: int
    min: float
    median: float
    max: float
    unit: str


@dataclass(frozen=True)
class MatchRow:
    """How the instances of one region path of one run matched the reference (timing) run.

    ``status`` is ``match`` (an ncu run's counters of these instances are used), ``mismatch`` (the instances' kernel
    sequence differed: ``difference`` gives the first one; their counters are kept but give no value) or
    ``missing`` (an instance only one of the runs has).  ``indexes`` lists the instances as the scope counts them
    (measured instances of the path from 0), e.g. ``1-3``; warm-up instances never take part.
    """

    run_id: str
    ref_run_id: str
    status: str
    instances: int
    example_path: str
    difference: str
    indexes: str = ""


@dataclass(frozen=True)
class InstanceGroupRow:
    """Instances of one region path (in one run) that launched the same kernel sequence.

    Only paths whose measured instances fall into more than one group are listed.  Group 0 is the majority (the
    steady state; on a tie, the group that ran last); the others differ from it: first-call autotuning, lazy
    initialisation, compilation, a data-dependent branch.  ``values`` holds the median of each signal over the
    group's instances, so a region's statistics can be read per group.
    """

    path: str
    run_id: str
    group: int
    majority: bool
    instances: int
    indexes: str
    """The group's instances as the scope counts them (measured instances of the path from 0), e.g. ``0`` or ``1-3``."""
    kernels: int
    """Kernels each instance of the group launched (its nested instances included)."""
    values: dict[str, tuple[float | None, str]] = field(default_factory=dict)
    signature: str = ""
    note: str = ""
    """One sentence, e.g. ``instance 0: 1,895 kernels, 364 ms, a different kernel sequence (...)``."""


@dataclass(frozen=True)
class RankRow:
    """Cross-rank skew of one region path (multi-rank runs): over its occurrences, where an occurrence is the
    same (run, repetition, n-th instance of the path on each rank) on every rank and its skew is its largest
    lag (``rank.start_lag`` / ``rank.end_lag``) over the ranks, on rank 0's clock."""

    path: str
    ranks: int
    occurrences: int
    start_skew_median: float | None
    start_skew_max: float | None
    end_skew_median: float | None
    end_skew_max: float | None
    last_to_start: int | None
    """The rank that most often entered last."""
    last_to_end: int | None
    """The rank that most often left last."""
    runs: str
    unit: str = "ns"


@dataclass(frozen=True)
class ClockOffsetRow:
    """One rank's host-clock offset against rank 0 in one phase (``before``/``after`` the workload).

    ``rank-0 time = rank time + offset_ns``, within ``± uncertainty_ns``; ``status`` is ``reference`` (rank 0),
    ``estimated`` or ``not estimated`` (then ``reason`` says why and the rank's lags are uncorrected).
    """

    run_id: str
    rank: int
    phase: str
    status: str
    offset_ns: int | None
    uncertainty_ns: int | None
    round_trip_ns: int | None
    samples: int
    reason: str
    provenance_id: str


EVIDENCE_SIGNALS = {
    "instance": "host.*",
    "kernel": "gpu.time, gpu.kernels, gpu.span",
    "memcpy": "gpu.memcpy_*",
    "memset": "gpu.memset_bytes",
    "ncu_kernel": "hw:*",
    "sample": "sys.*, pm:*",
    "compiler": "compile.*",
    "device_launch": "dev.*",
}

_VALUE_CLASSES = ("exact", "ordinal", "temporal", "ambiguous", "mismatch")  # the w_* columns of instance_values
REPLAY_BACKENDS = [b.name for b in BACKENDS.values() if b.perturbation == "replay"]


def shares(weights: dict[str, float | None]) -> Shares:
    """``{class: share of the total weight}`` in :data:`~argus_lab.model.vocabulary.CLASSES` order, zero shares left
    out."""
    vals = {c: float(weights.get(c) or 0.0) for c in CLASSES}
    total = sum(vals.values())
    if total <= 0:
        return {}
    return {c: w / total for c, w in vals.items() if w > 0}


def describe(sh: Shares) -> str:
    """``exact`` or ``exact 97%, temporal 3%``; ``no evidence`` when empty."""
    if not sh:
        return "no evidence"
    if len(sh) == 1:
        return next(iter(sh))
    return ", ".join(f"{c} {_pct(s)}" for c, s in sorted(sh.items(), key=lambda kv: -kv[1]))


def _pct(share: float) -> str:
    return f"{100 * share:.0f}%" if share >= 0.01 else f"{100 * share:.1g}%"


@dataclass(frozen=True)
class RegionSummary:
    """What the region and counter tables and :meth:`Report.diff` need, read in one pass."""

    regions: tuple[RegionRow, ...]
    counters: tuple[CounterRow, ...]
    values: dict[tuple[str, str], Any]
    """Per (path, signal): the per-instance inclusive values (numpy array), for the diff."""
    units: dict[tuple[str, str], str]


def read_runs(store: Store, ids: list[str]) -> tuple[RunRow, ...]:
    """The runs, in plan order, with their provenance (:data:`argus_lab.report.runs.RUNS`)."""
    return tuple(
        RunRow(
            run_id=r["run_id"],
            plan_index=r["plan_index"] or 0,
            status=r["status"] or "",
            backends=tuple(r["backends"] or ()),
            signals=tuple(r["signals"] or ()),
            repetitions=r["repetitions"] or 0,
            warmup=r["warmup"] or 0,
            reps_done=r["reps_done"] or 0,
            seconds=r["seconds"],
            workload=r["workload"] or "",
            command=r["command"] or "",
            cause=r["cause"] or "",
            reason=r["reason"] or "",
            versions=_json(r["versions"]),
            env=_json(r["env"]),
            host=r["host"] or "",
            settings=_json(r["settings"]),
        )
        for r in store.records(RUNS, [ids])
    )


def read_scope_map(store: Store, ids: list[str]) -> dict[str, Scope]:
    """The parsed scope of each run's request (an empty :class:`Scope` = everything)."""
    scopes: dict[str, Scope] = {}
    for r in store.records(q.SCOPE_RUNS, [ids]):
        text = (json.loads(r["spec"]) if r["spec"] else {}).get("scope", "")
        scopes[r["run_id"]] = Scope.parse(text or "")
    return scopes


def scope_predicate(store: Store, ids: list[str], scopes: dict[str, Scope]) -> ScopeFilter | None:
    """The predicate over ``region_instances`` that applies ``scopes`` (per run; ``None``: all)."""
    paths: dict[str, dict[str, int]] = {}
    if not all(s.is_everything for s in scopes.values()):
        for r in store.records(q.RUN_PATHS, [ids]):
            paths.setdefault(r["run_id"], {})[r["path"]] = int(r["warmup"])
    return predicate(scopes, paths)


def read_scopes(store: Store, ids: list[str]) -> tuple[dict[str, str], ScopeFilter | None]:
    """The scope of each run's request (canonical text) and the predicate that applies them (``None``: all)."""
    scopes = read_scope_map(store, ids)
    return {r: str(s) for r, s in scopes.items()}, scope_predicate(store, ids, scopes)


def read_summary(store: Store, ids: list[str], scope: ScopeFilter | None = None) -> RegionSummary:
    """Region rows (not ``hw:``/``pm:``), counter rows (``hw:``/``pm:``) and per-instance values.

    The per-instance values (:data:`argus_lab.report.sql.VALUES`) are collected once into a temporary table of a
    private cursor, and both summaries run over it inside DuckDB.
    """
    import numpy as np

    def summarise(con: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Any]:
        cur = con.cursor()
        try:
            values_sql, bound = scoped(q.VALUES, scope)
            cur.execute(f"CREATE OR REPLACE TEMP TABLE _r_values AS {values_sql}", [*bound, ids, REPLAY_BACKENDS])
            minor_instances(cur, ids)  # the main kernel-sequence group of each path alone makes its statistics
            cur.execute(MAIN_GROUP_ONLY)
            signals = [str(r[0]) for r in cur.execute("SELECT DISTINCT signal FROM _r_values").fetchall()]
            cur.register("_r_agg", pa.table({"signal": signals, "agg": [aggregation(g) for g in signals]}))
            rows = _records(cur, q.REGIONS)
            # the values of each (path, signal), fetched as one float array (no Python object per value)
            lists = _records(
                cur,
                "SELECT path, signal, count(inclusive) AS n, any_value(unit) AS unit FROM _r_values "
                "GROUP BY ALL ORDER BY path, signal",
            )
            flat = cur.execute(
                "SELECT inclusive FROM _r_values WHERE inclusive IS NOT NULL ORDER BY path, signal, run_id, instance_id"
            ).fetchnumpy()["inclusive"]
        finally:
            cur.close()
        return rows, lists, flat

    rows, lists, flat = store.read(summarise)  # taken again with more memory if DuckDB runs out
    regions: list[RegionRow] = []
    counters: list[CounterRow] = []
    for r in rows:
        sh = shares({c: r[f"w_{c}"] for c in _VALUE_CLASSES})
        provenance = tuple(r["provenance"] or ())
        if r["signal"].startswith(("hw:", "pm:")):
            counters.append(
                CounterRow(
                    path=r["path"],
                    signal=r["signal"],
                    instances=r["instances"],
                    median=r["median"],
                    p25=r["p25"],
                    p75=r["p75"],
                    exclusive_median=r["exclusive_median"],
                    unit=r["unit"] or "",
                    shares=sh,
                    runs=r["runs"],
                    provenance=provenance,
                    settings="",
                    agg=r["agg"],
                    kernel_range=None if r["k_lo"] is None else (float(r["k_lo"]), float(r["k_hi"])),
                )
            )
            continue
        regions.append(
            RegionRow(
                path=r["path"],
                signal=r["signal"],
                n=r["n"],
                instances=r["instances"],
                median=r["median"],
                p25=r["p25"],
                p75=r["p75"],
                min=r["min"],
                max=r["max"],
                unit=r["unit"] or "",
                runs=r["runs"],
                attribution=describe(sh),
                exclusive_median=r["exclusive_median"],
                exclusive_p25=r["exclusive_p25"],
                exclusive_p75=r["exclusive_p75"],
                reps=r["reps"] or 0,
                rep_median=r["rep_median"],
                rep_p25=r["rep_p25"],
                rep_p75=r["rep_p75"],
                shares=sh,
                backend=r["backends"] or "",
                provenance=provenance,
                agg=r["agg"],
            )
        )
    flat = np.asarray(flat, dtype=np.float64)
    values: dict[tuple[str, str], np.ndarray] = {}
    at = 0
    for r in lists:
        n = int(r["n"])
        values[(r["path"], r["signal"])] = flat[at : at + n]
        at += n
    units = {(r["path"], r["signal"]): r["unit"] or "" for r in lists}
    return RegionSummary(tuple(regions), tuple(counters), values, units)


MAIN_GROUP_ONLY = """
DELETE FROM _r_values v
WHERE (v.run_id, v.instance_id) IN (SELECT run_id, instance_id FROM _r_minor)
  AND EXISTS (SELECT 1 FROM _r_values w WHERE w.path = v.path AND w.signal = v.signal
              AND (w.run_id, w.instance_id) NOT IN (SELECT run_id, instance_id FROM _r_minor))
"""
"""The values of instances outside their path's main group leave the summary of a signal the main group has too (a
signal only another group has, e.g. the kernels of the one instance that launched any, stays)."""


def minor_instances(cur: Any, ids: list[str]) -> None:
    """``_r_minor`` on the cursor's connection: the measured instances outside their path's main kernel-sequence
    group (:data:`argus_lab.report.sql.MINOR_INSTANCES`; empty for a store without instance signatures)."""
    import duckdb

    try:
        cur.execute(f"CREATE OR REPLACE TEMP TABLE _r_minor AS {q.MINOR_INSTANCES}", [ids])
    except duckdb.CatalogException:  # joined by an older argus_lab: no instance_signatures table
        cur.execute("CREATE OR REPLACE TEMP TABLE _r_minor (run_id VARCHAR, instance_id BIGINT, path VARCHAR)")


def _records(cur: Any, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Rows of a query on an open cursor, as dicts keyed by column name."""
    res = cur.execute(sql, list(params))
    names = [d[0] for d in res.description or ()]
    return [dict(zip(names, row, strict=True)) for row in res.fetchall()]


def with_settings(counters: Sequence[CounterRow], prov: Sequence[ProvenanceRow]) -> tuple[CounterRow, ...]:
    """Counter rows with the measuring backend's replay/clock/cache settings filled in."""
    by_id = {p.provenance_id: p for p in prov}
    keys = ("replay_mode", "clock_control", "cache_control", "graph_profiling", "sampling_interval")
    out = []
    for c in counters:
        parts = []
        for pid in c.provenance:
            p = by_id.get(pid)
            if p is None:
                continue
            s = ", ".join(f"{k}={p.settings[k]}" for k in keys if k in p.settings)
            parts.append(f"{p.backend_version or p.backend}: {s}" if s else p.backend_version or p.backend)
        out.append(dataclasses.replace(c, settings="; ".join(parts)))
    return tuple(out)


def read_kernels(
    store: Store,
    ids: list[str],
    scope: ScopeFilter | None = None,
    limit: int | None = None,
    *,
    main_only: bool = False,
    path: str | None = None,
) -> tuple[KernelRow, ...]:
    """Per-kernel rows with the ncu counters matched to them by ordinal (the first ``limit`` of them in the table's
    order, when given: a view that shows a few thousand rows of a long run's millions never holds them all);
    ``main_only``: rows of the main kernel-sequence group alone; ``path``: rows of one region path alone."""
    return fold_kernels(store, ids, tuple, scope, limit, main_only=main_only, path=path)


def fold_kernels(
    store: Store,
    ids: list[str],
    fold: Callable[[Iterator[KernelRow]], T],
    scope: ScopeFilter | None = None,
    limit: int | None = None,
    *,
    main_only: bool = False,
    path: str | None = None,
) -> T:
    """``fold`` over the rows :func:`read_kernels` reads, handed over as DuckDB returns them (a batch of
    :data:`FETCH_ROWS` at a time), so that a fold that keeps a summary never holds a long run's every row; ``fold``
    runs again from the start when the read is taken again with more memory."""
    if path is not None:  # the path's instances (whole: ordinals stay), and the records of no instance
        scope = conjoin(scope, ScopeFilter("i.path = ?", (path,)))
    kernels_sql, bound = scoped(q.KERNELS if limit is None else q.KERNELS_OF_KEYS, scope)
    keys = q.first_kernel_keys(limit, main_only, path is not None) if limit is not None else ""
    keys_sql = scoped(keys, scope)[0] if keys else ""
    tail = [] if path is None else [path]

    def kernel_rows(con: Any) -> T:
        cur = con.cursor()
        try:
            minor_instances(cur, ids)  # instances of another kernel-sequence group: in Report.groups, not here
            if keys_sql:  # the first rows' keys, then those rows alone
                cur.execute(f"CREATE OR REPLACE TEMP TABLE _r_top AS {keys_sql}", [*bound, ids, ids, *tail])
            matched = _Counters(_records(cur, q.KERNEL_COUNTERS, [ids]))
            res = cur.execute(kernels_sql, [*bound, ids, ids])
            names = [d[0] for d in res.description or ()]

            def stream() -> Iterator[KernelRow]:
                while batch := res.fetchmany(FETCH_ROWS):
                    for row in batch:
                        r = dict(zip(names, row, strict=True))
                        if (path is None or r["path"] == path) and (not main_only or r["main_group"]):
                            yield matched.row(r)

            return fold(stream())
        finally:
            cur.close()

    return store.read(kernel_rows)  # taken again with more memory if DuckDB runs out


FETCH_ROWS = 4096
"""Rows of the kernel table taken from DuckDB at a time by :func:`fold_kernels`."""


class _Counters:
    """The ncu counters of the report's runs, found for a kernel row by ordinal."""

    def __init__(self, found: Sequence[dict[str, Any]]) -> None:
        # keyed by (run, path, ordinal, name, instance group): a kernel of an instance of another kernel sequence (an
        # autotuning first call) never takes the counters of the main group's kernel at the same ordinal
        self.by: dict[tuple[str, str, int, str, bool], dict[str, tuple[float, str]]] = {}
        self.anywhere: dict[tuple[str, str, int, str, bool], dict[str, tuple[float, str]]] = {}  # (path, ordinal, ...)
        for c in found:
            where = (c["run_id"], c["path"], int(c["ordinal"]), c["name"], bool(c["minor"]))
            value = (float(c["value"]), c["unit"] or "")
            self.by.setdefault(where, {})[c["signal"]] = value
            self.anywhere.setdefault(("", *where[1:]), {}).setdefault(c["signal"], value)

    def row(self, r: dict[str, Any]) -> KernelRow:
        """One record of :data:`argus_lab.report.sql.KERNELS` as a :class:`KernelRow` with its counters."""
        from argus_lab.report.names import display_name

        ordinal = None if r["ordinal"] is None else int(r["ordinal"])
        # the ncu run matched to this timing run, else (a timing run and an ncu run of separate requests, each
        # joined on its own) an ncu kernel of the report at the same path, ordinal and name
        found = {}
        if ordinal is not None:
            minor = not r["main_group"]
            found = self.by.get((r["run_id"], r["path"], ordinal, r["name"], minor)) or self.anywhere.get(
                ("", r["path"], ordinal, r["name"], minor), {}
            )
        return KernelRow(
            run_id=r["run_id"],
            path=r["path"],
            ordinal=ordinal,
            name=r["name"],
            launches=int(r["launches"]),
            median_ns=float(r["median_ns"]),
            p25_ns=float(r["p25_ns"]),
            p75_ns=float(r["p75_ns"]),
            min_ns=float(r["min_ns"]),
            max_ns=float(r["max_ns"]),
            total_ns=float(r["total_ns"] or 0.0),
            grid=r["grid"] or "",
            block=r["block"] or "",
            registers=r["registers"],
            classes=r["classes"] or "",
            counters=found,
            display_name=display_name(r["name"]),
            main_group=bool(r["main_group"]),
        )


def read_kernel_count(store: Store, ids: list[str], scope: ScopeFilter | None = None) -> tuple[int, int]:
    """``(rows, main-group rows)`` of :func:`read_kernels`' table, counted in DuckDB
    (:data:`argus_lab.report.sql.KERNEL_ROW_COUNT`)."""
    got = _kernel_group_records(store, ids, q.KERNEL_ROW_COUNT, scope)[0]
    return int(got["rows"] or 0), int(got["main_rows"] or 0)


def read_other_kernel_groups(
    store: Store, ids: list[str], scope: ScopeFilter | None = None
) -> dict[str, tuple[int, int]]:
    """Per region path, ``(launches, distinct kernels)`` of its :func:`read_kernels` rows outside its main
    kernel-sequence group, summed in DuckDB (:data:`argus_lab.report.sql.OTHER_KERNEL_GROUPS`)."""
    found = _kernel_group_records(store, ids, q.OTHER_KERNEL_GROUPS, scope)
    return {str(r["path"]): (int(r["launches"] or 0), int(r["kernels"])) for r in found}


def _kernel_group_records(store: Store, ids: list[str], query: str, scope: ScopeFilter | None) -> list[dict[str, Any]]:
    """The records of a query over the kernel table's groups (the parameters of :data:`argus_lab.report.sql.KERNELS`),
    with ``_r_minor`` made first on the same cursor."""
    sql, bound = scoped(query, scope)

    def fetch(con: Any) -> list[dict[str, Any]]:
        cur = con.cursor()
        try:
            minor_instances(cur, ids)
            return _records(cur, sql, [*bound, ids, ids])
        finally:
            cur.close()

    return store.read(fetch)


def read_ranks(store: Store, ids: list[str], scope: ScopeFilter | None = None) -> tuple[RankRow, ...]:
    """Per region path of the multi-rank runs: ranks, occurrences, start and end skew (median, max)."""
    ranks_sql, bound = scoped(RANKS, scope)
    return tuple(
        RankRow(
            path=r["path"],
            ranks=int(r["ranks"]),
            occurrences=int(r["occurrences"]),
            start_skew_median=_num(r["start_skew_median"]),
            start_skew_max=_num(r["start_skew_max"]),
            end_skew_median=_num(r["end_skew_median"]),
            end_skew_max=_num(r["end_skew_max"]),
            last_to_start=None if r["last_to_start"] is None else int(r["last_to_start"]),
            last_to_end=None if r["last_to_end"] is None else int(r["last_to_end"]),
            runs=r["runs"] or "",
        )
        for r in store.records(ranks_sql, [*bound, ids])
    )


def clock_offsets(provenance: Sequence[ProvenanceRow]) -> tuple[ClockOffsetRow, ...]:
    """The ranks' clock offsets, from the ``clock`` provenance records the ranks wrote."""
    out = []
    for p in provenance:
        if p.backend != "clock":
            continue
        st = p.settings
        out.append(
            ClockOffsetRow(
                run_id=p.run_id,
                rank=int(st.get("rank", -1)),
                phase=str(st.get("phase", "")),
                status=str(st.get("status", "")),
                offset_ns=st.get("offset_ns"),
                uncertainty_ns=st.get("uncertainty_ns"),
                round_trip_ns=st.get("round_trip_ns"),
                samples=int(st.get("samples") or 0),
                reason=str(st.get("reason") or ""),
                provenance_id=p.provenance_id,
            )
        )
    return tuple(sorted(out, key=lambda o: (o.run_id, o.rank, o.phase != "before")))


def _num(v: Any) -> float | None:
    return None if v is None else float(v)


def read_groups(store: Store, ids: list[str], scope: ScopeFilter | None = None) -> tuple[InstanceGroupRow, ...]:
    """Region paths whose measured instances ran different kernel sequences, one row per group (majority first).

    Stores joined before instance signatures existed have none: the table is then empty.
    """
    import duckdb

    sql, bound = scoped(q.GROUPS, scope)
    try:
        recs = store.records(sql, [*bound, ids, ids])
    except duckdb.CatalogException:  # a store joined by an older argus_lab (no instance_signatures table)
        return ()
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in recs:
        by.setdefault((r["run_id"], r["path"]), []).append(r)
    out: list[InstanceGroupRow] = []
    for (run, path), groups in by.items():
        major = max(groups, key=lambda g: (int(g["n"]), int(g["last_ns"] or 0)))
        ordered = [major, *sorted((g for g in groups if g is not major), key=lambda g: int(g["first_ns"] or 0))]
        base_vals = _group_values(major)
        for k, g in enumerate(ordered):
            vals = _group_values(g)
            idx = index_ranges(g["indexes"] or ())
            out.append(
                InstanceGroupRow(
                    path=path,
                    run_id=run,
                    group=k,
                    majority=k == 0,
                    instances=int(g["n"]),
                    indexes=idx,
                    kernels=int(g["kernels"] or 0),
                    values=vals,
                    signature=str(g["signature"] or ""),
                    note=_group_note(idx, int(g["n"]), int(g["kernels"] or 0), vals, k == 0, major, base_vals),
                )
            )
    return tuple(out)


def _group_values(g: dict[str, Any]) -> dict[str, tuple[float | None, str]]:
    return {v["signal"]: (_num(v["median"]), v["unit"] or "") for v in (g["vals"] or ())}


def _time_of(vals: dict[str, tuple[float | None, str]]) -> str:
    from argus_lab.units import fmt

    for sig in ("gpu.time", "host.wall"):
        v = vals.get(sig)
        if v is not None and v[0] is not None:
            return fmt(v[0], v[1])
    return ""


def _group_note(
    idx: str,
    n: int,
    kernels: int,
    vals: dict[str, tuple[float | None, str]],
    majority: bool,
    major: dict[str, Any],
    base_vals: dict[str, tuple[float | None, str]],
) -> str:
    word = "instance" if n == 1 else "instances"
    each = "" if n == 1 else " each"
    t = _time_of(vals)
    head = f"{word} {idx}: {kernels:,} kernel{'s' if kernels != 1 else ''}" + (f", {t}" if t else "") + each
    if majority:
        return head + " (the majority)"
    mn = int(major["n"])
    mk = int(major["kernels"] or 0)
    mt = _time_of(base_vals)
    other = (
        f"the other {mn} instance{'s' if mn != 1 else ''}: {mk:,} kernel{'s' if mk != 1 else ''}"
        + (f", {mt}" if mt else "")
        + (" each" if mn != 1 else "")
    )
    return f"{head}, a different kernel sequence ({other})"


def read_compiler(store: Store, ids: list[str], scope: ScopeFilter | None = None) -> tuple[CompilerRow, ...]:
    """Compiler facts per binary (kernel_facts) with where each ran, and the facts CUPTI's launch records carry for
    launched kernels without compiler facts."""
    from argus_lab.report.names import display_name

    have = {
        r[0] for r in store.rows("SELECT column_name FROM information_schema.columns WHERE table_name = 'kernel_facts'")
    }
    sql, bound = scoped(q.compiler_sql(have), scope)
    out = []
    for r in store.records(sql, [*bound, ids, ids, ids, ids]):
        places = r["places"] or ()
        out.append(
            CompilerRow(
                name=r["name"],
                source=r["source"],
                registers=r["registers"],
                spill_words=r["spill_words"],
                shared_bytes=r["shared_bytes"],
                num_warps=r["num_warps"],
                num_stages=r["num_stages"],
                sass_instructions=r["sass_instructions"],
                unavailable=r["unavailable"],
                run_id=r["run_id"],
                paths=", ".join(p["path"] for p in places) if places else r["paths"],
                display_name=display_name(r["name"]),
                binary_hash=r["binary_hash"] or "",
                config=_json(r["config"]) if r["config"] else None,
                sass_mix={k: int(v) for k, v in _json(r["sass_mix"]).items()} if r["sass_mix"] else None,
                origin=r["origin"] or "",
                threads=r["threads"],
                ran_in=_ran_in(places, bool(r["ambiguous"])),
                measured=None if r["measured"] is None else bool(r["measured"]),
            )
        )
    return tuple(out)


def _ran_in(places: Sequence[dict[str, Any]], ambiguous: bool) -> str:
    """``matmul #1-3; +1 other`` from the per-path places of a binary."""
    parts = []
    for p in places:
        idx = index_ranges(p["indexes"] or ())
        other = int(p["other"] or 0)
        text = f"{p['path']} #{idx}" if idx else f"{p['path']} (no measured instance)"
        if other:
            text += f" +{other} other"
        parts.append(text)
    out = "; ".join(parts)
    return out + (" (ambiguous: other binaries fit the same launches)" if ambiguous and out else "")


def read_attribution(provenance: Sequence[ProvenanceRow]) -> tuple[AttributionRow, ...]:
    """Per evidence kind: items and the share of weight (and of kernel time) per class.

    Read from the summary the join stores in each run's ``<run>:join`` provenance record (so a report over ten
    million kernel records needs no pass over them).
    """
    by: dict[str, dict[str, list[float]]] = {}
    for p in provenance:
        if p.backend != "join":
            continue
        for ev, per in p.settings.get("attributed", {}).items():
            for cls, e in per.items():
                acc = by.setdefault(ev, {}).setdefault(cls, [0.0, 0.0, 0.0])
                acc[0] += e.get("items", 0)
                acc[1] += e.get("weight", 0.0)
                acc[2] += e.get("time_ns", 0.0)
    out = []
    for ev, per in by.items():
        items = int(per.pop("*", [0.0])[0])  # every item once (a split sample reaches several classes)
        sh = shares({c: v[1] for c, v in per.items()})
        ts = shares({c: v[2] for c, v in per.items()}) if ev in ("kernel", "memcpy", "memset") else None
        out.append(
            AttributionRow(evidence=ev, signals=EVIDENCE_SIGNALS.get(ev, ""), items=items, shares=sh, time_shares=ts)
        )
    order = list(EVIDENCE_SIGNALS)
    return tuple(sorted(out, key=lambda a: order.index(a.evidence) if a.evidence in order else len(order)))


def read_provenance(store: Store, ids: list[str]) -> tuple[ProvenanceRow, ...]:
    """Every provenance record of the report's runs (backends and the join)."""
    return tuple(
        ProvenanceRow(**{**r, "settings": _json(r["settings"]), "clocks": _json(r["clocks"])})
        for r in store.records(q.PROVENANCE, [ids])
    )


def read_clocks(store: Store, ids: list[str]) -> tuple[ClockRow, ...]:
    """Clocks, power and temperature sampled during the report's runs."""
    return tuple(ClockRow(**r) for r in store.records(q.CLOCKS_SEEN, [ids]))


def read_matches(store: Store, ids: list[str], scope: ScopeFilter | None = None) -> tuple[MatchRow, ...]:
    """Instance matching of each run against the reference run, by region path and status (measured instances of
    the report's scope only)."""
    sql, bound = scoped(q.MATCHES, scope)
    return tuple(
        MatchRow(
            run_id=r["run_id"],
            ref_run_id=r["ref_run_id"] or "",
            status=r["status"],
            instances=int(r["n"]),
            example_path=r["path"] or "",
            difference=r["difference"] or "",
            indexes=index_ranges(r["indexes"] or ()),
        )
        for r in store.records(sql, [*bound, ids, ids])
    )


def index_ranges(indexes: Sequence[int | None]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2, 5``."""
    nums = sorted({int(i) for i in indexes if i is not None})
    parts: list[str] = []
    k = 0
    while k < len(nums):
        j = k
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[k]) if j == k else f"{nums[k]}-{nums[j]}")
        k = j + 1
    return ", ".join(parts)


def _json(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        val = json.loads(text or "{}")
    except (TypeError, ValueError):
        return {"raw": str(text)}
    return val if isinstance(val, dict) else {"value": val}
