"""Time samples (NVML, PM sampling) over region instances: the join's one implementation of sample windows.

A sample at ``t`` stands for the time nearer to it than to its neighbours of the same series (device, signal);
PM samples carry their own window end.  Each window is cut at the innermost-instance timeline of every thread
(``_j_seg``) and split over the instances it overlaps: one ``temporal`` attribution per piece (``ambiguous`` when
instances of several threads overlap the window), ``unattributed`` for what lies outside every region.  Values
per instance: *levels* (units in :data:`LEVEL_UNITS`: W, MHz, %, C ...) are the time-weighted mean over the
instance; other sampled values (PM ``.sum`` counters) are the overlapped share of each sample's value.  Each value
is labelled with the backend that sampled it (:data:`SAMPLE_BACKENDS`).

Run by :mod:`argus_lab.join.attribution` after the kernel attribution (it reads ``_j_runs``, ``_j_threads``,
``_j_seg`` and ``_j_prov``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from argus_lab.join.arrays import changes, floats, ints, run_codes
from argus_lab.join.signatures import Levels
from argus_lab.plan.catalog import aggregation

if TYPE_CHECKING:
    import duckdb

    from argus_lab.join.kernel_values import Nodes
    from argus_lab.join.timeline import Timeline
    from argus_lab.join.values import Values

LEVEL_UNITS: tuple[str, ...] = ("W", "MHz", "C", "%", "pct", "percent", "ratio")
"""Units of sampled *levels* (time-weighted mean over an instance); other sampled values are split by share."""

SAMPLE_BACKENDS: tuple[tuple[str, str], ...] = (("pm:", "pm"), ("", "nvml"))
"""(signal prefix, backend) of sampled signals, the longest matching prefix wins: ``pm:`` signals come from PM
sampling, the others (``sys.*``) from NVML."""

SAMPLES = """
CREATE OR REPLACE TEMP TABLE _j_s AS
WITH s AS (
    SELECT run_id, coalesce(device_id, 0) AS device_id, signal, t_ns, value, unit,
           lag(t_ns) OVER g AS prev_ns, lead(t_ns) OVER g AS next_ns
    FROM samples WHERE run_id IN (SELECT run_id FROM _j_runs) AND value IS NOT NULL
    WINDOW g AS (PARTITION BY run_id, coalesce(device_id, 0), signal ORDER BY t_ns)
)
SELECT run_id, device_id, signal, t_ns, value, unit,
       signal || '@' || device_id || '@' || t_ns AS key,
       CASE WHEN prev_ns IS NOT NULL THEN (prev_ns + t_ns) // 2
            WHEN next_ns IS NOT NULL THEN t_ns - (next_ns - t_ns) // 2 ELSE t_ns END AS w0,
       CASE WHEN next_ns IS NOT NULL THEN (t_ns + next_ns) // 2
            WHEN prev_ns IS NOT NULL THEN t_ns + (t_ns - prev_ns) // 2 ELSE t_ns + 1 END AS w1
FROM s
"""

SAMPLE_ROWS = (
    "SELECT run_id, device_id, signal, unit, value, key, w0, w1 FROM _j_s ORDER BY run_id, device_id, signal, w0"
)

# the attribution rows of the samples (run_id, evidence, evidence_id, instance_id, class, weight, reason,
# target_run_id), from the pieces (registered as _j_sp): the join writes them with its other rows, in one insert
SAMPLE_ATTRIBUTION_ROWS = """
SELECT p.run_id, 'sample', p.key, p.inner_id,
       CASE WHEN p.threads > 1 THEN 'ambiguous' ELSE 'temporal' END,
       p.len / p.wlen,
       CASE WHEN p.threads > 1
            THEN printf('%.1f%% of the sample window; region instances of %d threads overlap it', 100 * p.len / p.wlen,
                        p.threads)
            ELSE printf('%.1f%% of the sample window overlaps this instance', 100 * p.len / p.wlen) END,
       p.run_id
FROM _j_sp p
UNION ALL
SELECT s.run_id, 'sample', s.key, NULL, 'unattributed', greatest(0.0, 1.0 - s.covered),
       printf('%.1f%% of the sample window lies outside every region', 100 * greatest(0.0, 1.0 - s.covered)), NULL
FROM _j_sw s
WHERE s.covered < 1.0 - 1e-9
"""


@dataclass(frozen=True)
class Split:
    """The samples (``_j_sw``: one row each, with the share of its window that instances cover) and the pieces of
    their windows (``_j_sp``: per sample, thread and innermost instance, with the number of threads whose instances
    the window overlaps), which :data:`SAMPLE_ATTRIBUTION_ROWS` reads."""

    samples: pa.Table
    pieces: pa.Table


def derive(con: duckdb.DuckDBPyConnection, nodes: Nodes, timeline: Timeline, values: Values) -> Split | None:
    """Split the samples of the join's runs over the instances and hand their per-instance values to ``values``;
    returns the split (``None`` without samples) for the attribution rows."""
    con.execute(SAMPLES)
    samples = con.sql(SAMPLE_ROWS).to_arrow_table()
    if samples.num_rows == 0:
        return None
    pieces = _pieces(timeline, samples, nodes.runs)
    _values(con, nodes, pieces, values)
    share = ints(pieces.column("len")) / ints(pieces.column("wlen"))
    covered = np.bincount(ints(pieces.column("sample")), weights=share, minlength=samples.num_rows)
    kept = samples.select(["run_id", "key"]).append_column("covered", pa.array(covered, type=pa.float64()))
    return Split(kept, pieces)


def _pieces(timeline: Timeline, samples: pa.Table, runs: list[str]) -> pa.Table:
    """Per (sample, thread, innermost instance): how long the sample's window and the instance's stretch of the
    thread's timeline overlap (``len``; only where they do), with the window's length (``wlen``).

    A thread's timeline is a run of segments, each from one event to the next (the last one open-ended), with the
    instance innermost after the event; the stretch before the first event, and segments with no instance open,
    belong to no instance.  A sample's window is ``[w0, w1)``; the windows of one series follow each other.  Runs
    are numbered by their position in ``runs``; ``sample`` (the row of ``samples``) and ``thread`` (a number per
    (run, rank, thread)) say which window and timeline each overlap comes from."""
    t_run, t_rank, t, inner, thread = timeline.run, timeline.rank, timeline.t, timeline.inner, timeline.thread
    seg_end = timeline.segment_ends()
    open_ = np.flatnonzero(inner != 0)
    s_run = run_codes(samples.column("run_id"), runs)
    signal = samples.column("signal").combine_chunks().dictionary_encode().indices.to_numpy(zero_copy_only=False)
    bounds = np.r_[np.flatnonzero(changes(s_run, ints(samples.column("device_id")), signal)), len(s_run)]
    w0, w1 = ints(samples.column("w0")), ints(samples.column("w1"))
    found_s: list[np.ndarray] = []
    found_g: list[np.ndarray] = []
    found_len: list[np.ndarray] = []
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        segs = open_[t_run[open_] == s_run[lo]]  # every thread of the series' run (any rank)
        a, c = t[segs], seg_end[segs]
        first = lo + np.searchsorted(w1[lo:hi], a, side="right")  # the first window ending after the start
        stop = lo + np.searchsorted(w0[lo:hi], c, side="left")  # past the last window starting before the end
        count = np.maximum(stop - first, 0)
        seg = np.repeat(segs, count)
        win = np.repeat(first, count) + (np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count))
        length = np.minimum(seg_end[seg], w1[win]) - np.maximum(t[seg], w0[win])
        keep = length > 0
        found_s.append(win[keep])
        found_g.append(seg[keep])
        found_len.append(length[keep])
    win = np.concatenate(found_s) if found_s else np.zeros(0, np.int64)
    seg = np.concatenate(found_g) if found_g else np.zeros(0, np.int64)
    length = np.concatenate(found_len) if found_len else np.zeros(0, np.int64)
    order = np.lexsort((inner[seg], thread[seg], win))
    win, seg, length = win[order], seg[order], length[order]
    at = np.flatnonzero(changes(win, thread[seg], inner[seg]))  # none when no window meets an open instance
    total = np.add.reduceat(length, at) if len(at) else np.zeros(0, np.int64)
    win, seg = win[at], seg[at]
    take = pa.array(win, type=pa.int64())
    return pa.table(
        {
            "run_id": samples.column("run_id").take(take),
            "key": samples.column("key").take(take),
            "signal": samples.column("signal").take(take),
            "unit": samples.column("unit").take(take),
            "value": samples.column("value").take(take),
            "rank": pa.array(t_rank[seg], type=pa.int64()),
            "thread_id": timeline.thread_id.take(pa.array(seg, type=pa.int64())),
            "inner_id": pa.array(inner[seg], type=pa.int64()),
            "len": pa.array(total, type=pa.int64()),
            "wlen": pa.array((w1 - w0)[win], type=pa.int64()),
            "sample": pa.array(win, type=pa.int64()),
            "thread": pa.array(thread[seg], type=pa.int64()),
            "run": pa.array(t_run[seg], type=pa.int64()),
            "threads": pa.array(_threads(win, thread[seg])[win], type=pa.int64()),
        }
    )


def _values(con: duckdb.DuckDBPyConnection, nodes: Nodes, pieces: pa.Table, values: Values) -> None:
    """Per instance and sampled signal: levels (W, MHz ...) as the time-weighted mean over the instance, other
    values as the overlapped share of each sample's value; inclusive of nested instances, with the weight of the
    windows that several threads' instances overlapped as ``ambiguous``."""
    if pieces.num_rows == 0:
        return
    prov = {
        (str(r), str(b)): str(p)
        for r, b, p in con.execute("SELECT run_id, backend, provenance_id FROM _j_prov").fetchall()
    }
    run = ints(pieces.column("run"))
    node = nodes.locate(run, ints(pieces.column("inner_id")))
    length = floats(pieces.column("len"))
    share = length / floats(pieces.column("wlen"))
    value = floats(pieces.column("value"))
    ambiguous = ints(pieces.column("threads")) > 1
    signals = pieces.column("signal").combine_chunks().dictionary_encode()
    signal = signals.indices.to_numpy(zero_copy_only=False)
    units = pieces.column("unit").combine_chunks()
    tree = Levels.of(nodes.parent)
    n = len(nodes.instance)
    for code_s, sig in sorted(enumerate(signals.dictionary.to_pylist()), key=lambda cs: str(cs[1])):
        mine = (signal == code_s) & (node >= 0)
        own = {
            "vlen": np.bincount(node[mine], weights=(value * length)[mine], minlength=n).astype(np.float64),
            "len": np.bincount(node[mine], weights=length[mine], minlength=n).astype(np.float64),
            "vfrac": np.bincount(node[mine], weights=(value * share)[mine], minlength=n).astype(np.float64),
            "w": np.bincount(node[mine], weights=share[mine], minlength=n).astype(np.float64),
            "n": np.bincount(node[mine], minlength=n).astype(np.float64),
            "wa": np.bincount(node[mine & ambiguous], weights=share[mine & ambiguous], minlength=n).astype(np.float64),
        }
        inc = {k: _up(v, tree) for k, v in own.items()}
        at = np.flatnonzero(mine)
        # a level (W, MHz, a percentage, an average: the signal's aggregation rule, or a level unit) is the
        # time-weighted mean over the instance; anything else the share of the windows it overlapped
        level = len(at) > 0 and (aggregation(str(sig)) == "mean" or str(units[int(at[0])].as_py()) in LEVEL_UNITS)
        backend = _backend(sig)
        for code in sorted(set(run[mine].tolist())):
            r = nodes.runs[code]
            sel = np.flatnonzero((nodes.run == code) & (inc["n"] > 0))
            has_own = own["n"][sel] > 0
            if level:
                inclusive = inc["vlen"][sel] / inc["len"][sel]
                with np.errstate(invalid="ignore", divide="ignore"):
                    exclusive = np.where(has_own, own["vlen"][sel] / np.where(has_own, own["len"][sel], 1.0), np.nan)
            else:
                inclusive = inc["vfrac"][sel]
                exclusive = np.where(has_own, own["vfrac"][sel], 0.0)
            zero = np.zeros(len(sel))
            unit = units[int(np.flatnonzero(mine & (run == code))[0])].as_py()  # NULL stays NULL
            key = (r, sig, unit, backend, prov.get((r, backend), f"{r}:{backend}"))
            values.add(
                con,
                key,
                {
                    "instance_id": nodes.instance[sel],
                    "inclusive": inclusive,
                    "exclusive": exclusive,
                    "evidence": inc["n"][sel].astype(np.int64),
                    "w_exact": zero,
                    "w_ordinal": zero,
                    "w_temporal": inc["w"][sel] - inc["wa"][sel],
                    "w_ambiguous": inc["wa"][sel],
                    "w_mismatch": zero,
                },
            )


def _threads(sample: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """Per sample (``0 .. sample.max()``): how many threads' instances its window overlaps."""
    if len(sample) == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((thread, sample))
    s = sample[order]
    return np.bincount(s[changes(s, thread[order])], minlength=int(sample.max()) + 1)


def _up(own: np.ndarray, tree: Levels) -> np.ndarray:
    """Each instance's value plus those of every instance nested in it."""
    out = own.copy()
    for kids, parents in tree.upward():
        np.add.at(out, parents, out[kids])
    return out


def _backend(signal: str) -> str:
    """The backend of a sampled signal by :data:`SAMPLE_BACKENDS` (the longest matching prefix)."""
    for prefix, backend in sorted(SAMPLE_BACKENDS, key=lambda pb: -len(pb[0])):
        if signal.startswith(prefix):
            return backend
    return "nvml"


__all__ = ["LEVEL_UNITS", "SAMPLE_ATTRIBUTION_ROWS", "SAMPLE_BACKENDS", "Split", "derive"]
