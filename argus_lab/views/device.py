"""The per-SM lane timeline of one instrumented launch: where each SM's time went, and what its tail cost.

:func:`launch_data` turns the rows of one launch (``device_intervals``, ``device_programs``, ``device_sm`` and what
the join placed it under) into the compact structure that ``argus_lab/static/report-renderer.js`` draws (the
*Device* tab of a report and of its exported HTML) and :func:`figure` draws with plotly in Python.  One lane per SM,
ordered by when the SM finished (the last-finishing SMs at the bottom, so the tail reads as a staircase); bars are
device region occurrences coloured by region (``colors``, from :mod:`argus_lab.views.palette`, the colours the
renderer uses too); two marks show the median SM end and the last SM end, whose distance
is ``dev.tail``.  Times are GPU ns (``%globaltimer``) relative to the launch's first CTA begin.

Scale: a launch with up to ``exact_limit`` occurrences embeds each one; a larger one embeds the aggregation pyramid
of :func:`argus_lab.views.timeline.pyramid` over (SM lane, time bin) cells instead (count, busy time, the region of
the longest occurrence), so a persistent GEMM with a million marked k-steps stays a bounded payload and the
renderer refines as one zooms in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from argus_lab.report.device_launches import LaunchRef, launch_columns, launch_values, launches
from argus_lab.report.json import jsonable
from argus_lab.views.palette import region_colors
from argus_lab.views.timeline import TimelineLimits, pyramid

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from argus_lab.store import Store

DEVICE_LIMITS = TimelineLimits(exact_limit=5_000, base_bins=128, factor=4, bin_budget=40_000)
"""Notebook outputs: every occurrence up to 5,000, else 128 bins per SM lane at the coarsest level."""
DEVICE_EXPORT_LIMITS = TimelineLimits(exact_limit=20_000, base_bins=128, factor=4, bin_budget=150_000)
"""Exported pages carry more."""


def pick(refs: Sequence[LaunchRef], limit: int) -> list[LaunchRef]:
    """Launches worth drawing: the first measured launch of each (run, host path, kernel), then more, up to
    ``limit``."""
    firsts: dict[tuple[str, str, str], LaunchRef] = {}
    for r in refs:
        firsts.setdefault((r.run_id, r.path, r.kernel), r)
    chosen = list(firsts.values())[:limit]
    for r in refs:
        if len(chosen) >= limit:
            break
        if r not in chosen:
            chosen.append(r)
    return chosen


def launch_data(ref: LaunchRef, cols: Mapping[str, Mapping[str, Any]], limits: TimelineLimits = DEVICE_LIMITS,
                values: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:  # fmt: skip
    """The per-SM timeline of one launch as a JSON-ready dict (see the module docstring)."""
    iv, pr, sm = cols["intervals"], cols["programs"], cols["sm"]
    sm_ids = np.asarray(sm.get("sm", []), dtype=np.int64)  # ordered by end, then id (see launch_columns)
    ends = np.asarray(sm.get("end_ns", []), dtype=np.int64)
    begins = np.asarray(pr.get("t_begin_ns", []), dtype=np.int64)
    t0 = int(begins.min()) if begins.size else int(np.asarray(iv.get("t_start_ns", [0]), dtype=np.int64).min(initial=0))
    span = max(1, int(ends.max()) - t0) if ends.size else 1
    lane_of = {int(s): i for i, s in enumerate(sm_ids.tolist())}
    names_arr = np.asarray(iv.get("region", []), dtype=object).astype(str)
    regions, region_idx = np.unique(names_arr, return_inverse=True) if names_arr.size else (np.array([]), np.array([]))
    start = np.asarray(iv.get("t_start_ns", []), dtype=np.int64) - t0
    end = np.asarray(iv.get("t_end_ns", []), dtype=np.int64) - t0
    ivsm = np.asarray(iv.get("sm", []), dtype=np.int64)
    lane = np.asarray([lane_of.get(int(s), -1) for s in ivsm.tolist()], dtype=np.int64)
    keep = lane >= 0
    n = int(keep.sum())
    med_end = float(np.median(ends - t0)) if ends.size else 0.0  # relative first: epoch ns lose 256 ns as doubles
    data: dict[str, Any] = {
        "run_id": ref.run_id,
        "launch": ref.launch,
        "kernel": ref.kernel,
        "path": ref.path,
        "instance_id": ref.instance_id,
        "instance_index": ref.instance_index,
        "kernel_key": ref.kernel_key,
        "attribution": ref.attribution,
        "warmup": ref.warmup,
        "label": f"{ref.path} #{ref.instance_index if ref.instance_index is not None else '?'} \u00b7 {ref.kernel} "
        f"\u00b7 launch {ref.launch}",
        "t0": str(t0),
        "span": span,
        "regions": [str(r) for r in regions.tolist()],
        "colors": region_colors([str(r) for r in regions.tolist()]),
        "lanes": [f"SM {s}" for s in sm_ids.tolist()],
        "sm": {
            "sm": sm_ids.tolist(),
            "programs": np.asarray(sm.get("programs", []), dtype=np.int64).tolist(),
            "begin": (np.asarray(sm.get("begin_ns", []), dtype=np.int64) - t0).tolist(),
            "end": (ends - t0).tolist(),
            "busy": np.asarray(sm.get("busy_ns", []), dtype=np.int64).tolist(),
        },
        "tail": {
            "median_end": med_end,
            "last_end": float(ends.max() - t0) if ends.size else 0.0,
            "imbalance": float(ends.max() - t0 - med_end) if ends.size else 0.0,
        },
        "values": jsonable([dict(v) for v in values]),
        "total": n,
    }
    if n <= limits.exact_limit:
        data["exact"] = True
        data["lane"] = lane[keep].tolist()
        data["start"] = start[keep].tolist()
        data["end"] = end[keep].tolist()
        data["region"] = np.asarray(region_idx, dtype=np.int64)[keep].tolist()
        data["depth"] = np.asarray(iv.get("depth", []), dtype=np.int64)[keep].tolist()
        data["cta"] = np.asarray(iv.get("cta", []), dtype=np.int64)[keep].tolist()
    else:
        data["exact"] = False
        data["levels"] = pyramid(
            start[keep], end[keep], lane[keep], np.asarray(region_idx, dtype=np.int64)[keep], span, len(regions), limits
        )
    return data


def timelines(
    store: Store, ids: Sequence[str], count: int, limits: TimelineLimits = DEVICE_LIMITS
) -> list[dict[str, Any]]:
    """The per-SM timelines of up to ``count`` launches of the runs (see :func:`pick`)."""
    out = []
    for ref in pick(launches(store, ids), count):
        cols = launch_columns(store, ref.run_id, ref.launch)
        out.append(launch_data(ref, cols, limits, launch_values(store, ref.run_id, ref.launch)))
    return out


def figure(data: Mapping[str, Any], title: str = "") -> go.Figure:
    """A plotly figure of :func:`launch_data` output (the coarsest level when the launch is aggregated)."""
    import plotly.graph_objects as go

    from argus_lab.views.escape import plotly_text

    fig = go.Figure()
    regions: list[str] = list(data["regions"])
    colors: list[str] = list(data.get("colors") or region_colors(regions))
    lanes: list[str] = list(data["lanes"])
    if data.get("exact", True):
        for r, name in enumerate(regions):
            sel = [i for i, x in enumerate(data["region"]) if x == r]
            if not sel:
                continue
            fig.add_bar(
                orientation="h",
                y=[data["lane"][i] for i in sel],
                base=[data["start"][i] / 1e3 for i in sel],
                x=[max(data["end"][i] - data["start"][i], 1) / 1e3 for i in sel],
                width=[0.8 - 0.25 * min(data["depth"][i], 2) for i in sel],
                marker={"color": colors[r], "line": {"width": 0}},
                name=plotly_text(name),
                hovertext=[f"{plotly_text(name)} · CTA {data['cta'][i]} · {lanes[data['lane'][i]]}" for i in sel],
                hoverinfo="text+x",
            )
    else:
        lvl = data["levels"][0]
        w = lvl["bin_ns"]
        for r, name in enumerate(regions):
            sel = [i for i, x in enumerate(lvl["region"]) if x == r]
            if not sel:
                continue
            fig.add_bar(
                orientation="h",
                y=[lvl["lane"][i] for i in sel],
                base=[lvl["bin"][i] * w / 1e3 for i in sel],
                x=[w / 1e3] * len(sel),
                width=0.8,
                marker={"color": colors[r], "line": {"width": 0}},
                name=f"{plotly_text(name)} (aggregated)",
                hovertext=[f"{lvl['count'][i]} occurrence(s), busy {lvl['busy'][i] / 1e3:.2f} us" for i in sel],
                hoverinfo="text",
            )
    ticks = list(range(0, len(lanes), max(1, -(-len(lanes) // 44))))  # every lane drawn, a readable share labelled
    tail = data["tail"]
    for x, label in ((tail["median_end"], "median SM end"), (tail["last_end"], "last SM end")):
        fig.add_vline(x=x / 1e3, line_dash="dash", line_color="#444", annotation_text=label)
    fig.update_layout(
        barmode="overlay",
        title=plotly_text(title or data.get("label", "")),
        xaxis_title="µs since the launch's first CTA began (GPU %globaltimer)",
        yaxis={
            "tickmode": "array",
            "tickvals": ticks,
            "ticktext": [plotly_text(lanes[i]) for i in ticks],
            "autorange": "reversed",
        },
        height=max(300, 60 + 7 * len(lanes)),
        margin={"l": 10, "r": 10, "t": 50, "b": 40},
    )
    return fig


__all__ = ["DEVICE_EXPORT_LIMITS", "DEVICE_LIMITS", "figure", "launch_data", "pick", "timelines"]
