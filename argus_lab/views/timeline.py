"""Timeline data: host region instances nested per thread, device work per stream, aggregated to the screen.

:func:`timeline_data` turns the region instances and kernel records of one run into the compact structure the
report renderer (``argus_lab/static/report-renderer.js``) draws and :func:`figure` draws with plotly in Python.

Scale: a run with up to ``exact_limit`` kernels embeds every kernel.  A bigger run embeds a *pyramid* instead:
level 0 cuts the run into ``base_bins`` time bins per device lane, each further level has ``factor`` times more
bins, and levels are added until ``bin_budget`` bins are stored (only non-empty bins count).  The renderer picks,
for the visible window, the coarsest level whose bins are narrower than a screen pixel allows, so zooming in
refines the picture without a kernel or a server, and the payload stays bounded whatever the kernel count.
All times are nanoseconds relative to ``t0`` (the first timestamp of the run), so they fit JSON numbers exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import plotly.graph_objects as go


@dataclass(frozen=True)
class TimelineLimits:
    """How much of a run's timeline is embedded.

    Attributes
    ----------
    exact_limit
        Runs with at most this many kernels embed every kernel; host instances are capped at this number too.
    base_bins
        Bins per device lane at the coarsest pyramid level.
    factor
        Bin multiplication from one level to the next.
    bin_budget
        Levels are added until this many non-empty bins are stored in all.
    """

    exact_limit: int = 20_000
    base_bins: int = 1024
    factor: int = 4
    bin_budget: int = 150_000


Columns = Mapping[str, Sequence[Any] | np.ndarray]


def _arr(cols: Columns, name: str, dtype: Any = np.int64, default: Any = 0) -> np.ndarray:
    col = cols.get(name)
    n = len(next(iter(cols.values()))) if cols else 0
    if col is None:
        return np.full(n, default, dtype=dtype)
    if dtype is object:
        return np.asarray(col, dtype=object)
    a = np.asarray([default if v is None else v for v in col] if not isinstance(col, np.ndarray) else col)
    return a.astype(dtype, copy=False)


def timeline_data(
    run_id: str, instances: Columns, kernels: Columns, limits: TimelineLimits = TimelineLimits()
) -> dict[str, Any]:
    """The timeline of one run as a JSON-ready dict (see the module docstring for the level scheme).

    Parameters
    ----------
    run_id
        The run the rows belong to.
    instances
        Columns of ``region_instances`` (``instance_id``, ``path``, ``instance_index``, ``thread_id``, ``pid``,
        ``start_ns``, ``end_ns``, ``error``, ``warmup``).
    kernels
        Columns of ``kernels`` (``instance_id``, ``name``, ``start_ns``, ``end_ns``, ``device_id``,
        ``stream_id``; ``kind`` when present).
    limits
        What to embed.
    """
    i_start = _arr(instances, "start_ns")
    i_end = _arr(instances, "end_ns")
    k_start = _arr(kernels, "start_ns")
    k_end = _arr(kernels, "end_ns")
    starts = [a.min() for a in (i_start, k_start) if len(a)]
    ends = [a.max() for a in (i_end, k_end) if len(a)]
    t0 = int(min(starts)) if starts else 0
    span = max(1, int(max(ends)) - t0) if ends else 1

    paths = _arr(instances, "path", object, "")
    iids = _arr(instances, "instance_id")
    regions: list[str] = sorted({str(p) for p in paths.tolist()})
    region_of_path = {p: i for i, p in enumerate(regions)}
    iid_region = {int(i): region_of_path[str(p)] for i, p in zip(iids.tolist(), paths.tolist(), strict=True)}

    lanes: list[dict[str, Any]] = []
    host = _host_rows(instances, t0, region_of_path, lanes, limits.exact_limit)
    device = _device_rows(kernels, t0, span, iid_region, len(regions), lanes, limits)
    return {
        "run_id": run_id,
        "t0": str(t0),
        "span": span,
        "lanes": lanes,
        "regions": regions,
        "host": host,
        "device": device,
    }


def _host_rows(
    instances: Columns, t0: int, region_of_path: dict[str, int], lanes: list[dict[str, Any]], cap: int
) -> dict[str, Any]:
    n = len(instances.get("instance_id", ()))
    total = n
    paths = _arr(instances, "path", object, "")
    start = _arr(instances, "start_ns")
    end = _arr(instances, "end_ns")
    order = np.argsort(start, kind="stable")[:cap]
    pid = _arr(instances, "pid")[order]
    tid = _arr(instances, "thread_id", np.uint64)[order]
    depth = np.asarray([str(p).count("/") for p in paths[order].tolist()], dtype=np.int64)
    keys = sorted({(int(p), int(t)) for p, t in zip(pid.tolist(), tid.tolist(), strict=True)})
    row_of: dict[tuple[int, int, int], int] = {}
    first_row = len(lanes)
    max_depth = {k: 0 for k in keys}
    for p, t, d in zip(pid.tolist(), tid.tolist(), depth.tolist(), strict=True):
        max_depth[(int(p), int(t))] = max(max_depth[(int(p), int(t))], int(d))
    names = _thread_labels(instances, order, pid, tid, keys)
    for p, t in keys:
        for d in range(max_depth[(p, t)] + 1):
            row_of[(p, t, d)] = len(lanes)
            label = names[(p, t)] if d == 0 else f"{names[(p, t)]} (level {d + 1})"
            lanes.append(
                {"kind": "host", "label": label, "pid": p, "thread_id": str(t), "thread": names[(p, t)], "depth": d}
            )
    rows = [
        row_of[(int(p), int(t), int(d))] for p, t, d in zip(pid.tolist(), tid.tolist(), depth.tolist(), strict=True)
    ]
    errors = _arr(instances, "error", object, "")[order]
    return {
        "total": total,
        "shown": len(order),
        "lane": rows,
        "start": (start[order] - t0).tolist(),
        "end": (end[order] - t0).tolist(),
        "iid": _arr(instances, "instance_id")[order].tolist(),
        "index": _arr(instances, "instance_index")[order].tolist(),
        "region": [region_of_path[str(p)] for p in paths[order].tolist()],
        "warmup": [bool(w) for w in _arr(instances, "warmup", bool, False)[order].tolist()],
        "error": [str(e or "") for e in errors.tolist()],
        "first_lane": first_row,
    }


def _thread_labels(
    instances: Columns, order: np.ndarray, pid: np.ndarray, tid: np.ndarray, keys: list[tuple[int, int]]
) -> dict[tuple[int, int], str]:
    """A lane label per (pid, thread): the thread's name (``MainThread``), after ``rank r ·`` when the run has
    several ranks (or ``pid p ·`` for several processes without ranks); ``thread k`` when no name was recorded."""
    names_col = _arr(instances, "thread_name", object, "")[order].tolist()
    ranks_col = _arr(instances, "rank", np.int64, 0)[order].tolist() if "rank" in instances else None
    named: dict[tuple[int, int], str] = {}
    rank_of: dict[int, int] = {}
    for i, (p, t) in enumerate(zip(pid.tolist(), tid.tolist(), strict=True)):
        key = (int(p), int(t))
        if not named.get(key) and names_col[i]:
            named[key] = str(names_col[i])
        if ranks_col is not None:
            rank_of.setdefault(int(p), int(ranks_col[i]))
    several_ranks = len(set(rank_of.values())) > 1
    several_pids = len({p for p, _ in keys}) > 1
    out: dict[tuple[int, int], str] = {}
    seen: dict[str, int] = {}
    for p, t in keys:
        base = named.get((p, t)) or f"thread {sum(1 for q, _ in out if q == p) + 1}"
        if several_ranks:
            base = f"rank {rank_of.get(p, 0)} · {base}"
        elif several_pids:
            base = f"pid {p} · {base}"
        seen[base] = seen.get(base, 0) + 1
        out[(p, t)] = base if seen[base] == 1 else f"{base} #{seen[base]}"
    return out


def _device_rows(
    kernels: Columns,
    t0: int,
    span: int,
    iid_region: dict[int, int],
    n_regions: int,
    lanes: list[dict[str, Any]],
    limits: TimelineLimits,
) -> dict[str, Any]:
    n = len(kernels.get("start_ns", ()))
    if n == 0:
        return {"total": 0, "exact": True, "lane": [], "start": [], "end": [], "name": [], "names": [], "region": []}
    start = _arr(kernels, "start_ns") - t0
    end = _arr(kernels, "end_ns") - t0
    dev = _arr(kernels, "device_id")
    stream = _arr(kernels, "stream_id")
    rank = _arr(kernels, "rank") if "rank" in kernels else np.zeros(n, dtype=np.int64)
    several = len(np.unique(rank)) > 1
    lane_key = (rank * (1 << 16) + dev) * (1 << 32) + stream
    ukeys, lane_idx = np.unique(lane_key, return_inverse=True)
    base = len(lanes)
    for k in ukeys.tolist():
        r, d, st = k >> 48, (k >> 32) & 0xFFFF, k & 0xFFFFFFFF
        label = f"GPU {d} stream {st}"
        lanes.append({"kind": "device", "label": f"rank {r} · {label}" if several else label, "rank": r})
    lane = lane_idx.astype(np.int64) + base
    iid = _arr(kernels, "instance_id")
    # region of each kernel: its instance's region; -1 = outside every region
    if iid_region:
        keys = np.fromiter(iid_region.keys(), dtype=np.int64)
        vals = np.fromiter(iid_region.values(), dtype=np.int64)
        order = np.argsort(keys)
        keys, vals = keys[order], vals[order]
        pos = np.clip(np.searchsorted(keys, iid), 0, len(keys) - 1)
        region = np.where(keys[pos] == iid, vals[pos], -1)
    else:
        region = np.full(n, -1, dtype=np.int64)
    if n <= limits.exact_limit:
        names_arr = _arr(kernels, "name", object, "")
        names, name_idx = np.unique(names_arr.astype(str), return_inverse=True)
        return {
            "total": n,
            "exact": True,
            "lane": lane.tolist(),
            "start": start.tolist(),
            "end": end.tolist(),
            "name": name_idx.astype(np.int64).tolist(),
            "names": names.tolist(),
            "region": region.tolist(),
            "iid": iid.tolist(),
        }
    return {"total": n, "exact": False, "levels": pyramid(start, end, lane, region, span, n_regions, limits)}


def pyramid(
    start: np.ndarray,
    end: np.ndarray,
    lane: np.ndarray,
    region: np.ndarray,
    span: int,
    n_regions: int,
    limits: TimelineLimits = TimelineLimits(),
) -> list[dict[str, Any]]:
    """Aggregation levels of kernels: per level, non-empty (lane, bin) cells with count, busy time, region.

    A kernel is counted in the bin where it starts; ``busy`` sums durations (it can exceed the bin width when
    kernels overlap or run past the bin).  ``region`` is the region of the longest kernel in the cell (-1 none).
    """
    dur = (end - start).astype(np.float64)
    levels: list[dict[str, Any]] = []
    stored = 0
    nb = limits.base_bins
    lane64 = lane.astype(np.int64)
    # longest kernels first, so np.unique's first occurrence is the longest kernel of each cell
    by_len = np.argsort(-dur, kind="stable")
    s_sorted, lane_sorted, dur_sorted, reg_sorted = start[by_len], lane64[by_len], dur[by_len], region[by_len]
    while True:
        width = max(1.0, span / nb)
        b = np.minimum((s_sorted / width).astype(np.int64), nb - 1)
        key = lane_sorted * nb + b
        ukey, first, inv = np.unique(key, return_index=True, return_inverse=True)
        count = np.bincount(inv)
        busy = np.bincount(inv, weights=dur_sorted)
        levels.append(
            {
                "bin_ns": width,
                "bins": nb,
                "lane": (ukey // nb).tolist(),
                "bin": (ukey % nb).tolist(),
                "count": count.tolist(),
                "busy": np.round(busy).astype(np.int64).tolist(),
                "region": reg_sorted[first].tolist(),
            }
        )
        stored += len(ukey)
        if len(ukey) >= len(start) or width <= 1.0 or stored + len(ukey) * limits.factor > limits.bin_budget:
            break
        nb *= limits.factor
    return levels


def figure(timeline: Mapping[str, Any], title: str = "") -> go.Figure:
    """A plotly figure of :func:`timeline_data` output (the coarsest level when the run is aggregated)."""
    import plotly.graph_objects as go

    from argus_lab.views.escape import plotly_text

    fig = go.Figure()
    regions: list[str] = list(timeline["regions"])
    host = timeline["host"]
    lanes = timeline["lanes"]
    for r, name in enumerate(regions):
        sel = [i for i, x in enumerate(host["region"]) if x == r]
        if not sel:
            continue
        fig.add_bar(
            orientation="h",
            y=[host["lane"][i] for i in sel],
            base=[host["start"][i] / 1e6 for i in sel],
            x=[(host["end"][i] - host["start"][i]) / 1e6 for i in sel],
            name=plotly_text(name),
            legendgroup=str(r),
            hovertext=[f"{plotly_text(name)} #{host['index'][i]} (instance {host['iid'][i]})" for i in sel],
            hoverinfo="text+x",
            customdata=[["instance", host["iid"][i]] for i in sel],
        )
    dev = timeline["device"]
    if dev.get("total"):
        if dev["exact"]:
            ys, xs, bs, texts = dev["lane"], dev["start"], dev["end"], dev["names"]
            fig.add_bar(
                orientation="h",
                y=ys,
                base=[s / 1e6 for s in xs],
                x=[(e - s) / 1e6 for s, e in zip(xs, bs, strict=True)],
                name="kernels",
                hovertext=[plotly_text(texts[i]) for i in dev["name"]],
                hoverinfo="text+x",
            )
        else:
            lvl = dev["levels"][0]
            w = lvl["bin_ns"]
            fig.add_bar(
                orientation="h",
                y=lvl["lane"],
                base=[b * w / 1e6 for b in lvl["bin"]],
                x=[w / 1e6] * len(lvl["bin"]),
                name="kernels (aggregated)",
                hovertext=[
                    f"{c} kernels, busy {u / 1e3:.1f} us" for c, u in zip(lvl["count"], lvl["busy"], strict=True)
                ],
                hoverinfo="text",
            )
    fig.update_layout(
        barmode="overlay",
        title=plotly_text(title) if title else None,
        xaxis_title="ms since the run's first timestamp",
        yaxis={
            "tickmode": "array",
            "tickvals": list(range(len(lanes))),
            "ticktext": [plotly_text(lane["label"]) for lane in lanes],
            "autorange": "reversed",
        },
        height=max(260, 40 + 26 * len(lanes)),
        margin={"l": 10, "r": 10, "t": 40 if title else 10, "b": 40},
    )
    return fig
