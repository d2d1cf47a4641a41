"""Recorded evidence that must travel small: argus_lab.store.trim (keep some runs, drop raw device intervals) and
bench/optimize_evidence.py (the walk store packed for notebooks/optimize.ipynb: its runs only, tiers of raw
intervals, compacted, gzipped, under a limit).

Input: tests/data/gpu/device/device_gemm_h200.duckdb, recorded on the H200 (a clean timing run and an instrumented
run of the persistent GEMM with k-step marks, 4 launches, 76,032 raw intervals).  For the walk packing its runs are
relabelled as the runs of optimisation candidates (SYNTHETIC settings; the device rows are the recorded ones).
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

import pytest

from argus_lab.optimize.session import history
from argus_lab.store import Store
from argus_lab.store.trim import device_interval_counts, drop_device_intervals, keep_runs, run_tables

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.optimize_evidence import kept_candidates, pack_walk  # noqa: E402

RECORDED = ROOT / "tests" / "data" / "gpu" / "device" / "device_gemm_h200.duckdb"
TIMING, INSTRUMENTED = "r-e518965816", "r-a43591a64a"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    path = tmp_path / "s.duckdb"
    shutil.copy(RECORDED, path)
    return Store(path)


def count(st: Store, table: str, run: str) -> int:
    return int(st.rows(f"SELECT count(*) FROM {table} WHERE run_id = ?", [run])[0][0])


def test_keep_runs_removes_every_row_and_the_folder_of_the_others(store: Store) -> None:
    assert count(store, "region_instances", TIMING) and count(store, "device_intervals", INSTRUMENTED)
    folder = store.path.with_name(store.path.name + ".runs") / TIMING
    folder.mkdir(parents=True)
    assert keep_runs(store, [INSTRUMENTED]) == [TIMING]
    for table in run_tables(store):
        assert count(store, table, TIMING) == 0, table
    assert count(store, "device_intervals", INSTRUMENTED) == 76_032
    assert not folder.exists()
    assert keep_runs(store, [INSTRUMENTED]) == []  # nothing left to remove


def test_dropping_raw_intervals_keeps_the_derived_device_rows(store: Store) -> None:
    values = count(store, "device_values", INSTRUMENTED)
    sms = count(store, "device_sm", INSTRUMENTED)
    assert device_interval_counts(store) == {INSTRUMENTED: 76_032}
    assert drop_device_intervals(store, [TIMING]) == 0  # a run without intervals
    assert drop_device_intervals(store, [INSTRUMENTED], min_depth=1) == 0  # the k-step marks are all outermost
    assert drop_device_intervals(store, [INSTRUMENTED]) == 76_032
    assert device_interval_counts(store) == {}
    assert count(store, "device_values", INSTRUMENTED) == values > 0
    assert count(store, "device_sm", INSTRUMENTED) == sms > 0


def test_a_launch_without_raw_intervals_reports_and_renders_the_same_device_rows(store: Store) -> None:
    import argus_lab
    from argus_lab import views

    runs = [TIMING, INSTRUMENTED]
    before = {(d.region, d.signal, d.median) for d in argus_lab.Report(store, runs).device}
    drop_device_intervals(store)
    after_report = argus_lab.Report(store, runs)
    assert before and {(d.region, d.signal, d.median) for d in after_report.device} == before
    bundle = views.compare(after_report, after_report, signal="gpu.time")._repr_mimebundle_()
    assert "gemm_step" in bundle["text/html"]


def test_a_missing_store_is_named_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no store at .*give the path of an existing \.duckdb file"):
        keep_runs(tmp_path / "nope.duckdb", [])


def _walk(tmp_path: Path) -> Path:
    """A walk store: candidate A (the default: the recorded timing run and instrumented run), candidate B (the
    evidence-guided best: a second instrumented run with the recorded rows under another id) and a run of another
    configuration (SYNTHETIC settings)."""
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    path = evidence / "optimize_walk.duckdb"
    shutil.copy(RECORDED, path)
    st = Store(path)

    def settings(target: str, key: str) -> str:
        return json.dumps({"optimize": {"target": target, "key": key, "candidate": {"k": key}}})

    with st.connect(write=True) as con:
        con.execute("UPDATE runs SET settings = ? WHERE run_id = ?", [settings("walk", "A"), TIMING])
        con.execute("UPDATE runs SET settings = ? WHERE run_id = ?", [settings("walk", "A"), INSTRUMENTED])
        for new, target in (("r-b", "walk"), ("r-other", "other")):
            con.execute(
                "INSERT INTO runs SELECT * REPLACE (? AS run_id, ? AS settings) FROM runs WHERE run_id = ?",
                [new, settings(target, "B"), INSTRUMENTED],
            )
            for table in ("device_intervals", "device_values", "device_sm", "device_launches", "device_programs"):
                con.execute(
                    f"INSERT INTO {table} SELECT * REPLACE (? AS run_id) FROM {table} WHERE run_id = ?",
                    [new, INSTRUMENTED],
                )
    walk = {
        "target": "walk",
        "default": {"key": "A"},
        "summary": {"timing-only": {"best": "A"}, "evidence-guided": {"best": "B"}},
    }
    (evidence / "optimize_walk.json").write_text(json.dumps(walk))
    return evidence


def test_kept_candidates_per_tier() -> None:
    walk = {"default": {"key": "A"}, "summary": {"timing-only": {"best": "C"}, "evidence-guided": {"best": "B"}}}
    assert kept_candidates(walk, "all") is None
    assert kept_candidates(walk, "default and bests") == {"A", "B", "C"}
    assert kept_candidates(walk, "evidence-guided best") == {"B"}
    assert kept_candidates(walk, "none") == set()


def test_the_walk_store_is_packed_to_its_runs_and_under_the_limit(tmp_path: Path) -> None:
    evidence = _walk(tmp_path)
    # both instrumented runs (2 x 76,032 intervals, ~1.5 MB gzipped) do not fit 1 MB; the best's alone does
    rec = pack_walk(evidence, limit=1_000_000)
    assert rec["runs_removed"] == ["r-other"]
    assert rec["tier"] == "evidence-guided best"
    assert rec["intervals_kept"] == {"r-b": 76_032} and rec["intervals_dropped"] == 76_032
    packed = evidence / "optimize_walk.duckdb.gz"
    assert rec["bytes_gz"] == packed.stat().st_size <= 1_000_000
    assert not (evidence / "optimize_walk.duckdb").exists()
    assert json.loads((evidence / "optimize_walk.pack.json").read_text())["tier"] == rec["tier"]
    local = tmp_path / "back.duckdb"
    with gzip.open(packed, "rb") as src, local.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    st = Store(local)
    assert {r["target"] for r in history(st)} == {"walk"}
    assert device_interval_counts(st) == {"r-b": 76_032}
    assert count(st, "device_values", INSTRUMENTED) == count(st, "device_values", "r-b") > 0  # derived rows stay


def test_a_limit_nothing_fits_drops_every_raw_interval(tmp_path: Path) -> None:
    evidence = _walk(tmp_path)
    rec = pack_walk(evidence, limit=100_000)
    assert rec["tier"] == "none" and rec["intervals_kept"] == {}
    assert rec["bytes_gz"] < 100_000
