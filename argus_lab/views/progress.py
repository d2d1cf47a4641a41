"""Where a measurement's progress is shown: one updating line in a notebook, a tqdm bar per run on a terminal,
nothing when quiet or when stderr is a pipe.

The notebook line is one display output updated in place (``display_id``): plain text for nbconvert and any
frontend, and :data:`PROGRESS_MIME` with the tick's fields (:meth:`argus_lab.run.progress.Tick.to_json`) for the
JupyterLab panel, which shows its own progress line from it while *Run in kernel* runs.
"""

from __future__ import annotations

import sys
from typing import Any

from argus_lab.run.progress import ProgressFn, Tick, terminal, throttled

PROGRESS_MIME = "application/vnd.argus.progress+json"
"""The MIME type of the progress lines of a measurement (the JupyterLab panel shows these, not the cells' output)."""


class NotebookLine:
    """A plan's progress as one output line of the running cell, updated in place (works without widgets and in
    nbconvert, where only the last state is kept)."""

    def __init__(self) -> None:
        self.handle: Any = None

    def __call__(self, tick: Tick) -> None:
        from IPython.display import display

        text = tick.text()
        bundle = {"text/plain": text, PROGRESS_MIME: tick.to_json()}
        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)  # type: ignore[no-untyped-call]
        else:
            self.handle.update(bundle, raw=True)


def in_notebook_kernel() -> bool:
    """Whether this process is a Jupyter kernel (an IPython shell with a kernel behind it)."""
    shell_mod = sys.modules.get("IPython")
    if shell_mod is None or "ipykernel" not in sys.modules:
        return False
    get = getattr(shell_mod, "get_ipython", None)
    shell = get() if get is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


def choose(progress: bool | ProgressFn | None) -> ProgressFn | None:
    """The view for ``progress``: ``False``/``None`` -> none; a callable -> itself; ``True`` -> the notebook line in
    a kernel, a tqdm bar on a terminal, nothing otherwise (a log is not filled with bars)."""
    if progress is None or progress is False:
        return None
    if callable(progress):
        return progress
    if in_notebook_kernel():
        return throttled(NotebookLine())
    if sys.stderr.isatty():
        return terminal()
    return None


__all__ = ["PROGRESS_MIME", "NotebookLine", "choose", "in_notebook_kernel"]
