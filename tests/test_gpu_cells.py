"""``%%argus_needs_gpu``: a cell that needs a GPU skips itself elsewhere, and runs (and fails) as itself where there is
one.  Driven through the real IPython shell of the tests; the GPU branch is taken by making ``gpu_available`` answer
yes (there is no GPU on the CPU machine), the no-GPU branch by ``ARGUS_ASSUME_NO_GPU=1`` (also on a GPU machine)."""

from __future__ import annotations

from typing import Any

import pytest

import argus_lab.run.machine
from argus_lab.faces.magics import ArgusMagics


@pytest.fixture
def magics(ipython_shell: Any) -> ArgusMagics:
    m = ipython_shell.magics_manager.registry["ArgusMagics"]
    m.setup_cells.clear()
    return m


def test_without_a_gpu_the_cell_does_not_run_and_one_line_says_what_it_would_do(
    ipython_shell: Any, magics: ArgusMagics, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ARGUS_ASSUME_NO_GPU", "1")
    ipython_shell.user_ns.pop("model_built", None)
    cell = "%%argus_needs_gpu builds the model on CUDA; section 6 shows the H200 recording\n%%argus_setup model\n"
    res = ipython_shell.run_cell(cell + "import no_such_gpu_package\nmodel_built = True\n")
    assert res.success  # Run All goes on
    out = capsys.readouterr().out
    assert out == (
        "argus: skipped here (no NVIDIA GPU on this machine): builds the model on CUDA; section 6 shows the H200 "
        "recording\n"
    )
    assert "model_built" not in ipython_shell.user_ns
    assert magics.setup_cells == {}  # nothing ran, nothing is remembered


def test_with_a_gpu_the_rest_of_the_cell_runs_and_its_failure_fails_the_cell(
    ipython_shell: Any, magics: ArgusMagics, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ARGUS_ASSUME_NO_GPU", raising=False)
    monkeypatch.setattr(argus_lab.run.machine, "gpu_available", lambda: True)
    res = ipython_shell.run_cell("%%argus_needs_gpu builds the model\n%%argus_setup model\nW = [1, 2]\nlen(W)\n")
    assert res.success
    assert magics.setup_cells == {"model": "W = [1, 2]\nlen(W)\n"}  # the nested magic ran as itself
    assert ipython_shell.user_ns["W"] == [1, 2]
    capsys.readouterr()
    res = ipython_shell.run_cell("%%argus_needs_gpu measures it\nraise RuntimeError('CUDA out of memory')\n")
    assert not res.success  # Run All stops here
    err = capsys.readouterr()
    assert "RuntimeError: CUDA out of memory" in err.out + err.err
    assert "UsageError: the cell failed with RuntimeError (shown above)" in err.err


def test_a_gate_without_a_description_says_what_to_write(
    ipython_shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    res = ipython_shell.run_cell("%%argus_needs_gpu\nx = 1\n")
    assert not res.success
    err = capsys.readouterr().err
    assert "UsageError: %%argus_needs_gpu needs a description: say what the cell does and where its recorded" in err
