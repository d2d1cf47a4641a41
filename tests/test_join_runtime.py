"""The join runs when a plan finishes (runtime.execute), on a real host-only measurement (no GPU needed)."""

from __future__ import annotations

import threading
from pathlib import Path

import argus_lab
from argus_lab.store import Store


def test_execute_attributes_and_derives_exclusive_values(store_path: Path) -> None:
    def step() -> None:
        with argus_lab.region("step"):
            sum(range(20_000))
            with argus_lab.region("inner"):
                sum(range(20_000))
        # a region on another thread: its instance is attributed on its own thread's timeline
        t = threading.Thread(target=side)
        t.start()
        t.join()

    def side() -> None:
        with argus_lab.region("side"):
            sum(range(1000))

    report = argus_lab.measure(step, signals="host.wall", repeat=3, warmup=1, store=str(store_path))
    store = Store(store_path)
    (run_id,) = report.run_ids
    assert store.rows("SELECT backend FROM provenance WHERE provenance_id = ?", [f"{run_id}:join"]) == [("join",)]
    n = store.rows("SELECT count(*), min(class), max(class) FROM attributions WHERE evidence = 'instance'")
    assert n == [(12, "exact", "exact")]  # 4 repetitions x 3 regions, each its own evidence
    rows = {(r.path, r.signal): r for r in report.regions}
    step_row, inner = rows["step", "host.wall"], rows["step/inner", "host.wall"]
    assert step_row.instances == 3 and step_row.reps == 3
    # exclusive = inclusive minus the nested instance, per instance
    vals = store.rows(
        "SELECT v.inclusive, v.exclusive, c.inclusive FROM instance_values v "
        "JOIN region_instances i USING (run_id, instance_id) "
        "JOIN region_instances ci ON ci.run_id = i.run_id AND ci.parent_instance_id = i.instance_id "
        "JOIN instance_values c ON c.run_id = ci.run_id AND c.instance_id = ci.instance_id AND c.signal = v.signal "
        "WHERE i.path = 'step' AND v.signal = 'host.wall'"
    )
    assert len(vals) == 4 and all(inc - kid == exc for inc, exc, kid in vals)
    assert inner.exclusive_median == inner.median  # a leaf's exclusive value is its inclusive one
    assert rows["side", "host.wall"].attribution == "exact"
