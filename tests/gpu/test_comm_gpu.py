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
    # the matmul runs alongside and hides part of the all-reduce.  How much is the GPU's scheduling, not the tool's:
    # on the H200 the matmul's blocks sometimes go first and the all-reduce waits for them (2026-11-29: most of it
    # hidden in some instances; 2026-12-02: 83-84 us of 273 us in every instance, 31 %)
    assert rows["overlapped/allreduce", "comm.overlap"].max > 0.2 * v["overlapped/allreduce", "comm.time"]
    assert (
        rows["overlapped/allreduce", "comm.overlap"].max <= rows["overlapped/allreduce", "comm.time"].max
    )  # a part of it
    assert rows["overlapped/allreduce", "comm.overlap"].min > 0
    assert v["serial", "comm.time"] == pytest.approx(serial_t)  # inclusive in the parent
