"""The stores of `argus-lab run`s on the H200 whose timing run tied launches to instances without a launch callback:
with boundary probes (tests/data/gpu/e2e_probes_h200.duckdb.gz) and with CUPTI's clock
(tests/data/gpu/e2e_clock_h200.duckdb.gz, the launch identity `clock`, when it was the default for one run of
2026-12-01), both recorded by `scripts/gpu-check` part e2e, second run."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

import argus_lab
from argus_lab import join
from argus_lab.store import Store

RECORDED = Path(__file__).parent / "data" / "gpu" / "e2e_probes_h200.duckdb.gz"
RECORDED_CLOCK = Path(__file__).parent / "data" / "gpu" / "e2e_clock_h200.duckdb.gz"


def _open(recorded: Path, tmp_path_factory: pytest.TempPathFactory) -> Store:
    local = tmp_path_factory.mktemp("recorded") / recorded.name.removesuffix(".gz")
    with gzip.open(recorded, "rb") as src, local.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return Store(local)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return _open(RECORDED, tmp_path_factory)


@pytest.fixture(scope="module")
def clock_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return _open(RECORDED_CLOCK, tmp_path_factory)


def _classes(store: Store) -> dict[tuple[str, str], int]:
    rows = store.rows("SELECT evidence, class, count(*) FROM attributions WHERE evidence = 'kernel' GROUP BY ALL")
    return {(e, c): int(n) for e, c, n in rows}


def test_the_timing_run_used_boundary_probes_and_says_how_it_placed_each_launch(store: Store) -> None:
    (settings,) = [json.loads(s) for (s,) in store.rows("SELECT settings FROM provenance WHERE backend = 'cupti'")]
    assert settings["launch_path"] == "native probes"
    order = settings["launch_order"]
    assert order["launches"] == 24 and order["in one open region"] == 18 and order["with no region open"] == 6
    assert order["with regions open on several threads"] == 0
    assert order["probes"] >= 2 * 12  # two boundaries for each of the 12 instances (+ the one at start)
    assert settings["records"]["api"] == 6  # a zero-length row at the last probe's time for each launch outside
    assert "boundary probes through" in " ".join(settings["notes"])


def test_the_clock_run_placed_each_kernel_by_its_queued_stamp_and_says_how(clock_store: Store) -> None:
    (settings,) = [
        json.loads(s) for (s,) in clock_store.rows("SELECT settings FROM provenance WHERE backend = 'cupti'")
    ]
    assert settings["launch_path"] == "native clock"
    order = settings["launch_order"]
    assert order["kernels"] == 24 and order["in one open region"] == 18 and order["with no region open"] == 6
    assert order["without a queued stamp"] == 0 and order["before the first boundary row"] == 0
    assert order["boundary rows"] >= 2 * 12  # two boundaries for each of the 12 instances (+ the one at start)
    assert settings["records"]["api"] == 6  # a zero-length row at the kernel's queued stamp for each launch outside
    assert "boundary rows on CUPTI's clock" in " ".join(settings["notes"])


@pytest.mark.parametrize("which", ["probes", "clock"])
def test_attribution_without_a_launch_callback_joins_like_the_callback_run_and_the_replay_run_matches(
    which: str, store: Store, clock_store: Store
) -> None:
    store = store if which == "probes" else clock_store
    before = _classes(store)
    assert before == {("kernel", "exact"): 18, ("kernel", "unattributed"): 6}  # as the callback run of the same e2e
    run_ids = [r for (r,) in store.rows("SELECT run_id FROM runs ORDER BY plan_index")]
    join.attribute_request(store, run_ids)
    assert _classes(store) == before  # re-joined from the stored records: unchanged
    report = argus_lab.Report(str(store.path), None)
    rows = {(r.path, r.signal): r for r in report.regions}
    assert rows["outer/inner", "gpu.kernels"].median == 2
    assert rows["outer", "gpu.kernels"].median == 3
    assert ("outer/inner", "gpu.launch_overhead") not in rows  # no launch call was timed
    matches = store.rows("SELECT count(*) FROM instance_matches WHERE run_id <> ref_run_id AND status = 'match'")
    assert matches[0][0] == 8  # the ncu run's outer and outer/inner instances 0-3
