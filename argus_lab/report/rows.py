"""The rows of the Report's tables (frozen dataclasses) and how they are read from the store.

Each ``read_*`` function takes the store and the report's run ids and returns a tuple of rows; nothing here
keeps a connection.  Shares are fractions (0..1) of the evidence weight behind a value, by attribution class.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from argus_lab.join import CLASSES, LEVEL_UNITS, NON_ADDITIVE
from argus_lab.join.skew import RANKS
from argus_lab.plan.backends import BACKENDS
from argus_lab.plan.scope import Scope
from argus_lab.report import sql as q
from argus_lab.report.scope_sql import ScopeFilter, predicate, scoped
from argus_lab.store import Store
from argus_lab.store.queries import RUNS

Shares = dict[str, float]


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


@dataclass(frozen=True)
class CompilerRow:
    """Static facts of one kernel function, with the region paths whose instances ran it."""

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
    """How the instances of one run matched the reference run."""

    run_id: str
    ref_run_id: str
    status: str
    instances: int
    example_path: str
    difference: str


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
}

_VALUE_CLASSES = ("exact", "ordinal", "temporal", "ambiguous", "mismatch")  # the w_* columns of instance_values
REPLAY_BACKENDS = [b.name for b in BACKENDS.values() if b.perturbation == "replay"]


def shares(weights: dict[str, float | None]) -> Shares:
    """``{class: share of the total weight}`` in :data:`~argus_lab.join.CLASSES` order, zero shares left out."""
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
    """The runs, in plan order, with their provenance (:data:`argus_lab.store.queries.RUNS`)."""
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

    with store.connect() as con:
        cur = con.cursor()
        try:
            values_sql, bound = scoped(q.VALUES, scope)
            cur.execute(f"CREATE OR REPLACE TEMP TABLE _r_values AS {values_sql}", [*bound, ids, REPLAY_BACKENDS])
            rows = _records(cur, q.REGIONS, [list(NON_ADDITIVE), list(LEVEL_UNITS)])
            lists = _records(
                cur,
                "SELECT path, signal, list(inclusive) FILTER (WHERE inclusive IS NOT NULL) AS values, "
                "any_value(unit) AS unit FROM _r_values GROUP BY ALL",
            )
        finally:
            cur.close()
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
            )
        )
    values = {(r["path"], r["signal"]): np.asarray(r["values"] or [], dtype=np.float64) for r in lists}
    units = {(r["path"], r["signal"]): r["unit"] or "" for r in lists}
    return RegionSummary(tuple(regions), tuple(counters), values, units)


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


def read_kernels(store: Store, ids: list[str], scope: ScopeFilter | None = None) -> tuple[KernelRow, ...]:
    """Per-kernel rows with the ncu counters matched to them by ordinal."""
    counters: dict[tuple[str, str, int, str], dict[str, tuple[float, str]]] = {}
    for c in store.records(q.KERNEL_COUNTERS, [ids]):
        where = (c["run_id"], c["path"], int(c["ordinal"]), c["name"])
        counters.setdefault(where, {})[c["signal"]] = (float(c["value"]), c["unit"] or "")
    kernels_sql, bound = scoped(q.KERNELS, scope)
    out = []
    for r in store.records(kernels_sql, [*bound, ids, ids]):
        ordinal = None if r["ordinal"] is None else int(r["ordinal"])
        found = counters.get((r["run_id"], r["path"], ordinal, r["name"]), {}) if ordinal is not None else {}
        out.append(
            KernelRow(
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
            )
        )
    return tuple(out)


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


def read_compiler(store: Store, ids: list[str]) -> tuple[CompilerRow, ...]:
    """Compiler facts (kernel_facts) and the facts CUPTI's launch records carry, per kernel function."""
    return tuple(CompilerRow(**r) for r in store.records(q.COMPILER, [ids, ids]))


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


def read_matches(store: Store, ids: list[str]) -> tuple[MatchRow, ...]:
    """Instance matching of each run against the reference run, by status."""
    return tuple(
        MatchRow(
            run_id=r["run_id"],
            ref_run_id=r["ref_run_id"] or "",
            status=r["status"],
            instances=int(r["n"]),
            example_path=r["path"] or "",
            difference=r["difference"] or "",
        )
        for r in store.records(q.MATCHES, [ids])
    )


def _json(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        val = json.loads(text or "{}")
    except (TypeError, ValueError):
        return {"raw": str(text)}
    return val if isinstance(val, dict) else {"value": val}
