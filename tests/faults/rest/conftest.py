"""pytest-jupyter's fixtures and async-test hooks, for the REST fault tests of this folder only.

Loading pytest-jupyter with ``pytest_plugins`` would make its autouse event-loop fixture apply to every test of
the run, where it closes the loop Playwright's sync API is running (the browser tests).  Imported here, its
fixtures and hooks are scoped to ``tests/faults/rest``.
"""

from __future__ import annotations

from pytest_jupyter.jupyter_core import pytest_pycollect_makeitem, pytest_pyfunc_call
from pytest_jupyter.jupyter_server import *  # noqa: F403

__all__ = ["pytest_pycollect_makeitem", "pytest_pyfunc_call"]
