"""What a run executes: a script, a ``module:function``, a Python callable, or a notebook cell.

A workload can be executed in this process (:meth:`Workload.load`) or described as JSON for a child
process (:meth:`Workload.to_dict`); callables cannot cross a process boundary, every other kind can.

Notebook cells: a cell is replayed in a child process from its source together with the sources of the setup
cells it depends on (the cells that define what it uses, given by the caller, usually the magic).  The setup
cells run once, then the cell runs once per repetition, in one fresh namespace.  Limits: state the kernel built
interactively without a setup cell (objects mutated by hand, data loaded in a cell that is not listed) is not
there; IPython magics and shell escapes in the replayed sources are not supported; anything random differs
unless the sources seed it.
"""

from __future__ import annotations

import importlib
import os
import runpy
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from argus_lab.errors import WorkloadError

Kind = Literal["script", "function", "callable", "cell"]


def _region_name(text: str) -> str:
    """A region name made from a file or function name ("" when nothing usable is left)."""
    return text.replace("/", "_").strip()


@dataclass(frozen=True)
class Workload:
    """A description of what to execute once per repetition."""

    kind: Kind
    target: str
    args: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    cwd: str = field(default_factory=os.getcwd)
    func: Callable[[], Any] | None = field(default=None, compare=False, repr=False)
    implicit_region: str = ""
    """The region that measures the whole workload when it marks none ("" = none): the driver finds out in the
    first repetition (:func:`argus_lab.run.driver.drive`)."""
    label: str = ""
    """How the workload is described to people (e.g. ``cell [5] of quickstart.ipynb``); default :meth:`describe`."""
    origin: str = ""
    """Where the workload comes from, as JSON (the notebook and its cells: ``{"notebook", "cells": [{"id",
    "execution_count", "name"}]}``), stored with each run so that a face can link back to the cells."""

    # -- construction -----------------------------------------------------------------------------
    @classmethod
    def script(cls, path: str | os.PathLike[str], args: tuple[str, ...] = ()) -> Workload:
        """A Python script run as ``__main__`` once per repetition."""
        p = os.fspath(path)
        if not os.path.isfile(p):
            hint = " (it is a folder)" if os.path.isdir(p) else ""
            msg = f"the script {p!r} does not exist{hint}; pass the path of a Python file, e.g. `examples/nested.py`"
            raise WorkloadError(msg)
        return cls("script", os.path.abspath(p), tuple(args), implicit_region=_region_name(Path(p).stem))

    @classmethod
    def function(cls, spec: str) -> Workload:
        """``package.module:function``, imported and called with no arguments."""
        module, sep, name = spec.partition(":")
        if not sep or not module or not name:
            msg = f"{spec!r} is not of the form `module:function`; e.g. `mypkg.bench:step`"
            raise WorkloadError(msg)
        return cls("function", spec, implicit_region=_region_name(name.rsplit(".", 1)[-1]))

    @classmethod
    def of_callable(cls, fn: object) -> Workload:
        """A Python callable (in-process runs only)."""
        if not callable(fn):
            msg = f"expected a callable taking no arguments, got {type(fn).__name__}; wrap it: `lambda: f(x)`"
            raise WorkloadError(msg)
        name = getattr(fn, "__qualname__", type(fn).__name__)
        short = str(getattr(fn, "__name__", ""))
        implicit = _region_name(short) if short.isidentifier() else ""
        return cls("callable", f"{getattr(fn, '__module__', '?')}:{name}", func=fn, implicit_region=implicit)

    @classmethod
    def cell(cls, source: str, setup: tuple[str, ...] = ()) -> Workload:
        """A notebook cell's source plus the setup cells it depends on."""
        return cls("cell", source, setup=tuple(setup))

    @classmethod
    def from_target(cls, target: object, args: tuple[str, ...] = ()) -> Workload:
        """Interpret what a user passed: a Workload, a callable, ``module:function`` or a script path."""
        if isinstance(target, Workload):
            return target
        if callable(target):
            return cls.of_callable(target)
        if isinstance(target, str | os.PathLike):
            text = os.fspath(target)
            if text.endswith(".py") or os.path.sep in text or os.path.exists(text):
                return cls.script(text, args)
            if ":" in text:
                return cls.function(text)
            return cls.script(text, args)
        msg = f"cannot measure a {type(target).__name__}; pass a callable, a script path or 'module:function'"
        raise WorkloadError(msg)

    # -- description ------------------------------------------------------------------------------
    @property
    def can_run_in_child(self) -> bool:
        """Whether this workload can be executed by a child process."""
        return self.kind != "callable"

    def describe(self) -> str:
        """A one-line human description (stored with each run)."""
        if self.label:
            return self.label
        if self.kind == "script":
            return " ".join(["python", self.target, *self.args])
        if self.kind == "cell":
            first = next((ln for ln in self.target.splitlines() if ln.strip()), "")
            return f"notebook cell: {first[:60]} (+{len(self.setup)} setup cell(s))"
        return self.target

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form for a child process."""
        if not self.can_run_in_child:
            msg = (
                f"the callable {self.target!r} cannot run in a child process (needed by ncu runs); "
                "pass it as 'module:function' or as a script path instead"
            )
            raise WorkloadError(msg)
        return {
            "kind": self.kind,
            "target": self.target,
            "args": list(self.args),
            "setup": list(self.setup),
            "cwd": self.cwd,
            "implicit_region": self.implicit_region,
            "label": self.label,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Workload:
        """Inverse of :meth:`to_dict`."""
        return cls(
            data["kind"],
            data["target"],
            tuple(data.get("args", ())),
            tuple(data.get("setup", ())),
            data.get("cwd", os.getcwd()),
            implicit_region=data.get("implicit_region", ""),
            label=data.get("label", ""),
        )

    # -- execution --------------------------------------------------------------------------------
    def load(self) -> Callable[[], None]:
        """A function that executes the workload once (setup work, if any, is done here once)."""
        if self.kind == "callable":
            assert self.func is not None
            fn = self.func
            return lambda: (fn(), None)[1]
        if self.kind == "function":
            module_name, _, attr = self.target.partition(":")
            if self.cwd not in sys.path:
                sys.path.insert(0, self.cwd)
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                msg = f"cannot import {module_name!r} for workload {self.target!r}: {exc}; check the module path"
                raise WorkloadError(msg) from exc
            obj: Any = module
            for part in attr.split("."):
                if not hasattr(obj, part):
                    msg = f"module {module_name!r} has no attribute {attr!r}; check the `module:function` spelling"
                    raise WorkloadError(msg)
                obj = getattr(obj, part)
            func = obj
            return lambda: (func(), None)[1]
        if self.kind == "script":
            path, argv = self.target, [self.target, *self.args]
            folder = os.path.dirname(path)

            def run_script() -> None:
                saved = sys.argv
                sys.argv = list(argv)
                if folder not in sys.path:
                    sys.path.insert(0, folder)
                try:
                    runpy.run_path(path, run_name="__main__")
                finally:
                    sys.argv = saved

            return run_script
        namespace: dict[str, Any] = {"__name__": "__main__"}
        for i, src in enumerate(self.setup):
            exec(compile(src, f"<setup cell {i}>", "exec"), namespace)
        code = compile(self.target, "<measured cell>", "exec")
        return lambda: exec(code, namespace)
