"""The layout rule (docs/architecture.md): a module imports only from its own stage or stages upstream of it.

Stages, upstream to downstream: markers (``regions``, ``device``) -> ``plan/`` -> ``run/`` -> ``backends/`` ->
``join/`` -> ``store/`` -> ``report/`` -> ``views/`` -> ``faces/``; ``errors`` and ``units`` are usable by every
stage, and the package's ``__init__`` (the public API, loaded lazily) counts as a face. Every import is checked, at
module level, inside functions and under ``TYPE_CHECKING`` alike, by reading the source with :mod:`ast`. Two things
are loaded by the name a declaration holds instead of imported, which is how an upstream stage reaches downstream
code without depending on it: a backend's implementation (``BackendInfo.module``) and the Report's renderer
(``report.report.RENDERER``).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import argus_lab

PACKAGE = Path(argus_lab.__file__).resolve().parent
ROOT = PACKAGE.parent

STAGES: tuple[tuple[str, ...], ...] = (
    ("argus_lab.errors", "argus_lab.units"),
    ("argus_lab.regions", "argus_lab.device"),
    ("argus_lab.plan",),
    ("argus_lab.run",),
    ("argus_lab.backends", "argus_lab.importers"),
    ("argus_lab.join",),
    ("argus_lab.store",),
    ("argus_lab.report",),
    ("argus_lab.views",),
    ("argus_lab.app",),
    ("argus_lab.optimize", "argus_lab.faces", "argus_lab"),
)
"""Each stage's module prefixes, upstream first (stage 0, ``errors``/``units``, is usable by all)."""

LAZY_NAMES = {
    "region": "argus_lab.regions",
    "Region": "argus_lab.regions",
    "current_path": "argus_lab.regions",
    "DEFAULT_SIGNALS": "argus_lab.plan",
    "measure": "argus_lab.app.measure",
    "open_store": "argus_lab.app.measure",
    "optimize": "argus_lab.optimize",
    "Report": "argus_lab.report",
}
"""What ``from argus_lab import NAME`` imports for the names the package exports lazily."""


def stage_of(module: str) -> int | None:
    """The stage index of a module of argus_lab (``None`` when it belongs to no stage)."""
    for index, prefixes in enumerate(STAGES):
        for prefix in prefixes:
            if prefix == "argus_lab" and module != "argus_lab":
                continue
            if module == prefix or module.startswith(prefix + "."):
                return index
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every argus_lab module ``path`` imports, wherever the import statement is."""
    name = module_name(path)
    return imports_in(path.read_text(), name if path.name == "__init__.py" else name.rpartition(".")[0])


def imports_in(source: str, package: str) -> list[tuple[int, str]]:
    """(line, module) of every argus_lab module imported by ``source``, a module of ``package``."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "argus_lab"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            if source.split(".")[0] != "argus_lab":
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if source == "argus_lab" and alias.name in LAZY_NAMES:
                    out.append((node.lineno, LAZY_NAMES[alias.name]))
                elif (ROOT / sub.replace(".", "/")).with_suffix(".py").exists() or (
                    ROOT / sub.replace(".", "/") / "__init__.py"
                ).exists():
                    out.append((node.lineno, sub))
                else:
                    out.append((node.lineno, source))
    return out


def sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "labextension" not in p.parts)


def test_every_module_belongs_to_a_stage() -> None:
    lost = [module_name(p) for p in sources() if stage_of(module_name(p)) is None]
    assert not lost, f"modules outside every stage (put each in a stage's folder, see docs/architecture.md): {lost}"


def test_no_module_imports_from_a_stage_downstream_of_it() -> None:
    offenders = []
    for path in sources():
        own = stage_of(module_name(path))
        if own is None:
            continue
        for line, target in imported_modules(path):
            theirs = stage_of(target)
            if theirs is not None and theirs > own:
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {target} (stage {theirs} > {own})")
    assert not offenders, "imports from a downstream stage:\n" + "\n".join(offenders)


def test_the_guard_sees_function_level_relative_and_type_checking_imports() -> None:
    """The checker itself (SYNTHETIC source): imports in a function body, relative and under TYPE_CHECKING."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from argus_lab.views import bundle\n"
        "def f():\n    from argus_lab.report import Report\n    from ..store import db\n    return Report, db\n"
    )
    found = {m for _, m in imports_in(source, "argus_lab.run")}
    assert found == {"argus_lab.views.bundle", "argus_lab.report", "argus_lab.store.db"}
    run = stage_of("argus_lab.run.runtime")
    assert run is not None
    assert all((stage_of(m) or 0) > run for m in found)


def test_the_optimisation_loop_is_a_face() -> None:
    """``argus_lab.optimize`` is the package ``argus_lab.optimize``, exported lazily like ``measure``, and its
    parts (``optimize/``) sit in the top stage."""
    assert argus_lab.optimize.__name__ == LAZY_NAMES["optimize"]
    faces = len(STAGES) - 1
    assert stage_of("argus_lab.optimize") == stage_of("argus_lab.optimize.session") == faces


def test_measured_process_imports_stay_light() -> None:
    """A measured child imports the markers and the child runner: no polars, plotly, ipywidgets or DuckDB."""
    code = (
        "import sys, argus_lab.regions, argus_lab.run.child\n"
        "heavy = sorted(m for m in ('polars', 'plotly', 'ipywidgets', 'duckdb', 'IPython') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, timeout=60
    ).stdout.strip()
    assert out == "", f"importing argus_lab.regions and argus_lab.run.child loaded {out}"
