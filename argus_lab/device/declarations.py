"""Device region declarations on the host: the table of a kernel's region names (:func:`regions`), the code a name
has in a probe buffer (:func:`region_code`) and the static check of a kernel's markers (:class:`DeviceRegions`).
Imports neither Triton nor torch."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections import Counter
from dataclasses import dataclass
from typing import Any

from argus_lab.device.layout import REGION_ID_BITS
from argus_lab.errors import RegionMisuseError
from argus_lab.regions import Region

_MARKER_CALLS = ("enter", "exit")


def region_code(name: Any) -> int:
    """The 31-bit code of a device region name inside a probe buffer (stable: FNV-1a of the UTF-8 name).

    Raises :class:`RegionMisuseError` for names that are not non-empty strings or that contain ``/``.
    """
    name = getattr(name, "value", name)  # a tl.constexpr while Triton traces a kernel
    if not isinstance(name, str) or not name.strip():
        msg = (
            f"a device region name must be a non-empty string literal, got {name!r}; "
            "e.g. `c = dm.enter(probe, c, 'load')`"
        )
        raise RegionMisuseError(msg)
    if "/" in name:
        msg = (
            f"device region name {name!r} contains '/', which separates levels of a region path; "
            "nest regions instead: enter 'tile', then 'load', exit 'load', exit 'tile'"
        )
        raise RegionMisuseError(msg)
    # FNV-1a over the UTF-8 bytes, in plain Python: Triton evaluates this function while tracing a kernel
    # (markers.py wraps it with triton.constexpr_function) and refuses calls to module-level functions there.
    h = 0x811C9DC5
    for byte in name.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h & ((1 << REGION_ID_BITS) - 1)


@dataclass(frozen=True)
class DeviceRegions:
    """The device regions one kernel (or one module of kernels) declares: names, codes and identities.

    Build it with :func:`regions`. The decoder turns buffer codes back into names with it; its
    :meth:`check_kernel` finds undeclared names and unbalanced markers in a kernel's source before any launch.
    """

    names: tuple[str, ...]
    module: str

    def code(self, name: str) -> int:
        """The buffer code of a declared ``name``."""
        if name not in self.names:
            raise RegionMisuseError(self._unknown(name))
        return region_code(name)

    def name_of(self, code: int) -> str | None:
        """The declared name with buffer ``code``, or ``None``."""
        return self._by_code().get(code)

    def region(self, name: str) -> Region:
        """The stable identity of device region ``name`` (kind ``device``; same in clean and instrumented runs)."""
        if name not in self.names:
            raise RegionMisuseError(self._unknown(name))
        return Region(name=name, kind="device", module=self.module)

    def codes(self) -> dict[int, str]:
        """Every declared code with its name."""
        return dict(self._by_code())

    def _by_code(self) -> dict[int, str]:
        return {region_code(n): n for n in self.names}

    def _unknown(self, name: str) -> str:
        return (
            f"device region {name!r} is not declared (declared: {', '.join(self.names) or 'none'}); "
            f"add it to the declaration, e.g. `argus_lab.device.regions({', '.join(map(repr, (*self.names, name)))})`, "
            "or fix the name in the kernel"
        )

    def check_kernel(self, kernel: Any) -> None:
        """Check the markers in a ``@triton.jit`` kernel's source against this table, without compiling it.

        Finds ``enter``/``exit`` calls whose region name is not declared, whose name is not a string literal,
        and names whose ``enter`` and ``exit`` calls are not equally many in the source. Raises
        :class:`RegionMisuseError` listing every problem with its fix.
        """
        src = getattr(kernel, "src", None)
        if not isinstance(src, str):
            src = inspect.getsource(getattr(kernel, "fn", kernel))
        tree = ast.parse(textwrap.dedent(src))
        counts: Counter[tuple[str, str]] = Counter()
        problems: list[str] = []
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in _MARKER_CALLS or len(node.args) != 3:
                continue
            arg = node.args[2]
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                problems.append(
                    f"line {node.lineno}: {node.func.attr}() needs the region name as a string literal "
                    f"(got `{ast.unparse(arg)}`), e.g. `dm.{node.func.attr}(probe, c, 'load')`"
                )
                continue
            if arg.value not in self.names:
                problems.append(f"line {node.lineno}: {self._unknown(arg.value)}")
            counts[(arg.value, node.func.attr)] += 1
        for name in sorted({n for n, _ in counts}):
            n_enter, n_exit = counts[(name, "enter")], counts[(name, "exit")]
            if n_enter != n_exit:
                problems.append(
                    f"region {name!r} has {n_enter} enter() and {n_exit} exit() calls in the kernel source; "
                    "every `c = dm.enter(probe, c, name)` needs one `c = dm.exit(probe, c, name)` on the same path"
                )
        if problems:
            kname = getattr(kernel, "__name__", None) or getattr(getattr(kernel, "fn", None), "__name__", "kernel")
            raise RegionMisuseError(f"device markers of {kname}: " + "; ".join(problems))


def regions(*names: str, module: str | None = None) -> DeviceRegions:
    """Declare the device regions a kernel marks, e.g. ``PHASES = argus_lab.device.regions("load", "mma")``.

    ``module`` is part of each region's identity (default: the caller's module), as for host regions.
    """
    if not names:
        msg = "declare at least one device region name, e.g. `argus_lab.device.regions('load', 'mma', 'epilogue')`"
        raise RegionMisuseError(msg)
    seen: dict[int, str] = {}
    for name in names:
        code = region_code(name)
        if code in seen and seen[code] != name:
            msg = f"device region names {seen[code]!r} and {name!r} have the same code; rename one of them"
            raise RegionMisuseError(msg)
        seen[code] = name
    if len(set(names)) != len(names):
        dup = sorted(n for n, k in Counter(names).items() if k > 1)
        msg = f"device region names declared twice: {', '.join(dup)}; declare each name once"
        raise RegionMisuseError(msg)
    if module is None:
        frame = inspect.currentframe()
        caller = frame.f_back if frame is not None else None
        module = str(caller.f_globals.get("__name__", "__main__")) if caller is not None else "__main__"
    return DeviceRegions(names=tuple(names), module=module)


__all__ = ["DeviceRegions", "region_code", "regions"]
