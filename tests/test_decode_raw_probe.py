"""The decode bench's fallback reading of a probe buffer (examples/gpu/decode/raw_probe.py).

A buffer laid out as the device markers write it (argus_lab.device.layout) with two programs on two SMs: per region
the time of each program (summed over its intervals), the median over programs, the tail, and dropped events.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def _write(buf, slot: int, smid: int, t0: int, t1: int, events: list[tuple[int, str, int]], tried: int) -> None:
    from argus_lab.device import layout, region_code

    cap = int(buf[layout.H_EVENTS_PER_SLOT])
    base = layout.LAUNCH_HEADER_WORDS + slot * int(buf[layout.H_SLOT_WORDS])
    buf[base + layout.S_PID1] = slot + 1
    buf[base + layout.S_SMID] = smid
    buf[base + layout.S_T_BEGIN] = t0
    buf[base + layout.S_T_END] = t1
    buf[base + layout.S_N_EVENTS] = tried
    for i, (t, name, is_exit) in enumerate(events[:cap]):
        at = base + layout.SLOT_HEADER_WORDS + 2 * i
        buf[at] = t
        buf[at + 1] = (region_code(name) << 1) | is_exit


def test_regions_are_summed_per_program_and_the_tail_is_the_last_sm_past_the_median() -> None:
    from examples.gpu.decode import raw_probe
    from examples.gpu.decode.kernels import PHASES

    buf = raw_probe.allocate(programs=3, events=6, device="cpu")
    # program 0: qkv twice (100 + 50 ns), one barrier wait of 30 ns
    _write(buf, 0, 5, 1000, 1400, [(1000, "qkv", 0), (1100, "qkv", 1), (1100, "wait_qkv", 0), (1130, "wait_qkv", 1),
                                   (1200, "qkv", 0), (1250, "qkv", 1)], tried=6)  # fmt: skip
    # program 1: qkv once (300 ns), and 8 events tried: 2 dropped
    _write(buf, 1, 7, 1000, 1700, [(1000, "qkv", 0), (1300, "qkv", 1)], tried=8)
    # program 2 never ran its markers (slot left zero)
    s = raw_probe.summarize(buf, PHASES)
    assert s["programs"] == 2 and s["sms"] == 2
    assert s["regions"]["qkv"]["min_ns"] == 150.0 and s["regions"]["qkv"]["max_ns"] == 300.0
    assert s["regions"]["qkv"]["intervals"] == 3
    assert s["regions"]["wait_qkv"] == {
        "programs": 1,
        "intervals": 1,
        "median_ns": 30.0,
        "min_ns": 30.0,
        "max_ns": 30.0,
    }
    assert s["dropped_events"] == 2
    assert s["tail_ns"] == 0.0  # two SMs: the median end is the later one
    assert s["program_span_median_ns"] == 550.0
