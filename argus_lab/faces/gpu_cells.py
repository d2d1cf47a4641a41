"""``%%argus_needs_gpu WHAT``: a notebook cell that runs only on a machine with an NVIDIA GPU.

Without a GPU the cell is not run at all: one line says so and repeats ``WHAT`` (what the cell would do, and where
the notebook shows the result recorded on a GPU instead), and *Run All* goes on to the next cell.  With a GPU the
rest of the cell runs as if that first line were not there; it may start with another cell magic
(``%%argus_setup``, ``%%argus``).  A cell that fails there fails this magic too, so *Run All* stops at it.

``ARGUS_ASSUME_NO_GPU=1`` skips these cells on a GPU machine as well (the rule of
:func:`argus_lab.run.machine.gpu_available`).
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class

USAGE = (
    "say what the cell does and where its recorded result is shown, e.g. `%%argus_needs_gpu builds the model on "
    "CUDA; section 6 shows the run recorded on the H200`"
)


def skip_line(what: str) -> str:
    """The line a skipped cell prints."""
    return f"argus: skipped here (no NVIDIA GPU on this machine): {what.strip()}"


@magics_class
class GpuCellMagics(Magics):
    """``%%argus_needs_gpu`` (registered by ``%load_ext argus_lab``)."""

    @cell_magic
    def argus_needs_gpu(self, line: str, cell: str) -> None:
        """Run the cell only where an NVIDIA GPU is: ``%%argus_needs_gpu WHAT THE CELL DOES; WHERE ITS RESULT IS``."""
        if not line.strip():
            msg = f"%%argus_needs_gpu needs a description: {USAGE}"
            raise UsageError(msg)
        from argus_lab.run.machine import gpu_available

        if not gpu_available():
            print(skip_line(line))
            return
        shell: Any = self.shell
        result = shell.run_cell(cell, store_history=False)
        if not result.success:
            error = result.error_in_exec or result.error_before_exec
            what = type(error).__name__ if error is not None else "an error"
            msg = f"the cell failed with {what} (shown above); fix it and run it again"
            raise UsageError(msg)


__all__ = ["USAGE", "GpuCellMagics", "skip_line"]
