"""What measuring a notebook cell does beyond reading the magic's line (``%%argus``, ``%%argus_region``).

The magics (:mod:`argus_lab.faces.magics`) read the line and the kernel (the cell's source, prompt number, notebook,
cell id, history) and display; here: the cell as a workload, its label and origin, the region a cell without
regions is measured as, the setup cells a replay runs and the notes about them, the plan (with the cell's kernel
census), the one-run measurement of a ``%%argus_region`` cell, the store a kernel writes, and the hints after a
run.  Nothing here imports IPython, and the facade (:mod:`argus_lab.app.measure`) is imported when a cell is
measured, not when the magics load.
"""

from __future__ import annotations

import ast
import json
import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from argus_lab import config
from argus_lab.errors import StoreError
from argus_lab.run.workload import Workload

if TYPE_CHECKING:
    from argus_lab.app.measure import Measurement
    from argus_lab.plan import Plan
    from argus_lab.report import Report

REGION_CELL_SIGNALS = "host.wall,host.cpu"
"""What a ``%%argus_region`` cell measures when no measurement is active (once, no warm-up)."""


@dataclass(frozen=True)
class CellWorkload(Workload):
    """A notebook cell: in this process it runs ``func`` (the cell in the user namespace); a child process
    replays ``target`` after the ``setup`` sources (:meth:`Workload.to_dict` carries only those)."""

    def load(self) -> Callable[[], None]:
        """Execute in the notebook's namespace when a function is given, else replay like any cell."""
        if self.func is not None:
            fn = self.func
            return lambda: (fn(), None)[1]
        return super().load()


@dataclass(frozen=True)
class CellPlace:
    """Where a cell runs, as the kernel says: its notebook (relative to the Jupyter root, "" outside Jupyter), its
    cell id ("" when the request did not come from a cell) and its prompt number ``[N]``."""

    notebook: str
    cell_id: str
    number: int

    def origin(self) -> str:
        """The origin (JSON) stored with the runs: the notebook and the cell ("" outside a notebook cell)."""
        if not (self.notebook and self.cell_id):
            return ""
        cells = [{"id": self.cell_id, "execution_count": self.number}]
        return json.dumps({"notebook": self.notebook, "cells": cells})

    def label(self) -> str:
        """``cell [5] of quickstart.ipynb`` (``a cell of ...`` when the request came from no cell)."""
        return cell_label(self.number if self.cell_id else None, self.notebook)


def cell_label(number: int | None, notebook: str) -> str:
    """``cell [5] of quickstart.ipynb`` (the prompt number and the notebook's file name, as people see them)."""
    name = os.path.basename(notebook)
    cell = f"cell [{number}]" if number else "a cell"
    return f"{cell} of {name}" if name else cell


def origin_label(origin: str) -> str:
    """``cells attn, mlp of demo.ipynb`` for the cells of an origin (from the panel); "" when there is none."""
    if not origin:
        return ""
    try:
        data = json.loads(origin)
        names = [str(c.get("name") or f"[{c.get('execution_count')}]") for c in data.get("cells", [])]
        notebook = os.path.basename(str(data.get("notebook", "")))
    except (ValueError, AttributeError, TypeError):
        return ""
    if not names:
        return ""
    what = ("cell " if len(names) == 1 else "cells ") + ", ".join(names)
    return f"{what} of {notebook}" if notebook else what


def origin_cells(origin: str) -> dict[str, str]:
    """Region name -> ``cell 2 of demo.ipynb`` for the cells of an origin that carry a position."""
    try:
        data = json.loads(origin) if origin else {}
        notebook = os.path.basename(str(data.get("notebook", "")))
        return {
            str(c["name"]): f"cell {int(c['index']) + 1} of {notebook}"
            for c in data.get("cells", [])
            if c.get("name") and isinstance(c.get("index"), int)
        }
    except (ValueError, AttributeError, TypeError, KeyError):
        return {}


def checked_store(path: str) -> str:
    """``path`` if it can hold a store: its folder exists (a folder is never created without asking).

    Raises :class:`~argus_lab.errors.StoreError` naming the fix."""
    p = Path(path).expanduser()
    if p.is_dir():
        msg = f"{path!r} is a folder; give the store a file name in it, e.g. `{(p / 'argus.duckdb').as_posix()}`"
        raise StoreError(msg)
    folder = p.parent
    if not folder.exists():
        msg = (
            f"the folder {folder.as_posix()!r} of the store {path!r} does not exist; create it first "
            f"(`!mkdir -p {shlex.quote(folder.as_posix())}`) or choose a store in an existing folder"
        )
        raise StoreError(msg)
    return path


@dataclass(frozen=True)
class KernelStore:
    """Which store a kernel's measurements go to, and why (what the JupyterLab panel follows)."""

    store: str
    """Its absolute path."""
    source: str
    """``%argus store``, ``ARGUS_STORE`` or ``default``."""
    cwd: str
    notebook: str

    def to_dict(self) -> dict[str, str]:
        """The JSON form the panel reads: ``{"store", "source", "cwd", "notebook"}``."""
        return {"store": self.store, "source": self.source, "cwd": self.cwd, "notebook": self.notebook}


def kernel_store(chosen: str | None, notebook: str) -> KernelStore:
    """The store of a kernel whose ``%argus store`` is ``chosen`` (None: not set): that, else ``$ARGUS_STORE``, else
    ``argus.duckdb`` in the working folder."""
    env = config.value(config.ARGUS_STORE)
    source = "%argus store" if chosen else "ARGUS_STORE" if env else "default"
    path = os.path.abspath(os.path.expanduser(chosen or env or "argus.duckdb"))
    return KernelStore(path, source, os.getcwd(), notebook)


def region_check(name: str) -> None:
    """Raise :class:`~argus_lab.errors.RegionMisuseError` when ``name`` cannot name a region."""
    from argus_lab.regions import region

    region(name, module="__main__")


class RegionWrap(ast.NodeTransformer):
    """Wraps a cell's statements in ``with <marker>:``; a last expression is kept displayable after the block."""

    def __init__(self, marker_name: str, result_name: str) -> None:
        self.marker_name = marker_name
        self.result_name = result_name

    def visit_Module(self, node: ast.Module) -> ast.Module:
        body = list(node.body)
        tail: list[ast.stmt] = []
        if body and isinstance(body[-1], ast.Expr):
            last = body.pop()
            assert isinstance(last, ast.Expr)
            store = ast.Name(id=self.result_name, ctx=ast.Store())
            body.append(ast.copy_location(ast.Assign(targets=[store], value=last.value), last))
            tail.append(ast.copy_location(ast.Expr(value=ast.Name(id=self.result_name, ctx=ast.Load())), last))
        item = ast.withitem(context_expr=ast.Name(id=self.marker_name, ctx=ast.Load()))
        wrapped = ast.With(items=[item], body=body or [ast.Pass()])
        if body:
            ast.copy_location(wrapped, body[0])
        node.body = [wrapped, *tail]
        ast.fix_missing_locations(node)
        return node


@dataclass(frozen=True)
class SetupCells:
    """The setup sources a replay runs before the cell, and the notes about those left out."""

    sources: tuple[str, ...]
    notes: tuple[str, ...]


def setup_cells(raw: Sequence[str], transform: Callable[[str], str]) -> SetupCells:
    """The ``raw`` setup inputs as Python (``transform``: IPython's ``transform_cell``); an input that uses IPython
    syntax cannot be replayed and is left out with a note."""
    out: list[str] = []
    notes: list[str] = []
    for src in raw:
        py = transform(src)
        if "get_ipython()" in py:
            notes.append(f"left out of the replay (uses IPython syntax): {src.strip().splitlines()[0][:60]!r}")
            continue
        out.append(py)
    return SetupCells(tuple(out), tuple(notes))


@dataclass(frozen=True)
class CellRequest:
    """What a ``%%argus`` line asks for, read by the magic: the request options and how the cell is replayed."""

    signals: str
    scope: str
    repeat: int
    warmup: int
    allow_unknown_counters: bool
    store: str | None
    setup: str
    isolate: bool
    region: str
    origin: str

    @classmethod
    def of(cls, options: Any) -> CellRequest:
        """From the parsed ``%%argus`` options (:func:`argus_lab.faces.magics.measure_parser`)."""
        return cls(
            options.signals,
            options.scope,
            options.repeat,
            options.warmup,
            options.allow_unknown_counters,
            options.store,
            options.setup,
            options.isolate,
            options.region,
            options.origin,
        )


@dataclass(frozen=True)
class PlannedCell:
    """A cell ready to measure: its workload, its plan, the region it is measured as when it enters none, and the
    notes to show before the runs (setup inputs left out, what a replay in a child process cannot do)."""

    workload: CellWorkload
    plan: Plan
    implicit: str
    notes: tuple[str, ...]


def plan_cell(
    request: CellRequest,
    source: str,
    run_once: Callable[[], None],
    place: CellPlace,
    setup: SetupCells,
    store: str | None,
) -> PlannedCell:
    """The workload and plan of a ``%%argus`` cell (``source``, run here by ``run_once``) in ``store``: labelled by
    its origin (the panel's cells) or its place, measured as ``--region`` or ``cell_N`` when it enters no region,
    costed by the cell's kernel census (:func:`argus_lab.app.measure.plan_from_options`).

    Raises :class:`~argus_lab.errors.ArgusError`: a bad region name, a request the planner refuses."""
    from argus_lab.app.measure import plan_from_options

    origin = request.origin or place.origin()
    implicit = request.region or f"cell_{place.number}"
    region_check(implicit)
    workload = CellWorkload(
        "cell",
        source,
        setup=setup.sources,
        cwd=os.getcwd(),
        func=run_once,
        implicit_region=implicit,
        label=origin_label(origin) or place.label(),
        origin=origin,
    )
    the_plan = plan_from_options(request, workload, store)
    notes = list(setup.notes)
    needs_child = request.isolate or any(r.launcher is not None for r in the_plan.runs)
    if needs_child and "get_ipython()" in source:
        notes.append("this cell uses IPython syntax, which a replay in a child process cannot run")
    if needs_child and not setup.sources and request.setup == "marked":
        notes.append(
            "child runs replay this cell with no setup cells: run the cells that define its inputs with "
            "%%argus_setup, or use --setup history"
        )
    return PlannedCell(workload, the_plan, implicit, tuple(notes))


def implicit_hint(report: Report, implicit: str) -> str | None:
    """The hint when the cell entered no region, so that it was measured as region ``implicit``; else None."""
    from argus_lab.app.measure import only_region

    if not only_region(report, implicit):
        return None
    return (
        f"the cell enters no region, so it was measured as region {implicit!r}; mark parts of it "
        f"with `with argus_lab.region('name'):` to measure them apart"
    )


def measure_region_cell(run_once: Callable[[], None], label: str, origin: str, store: str | None) -> Measurement:
    """A ``%%argus_region`` cell run while no measurement is active: measured once (:data:`REGION_CELL_SIGNALS`, no
    warm-up) into ``store``, labelled by its cell."""
    from argus_lab.app.measure import plan, run_plan

    the_plan = plan(REGION_CELL_SIGNALS, repeat=1, warmup=0)
    workload = replace(Workload.of_callable(run_once), label=label, origin=origin)
    return run_plan(the_plan, workload, store)


def region_cell_summary(report: Report, name: str) -> str:
    """``region NAME: host.cpu 1.2 ms, host.wall 1.3 ms (run R in STORE)``: the values of a region cell's run."""
    from argus_lab.units import fmt

    values = {r.signal: fmt(r.median, r.unit) for r in report.regions if r.path.split("/")[-1] == name}
    summary = ", ".join(f"{k} {v}" for k, v in sorted(values.items())) or "no instance recorded"
    return f"region {name}: {summary} (run {', '.join(report.run_ids)} in {report.store.path})"


def region_cell_failure(report: Report, name: str, error: BaseException) -> str:
    """What a ``%%argus_region`` cell that raised says: its run is stored as failed."""
    return (
        f"region {name} failed: the cell raised {type(error).__name__}: {error} (its traceback is above); "
        f"the run is stored as failed ({', '.join(report.run_ids)} in {report.store.path}), with the "
        "instance and its error"
    )


__all__ = [
    "REGION_CELL_SIGNALS",
    "CellPlace",
    "CellRequest",
    "CellWorkload",
    "KernelStore",
    "PlannedCell",
    "RegionWrap",
    "SetupCells",
    "cell_label",
    "checked_store",
    "implicit_hint",
    "kernel_store",
    "measure_region_cell",
    "origin_cells",
    "origin_label",
    "plan_cell",
    "region_cell_failure",
    "region_cell_summary",
    "region_check",
    "setup_cells",
]
