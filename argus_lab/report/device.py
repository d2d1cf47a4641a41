"""The Report's device-region tables: dev.* values per host region, kernel and device region; the overhead.

Read from what the join derived (:mod:`argus_lab.join.device`): ``device_values`` (one value per instrumented
launch and device region, with its spread over CTAs or SMs) summarised over the launches of the non-warm-up
instances of each host region path, and the ``device.overhead`` provenance record of each instrumented run.  A store
written before device regions existed (schema version 1) has no device tables: the tables are then empty.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from argus_lab.join.device import OVERHEAD_BACKEND
from argus_lab.units import fmt

if TYPE_CHECKING:
    from argus_lab.report.rows import ProvenanceRow
    from argus_lab.store import Store

LAUNCH = "(launch)"
"""The ``region`` of a row about a whole launch (dev.sm_busy, dev.tail, dev.span, dev.unmarked)."""


LAST_LAUNCH_SMS = """
SELECT launch, count(*) AS sms, coalesce(sum(programs), 0) AS programs FROM device_sm
WHERE run_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY run_id, launch ORDER BY run_id, launch DESC LIMIT 1
"""
"""The SMs and programs of the runs' last instrumented launch (from the join's per-SM rows)."""

LAUNCH_PROBLEMS = """
SELECT coalesce(max(dropped), 0) AS dropped, list(problems) AS problems FROM device_launches
WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND kernel = ?
"""
"""The events a kernel's CTAs dropped and the decoder's problems, over the runs' instrumented launches."""


@dataclass(frozen=True)
class DeviceRow:
    """One dev.* signal of one device region (or of the whole launch) of one kernel under one host region path.

    ``median``/``p25``/``p75`` are over the launches of the per-launch value (for ``dev.time``: the median time per
    CTA; ``dev.count``: the occurrences in the launch; ``dev.sm_busy``: the median over SMs); ``spread_p10`` and
    ``spread_p90`` are the medians over launches of the per-launch p10 and p90 over CTAs (SMs for dev.sm_busy).
    """

    run_id: str
    path: str
    kernel: str
    region: str
    region_id: str
    signal: str
    launches: int
    median: float
    p25: float
    p75: float
    spread_p10: float | None
    spread_p90: float | None
    unit: str
    attribution: str


@dataclass(frozen=True)
class OverheadRow:
    """The instrumented variant's overhead on one kernel: its time instrumented against clean, same launches."""

    run_id: str
    clean_runs: tuple[str, ...]
    kernel: str
    launches: int
    clean_median_ns: float
    instrumented_median_ns: float
    ratio_median: float
    note: str = ""


def has_tables(store: Store) -> bool:
    """Whether the store has the device tables (schema version 2 or later)."""
    rows = store.rows("SELECT count(*) FROM information_schema.tables WHERE table_name = 'device_values'")
    return bool(rows and rows[0][0])


DEVICE = """
WITH v AS (
    SELECT d.*, coalesce(i.path, '(outside regions)') AS path, coalesce(i.warmup, false) AS warm,
           coalesce(l.kernel, '?') AS kernel, coalesce(r.name, d.region_id, '') AS region
    FROM device_values d
    LEFT JOIN region_instances i ON i.run_id = d.run_id AND i.instance_id = d.instance_id
    LEFT JOIN device_launches l ON l.run_id = d.run_id AND l.launch = d.launch
    LEFT JOIN regions r ON r.region_id = d.region_id
    WHERE d.run_id IN (SELECT unnest(?::VARCHAR[]))
), first_seen AS (  -- device regions in the order they first start in a launch
    SELECT run_id, region_id, min(t_start_ns - l0) AS t
    FROM (SELECT run_id, launch, region_id, t_start_ns,
                 min(t_start_ns) OVER (PARTITION BY run_id, launch) AS l0
          FROM device_intervals WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND seq = 0)
    GROUP BY ALL
)
SELECT v.run_id, v.path, v.kernel, v.region, coalesce(v.region_id, '') AS region_id, v.signal,
       count(*) AS launches, quantile_cont(v.value, [0.5, 0.25, 0.75]) AS q, quantile_cont(v.p10, 0.5) AS s10,
       quantile_cont(v.p90, 0.5) AS s90, any_value(v.unit) AS unit,
       string_agg(DISTINCT v.attribution, ',' ORDER BY v.attribution) AS attribution
FROM v LEFT JOIN first_seen f ON f.run_id = v.run_id AND f.region_id = v.region_id
WHERE NOT v.warm
GROUP BY v.run_id, v.path, v.kernel, v.region, v.region_id, v.signal
ORDER BY v.run_id, v.path, v.kernel, v.region_id IS NOT NULL, min(f.t), v.region, v.signal
"""


def read_device(store: Store, ids: list[str]) -> tuple[DeviceRow, ...]:
    """The device table of the report's runs (empty for stores without device tables)."""
    if not ids or not has_tables(store):
        return ()
    out = []
    for r in store.records(DEVICE, [ids, ids]):
        q = r.pop("q")
        out.append(
            DeviceRow(
                run_id=r["run_id"],
                path=r["path"],
                kernel=r["kernel"],
                region=LAUNCH if not r["region_id"] else r["region"],
                region_id=r["region_id"],
                signal=r["signal"],
                launches=int(r["launches"]),
                median=float(q[0]),
                p25=float(q[1]),
                p75=float(q[2]),
                spread_p10=None if r["s10"] is None else float(r["s10"]),
                spread_p90=None if r["s90"] is None else float(r["s90"]),
                unit=r["unit"],
                attribution=r["attribution"] or "",
            )
        )
    return tuple(out)


def read_overhead(provenance: Sequence[ProvenanceRow]) -> tuple[OverheadRow, ...]:
    """The overhead of each instrumented run's kernels, from the join's ``device.overhead`` provenance rows."""
    out: list[OverheadRow] = []
    for p in provenance:
        if p.backend != OVERHEAD_BACKEND:
            continue
        s: dict[str, Any] = p.settings if isinstance(p.settings, dict) else json.loads(str(p.settings))
        clean = tuple(s.get("clean_runs", ()))
        for name, k in sorted(s.get("kernels", {}).items()):
            out.append(
                OverheadRow(
                    run_id=p.run_id,
                    clean_runs=clean,
                    kernel=name,
                    launches=int(k["launches"]),
                    clean_median_ns=float(k["clean_median_ns"]),
                    instrumented_median_ns=float(k["instrumented_median_ns"]),
                    ratio_median=float(k["ratio_median"]),
                )
            )
        if not s.get("kernels"):
            out.append(OverheadRow(p.run_id, clean, "", 0, float("nan"), float("nan"), float("nan"),
                                   str(s.get("not_measured", ""))))  # fmt: skip
    return tuple(out)


def problems(store: Store, ids: list[str], limit: int = 5) -> list[str]:
    """Coverage sentences of the device launches: the decoder's problems (with their fixes) and launches that
    found no kernel record or no region instance."""
    if not ids or not has_tables(store):
        return []
    out: list[str] = []
    rows = store.records(
        "SELECT run_id, launch, kernel, problems FROM device_launches WHERE run_id IN (SELECT unnest(?::VARCHAR[])) "
        "AND problems IS NOT NULL AND problems <> '[]' ORDER BY run_id, launch",
        [ids],
    )
    for r in rows[:limit]:
        for text in json.loads(r["problems"]):
            out.append(f"device launch {r['launch']} of {r['kernel']} (run {r['run_id']}): {text}")
    if len(rows) > limit:
        out.append(f"... and {len(rows) - limit} more device launches with problems (table device_launches)")
    return out


def table(rows: Sequence[DeviceRow]) -> str:
    """The device table as text."""
    from argus_lab.report.text import table as text_table

    header = ("region", "kernel", "device region", "signal", "launches", "median", "p25..p75", "per CTA p10..p90",
              "attribution")  # fmt: skip
    body = [
        (
            r.path,
            r.kernel,
            r.region,
            r.signal,
            str(r.launches),
            fmt(r.median, r.unit),
            f"{fmt(r.p25, r.unit)}..{fmt(r.p75, r.unit)}",
            "-" if r.spread_p10 is None else f"{fmt(r.spread_p10, r.unit)}..{fmt(r.spread_p90, r.unit)}",
            r.attribution,
        )
        for r in rows
    ]
    return text_table(header, body)


def overhead_table(rows: Sequence[OverheadRow]) -> str:
    """The overhead rows as text."""
    from argus_lab.report.text import table as text_table

    header = ("instrumented run", "kernel", "launches", "clean", "instrumented", "ratio", "clean run(s)")
    body = [
        (
            r.run_id,
            r.kernel or "-",
            str(r.launches),
            fmt(r.clean_median_ns, "ns"),
            fmt(r.instrumented_median_ns, "ns"),
            "-" if r.ratio_median != r.ratio_median else f"{r.ratio_median:.3f}x",
            ", ".join(r.clean_runs) or (r.note or "-"),
        )
        for r in rows
    ]
    return text_table(header, body)


__all__ = ["LAUNCH", "DeviceRow", "OverheadRow", "has_tables", "overhead_table", "problems", "read_device",
           "read_overhead", "table"]  # fmt: skip
