"""Browser tests: remember each test's outcome, and a failing test that used a ``page`` leaves a screenshot
(``$ARGUS_SCREENSHOTS``, default ``/tmp/argus-ui``; named ``<module's SHOT_PREFIX>failure-<test>.png``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(autouse=True)
def _screenshot_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed and "page" in request.fixturenames:
        shots = Path(os.environ.get("ARGUS_SCREENSHOTS", "/tmp/argus-ui"))
        shots.mkdir(parents=True, exist_ok=True)
        prefix = getattr(request.module, "SHOT_PREFIX", "")
        request.getfixturevalue("page").screenshot(path=str(shots / f"{prefix}failure-{request.node.name}.png"))
