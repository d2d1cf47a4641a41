"""Put this folder first on ``PYTHONPATH`` and the Python started gets no ``torch`` and no ``triton``.

The notebooks must run top to bottom in the environment ``make demo`` builds (the ``jupyter`` extra: no torch, no
Triton) while the test environment has both; tests/test_notebooks_run_anywhere.py starts its kernels with this
folder on the path.  Python imports ``sitecustomize`` at start-up; this one replaces the path finder with one that
finds neither package, so ``import torch`` raises ``ModuleNotFoundError: No module named 'torch'`` and
``importlib.util.find_spec("torch")`` is ``None``, as where they are not installed.
"""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Sequence
from typing import Any

HIDDEN = frozenset({"torch", "triton"})


class _PathFinderWithout(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, fullname: str, path: Sequence[str] | None = None, target: Any = None) -> Any:
        if fullname.partition(".")[0] in HIDDEN:
            return None
        return super().find_spec(fullname, path, target)


sys.meta_path[:] = [_PathFinderWithout if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
