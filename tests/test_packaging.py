"""What the wheel is built from: one version source (``argus_lab.__version__``, which ``pyproject.toml`` reads) and
the PEP 561 marker that ships the package's type hints."""

from __future__ import annotations

import re
from pathlib import Path

import argus_lab

ROOT = Path(argus_lab.__file__).resolve().parents[1]
PYPROJECT = (ROOT / "pyproject.toml").read_text()


def _table(name: str) -> str:
    """The body of one ``[name]`` table of pyproject.toml."""
    found = re.search(rf"^\[{re.escape(name)}\]\n(.*?)(?=^\[|\Z)", PYPROJECT, re.S | re.M)
    assert found, f"pyproject.toml has no [{name}] table"
    return found.group(1)


def test_the_version_is_declared_once_in_the_package() -> None:
    project = _table("project")
    assert not re.search(r"^version\s*=", project, re.M), "pyproject.toml must read the version, not restate it"
    assert re.search(r'^dynamic\s*=\s*\[[^]]*"version"', project, re.M)
    assert re.search(r'^path\s*=\s*"argus_lab/__init__.py"', _table("tool.hatch.version"), re.M)
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)?", argus_lab.__version__)


def test_the_package_ships_its_type_hints() -> None:
    assert (ROOT / "argus_lab" / "py.typed").is_file()
    assert re.search(r'^packages\s*=\s*\["argus_lab"\]', _table("tool.hatch.build.targets.wheel"), re.M)
