"""``region()``: one marker per call site (cached by the caller's code object and instruction offset), the name
checks, and how a declaring file is named for people (source namers); ``_publish_region`` makes ``argus_lab.region``
the C ``region`` of a native boundary run while it records.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from argus_lab.errors import RegionMisuseError
from argus_lab.regions.identity import Region, RegionKind
from argus_lab.regions.marker import RegionMarker

# -- where a region is declared, as people know it ---------------------------------------------------------------
_source_namers: list[Callable[[str], str | None]] = []


def add_source_namer(namer: Callable[[str], str | None]) -> None:
    """Add a function that names a source file for people (e.g. a notebook kernel's temporary cell file as
    ``cell [5] of quickstart.ipynb``); it returns ``None`` for files it does not know.  Added once per function."""
    if namer not in _source_namers:
        _source_namers.append(namer)


def source_name(file: str) -> str:
    """``file`` as the first source namer that knows it names it, else unchanged (stored with each region)."""
    for namer in _source_namers:
        try:
            name = namer(file)
        except Exception:  # a namer must never break recording
            name = None
        if name:
            return name
    return file


# -- region(): one marker per call site -----------------------------------------------------------------------
# _SITES: (id of the caller's code, its instruction offset, name, kind, module) -> (marker, code); the code is kept
# so that its id is never reused while the entry exists.  _LAST: name -> (code, offset, kind, module, marker) of
# the site that used the name last, checked first (one lookup by a string, whose hash is cached).
_SITES: dict[tuple[Any, ...], tuple[RegionMarker, Any]] = {}
_LAST: dict[str, tuple[Any, int, str, str | None, RegionMarker]] = {}
_SITES_MAX = 8192  # a program that builds region names dynamically must not grow these without bound
_getframe = sys._getframe


def _caller_location(frame: Any) -> tuple[str, str, int]:
    module = str(frame.f_globals.get("__name__", "__main__"))
    file = frame.f_code.co_filename
    if module == "__main__" and file and not file.startswith("<"):
        module = os.path.splitext(os.path.basename(file))[0]
    return module, file, frame.f_lineno


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name.strip():
        msg = f"a region name must be a non-empty string, got {name!r}; e.g. `argus_lab.region('attn')`"
        raise RegionMisuseError(msg)
    if "/" in name:
        msg = (
            f"region name {name!r} contains '/', which separates levels of a region path; "
            "nest regions instead: `with region('layer'): with region('attn'): ...`"
        )
        raise RegionMisuseError(msg)


def region(name: str, *, kind: RegionKind = "host", module: str | None = None) -> RegionMarker:
    """Mark a region of code.

    The marker is made once per call site (and name, kind, module) and reused, so writing
    ``with argus_lab.region("attn"):`` inside a loop costs about as much as a marker built ahead.

    Parameters
    ----------
    name
        The region's name; ``/`` is not allowed in it because it separates the levels of a region path.
    kind
        ``"host"`` for Python code (the default), ``"device"`` for a region inside a kernel.
    module
        Overrides the declaring module that is part of the region's identity (default: the caller's).

    Examples
    --------
    >>> import argus_lab
    >>> with argus_lab.region("attn"):
    ...     pass
    >>> @argus_lab.region("step")
    ... def step() -> None: ...
    """
    frame = _getframe(1)
    try:
        last = _LAST.get(name)
    except TypeError:  # an unhashable name: _site_marker says what is wrong
        last = None
    if (
        last is not None
        and last[0] is frame.f_code
        and last[1] == frame.f_lasti
        and last[2] == kind
        and last[3] == module
    ):
        return last[4]
    return _site_marker(frame, name, kind, module)


def _publish_region(fn: Callable[..., Any]) -> None:
    """Make ``fn`` what ``argus_lab.region`` is: the C ``region`` of a native boundary run while it records (the
    same function, its call-site lookup and the ``with`` protocol in C), this module's :func:`region` otherwise.
    Code that bound the function itself (``from argus_lab import region``) keeps the Python one: same rows."""
    package = sys.modules.get("argus_lab")
    if package is not None:
        package.region = fn  # type: ignore[attr-defined]


def _site_marker(frame: Any, name: str, kind: RegionKind, module: str | None) -> RegionMarker:
    code = frame.f_code
    key = (id(code), frame.f_lasti, name, kind, module)
    try:
        hit = _SITES.get(key)
    except TypeError:
        hit = None
    if hit is not None:
        marker = hit[0]
    else:
        _check_name(name)
        if kind not in ("host", "device"):
            msg = f"a region kind must be 'host' or 'device', got {kind!r}"
            raise RegionMisuseError(msg)
        mod, file, line = _caller_location(frame)
        marker = RegionMarker(Region(name=name, kind=kind, module=module or mod, file=file, line=line))
        if len(_SITES) >= _SITES_MAX:
            _SITES.clear()
            _LAST.clear()
        _SITES[key] = (marker, code)
    _LAST[name] = (code, frame.f_lasti, kind, module, marker)
    return marker
