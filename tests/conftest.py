"""Shared fixtures: a fresh store path per test, and a guard that no test leaks an active recorder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from argus_lab import regions


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A path for a new DuckDB store in the test's temporary folder."""
    return tmp_path / "evidence.duckdb"


@pytest.fixture(autouse=True)
def _no_leaked_recorder() -> Iterator[None]:
    yield
    leaked = regions.active_recorder()
    if leaked is not None:
        leaked.deactivate()
        pytest.fail(f"the test left recorder {leaked.run_id!r} active")
