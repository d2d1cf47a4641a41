"""Loading a backend's implementation by the module its declaration names (never imported before a run uses it)."""

from __future__ import annotations

import importlib
from typing import Any

from argus_lab.plan.backends import backend_info


def load_backend(name: str) -> Any:
    """Import the module that implements backend ``name`` and return its ``make()`` result (a Collector or
    Launcher, see :mod:`argus_lab.run.protocols`)."""
    module = importlib.import_module(backend_info(name).implementation)
    return module.make()


__all__ = ["load_backend"]
