"""The ``%%argus`` line of a request, and the Python code that measures region cells in a notebook's kernel.

One implementation for every face that shows or sends them: the magics' help and the ipywidgets panel show
:func:`measure_line`; the JupyterLab extension asks the server for :func:`kernel_code` (``POST
argus-lab/measure-code``) and runs what it gets in the notebook's kernel, so no face writes Python or the magic's
syntax by itself.  Kept free of IPython so that the server can import it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from argus_lab import config
from argus_lab.errors import PlanError

DEFAULT_REPEAT = config.CELL_REPEAT
"""Measured repetitions of ``%%argus`` when ``-n`` is not given."""
DEFAULT_WARMUP = config.WARMUP
"""Warm-up repetitions of ``%%argus`` when ``-w`` is not given."""
SETUP_MODES = ("marked", "history", "none")


def measure_options(
    signals: str,
    scope: str = "",
    repeat: int = DEFAULT_REPEAT,
    warmup: int = DEFAULT_WARMUP,
    store: str | None = None,
    setup: str = "marked",
    title: str = "",
) -> str:
    """The options of the ``%%argus`` line for these settings, shell-quoted, defaults left out."""
    parts = ["-s", signals]
    if scope:
        parts += ["--scope", scope]
    if repeat != DEFAULT_REPEAT:
        parts += ["-n", str(repeat)]
    if warmup != DEFAULT_WARMUP:
        parts += ["-w", str(warmup)]
    if store:
        parts += ["--store", store]
    if setup != "marked":
        parts += ["--setup", setup]
    if title:
        parts += ["--title", title]
    return " ".join(shlex.quote(x) for x in parts)


def measure_line(
    signals: str,
    scope: str = "",
    repeat: int = DEFAULT_REPEAT,
    warmup: int = DEFAULT_WARMUP,
    store: str | None = None,
    setup: str = "marked",
    title: str = "",
) -> str:
    """The ``%%argus`` line for these settings (what the panels show; defaults are left out)."""
    return "%%argus " + measure_options(signals, scope, repeat, warmup, store, setup, title)


STORE_PROBE = "__import__('argus_lab.faces.magics', fromlist=['kernel_store']).kernel_store()"
"""The expression the JupyterLab panel evaluates in a notebook's kernel (``user_expressions`` of a silent request)
to learn which store the kernel writes (:func:`argus_lab.faces.magics.kernel_store`)."""


def kernel_code(
    cells: Sequence[tuple[str, str]],
    signals: str,
    scope: str = "",
    repeat: int = DEFAULT_REPEAT,
    warmup: int = DEFAULT_WARMUP,
    store: str | None = None,
    title: str = "",
    origin: str = "",
) -> str:
    """The code that measures ``cells`` ((region name, body) of ``%%argus_region`` cells) in a notebook's kernel.

    It is a ``%%argus`` cell (:func:`measure_line`) whose body runs each region cell as ``%%argus_region NAME``
    would, and it registers the magics first when ``%load_ext argus_lab`` was not run.  ``origin`` (JSON: the
    notebook and the cells' ids) is stored with the runs, so that a face can link a run back to its cells.

    Raises :class:`~argus_lab.errors.PlanError` when there is no cell to measure.
    """
    if not cells:
        msg = "no %%argus_region cells to run: mark a cell with `%%argus_region NAME` first"
        raise PlanError(msg)
    body = "\n".join(f"get_ipython().run_cell_magic('argus_region', {name!r}, {source!r})" for name, source in cells)
    options = measure_options(signals, scope, repeat, warmup, store, title=title)
    if origin:
        options += " --origin " + shlex.quote(origin)
    return "\n".join(
        [
            "import argus_lab.faces.magics as __argus_magics",
            "if 'argus' not in get_ipython().magics_manager.magics['cell']:",
            "    __argus_magics.load(get_ipython())",
            "del __argus_magics",
            f"get_ipython().run_cell_magic('argus', {options!r}, {body!r})",
        ]
    )


@dataclass(frozen=True)
class RegionCell:
    """A ``%%argus_region`` cell as the JupyterLab panel sends it: its region name, body, cell id and position."""

    name: str
    body: str
    id: str = ""
    index: int | None = None


@dataclass(frozen=True)
class MeasureCode:
    """What the JupyterLab panel runs in a notebook's kernel: the ``%%argus`` line it shows and the code."""

    line: str
    code: str


def measure_code(
    cells: Sequence[RegionCell],
    signals: str,
    scope: str = "",
    repeat: int = DEFAULT_REPEAT,
    warmup: int = DEFAULT_WARMUP,
    store: str | None = None,
    title: str = "",
    notebook: str = "",
) -> MeasureCode:
    """The ``%%argus`` line and the kernel code (:func:`kernel_code`) that measure ``cells``; the request is planned
    first, so that one the planner refuses gets its message; with ``notebook``, the runs' origin names it and the
    cells (ids, names, positions).

    Raises :class:`~argus_lab.errors.ArgusError` (a request the planner refuses, no cell to measure)."""
    from argus_lab.app.measure import explained_plan

    explained_plan(signals, scope, repeat, warmup)
    origin = ""
    if notebook:
        picked = [{"id": c.id, "name": c.name, "index": c.index} for c in cells]
        origin = json.dumps({"notebook": notebook, "cells": picked})
    cell_pairs = [(c.name, c.body) for c in cells]
    return MeasureCode(
        measure_line(signals, scope, repeat, warmup, store, title=title),
        kernel_code(cell_pairs, signals, scope, repeat, warmup, store, title, origin),
    )


__all__ = [
    "DEFAULT_REPEAT",
    "DEFAULT_WARMUP",
    "SETUP_MODES",
    "STORE_PROBE",
    "MeasureCode",
    "RegionCell",
    "kernel_code",
    "measure_code",
    "measure_line",
    "measure_options",
]
