"""The report bundle: what a report's notebook output and its exported HTML carry.

``application/vnd.argus.report+json`` is a small JSON object (ids, summary, bounded detail tables, one timeline
per run); everything else stays in the store.  The same object is what ``report-renderer.js`` draws, in
JupyterLab (the argus MIME renderer), in the ``text/html`` fallback and in an exported standalone page.

Layout (``"format": "argus.report/1"``)::

    title, store, created, run_ids
    palette      the colours of regions, phases and attribution classes (argus_lab.views.palette); each timeline
                 and device timeline also carries ``colors``, one per entry of its ``regions``
    summary      runs, status counts, regions, signals, instances, kernels, coverage sentences, heterogeneity
                 (instances that ran a different kernel sequence)
    regions      the Report's region rows (path, signal, instances, median, p25, p75, unit, runs, attribution), with
                 ``warmup_instances``: the path's warm-up instances in those runs (kept apart, not in the statistics)
    other_groups per region path with instances of another kernel sequence: their launches and distinct kernels
                 as ``Report.kernels`` counts them (every row, also those not embedded), which every kernel table's
                 collapsed group states
    joined       the Report's joined tables: counters per region, kernels by ordinal (with their counters), compiler
                 facts, attribution by evidence kind, cross-run matches, instance groups (heterogeneity), clock
                 samples (bounded); kernel rows carry ``display_name`` (demangled, shortened) beside ``name``
    runs         the Report's run rows (status, backends, signals, reason, cause, command, versions, settings)
    flame        per region path and time signal: summed inclusive and exclusive ns of the measured instances
                 (one run per signal), for the flame view
    finished     per region path: every instance that finished, warm-up included (shown when no measured
                 repetition finished, e.g. a workload that failed in its warm-up)
    tables       name -> {columns, rows, total, shown}: instances, values, kernel_groups, kernels, counters,
                 attribution, evidence_classes, ambiguous, provenance
    timelines    one per run with region instances or kernels in the report's scope (see argus_lab.views.timeline):
                 lanes per rank (host threads, then device streams), every rank on rank 0's clock
    device_timelines  per-SM lane timelines of a few instrumented launches (see argus_lab.views.device); the
                 Report's device table and the instrumented variant's overhead are in ``joined``
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from argus_lab.model.vocabulary import CLASS_MEANINGS
from argus_lab.report import evidence
from argus_lab.report.json import jsonable
from argus_lab.report.timeline_rows import timeline_inputs
from argus_lab.views import device
from argus_lab.views.palette import palette_json
from argus_lab.views.timeline import TimelineLimits, timeline_data

if TYPE_CHECKING:
    from argus_lab.report import Report

MIME = "application/vnd.argus.report+json"
FORMAT = "argus.report/1"


@dataclass(frozen=True)
class BundleLimits:
    """How many detail rows a bundle embeds (the notebook output is kept small; exports may carry more)."""

    instances: int = 500
    values: int = 1_000
    kernel_groups: int = 300
    kernels: int = 200
    counters: int = 500
    attribution: int = 2_000
    ambiguous: int = 300
    provenance: int = 200
    timeline_runs: int = 6
    timeline: TimelineLimits = field(default_factory=lambda: TimelineLimits(exact_limit=5_000, bin_budget=40_000))
    device_launches: int = 1
    device_timeline: TimelineLimits = device.DEVICE_LIMITS


NOTEBOOK = BundleLimits()
EXPORT = BundleLimits(
    instances=20_000,
    values=50_000,
    kernel_groups=5_000,
    kernels=10_000,
    counters=30_000,
    attribution=20_000,
    ambiguous=3_000,
    timeline=TimelineLimits(),
    device_launches=8,
    device_timeline=device.DEVICE_EXPORT_LIMITS,
)


def _row_dict(row: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(row) and not isinstance(row, type):
        return {f.name: getattr(row, f.name) for f in dataclasses.fields(row)}
    return dict(vars(row))


def build(report: Report, limits: BundleLimits = NOTEBOOK, title: str = "") -> dict[str, Any]:
    """The JSON bundle of ``report`` (see the module docstring)."""
    store = report.store
    ids = list(report.run_ids)
    tables: dict[str, evidence.Table] = {}
    if store.exists and ids:
        tables = {
            "instances": evidence.instances(store, ids, limits.instances),
            "values": evidence.instance_values(store, ids, limits.values),
            # the records Report.kernels reads, in the report's scope: every kernel table on the page counts alike
            "kernel_groups": evidence.with_display_names(
                evidence.kernel_groups(store, ids, limits.kernel_groups, report.scope_filter)
            ),
            "kernels": evidence.with_display_names(
                evidence.kernel_rows(store, ids, limits.kernels, report.scope_filter)
            ),
            "counters": evidence.counters(store, ids, limits.counters),
            "attribution": evidence.attribution_summary(store, ids, limits.attribution),
            "evidence_classes": evidence.evidence_classes(store, ids, limits.attribution),
            "class_meanings": evidence.Table(("class", "meaning"), tuple(CLASS_MEANINGS.items()), len(CLASS_MEANINGS)),
            "ambiguous": evidence.ambiguous_items(store, ids, limits.ambiguous),
            "provenance": evidence.provenance(store, ids, limits.provenance),
        }
    runs = [_row_dict(r) for r in report.runs]
    folders = evidence.run_folders(store, ids) if store.exists and ids else {}
    for run in runs:  # paths relative to the folder the run started in, as sources are
        cwd = folders.get(run["run_id"], "")
        run["command"] = evidence.relative_paths(run.get("command") or "", cwd)
        run["workload"] = evidence.relative_paths(run.get("workload") or "", cwd)
    timelines: list[dict[str, Any]] = []
    for run in runs:
        if len(timelines) >= limits.timeline_runs:
            break
        # the first instances, the kernels' pyramid columns, the rest aggregated in DuckDB: never the run whole
        inst, kern, extent = timeline_inputs(
            store, run["run_id"], limits.timeline.exact_limit, report.scope_filter, report.kernel_scope
        )
        if extent.total or len(kern.get("start_ns", ())):
            tl = timeline_data(run["run_id"], inst, kern, limits.timeline, extent)
            tl["label"] = f"run {run.get('plan_index', '?')} ({', '.join(run.get('backends', ()))})"
            timelines.append(tl)
        del inst, kern  # the columns of a run: gone before the next read, not after
    statuses: dict[str, int] = {}
    for run in runs:
        statuses[run["status"]] = statuses.get(run["status"], 0) + 1
    warmup = report.warmup_instances() if hasattr(report, "warmup_instances") else {}
    regions = [{**_row_dict(r), "warmup_instances": warmup.get(r.path, 0)} for r in report.regions]
    flame = evidence.flame(store, ids) if store.exists and ids and not report.pending else []
    finished = [
        {"path": p, "instances": n, "warmup": w, "wall_ns": wall, "raised": raised}
        for p, n, w, wall, raised in report.finished
    ]
    joined = {  # (a long run's kernel table is never read whole for a page: Report.first_kernels)
        name: [
            _row_dict(r)
            for r in (report.first_kernels(cap) if name == "kernels" else tuple(getattr(report, name, ()) or ())[:cap])
        ]
        for name, cap in (
            ("counters", limits.counters),
            ("kernels", limits.kernel_groups),
            ("compiler", limits.kernel_groups),
            ("attribution", 200),
            ("matches", 200),
            ("groups", 200),
            ("clocks", 200),
            ("device", 2_000),
            ("device_overhead", 200),
        )
    }
    # from every Report.kernels row, not only the embedded ones
    other_groups = {p: {"launches": n, "kernels": k} for p, (n, k) in report.other_kernel_groups().items()}
    device_timelines = (
        device.timelines(store, ids, limits.device_launches, limits.device_timeline)
        if store.exists and ids and report.device
        else []
    )
    summary = {
        "runs": len(runs),
        "status": statuses,
        "regions": len({r["path"] for r in regions}),
        "signals": sorted({r["signal"] for r in regions}),
        "instances": tables["instances"].total if tables else 0,
        "kernels": tables["kernels"].total if tables else 0,
        "warnings": list(getattr(report, "warnings", ())),
        "coverage": list(report.coverage()),
        "heterogeneity": report.heterogeneity(),
        "warmup": warmup,
    }
    return {
        "format": FORMAT,
        "palette": palette_json(),
        "title": title or f"argus report: {len(ids)} run(s)",
        "scope": getattr(report, "view_scope", ""),
        "store": str(store.path),
        "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "run_ids": ids,
        "summary": summary,
        "regions": jsonable(regions),
        "joined": jsonable(joined),
        "other_groups": other_groups,
        "runs": jsonable(runs),
        "flame": jsonable(flame),
        "finished": jsonable(finished),
        "tables": {name: t.to_json() for name, t in tables.items()},
        "timelines": timelines,
        "device_timelines": jsonable(device_timelines),
    }


def mimebundle(report: Report, limits: BundleLimits = NOTEBOOK, title: str = "") -> dict[str, Any]:
    """The notebook output of ``report``: the argus JSON, ``text/plain`` and a self-contained ``text/html``."""
    from argus_lab.views.html import fallback_html

    data = build(report, limits, title)
    return {MIME: data, "text/plain": report.text(), "text/html": fallback_html(data)}


class ReportView:
    """Displays a report in a notebook with the argus MIME bundle (what ``%%argus`` shows)."""

    def __init__(self, report: Report, title: str = "", limits: BundleLimits = NOTEBOOK) -> None:
        self.report = report
        self.title = title
        self.limits = limits

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return mimebundle(self.report, self.limits, self.title)

    def __repr__(self) -> str:
        return self.report.text()
