"""A probe buffer made and read without a measurement: the fallback view of where a step's time goes.

``argus_lab.measure(step, "gpu.time,dev.*")`` is the way to read the device regions (it needs CUPTI and DuckDB).
When those are missing on a machine, :func:`allocate` makes a launch's probe buffer by the same layout
(``argus_lab.device.layout``) and :func:`summarize` totals its regions per name (over programs: median, min, max of
a program's total ns in that region) and per SM, from the ``%globaltimer`` stamps.
"""

from __future__ import annotations

from typing import Any

from argus_lab.device import DeviceRegions


def allocate(programs: int, events: int, device: Any) -> Any:
    """A zeroed int64 probe buffer with its launch header, for ``programs`` programs of ``events`` events each."""
    import torch

    from argus_lab.device import layout

    buf = torch.zeros(layout.buffer_words(programs, events), dtype=torch.int64, device=device)
    buf[: layout.LAUNCH_HEADER_WORDS] = torch.tensor(layout.launch_header(programs, events), dtype=torch.int64)
    return buf


def summarize(buf: Any, regions: DeviceRegions) -> dict[str, Any]:
    """Per region: programs, events, and each program's total ns (median/min/max over programs); per SM: the span
    of its programs; the programs' spans and the dropped events."""
    import numpy as np

    from argus_lab.device import layout

    words = buf.cpu().numpy()
    n_slots, cap, slot = int(words[layout.H_N_SLOTS]), int(words[layout.H_EVENTS_PER_SLOT]), int(words[4])
    names = regions.codes()
    per_region: dict[str, list[float]] = {n: [] for n in regions.names}
    counts: dict[str, int] = dict.fromkeys(regions.names, 0)
    spans, sm_spans, dropped = [], {}, 0
    for s in range(n_slots):
        base = layout.LAUNCH_HEADER_WORDS + s * slot
        head = words[base : base + layout.SLOT_HEADER_WORDS]
        if head[layout.S_PID1] == 0:
            continue
        n = int(head[layout.S_N_EVENTS])
        dropped += max(0, n - cap)
        ev = words[base + layout.SLOT_HEADER_WORDS : base + layout.SLOT_HEADER_WORDS + 2 * min(n, cap)].reshape(-1, 2)
        t, tag = ev[:, 0], ev[:, 1]
        code = (tag >> 1) & ((1 << layout.REGION_ID_BITS) - 1)
        is_exit = tag & 1
        total: dict[str, float] = {}
        open_at: dict[int, int] = {}
        for ti, ci, xi in zip(t.tolist(), code.tolist(), is_exit.tolist(), strict=True):
            if xi == 0:
                open_at[ci] = ti
            elif ci in open_at:
                name = names.get(ci, str(ci))
                total[name] = total.get(name, 0.0) + (ti - open_at.pop(ci))
                counts[name] = counts.get(name, 0) + 1
        for name, v in total.items():
            per_region.setdefault(name, []).append(v)
        t0, t1 = int(head[layout.S_T_BEGIN]), int(head[layout.S_T_END])
        spans.append(t1 - t0)
        sm = int(head[layout.S_SMID])
        lo, hi = sm_spans.get(sm, (t0, t1))
        sm_spans[sm] = (min(lo, t0), max(hi, t1))
    regions_out = {}
    for name, vals in per_region.items():
        if vals:
            a = np.asarray(vals)
            regions_out[name] = {
                "programs": len(vals), "intervals": counts.get(name, 0), "median_ns": float(np.median(a)),
                "min_ns": float(a.min()), "max_ns": float(a.max()),
            }  # fmt: skip
    ends = sorted(hi for _, hi in sm_spans.values())
    return {
        "programs": len(spans),
        "sms": len(sm_spans),
        "program_span_median_ns": float(np.median(spans)) if spans else None,
        "tail_ns": float(ends[-1] - ends[len(ends) // 2]) if ends else None,
        "dropped_events": dropped,
        "regions": regions_out,
    }
