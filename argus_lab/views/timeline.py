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

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from argus_lab.report.names import display_name
from argus_lab.views.palette import region_color, region_colors
from argus_lab.views.perfetto import MAX_LANE, lane_name

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from argus_lab.report.timeline_rows import InstanceExtent


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

LANE_FILL = 0.8
"""How much of its lane a bar fills.  Set on every trace: plotly's default width is 0.8 of the smallest distance
between a trace's own positions, so a region whose instances sit on lanes 0 and 5 (two ranks) would draw bars four
lanes tall, over its neighbours."""


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
    run_id: str,
    instances: Columns,
    kernels: Columns,
    limits: TimelineLimits = TimelineLimits(),
    extent: InstanceExtent | None = None,
) -> dict[str, Any]:
    """The timeline of one run as a JSON-ready dict (see the module docstring for the level scheme).

    Parameters
    ----------
    run_id
        The run the rows belong to.
    instances
        Columns of ``region_instances`` (``instance_id``, ``path``, ``instance_index``, ``thread_id``, ``pid``,
        ``start_ns``, ``end_ns``, ``error``, ``warmup``; ``rank``, ``thread_name`` and ``offset_ns`` when present).
    kernels
        Columns of ``kernels`` (``instance_id``, ``name``, ``start_ns``, ``end_ns``, ``device_id``,
        ``stream_id``; ``kind``, ``rank`` and ``offset_ns`` when present).
    limits
        What to embed.
    extent
        When ``instances`` holds only the run's first instances in time order (at least ``limits.exact_limit`` of
        them: :func:`argus_lab.report.timeline_rows.timeline_inputs`), what the rest adds: the instance count, the
        run's first and last time, every region path and rank.  The kernels then name their instance's region in a
        ``path`` column (the instances are not all here to look it up by ``instance_id``).

    Lanes are keyed by rank: each rank's host threads (one lane per nesting depth, and overlap lanes where
    instances of one depth overlap in time: :func:`overlap_lanes`), then its (device, stream) lanes, rank by
    rank.  With several ranks every timestamp is put on rank 0's clock (``offset_ns``, the rank's recorded clock
    offset: ``rank-0 time = time + offset``), labels start with the rank, and ``clock`` says so; the same holds
    when a scope kept one rank other than 0 (``ranks=1``).
    """
    i_off = _arr(instances, "offset_ns")
    k_off = _arr(kernels, "offset_ns")
    i_start = _arr(instances, "start_ns") + i_off
    i_end = _arr(instances, "end_ns") + i_off
    k_start = _arr(kernels, "start_ns") + k_off
    k_end = _arr(kernels, "end_ns") + k_off
    starts = [a.min() for a in (i_start, k_start) if len(a)]
    ends = [a.max() for a in (i_end, k_end) if len(a)]
    if extent is not None:  # the instances not read as rows
        starts += [] if extent.start_ns is None else [extent.start_ns]
        ends += [] if extent.end_ns is None else [extent.end_ns]
    t0 = int(min(starts)) if starts else 0
    span = max(1, int(max(ends)) - t0) if ends else 1

    paths = _arr(instances, "path", object, "")
    iids = _arr(instances, "instance_id")
    regions: list[str] = sorted({str(p) for p in paths.tolist()} | set(extent.paths if extent else ()))
    region_of_path = {p: i for i, p in enumerate(regions)}
    # each instance's region as arrays (instance ids sorted, their region's index): no dict of a million entries
    codes = np.fromiter((region_of_path[str(p)] for p in paths.tolist()), dtype=np.int64, count=len(paths))
    by_iid = np.argsort(iids, kind="stable")
    iid_region = (iids.astype(np.int64)[by_iid], codes[by_iid])

    i_rank, k_rank = _arr(instances, "rank"), _arr(kernels, "rank")
    extent_offsets = extent.offsets if extent else ()
    ranks = sorted({int(r) for r in (*i_rank.tolist(), *k_rank.tolist(), *(r for r, _ in extent_offsets))})
    multi = len(ranks) > 1 or any(r != 0 for r in ranks)  # a multi-rank run (or a scope that kept rank r > 0)
    host_keys, host = _host_rows(instances, i_start, i_end, t0, region_of_path, limits.exact_limit, multi)
    if extent is not None:
        host["total"] = extent.total
    if "path" in kernels:  # each kernel's region named by the reader (the instances may not all be here)
        k_paths = _arr(kernels, "path", object, None)
        k_region = np.fromiter(
            (-1 if p is None else region_of_path.get(str(p), -1) for p in k_paths), np.int64, count=len(k_paths)
        )
    else:
        k_region = _kernel_regions(_arr(kernels, "instance_id"), iid_region)
    k_start -= t0  # (in place: a long run's kernel columns are not copied once more)
    k_end -= t0
    dev_keys, device = _device_rows(kernels, k_start, k_end, span, k_region, len(regions), limits, multi)
    # every lane, rank by rank (host threads first), and the rows pointed at their final lane index
    keyed = sorted([*host_keys, *dev_keys], key=lambda kl: kl[0])
    index = {k: i for i, (k, _) in enumerate(keyed)}
    lanes = [lane for _, lane in keyed]
    host["lane"] = [index[host_keys[j][0]] for j in host.pop("lane_key")]
    host["first_lane"] = min((index[k] for k, _ in host_keys), default=0)
    if device.get("total"):
        remap = np.asarray([index[k] for k, _ in dev_keys], dtype=np.int64)
        if device["exact"]:
            device["lane"] = remap[np.asarray(device["lane"], dtype=np.int64)].tolist() if device["lane"] else []
        else:
            for lvl in device["levels"]:
                lvl["lane"] = remap[np.asarray(lvl["lane"], dtype=np.int64)].tolist() if lvl["lane"] else []
    out: dict[str, Any] = {
        "run_id": run_id,
        "t0": str(t0),
        "span": span,
        "lanes": lanes,
        "regions": regions,
        "colors": region_colors(regions),
        "host": host,
        "device": device,
        "ranks": ranks,
    }
    if multi:
        offsets = dict(extent_offsets)
        offsets.update(
            (int(r), int(o))
            for r, o in zip((*i_rank.tolist(), *k_rank.tolist()), (*i_off.tolist(), *k_off.tolist()), strict=True)
        )
        out["clock"] = {
            "reference": "rank 0",
            "offsets_ns": {str(r): offsets.get(r, 0) for r in ranks},
            "note": "every rank on rank 0's clock: rank-0 time = the rank's time + its recorded clock offset "
            "(mean of the before/after estimates, argus_lab.join.skew)",
        }
    return out


LaneKey = tuple[Any, ...]


def _host_rows(
    instances: Columns,
    start: np.ndarray,
    end: np.ndarray,
    t0: int,
    region_of_path: dict[str, int],
    cap: int,
    multi: bool,
) -> tuple[list[tuple[LaneKey, dict[str, Any]]], dict[str, Any]]:
    """Host rows (up to ``cap``, in start order) and their lanes: one per (rank, process, thread, depth) and, where
    instances of one depth overlap, per overlap lane (:func:`overlap_lanes`)."""
    n = len(instances.get("instance_id", ()))
    paths = _arr(instances, "path", object, "")
    order = np.argsort(start, kind="stable")[:cap]
    pid = _arr(instances, "pid")[order]
    tid = _arr(instances, "thread_id", np.uint64)[order]
    rank = _arr(instances, "rank")[order]
    tname = _arr(instances, "thread_name", object, None)[order]
    depth = np.asarray([str(p).count("/") for p in paths[order].tolist()], dtype=np.int64)
    # each instance's row (rank, process, thread, depth) as one integer code, then its overlap lane in that row
    cols = [np.unique(c, return_inverse=True) for c in (rank, pid, tid, depth)]
    code = np.zeros(len(order), dtype=np.int64)
    for uniq, inv in cols:
        code = code * len(uniq) + np.asarray(inv, dtype=np.int64).reshape(-1)
    ucode, first, row_of = np.unique(code, return_index=True, return_inverse=True)
    row_of = np.asarray(row_of, dtype=np.int64).reshape(-1)
    over = overlap_lanes(row_of, start[order], end[order])
    n_over = np.ones(len(ucode), dtype=np.int64)
    np.maximum.at(n_over, row_of, over + 1)
    row_key = [
        (int(rank[i]), int(pid[i]), int(tid[i]), int(depth[i])) for i in np.asarray(first, dtype=np.int64).tolist()
    ]
    lanes_of = {k: int(n) for k, n in zip(row_key, n_over.tolist(), strict=True)}
    threads = sorted({k[:3] for k in row_key})
    max_depth = dict.fromkeys(threads, 0)
    for r, p, t, d in row_key:
        max_depth[(r, p, t)] = max(max_depth[(r, p, t)], d)
    name_of: dict[tuple[int, int, int], str] = {}
    for r, p, t, nm in zip(rank.tolist(), pid.tolist(), tid.tolist(), tname.tolist(), strict=True):
        if nm:
            name_of.setdefault((int(r), int(p), int(t)), str(nm))
    lanes: list[tuple[LaneKey, dict[str, Any]]] = []
    thread_no: dict[tuple[int, int, int], int] = {}
    several_pids = len({(r, p) for r, p, _ in threads}) > len({r for r, _, _ in threads})
    seen: dict[str, int] = {}
    for r, p, t in threads:
        thread_no[(r, p, t)] = sum(1 for q in thread_no if q[:2] == (r, p)) + 1
        # the lane says whose it is as people know it: the thread's name, the rank (several ranks), the process
        # (several processes of one rank); never raw ids
        who = name_of.get((r, p, t)) or f"thread {thread_no[(r, p, t)]}"
        if multi:
            who = f"rank {r} \u00b7 {who}"
        elif several_pids:
            who = f"pid {p} \u00b7 {who}"
        seen[who] = seen.get(who, 0) + 1
        if seen[who] > 1:  # another thread of the same name (e.g. one started per repetition)
            who = f"{who} #{seen[who]}"
        for d in range(max_depth[(r, p, t)] + 1):
            for o in range(lanes_of.get((r, p, t, d), 1)):
                lane = {
                    "kind": "host",
                    "label": lane_name(who if d == 0 else f"{who} (level {d + 1})", o),
                    "thread": who,
                    "rank": r,
                    "pid": p,
                    "thread_id": str(t),
                    "depth": d,
                    "overlap_lane": o,
                }
                if name_of.get((r, p, t)):
                    lane["thread_name"] = name_of[(r, p, t)]
                lanes.append(((r, 0, p, thread_no[(r, p, t)], d, o), lane))
    pos = {k: i for i, (k, _) in enumerate(lanes)}
    # a row's overlap lanes follow its first lane: lane = the row's first lane + the instance's overlap lane
    row_lane = np.asarray([pos[(r, 0, p, thread_no[(r, p, t)], d, 0)] for r, p, t, d in row_key], dtype=np.int64)
    lane_key = (row_lane[row_of] + over).tolist() if len(order) else []
    errors = _arr(instances, "error", object, "")[order]
    return lanes, {
        "total": n,
        "shown": len(order),
        "lane_key": lane_key,
        "start": (start[order] - t0).tolist(),
        "end": (end[order] - t0).tolist(),
        "iid": _arr(instances, "instance_id")[order].tolist(),
        "index": _arr(instances, "instance_index")[order].tolist(),
        "region": [region_of_path[str(p)] for p in paths[order].tolist()],
        "warmup": [bool(w) for w in _arr(instances, "warmup", bool, False)[order].tolist()],
        "error": [str(e or "") for e in errors.tolist()],
        "rank": rank.tolist(),
    }


def overlap_lanes(row: np.ndarray, start: np.ndarray, end: np.ndarray, last: int = MAX_LANE) -> np.ndarray:
    """The overlap lane of each host instance within its row (``row[i]``: an integer for its thread and depth).

    Instances of one thread and depth that overlap in time (imported ranges that start inside another and end after
    it, which the import places side by side: docs/join.md; the concurrent tasks of an asyncio event loop) cannot
    share a lane without painting over each other.  Each goes to the lowest lane of its row that is free at its
    start (lane 0 is the row itself; an instance that ends where the next starts leaves the lane free), in start
    order, as Perfetto's importer spills such slices to tracks of their own; from lane ``last`` on, what fits no
    earlier lane shares the last one (as the Perfetto export's :data:`~argus_lab.views.perfetto.MAX_LANE`).

    Rows whose instances never overlap (the common case) are found with numpy and stay on lane 0; the others are
    swept once in start order with a heap of the lanes' end times and a heap of free lanes: ``O(n log k)`` for
    ``k`` lanes.
    """
    n = len(row)
    out = np.zeros(n, dtype=np.int64)
    if n < 2:
        return out
    by = np.lexsort((start, row))  # by row, then start (stable: ties keep their order)
    r, s, e = row[by], start[by], np.maximum(end[by], start[by])
    cuts = np.flatnonzero(r[1:] != r[:-1]) + 1
    for idx, ss, ee in zip(np.split(by, cuts), np.split(s, cuts), np.split(e, cuts), strict=True):
        if len(ss) < 2 or not (ss[1:] < np.maximum.accumulate(ee)[:-1]).any():
            continue  # nothing in this row starts before an earlier one ended
        out[idx] = _sweep(ss.tolist(), ee.tolist(), last)
    return out


def _sweep(start: list[int], end: list[int], last: int) -> list[int]:
    """The lanes of one row's instances (in start order), lowest free lane first."""
    busy: list[tuple[int, int]] = []  # (end, lane) of the instances still open
    idle: list[int] = []  # lanes opened before and free now
    opened = 0
    out = []
    for s, e in zip(start, end, strict=True):
        while busy and busy[0][0] <= s:
            heapq.heappush(idle, heapq.heappop(busy)[1])
        if idle:
            lane = heapq.heappop(idle)
        else:
            lane = min(opened, last)
            opened = lane + 1
        heapq.heappush(busy, (e, lane))
        out.append(lane)
    return out


def _device_rows(
    kernels: Columns,
    start: np.ndarray,
    end: np.ndarray,
    span: int,
    region: np.ndarray,
    n_regions: int,
    limits: TimelineLimits,
    multi: bool,
) -> tuple[list[tuple[LaneKey, dict[str, Any]]], dict[str, Any]]:
    """Device rows (times relative to ``t0``) and their lanes: one per (rank, device, stream)."""
    n = len(kernels.get("start_ns", ()))
    if n == 0:
        empty = {"total": 0, "exact": True, "lane": [], "start": [], "end": [], "name": [], "names": [], "region": []}
        return [], empty
    rank = _arr(kernels, "rank")
    dev = _arr(kernels, "device_id")
    stream = _arr(kernels, "stream_id")
    # each kernel's (rank, device, stream) as one integer code in their order (no n x 3 copy of the columns)
    code = np.zeros(n, dtype=np.int64)
    values = []
    for col in (rank, dev, stream):
        uniq, inv = np.unique(col, return_inverse=True)
        code = code * len(uniq) + np.asarray(inv, dtype=np.int64).reshape(-1)
        values.append(uniq)
        del inv
    ucode, lane_idx = np.unique(code, return_inverse=True)
    del code
    n_dev, n_stream = len(values[1]), len(values[2])
    ukeys = [
        (values[0][c // (n_dev * n_stream)], values[1][c // n_stream % n_dev], values[2][c % n_stream])
        for c in ucode.tolist()
    ]
    lanes: list[tuple[LaneKey, dict[str, Any]]] = []
    for r, d, st in ((int(r), int(d), int(st)) for r, d, st in ukeys):
        label = f"GPU {d} stream {st}"
        if multi:
            label = f"rank {r} \u00b7 {label}"
        lanes.append(
            (
                (int(r), 1, int(d), int(st)),
                {"kind": "device", "label": label, "rank": int(r), "device": int(d), "stream": int(st)},
            )
        )
    lane = np.asarray(lane_idx, dtype=np.int64).reshape(-1)
    if n <= limits.exact_limit:
        iid = _arr(kernels, "instance_id")
        names_arr = _arr(kernels, "name", object, "")
        names, name_idx = np.unique(names_arr.astype(str), return_inverse=True)
        return lanes, {
            "total": n,
            "exact": True,
            "lane": lane.tolist(),
            "start": start.tolist(),
            "end": end.tolist(),
            "name": name_idx.astype(np.int64).tolist(),
            "names": [display_name(str(n)) for n in names.tolist()],
            "region": region.tolist(),
            "iid": iid.tolist(),
            "class": [str(c) for c in _arr(kernels, "class", object, "exact").tolist()],
        }
    return lanes, {"total": n, "exact": False, "levels": pyramid(start, end, lane, region, span, n_regions, limits)}


def _kernel_regions(iid: np.ndarray, iid_region: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Each kernel's region: that of its instance (``iid_region``: instance ids sorted, their region's index); -1 =
    outside every region."""
    keys, vals = iid_region
    if not len(keys):
        return np.full(len(iid), -1, dtype=np.int64)
    pos = np.clip(np.searchsorted(keys, iid), 0, len(keys) - 1)
    return np.where(keys[pos] == iid, vals[pos], -1)


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
    del by_len, dur, lane64  # (the sorted copies are all a level needs)
    while True:
        width = max(1.0, span / nb)
        b = (s_sorted / width).astype(np.int64)  # (in place below: a level's temporaries are few)
        np.minimum(b, nb - 1, out=b)
        key = lane_sorted * nb
        key += b
        del b
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
    colors: list[str] = list(timeline.get("colors") or region_colors(regions))
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
            width=LANE_FILL,
            marker={"color": colors[r], "line": {"width": 0}},
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
                width=LANE_FILL,
                marker={"color": [region_color(r) for r in dev["region"]], "line": {"width": 0}},
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
                width=LANE_FILL,
                marker={"color": [region_color(r) for r in lvl["region"]], "line": {"width": 0}},
                name="kernels (aggregated)",
                hovertext=[
                    f"{c} kernels, busy {u / 1e3:.1f} us" for c, u in zip(lvl["count"], lvl["busy"], strict=True)
                ],
                hoverinfo="text",
            )
    fig.update_layout(
        barmode="overlay",
        title=plotly_text(title) if title else None,
        xaxis_title="ms since the run's first timestamp"
        + (" (every rank on rank 0's clock)" if "clock" in timeline else ""),
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
