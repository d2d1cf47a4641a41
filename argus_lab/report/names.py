"""Kernel names for people: demangled by a maintained demangler, then shortened for tables.

The store keeps every kernel name exactly as the tools reported it (CUPTI and ncu give the mangled C++ symbol,
e.g. ``_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIiEE...``); this module only turns
names into something readable where they are shown: the text tables, the JSON's ``display_name`` fields, the
views, the panel and the exported HTML.

* :func:`demangle` uses the PyPI package ``cxxfilt`` (``abi::__cxa_demangle`` of the C++ runtime, the same code as
  ``c++filt``); without it, the ``c++filt`` program; without either, the name unchanged (and
  :func:`demangler` says so).  Names that are not mangled (Triton's ``matmul_kernel``, cuBLAS's
  ``sm90_xmma_gemm_...``) come back unchanged.
* :func:`display_name` is what tables show, close to what torch.profiler and Nsight print: the demangled name
  without its return type and parameter list (``at::native::vectorized_elementwise_kernel<4,
  at::native::FillFunctor<int>, std::array<char*, 1ul> >``), with deeply nested template arguments folded to
  ``<…>`` when it is longer than ``width``.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Iterable

ELLIPSIS = "…"


@functools.cache
def _cxxfilt() -> object | None:
    try:
        import cxxfilt
    except (ImportError, OSError):  # the package is missing or the C++ runtime could not be loaded
        return None
    return cxxfilt


def demangler() -> str:
    """Which demangler is used: ``cxxfilt``, ``c++filt`` or ``none`` (names are then shown as recorded)."""
    if _cxxfilt() is not None:
        return "cxxfilt"
    return "c++filt" if shutil.which("c++filt") else "none"


def _mangled(name: str) -> bool:
    return name.startswith("_Z")


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The demangled form of a C++ symbol (``name`` itself when it is not mangled or cannot be demangled)."""
    if not name or not _mangled(name):
        return name
    mod = _cxxfilt()
    if mod is not None:
        try:
            out = mod.demangle(name)  # type: ignore[attr-defined]
        except Exception:  # cxxfilt.InvalidName and ctypes errors: the name stays as recorded
            return name
        return str(out) or name
    return _cplusfilt([name]).get(name, name)


def demangle_all(names: Iterable[str]) -> dict[str, str]:
    """``{name: demangled}`` for many names at once (one ``c++filt`` process when ``cxxfilt`` is missing)."""
    uniq = list(dict.fromkeys(n for n in names if n))
    if _cxxfilt() is not None:
        return {n: demangle(n) for n in uniq}
    out = {n: n for n in uniq}
    out.update(_cplusfilt([n for n in uniq if _mangled(n)]))
    return out


def _cplusfilt(names: list[str]) -> dict[str, str]:
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return {}
    try:
        res = subprocess.run(
            [tool], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    lines = res.stdout.splitlines()
    return dict(zip(names, lines, strict=False)) if len(lines) == len(names) else {}


def _strip_signature(text: str) -> str:
    """``void ns::f<int>(float*, int)`` -> ``ns::f<int>``: no return type, no parameter list."""
    s = text.strip()
    if s.endswith(")"):  # the parameter list: the last top-level parenthesis group
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            ch = s[i]
            if ch == ")":
                depth += 1
            elif ch == "(":
                depth -= 1
                if depth == 0:
                    head = s[:i].rstrip()
                    if head and not head.endswith(("operator", "(anonymous namespace")):
                        s = head
                    break
    depth = 0  # the return type: a space outside every <...> and (...) before the name
    cut = -1
    for i, ch in enumerate(s):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == " " and depth == 0:
            cut = i
    if cut >= 0 and not s[:cut].endswith(("operator", ",")):
        s = s[cut + 1 :]
    return s


def _fold(text: str, keep_depth: int) -> str:
    """Template arguments nested deeper than ``keep_depth`` become ``…``."""
    out: list[str] = []
    depth = 0
    for ch in text:
        if ch == "<":
            depth += 1
            if depth == keep_depth + 1:
                out.append("<" + ELLIPSIS)
                continue
        elif ch == ">":
            depth -= 1
            if depth == keep_depth:
                out.append(">")
                continue
        if depth <= keep_depth:
            out.append(ch)
    return "".join(out)


@functools.lru_cache(maxsize=65536)
def display_name(name: str, width: int = 96) -> str:
    """A kernel name as tables show it: demangled, without return type and parameters, at most ``width``
    characters (nested template arguments folded first, then the end cut with ``…``)."""
    s = _strip_signature(demangle(name)) if _mangled(name) else name
    for depth in (2, 1, 0):
        if len(s) <= width:
            return s
        folded = _fold(s, depth)
        s = folded if len(folded) < len(s) else s
    return s if len(s) <= width else s[: width - 1] + ELLIPSIS


__all__ = ["demangle", "demangle_all", "demangler", "display_name"]
