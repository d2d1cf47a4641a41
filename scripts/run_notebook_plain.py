"""Run a notebook's code cells top to bottom in a plain IPython shell (no Jupyter kernel), printing what they show.

Used to record the GPU walkthrough on the H200, where IPython is available but no Jupyter kernel is:

    ARGUS_STORE=$PWD/gpu_walkthrough_h200.duckdb python3 scripts/run_notebook_plain.py notebooks/gpu_walkthrough.ipynb

Displays print their ``text/plain`` form.  Every cell runs even after a failure; the exit status is 1 if any failed.
"""

from __future__ import annotations

import json
import sys
import time


def main(path: str) -> int:
    from IPython.terminal.interactiveshell import TerminalInteractiveShell

    shell = TerminalInteractiveShell.instance()
    with open(path, encoding="utf-8") as f:
        cells = [c for c in json.load(f)["cells"] if c["cell_type"] == "code"]
    failed = 0
    for i, cell in enumerate(cells):
        src = "".join(cell["source"])
        print(f"\n----- cell {i}: {src.splitlines()[0] if src else ''}", flush=True)
        t0 = time.perf_counter()
        result = shell.run_cell(src, store_history=True)
        print(
            f"----- cell {i} took {time.perf_counter() - t0:.2f} s{'' if result.success else ' and FAILED'}", flush=True
        )
        failed += not result.success
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
