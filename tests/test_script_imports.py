"""The scripts, benchmarks, GPU tests and examples import only what argus_lab still has.

``scripts/``, ``bench/``, ``tests/gpu/`` and ``examples/`` run on the H200 (through ``scripts/gpu-check``), where a
stale ``from argus_lab... import name`` fails only after the device time is spent: ``scripts/gpu_record.py`` imported
``cuobjdump_sass`` from the compiler collector after it had moved to ``argus_lab.backends.compiler.artifacts.sass``,
and the recording part of gpu-check failed on the Triton case.  Here every ``from argus_lab.X import name`` of those
files (top level or inside a function) is resolved against the package, on the CPU machine.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GLOBS = ("scripts/**/*.py", "bench/*.py", "tests/gpu/*.py", "examples/**/*.py")
FILES = sorted(p for pattern in GLOBS for p in ROOT.glob(pattern))


def argus_imports(path: Path) -> list[tuple[int, str, str]]:
    """``(line, module, name)`` of each ``from argus_lab... import name`` in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):  # import argus_lab.views.bundle: the module itself must exist
            found.extend(
                (node.lineno, alias.name, "*") for alias in node.names if alias.name.split(".")[0] == "argus_lab"
            )
            continue
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
            continue
        if node.module == "argus_lab" or node.module.startswith("argus_lab."):
            found.extend((node.lineno, node.module, alias.name) for alias in node.names)
    return found


def test_the_scripts_are_found() -> None:
    names = {p.name for p in FILES}
    assert {"gpu_record.py", "timing_overhead.py", "join_bench.py"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_argus_lab_name_a_script_imports_exists(path: Path) -> None:
    missing = []
    for line, module, name in argus_imports(path):
        mod = importlib.import_module(module)
        if name == "*" or hasattr(mod, name):
            continue
        try:  # a submodule: from argus_lab.views import bundle
            importlib.import_module(f"{module}.{name}")
        except ModuleNotFoundError:
            missing.append(f"{path.relative_to(ROOT)}:{line}: from {module} import {name}")
    assert not missing, "names that argus_lab no longer has (import them from where they moved):\n" + "\n".join(missing)
