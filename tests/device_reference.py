"""An independent numpy computation of the per-launch device-region figures, from decoded rows (tests only).

The join derives the same figures in SQL (:mod:`argus_lab.join.device`); the tests compare the two, so this file
must not share code with the join. It also serves ``scripts/gpu_probe_device.py`` (the phase-A probe), which
prints the figures of probe buffers that never went through a store. Every figure is in ns on the GPU-wide
``%globaltimer`` time base, durations from the SM cycle counters scaled by each program's measured clock rate.

* ``dev.count``: occurrences of a region in the launch (all programs).
* ``dev.time``: a region's time per program (sum of its occurrences in that CTA): median, min, max, p10, p90
  over the programs that ran it; also the median of one occurrence.
* ``dev.sm_busy``: per SM, the union of the spans of the programs that ran on it; per SM and region, the sum of
  the region's occurrences there.
* ``dev.tail``: the tail imbalance, last SM's end minus the median SM's end (an SM's end is the latest end of its
  programs); ``dev.span``: first begin to last end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from argus_lab.backends.device.decode import F64, I64, DecodedLaunch


@dataclass(frozen=True)
class RegionFigures:
    """``dev.count`` and ``dev.time`` of one region in one launch."""

    launch: int
    region: str
    count: int
    ctas: int
    time_per_cta_median_ns: float
    time_per_cta_min_ns: float
    time_per_cta_max_ns: float
    time_per_cta_p10_ns: float
    time_per_cta_p90_ns: float
    occurrence_median_ns: float
    total_ns: float


@dataclass(frozen=True)
class SmFigures:
    """Per SM: when its programs began and ended, its busy time, and each region's time there."""

    sm: I64
    programs: I64
    begin_ns: I64
    end_ns: I64
    busy_ns: I64
    region_ns: dict[str, F64]


@dataclass(frozen=True)
class LaunchFigures:
    """The figures of one launch: per region, per SM, and the tail."""

    launch: int
    span_ns: int
    tail_imbalance_ns: float
    median_sm_end_ns: float
    last_sm_end_ns: int
    regions: tuple[RegionFigures, ...]
    sms: SmFigures


def _union_length(begin: I64, end: I64) -> int:
    """Total length covered by intervals [begin, end)."""
    if begin.size == 0:
        return 0
    o = np.argsort(begin, kind="stable")
    b, e = begin[o], np.maximum.accumulate(end[o])
    gaps = np.maximum(b[1:] - e[:-1], 0)
    return int(e[-1] - b[0] - gaps.sum())


def summarize(d: DecodedLaunch) -> LaunchFigures:
    """The figures of one decoded launch."""
    pr, iv = d.programs, d.intervals
    names = np.array(d.region_names(), dtype=object)
    regions: list[RegionFigures] = []
    for name in sorted(set(names.tolist())):
        sel = names == name
        ctas, inv = np.unique(iv.cta[sel], return_inverse=True)
        per_cta = np.bincount(inv, weights=iv.dur_ns[sel], minlength=len(ctas))
        regions.append(
            RegionFigures(
                launch=d.launch,
                region=str(name),
                count=int(sel.sum()),
                ctas=len(ctas),
                time_per_cta_median_ns=float(np.median(per_cta)),
                time_per_cta_min_ns=float(per_cta.min()),
                time_per_cta_max_ns=float(per_cta.max()),
                time_per_cta_p10_ns=float(np.percentile(per_cta, 10)),
                time_per_cta_p90_ns=float(np.percentile(per_cta, 90)),
                occurrence_median_ns=float(np.median(iv.dur_ns[sel])),
                total_ns=float(per_cta.sum()),
            )
        )
    sms, sm_inv = np.unique(pr.sm, return_inverse=True)
    begin = np.full(len(sms), np.iinfo(np.int64).max, dtype=np.int64)
    end = np.zeros(len(sms), dtype=np.int64)
    np.minimum.at(begin, sm_inv, pr.t_begin)
    np.maximum.at(end, sm_inv, pr.t_end)
    busy = np.array([_union_length(pr.t_begin[sm_inv == i], pr.t_end[sm_inv == i]) for i in range(len(sms))])
    region_ns: dict[str, F64] = {}
    iv_sm = np.searchsorted(sms, iv.sm)
    for name in sorted(set(names.tolist())):
        sel = names == name
        region_ns[str(name)] = np.bincount(iv_sm[sel], weights=iv.dur_ns[sel], minlength=len(sms)).astype(np.float64)
    # relative to the first end: epoch ns in float64 round to 256 ns (phase A's H200 figures did, see the tests)
    median_end = float(int(end.min()) + np.median(end - end.min())) if len(end) else float("nan")
    last_end = int(end.max()) if len(end) else 0
    return LaunchFigures(
        launch=d.launch,
        span_ns=int(pr.t_end.max() - pr.t_begin.min()) if len(pr.cta) else 0,
        tail_imbalance_ns=float(np.max(end - end.min()) - np.median(end - end.min())) if len(end) else float("nan"),
        median_sm_end_ns=median_end,
        last_sm_end_ns=last_end,
        regions=tuple(regions),
        sms=SmFigures(
            sm=sms.astype(np.int64),
            programs=np.bincount(sm_inv, minlength=len(sms)).astype(np.int64),
            begin_ns=begin,
            end_ns=end,
            busy_ns=busy.astype(np.int64),
            region_ns=region_ns,
        ),
    )
