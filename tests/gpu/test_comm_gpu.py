"""GPU test of the communication signals: a real NCCL all-reduce, serial and overlapped with a matmul."""

from __future__ import annotations

from pathlib import Path

import pytest

import argus_lab

pytestmark = pytest.mark.gpu

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gpu" / "nccl_overlap.py"


def test_overlapped_all_reduce_is_hidden_and_serial_one_is_exposed(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    report = argus_lab.measure(
        str(EXAMPLE),
        "gpu.time,comm.time,comm.kernels,comm.overlap,comm.exposed",
        repeat=3,
        warmup=1,
        store=str(tmp_path / "nccl.duckdb"),
    )
    (run,) = report.runs
    assert run.status == "ok", run.cause
    rows = {(r.path, r.signal): r for r in report.regions}
    v = {k: r.median for k, r in rows.items()}
    assert v["serial/allreduce", "comm.kernels"] >= 1  # NCCL's kernel is attributed to the region that launched it
    assert v["overlapped/allreduce", "comm.kernels"] >= 1
    serial_t = v["serial/allreduce", "comm.time"]
    assert serial_t > 0
    assert v["serial/allreduce", "comm.exposed"] > 0.9 * serial_t  # the matmul waits for it
    # the matmul runs alongside: in some instances most of the all-reduce is hidden (on the H200 the GPU sometimes
    # schedules the matmul's blocks first and the all-reduce waits for them: the median instance hides less)
    assert rows["overlapped/allreduce", "comm.overlap"].max > 0.5 * v["overlapped/allreduce", "comm.time"]
    assert rows["overlapped/allreduce", "comm.overlap"].min > 0
    assert v["serial", "comm.time"] == pytest.approx(serial_t)  # inclusive in the parent
