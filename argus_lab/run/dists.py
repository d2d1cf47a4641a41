"""Installed distributions: what they require, and the pins they place on one another (read from their metadata).

The version checks of the doctor and of the PM-sampling backend read what pip reads: the ``Requires-Dist`` lines of
the installed distributions (``importlib.metadata``), with their environment markers evaluated for this
interpreter.  A pin may be indirect: torch 2.11+cu130 requires ``cuda-toolkit[cupti,...]==13.0.2``, and it is
cuda-toolkit's extra ``cupti`` that requires ``nvidia-cuda-cupti==13.0.85.*``; :func:`pins_on` follows such extras
through the installed distributions.  Nothing here imports the packages it reads about.
"""

from __future__ import annotations

import importlib.metadata as md
import re
import site
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def norm(name: str) -> str:
    """A distribution name as pip compares them (PEP 503: case and ``-_.`` runs folded)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def version_tuple(text: str) -> tuple[int, ...]:
    """``13.0.85`` -> (13, 0, 85); ``2025.3.1.0`` -> (2025, 3, 1, 0); local parts and letters end it."""
    out: list[int] = []
    for part in re.split(r"[.+]", text.strip()):
        digits = re.match(r"\d+", part)
        if not digits:
            break
        out.append(int(digits.group()))
        if digits.group() != part:
            break
    return tuple(out)


def satisfies(version: str, spec: str) -> bool | None:
    """Whether ``version`` meets a specifier like ``~=13.4``, ``==13.0.85.*`` or ``>=13.0,<14`` (``None``: cannot
    be read)."""
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return None
    try:
        return Version(version) in SpecifierSet(spec)
    except (InvalidSpecifier, InvalidVersion):
        return None


@dataclass(frozen=True)
class Pin:
    """A requirement one installed distribution places on another, possibly through an extra of a third."""

    holder: str
    """The distribution that (directly or through ``via``) requires the target, e.g. ``torch``."""
    holder_version: str
    spec: str
    """The version specifier, e.g. ``==13.0.85.*`` (``""``: any version)."""
    via: tuple[str, ...] = ()
    """The requirements it goes through, e.g. ``("cuda-toolkit[cupti]==13.0.2",)``."""

    def text(self, target: str) -> str:
        """``torch 2.11.0 requires nvidia-cuda-cupti==13.0.85.* (through cuda-toolkit[cupti,...]==13.0.2)``."""
        through = f" (through {', '.join(self.via)})" if self.via else ""
        return f"{self.holder} {self.holder_version} requires {target}{self.spec}{through}"


@dataclass(frozen=True)
class Unmet:
    """A requirement of an installed distribution that this environment does not meet."""

    name: str
    spec: str
    installed: str
    """The installed version (``""``: not installed)."""

    @property
    def requirement(self) -> str:
        """The requirement as pip takes it, e.g. ``cuda-pathfinder>=1.4.1``."""
        return f"{self.name}{self.spec}"

    def text(self) -> str:
        """``pyelftools (not installed)`` or ``cuda-pathfinder>=1.4.1 (1.2.0 installed)``."""
        return f"{self.requirement} ({self.installed + ' installed' if self.installed else 'not installed'})"


def _requirements(dist: str) -> list[str]:
    try:
        return list(md.requires(dist) or [])
    except md.PackageNotFoundError:
        return []


def _parse(line: str) -> Any:
    """A ``Requires-Dist`` line as a ``packaging`` Requirement (``None`` when packaging or the line cannot be read)."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:
        return None
    try:
        return Requirement(line)
    except InvalidRequirement:
        return None


def _applies(req: Any, extras: tuple[str, ...]) -> bool:
    """Whether the requirement holds here: its marker true with no extra, or with one of ``extras`` asked."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": extra}) for extra in ("", *extras))


def pins_on(dist: str, target: str, depth: int = 2) -> list[Pin]:
    """The requirements installed distribution ``dist`` places on ``target``: its own, and those of the extras it asks
    of other installed distributions (``cuda-toolkit[cupti]``), ``depth`` levels deep."""
    version = _version(dist)
    if not version:
        return []
    return _pins(Pin(dist, version, ""), dist, (), target, depth, {norm(dist)})


def _pins(holder: Pin, dist: str, extras: tuple[str, ...], target: str, depth: int, seen: set[str]) -> list[Pin]:
    """Pins on ``target`` in the requirements of ``dist`` (for ``extras``), reached from ``holder`` via its ``via``."""
    out: list[Pin] = []
    for line in _requirements(dist):
        req = _parse(line)
        if req is None or not _applies(req, extras):
            continue
        spec = str(req.specifier)
        if norm(req.name) == norm(target):
            out.append(Pin(holder.holder, holder.holder_version, spec, holder.via))
        elif req.extras and depth > 0 and norm(req.name) not in seen and _version(req.name):
            step = f"{req.name}[{','.join(sorted(req.extras))}]{spec}"
            via = Pin(holder.holder, holder.holder_version, "", (*holder.via, step))
            out += _pins(via, req.name, tuple(sorted(req.extras)), target, depth - 1, seen | {norm(req.name)})
    return out


def requirement_on(dist: str, target: str) -> str:
    """The version specifier installed distribution ``dist`` places on ``target``, directly or through an extra it
    asks of another distribution (``""`` when none, or when ``dist`` is not installed)."""
    pins = pins_on(dist, target)
    return pins[0].spec if pins else ""


def unmet_requirements(dist: str) -> list[Unmet]:
    """The requirements of installed distribution ``dist`` (no extras; markers evaluated here) that are not
    installed, or installed in a version they exclude."""
    out: list[Unmet] = []
    for line in _requirements(dist):
        req = _parse(line)
        if req is None or not _applies(req, ()):
            continue
        have = _version(req.name)
        spec = str(req.specifier)
        if not have or (spec and satisfies(have, spec) is False):
            out.append(Unmet(req.name, spec, have))
    return out


def location(dist: str) -> Path | None:
    """The folder distribution ``dist`` is installed in (its ``*.dist-info`` folder's parent)."""
    try:
        return Path(str(md.distribution(dist).locate_file(""))).resolve()
    except md.PackageNotFoundError:
        return None


def private_folder(dist: str) -> Path | None:
    """The folder of ``dist`` when it is not one of this interpreter's site folders (a ``pip install --target`` folder
    on ``PYTHONPATH``), else ``None``."""
    where = location(dist)
    if where is None:
        return None
    sites = {sysconfig.get_paths().get(k) for k in ("purelib", "platlib")}
    try:
        sites |= set(site.getsitepackages()) | {site.getusersitepackages()}
    except AttributeError:  # site of an embedded interpreter
        pass
    known = {Path(s).resolve() for s in sites if s}
    return None if where in known else where


def pip_install(requirements: list[str], dist: str) -> str:
    """The pip command that installs ``requirements`` where ``dist`` lives (into its ``--target`` folder when that
    is private)."""
    folder = private_folder(dist)
    quoted = " ".join(f'"{r}"' for r in requirements)
    return f"pip install --no-deps --target {folder} {quoted}" if folder else f"pip install {quoted}"


def _version(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return ""


__all__ = [
    "Pin",
    "Unmet",
    "location",
    "norm",
    "pins_on",
    "pip_install",
    "private_folder",
    "requirement_on",
    "satisfies",
    "unmet_requirements",
    "version_tuple",
]
