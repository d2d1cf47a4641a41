"""Browser tests: remember each test's outcome so that a failing test can leave a screenshot."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
