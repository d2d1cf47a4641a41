"""Multi-rank runs on the CPU: torchrun + gloo, one shard folder per rank, merged into one store."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import argus_lab
from argus_lab.run.runtime import launch_command
from argus_lab.store import Store

WORKLOADS = Path(__file__).parent / "workloads"


def test_torchrun_prefix_gets_no_python() -> None:
    cmd = launch_command(["torchrun", "--nproc-per-node", "2"], ["python", "-m", "argus_lab.run.child", "s.json"])
    assert cmd == ["torchrun", "--nproc-per-node", "2", "--no-python", "python", "-m", "argus_lab.run.child", "s.json"]
    assert launch_command([], ["python"]) == ["python"]


def test_two_gloo_ranks_merge_into_one_store(store_path: Path) -> None:
    pytest.importorskip("torch.distributed", reason="torch is needed for the gloo multi-rank test")
    launch = (sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2")
    report = argus_lab.measure(
        str(WORKLOADS / "gloo_ranks.py"), "host.wall", repeat=3, warmup=1, store=str(store_path), launch=launch
    )
    (run,) = report.runs
    assert run.status == "ok", run.cause
    store = Store(store_path)
    per_rank = store.rows("SELECT rank, path, count(*) FROM region_instances GROUP BY ALL ORDER BY rank, path")
    assert per_rank == [(r, p, 4) for r in (0, 1) for p in ("step", "step/allreduce", "step/compute")]
    # instance ids never collide across ranks, and region identity is the same on every rank
    assert store.rows("SELECT count(*) = count(DISTINCT instance_id) FROM region_instances") == [(True,)]
    assert store.rows("SELECT count(DISTINCT region_id) FROM region_instances") == [(3,)]
    rows = {(r.path, r.signal): r for r in report.regions}
    assert rows["step/allreduce", "host.wall"].instances == 6  # 3 measured repetitions x 2 ranks


def test_a_scope_selects_ranks(store_path: Path) -> None:
    pytest.importorskip("torch.distributed", reason="torch is needed for the gloo multi-rank test")
    launch = (sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2")
    report = argus_lab.measure(
        str(WORKLOADS / "gloo_ranks.py"),
        "host.wall",
        repeat=2,
        warmup=0,
        scope="step/**; ranks=1",
        store=str(store_path),
        launch=launch,
    )
    rows = {(r.path, r.signal): r for r in report.regions}
    assert rows["step/allreduce", "host.wall"].instances == 2  # rank 1 only; both ranks are in the store
    assert Store(store_path).rows("SELECT count(DISTINCT rank) FROM region_instances") == [(2,)]
