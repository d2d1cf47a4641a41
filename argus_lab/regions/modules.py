"""``mark_modules()``: regions around the submodules of a model the user does not edit, without forward hooks.

A forward hook on a ``torch.nn.Module`` sends every call of that module down ``nn.Module``'s slower call path (the
hook dictionaries are walked at each call); on a decode step of a 22-layer Llama marked at its 44 attention and MLP
modules that alone cost 2.7 % on the H200 (docs/benchmarks.md, round 14).  ``mark_modules`` instead gives each
matched module an instance attribute ``forward`` that opens the region around the module's own ``forward``: the
module's class, its other instances and its hooks stay as they were, and ``remove()`` (or leaving the ``with``
block) deletes the attribute again.

Duck-typed: it needs ``named_modules()`` and ``forward`` only, so importing it never imports torch.
"""

from __future__ import annotations

import fnmatch
import inspect
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any

from argus_lab.errors import RegionMisuseError
from argus_lab.regions.identity import Region
from argus_lab.regions.marker import RegionMarker
from argus_lab.regions.sites import _check_name

_MARK = "_argus_lab_marked_forward"  # set on a wrapper: the module's own forward it calls


class ModuleMarks:
    """The modules :func:`mark_modules` marked: ``remove()`` (or the end of a ``with`` block) unmarks them."""

    def __init__(self, marked: list[tuple[Any, str, bool, Any]]) -> None:
        self._marked = marked  # (module, qualified name, had its own `forward` attribute, that attribute)

    @property
    def names(self) -> dict[str, str]:
        """Qualified module name -> region name, of every marked module."""
        return {qual: getattr(m.forward, "_argus_lab_region", "") for m, qual, _, _ in self._marked}

    def __len__(self) -> int:
        return len(self._marked)

    def remove(self) -> None:
        """Give every marked module its ``forward`` back (safe to call twice)."""
        marked, self._marked = self._marked, []
        for module, _, had_own, own in reversed(marked):
            if had_own:
                module.forward = own
            else:
                try:
                    del module.forward
                except AttributeError:  # already removed by the user
                    pass

    def __enter__(self) -> ModuleMarks:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.remove()


def mark_modules(root: Any, names: Mapping[str, str]) -> ModuleMarks:
    """Open a region around every call of the submodules of ``root`` whose qualified name (as
    ``root.named_modules()`` gives it) matches a pattern of ``names``: ``fnmatch`` pattern -> region name.

    >>> marks = argus_lab.mark_modules(model, {"model.layers.*.self_attn": "attn", "model.layers.*.mlp": "mlp"})
    >>> ...  # measure
    >>> marks.remove()

    or ``with argus_lab.mark_modules(model, {...}):``.  Regions nest as the calls do: a region the caller has open
    (``with argus_lab.region("decode"): model(...)``) is their parent.  A module matched by two patterns takes the
    first.  Every pattern must match at least one module, and a module can be marked once at a time.
    """
    if not hasattr(root, "named_modules"):
        msg = (
            f"mark_modules needs a torch.nn.Module (something with named_modules()), got {type(root).__name__}; "
            "pass the model itself, e.g. `argus_lab.mark_modules(model, {'model.layers.*.mlp': 'mlp'})`"
        )
        raise RegionMisuseError(msg)
    if not isinstance(names, Mapping) or not names:
        msg = "mark_modules needs a dict of module-name patterns to region names, e.g. {'model.layers.*.mlp': 'mlp'}"
        raise RegionMisuseError(msg)
    for region_name in names.values():
        _check_name(region_name)
    modules = [(qual, m) for qual, m in root.named_modules() if qual]
    chosen: list[tuple[str, Any, str]] = []
    unmatched = []
    taken: set[int] = set()
    for pattern, region_name in names.items():
        hits = [(q, m) for q, m in modules if fnmatch.fnmatchcase(q, pattern)]
        if not hits:
            unmatched.append(pattern)
        for q, m in hits:
            if id(m) not in taken:
                taken.add(id(m))
                chosen.append((q, m, region_name))
    if unmatched:
        sample = ", ".join(q for q, _ in modules[:6])
        msg = (
            f"no submodule of {type(root).__name__} matches {', '.join(map(repr, unmatched))}; patterns are matched "
            f"against the names root.named_modules() gives (here: {sample}, ...), e.g. 'model.layers.*.mlp'"
        )
        raise RegionMisuseError(msg)
    already = [q for q, m, _ in chosen if hasattr(m.__dict__.get("forward"), _MARK)]
    if already:
        msg = (
            f"{len(already)} module(s) are marked already ({', '.join(already[:3])}); call remove() on the marks "
            "that mark_modules returned before marking them again"
        )
        raise RegionMisuseError(msg)
    markers: dict[tuple[str, type], RegionMarker] = {}
    marked: list[tuple[Any, str, bool, Any]] = []
    for qual, module, region_name in chosen:
        key = (region_name, type(module))
        marker = markers.get(key)
        if marker is None:
            marker = markers[key] = RegionMarker(_identity(region_name, type(module)))
        had_own = "forward" in module.__dict__
        own = module.__dict__.get("forward")
        module.forward = _wrap(marker, module.forward, region_name)
        marked.append((module, qual, had_own, own))
    return ModuleMarks(marked)


def _identity(name: str, cls: type) -> Region:
    """The region's identity: its name in the module that declares the class (one region for every instance)."""
    forward = getattr(cls, "forward", None)
    file, line = "", 0
    if forward is not None:
        try:
            file = inspect.getsourcefile(forward) or ""
            line = inspect.getsourcelines(forward)[1]
        except (OSError, TypeError):
            pass
    return Region(name=name, kind="host", module=cls.__module__, file=file, line=line)


def _wrap(marker: RegionMarker, forward: Callable[..., Any], name: str) -> Callable[..., Any]:
    enter, exit_ = marker.__enter__, marker.__exit__

    def marked_forward(*args: Any, **kwargs: Any) -> Any:
        enter()
        try:
            out = forward(*args, **kwargs)
        except BaseException as exc:
            exit_(type(exc), exc, exc.__traceback__)
            raise
        exit_(None, None, None)
        return out

    setattr(marked_forward, _MARK, forward)
    marked_forward._argus_lab_region = name  # type: ignore[attr-defined]
    return marked_forward


def marked_modules(root: Any) -> Iterator[tuple[str, str]]:
    """(qualified name, region name) of each submodule of ``root`` that :func:`mark_modules` marked now."""
    for qual, m in root.named_modules():
        fwd = m.__dict__.get("forward")
        if hasattr(fwd, _MARK):
            yield qual, getattr(fwd, "_argus_lab_region", "")
