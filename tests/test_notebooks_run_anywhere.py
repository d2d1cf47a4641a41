"""Every notebook of ``notebooks/`` runs top to bottom as *Run All* runs it, on a machine without a GPU and in a kernel
without torch or Triton (the environment ``make demo`` builds), and writes nothing next to itself.

Each notebook runs in a real Jupyter kernel (nbclient, which stops at the first cell that fails, as *Run All* and
``jupyter nbconvert --execute`` do), from a copy of the notebooks in a temporary checkout whose other folders link to
this one; the kernel's working folder is the copy's ``notebooks/``, as in JupyterLab.  The kernel starts with
``tests/without_gpu_packages`` first on ``PYTHONPATH`` (its ``sitecustomize`` hides torch and Triton) and
``ARGUS_ASSUME_NO_GPU=1`` (so a GPU machine tests the same path), without ``$ARGUS_STORE`` (the notebooks' own
default).  The optimize notebook's printed output must read as words and units (no long float, ``None`` speed-up
or dict repr).  nbval (``make test``) skips the cells tagged ``nbval-skip``; Run All does not, so here the GPU cells run
and must skip themselves.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from argus_lab.faces.gpu_cells import skip_line
from argus_lab.faces.server.paths import find_stores

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
WITHOUT_GPU_PACKAGES = REPO / "tests" / "without_gpu_packages"
LINKED = ("argus_lab", "tests", "examples", "bench", "scripts")  # what the notebooks read from the checkout
GATE = "%%argus_needs_gpu"
PROBE = (
    "import importlib.util, sys\n"
    "print('hidden:', importlib.util.find_spec('torch'), importlib.util.find_spec('triton'), 'torch' in sys.modules)"
)
# the notebooks that measure live host regions into their default store (argus.duckdb at the top of the checkout)
STORE_WRITERS = {"quickstart.ipynb"}
# the notebooks whose printed output must read as words and units: no raw values a reader has to decode
READABLE = {"optimize.ipynb"}
RAW_VALUES = {
    "a float with more than 6 decimals": re.compile(r"\d\.\d{7,}"),
    "a speed-up of None": re.compile(r"speed-up[^\n]*\bNone\b"),
    "a raw dict": re.compile(r"\{'[^'\n]+': "),
}


def raw_values(text: str) -> list[str]:
    """What in ``text`` is a raw Python value (a long float, a ``None`` speed-up, a dict's repr), each with its line."""
    return [
        f"{what}: {line.strip()}" for line in text.splitlines() for what, rx in RAW_VALUES.items() if rx.search(line)
    ]


def _files(root: Path) -> set[str]:
    """Every file and folder under ``root``, relative, not following links (the linked folders are not walked)."""
    found: set[str] = set()
    for folder, dirs, files in os.walk(root):
        rel = Path(folder).relative_to(root)
        found.update((rel / name).as_posix() for name in dirs + files)
    return found


def _checkout(base: Path) -> Path:
    root = base / "checkout"
    (root / "notebooks").mkdir(parents=True)
    for name in NOTEBOOKS:
        shutil.copy(REPO / "notebooks" / name, root / "notebooks" / name)
    for name in LINKED:
        (root / name).symlink_to(REPO / name, target_is_directory=True)
    return root


def _kernel_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ARGUS_STORE"}
    env["PYTHONPATH"] = os.pathsep.join([str(WITHOUT_GPU_PACKAGES), str(REPO)])
    env["ARGUS_ASSUME_NO_GPU"] = "1"
    return env


def _run_all(nb: Any, cwd: Path) -> Any:
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}})
    return client.execute(env=_kernel_env())


def _text(cell: Any) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            parts.append(out["text"])
        elif out["output_type"] == "error":
            parts.append(f"{out['ename']}: {out['evalue']}")
        elif "text/plain" in out.get("data", {}):
            parts.append(out["data"]["text/plain"])
    return "".join(parts)


def _ignored_by_git(paths: list[str]) -> set[str]:
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        input="\n".join(paths),
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    return set(done.stdout.split())


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_top_to_bottom_without_gpu_or_torch_and_writes_nothing_beside_itself(
    name: str, tmp_path: Path
) -> None:
    root = _checkout(tmp_path)
    before = _files(root)
    nb = nbformat.read(root / "notebooks" / name, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    _run_all(nb, root / "notebooks")  # raises CellExecutionError at the first cell that fails

    gained = sorted(_files(root) - before)
    assert not [p for p in gained if p.startswith("notebooks/")], f"{name} wrote into notebooks/: {gained}"
    expected = {"argus.duckdb"} if name in STORE_WRITERS else set()
    assert {s.path for s in find_stores(root)} == expected  # what the JupyterLab panel lists as stores
    assert all(p.startswith("argus.duckdb") for p in gained), gained
    assert _ignored_by_git(gained) == set(gained), f"not covered by .gitignore: {gained}"

    assert _text(nb.cells[-1]).strip() == "hidden: None None False"  # the kernel really had no torch, no Triton
    if name in READABLE:
        raw = [f"cell {i}: {r}" for i, c in enumerate(nb.cells[:-1]) for r in raw_values(_text(c))]
        assert raw == [], f"{name} prints raw values:\n" + "\n".join(raw)
    gated = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(GATE)]
    for cell in nb.cells:
        if "nbval-skip" in cell.get("metadata", {}).get("tags", []):
            assert cell in gated, f"{name}: a cell nbval skips (it needs a GPU) does not start with {GATE}"
    for cell in gated:  # a cell that says it is skipped is: one line, no output of its own
        what = cell.source.splitlines()[0][len(GATE) :]
        assert _text(cell) == skip_line(what) + "\n"


def test_raw_values_are_found_in_printed_output() -> None:
    """SYNTHETIC lines, as the optimize notebook printed them before it said its numbers in words."""
    assert raw_values("kernel time 256.54399394989014 us\nspeed-up over the baseline: None\n{'exact': 0.5}") == [
        "a float with more than 6 decimals: kernel time 256.54399394989014 us",
        "a speed-up of None: speed-up over the baseline: None",
        "a raw dict: {'exact': 0.5}",
    ]
    assert raw_values("kernel time 256.5 us (1.23x faster); classes: exact 50%, inferred 50%") == []


def test_a_failing_setup_cell_stops_run_all(tmp_path: Path) -> None:
    """SYNTHETIC notebook: the setup cell raises, so the cells after it never run."""
    cells = [
        "%load_ext argus_lab",
        "%%argus_setup weights\nraise RuntimeError('no weights file')",
        "after_setup = True",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    with pytest.raises(CellExecutionError) as failed:
        _run_all(nb, tmp_path)
    assert "the setup cell 'weights' raised RuntimeError" in str(failed.value)
    assert nb.cells[2].execution_count is None and nb.cells[2].outputs == []
