"""SYNTHETIC probe buffers for decoder edge cases (not measured: built here by the layout's rules)."""

from __future__ import annotations

import numpy as np

from argus_lab.device import region_code
from argus_lab.device.layout import (
    LAUNCH_HEADER_WORDS,
    SLOT_HEADER_WORDS,
    buffer_words,
    launch_header,
    slot_words,
)

Event = tuple[str, bool, int]  # (region name, is_exit, time offset in ns)


def build(
    programs: list[tuple[int, int, list[Event]]],
    *,
    n_slots: int | None = None,
    events_per_slot: int = 64,
    t0: int = 1_000_000,
    cycles_per_ns: int = 2,
    finished: bool = True,
    grid_overflow: bool = False,
) -> np.ndarray:
    """A SYNTHETIC buffer: ``programs`` is (cta, sm, events); each event is written as the kernel would."""
    n = n_slots if n_slots is not None else max(p[0] for p in programs) + 1
    buf = np.zeros(buffer_words(n, events_per_slot), dtype=np.int64)
    buf[:LAUNCH_HEADER_WORDS] = launch_header(n, events_per_slot)
    buf[5] = int(grid_overflow)
    words = slot_words(events_per_slot)
    for cta, sm, events in programs:
        base = LAUNCH_HEADER_WORDS + cta * words
        clk0 = 10_000 * (cta + 1)
        last = max([dt for _, _, dt in events], default=0) + 100
        buf[base : base + SLOT_HEADER_WORDS] = [
            cta + 1, sm, t0, t0 + last if finished else 0, clk0, clk0 + last * cycles_per_ns if finished else 0,
            len(events) if finished else 0, 8,
        ]  # fmt: skip
        for i, (name, is_exit, dt) in enumerate(events[:events_per_slot]):
            at = base + SLOT_HEADER_WORDS + 2 * i
            clk = (clk0 + dt * cycles_per_ns) & 0xFFFFFFFF
            buf[at] = t0 + dt
            buf[at + 1] = (clk << 32) | (region_code(name) << 1) | int(is_exit)
    return buf
