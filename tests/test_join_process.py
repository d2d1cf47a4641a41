"""A long run's join in a fresh process (argus_lab.app.join_process): the same values as joining in the measured
process, and the join made here when the fresh process fails; on runs recorded on the H200 (tests/data/gpu/cases)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from recorded_cases import CASES, load_case

from argus_lab import join
from argus_lab.app import join_process
from argus_lab.store import Store

VALUES = "SELECT run_id, instance_id, signal, inclusive, exclusive FROM instance_values ORDER BY ALL"


def loaded(tmp_path: Path, name: str) -> Store:
    store = Store(tmp_path / f"{name}.duckdb")
    load_case(store, CASES / "nested", "nested")
    return store


def test_a_long_run_is_joined_in_a_fresh_process_with_the_values_of_joining_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here, fresh = loaded(tmp_path, "here"), loaded(tmp_path, "fresh")
    join.attribute_request(here, ["nested"])
    monkeypatch.setattr(join_process, "FRESH_PROCESS_RECORDS", 1)  # the recorded run counts as long
    assert join_process.join_measured_runs(fresh, ["nested"]) == "fresh process"
    assert fresh.rows(VALUES)
    assert fresh.rows(VALUES) == here.rows(VALUES)


def test_a_short_run_is_joined_in_this_process(tmp_path: Path) -> None:
    store = loaded(tmp_path, "short")
    assert join_process.join_measured_runs(store, ["nested"]) == "this process"
    assert store.rows(VALUES)


def test_a_failed_fresh_process_leaves_the_join_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = loaded(tmp_path, "failed")
    monkeypatch.setattr(join_process, "FRESH_PROCESS_RECORDS", 1)
    monkeypatch.setattr(sys, "executable", "/bin/false")  # the fresh process exits 1 without joining
    assert join_process.join_measured_runs(store, ["nested"]) == "this process"
    assert store.rows(VALUES)


def test_a_run_of_many_region_instances_is_joined_in_a_fresh_process(tmp_path: Path) -> None:
    store = loaded(tmp_path, "instances")  # few kernel records, but as many instances as a long run has
    many = join_process.FRESH_PROCESS_RECORDS
    assert join_process.join_measured_runs(store, ["nested"], instances=many) == "fresh process"
    assert store.rows(VALUES)
