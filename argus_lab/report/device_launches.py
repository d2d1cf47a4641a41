"""The rows of instrumented launches that the device views draw: which launches the runs hold and where the join
placed each (:func:`launches`), one launch's device intervals, programs and SMs as numpy columns
(:func:`launch_columns`) and the join's dev.* values of one launch (:func:`launch_values`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from argus_lab.report.device import has_tables
from argus_lab.report.evidence import _fetch_columns

if TYPE_CHECKING:
    from argus_lab.store import Store


@dataclass(frozen=True)
class LaunchRef:
    """One instrumented launch and where the join placed it."""

    run_id: str
    launch: int
    kernel: str
    path: str
    instance_id: int | None
    instance_index: int | None
    kernel_key: str | None
    attribution: str
    warmup: bool


LAUNCHES = """
SELECT l.run_id, l.launch, l.kernel, coalesce(i.path, '(outside regions)') AS path, a.instance_id,
       i.instance_index, v.kernel_key, coalesce(a.class, 'not joined') AS attribution,
       coalesce(i.warmup, false) AS warmup
FROM device_launches l
LEFT JOIN attributions a
    ON a.run_id = l.run_id AND a.evidence = 'device_launch' AND a.evidence_id = 'launch:' || l.launch
LEFT JOIN region_instances i ON i.run_id = l.run_id AND i.instance_id = a.instance_id
LEFT JOIN (SELECT DISTINCT run_id, launch, kernel_key FROM device_values) v
    ON v.run_id = l.run_id AND v.launch = l.launch
WHERE l.run_id IN (SELECT unnest(?::VARCHAR[]))
ORDER BY coalesce(i.warmup, false), l.run_id, l.launch
"""


def launches(store: Store, ids: Sequence[str]) -> list[LaunchRef]:
    """Every instrumented launch of the runs, measured ones first (empty for stores without device tables)."""
    if not ids or not has_tables(store):
        return []
    return [LaunchRef(**r) for r in store.records(LAUNCHES, [list(ids)])]


def launch_columns(store: Store, run_id: str, launch: int) -> dict[str, dict[str, Any]]:
    """The rows of one launch: ``intervals`` (with region names), ``programs`` and ``sm`` as numpy columns."""
    iv = _fetch_columns(
        store,
        "SELECT coalesce(r.name, d.region_id) AS region, d.cta, d.sm, d.depth, d.t_start_ns, d.t_end_ns, d.dur_ns "
        "FROM device_intervals d LEFT JOIN regions r ON r.region_id = d.region_id "
        "WHERE d.run_id = ? AND d.launch = ? ORDER BY d.t_start_ns",
        [run_id, launch],
    )
    pr = _fetch_columns(
        store,
        "SELECT cta, sm, t_begin_ns, t_end_ns FROM device_programs WHERE run_id = ? AND launch = ? AND t_end_ns > 0 "
        "ORDER BY cta",
        [run_id, launch],
    )
    sm = _fetch_columns(
        store,
        "SELECT sm, programs, begin_ns, end_ns, busy_ns, idle_tail_ns FROM device_sm WHERE run_id = ? AND launch = ? "
        "ORDER BY end_ns, sm",
        [run_id, launch],
    )
    return {"intervals": iv, "programs": pr, "sm": sm}


def launch_values(store: Store, run_id: str, launch: int) -> list[dict[str, Any]]:
    """The join's dev.* values of one launch (per device region and for the launch), for the drill-down."""
    return store.records(
        "SELECT coalesce(r.name, '(launch)') AS region, v.signal, v.value, v.p10, v.p90, v.min, v.max, v.n, v.unit "
        "FROM device_values v LEFT JOIN regions r ON r.region_id = v.region_id "
        "WHERE v.run_id = ? AND v.launch = ? ORDER BY v.region_id IS NOT NULL, region, v.signal",
        [run_id, launch],
    )
