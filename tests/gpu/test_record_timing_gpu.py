"""GPU test of the recorded table's timing protocol (bench/record_candidates.py ``time_calls``): the GPU sleep in
front of the timed launches must outlast the host's queueing, and a sleep that ran out is noticed and the
measurement taken again with a longer one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def test_a_sleep_that_runs_out_is_noticed_and_a_long_one_is_not() -> None:
    import torch

    from bench.record_candidates import SLEEP_RETRIES, time_calls

    x = torch.randn(1 << 20, device="cuda")

    def fn() -> None:
        x.mul_(1.0)

    samples, retries = time_calls(fn, warmup=2, launches=10, sleep_cycles=0)  # no sleep: the GPU waits at once
    assert len(samples) == 10 and retries == SLEEP_RETRIES
    samples, retries = time_calls(fn, warmup=2, launches=10, sleep_cycles=int(2e9 * 0.05))  # 50 ms of sleep
    assert len(samples) == 10 and retries == 0 and all(s > 0 for s in samples)
