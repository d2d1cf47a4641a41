"""Shared fixtures: a fresh store path per test, and a guard that no test leaks an active recorder."""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="session")
def ipython_shell() -> Any:
    """The process's one test IPython shell with the argus magics loaded (IPython's ``start_ipython`` makes it on
    its first call only and returns None after, whichever test module called it first)."""
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or builtins._ip  # type: ignore[attr-defined]
    shell.run_line_magic("load_ext", "argus_lab")
    return shell
