"""Magic arguments and failing region cells (issue 16, item 5), through a real IPython shell."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def ip() -> Any:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or InteractiveShell.instance()  # the one test shell, whichever module started it
    shell.run_line_magic("load_ext", "argus_lab")
    return shell


@pytest.fixture
def magics(ip: Any, store_path: Path) -> Any:
    m = ip.magics_manager.registry["ArgusMagics"]
    m.store_path = str(store_path)
    m.last_report = None
    return m


def test_an_unbalanced_quote_is_one_clear_line(ip: Any, magics: Any, capsys: pytest.CaptureFixture[str]) -> None:
    for cell in ("%%argus -s 'host.wall\nx = 1\n", "%argus plan -s 'host.wall"):
        assert ip.run_cell(cell).success is False
        err = capsys.readouterr().err
        assert "UsageError: cannot read the" in err and "a quote is not closed" in err
        assert "Traceback" not in err and "No closing quotation" in err


def test_out_refuses_to_hide_a_builtin(ip: Any, magics: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert ip.run_cell("%%argus -n 1 -w 0 -o print\nx = 1\n").success is False
    assert "would hide Python's builtin 'print'" in capsys.readouterr().err
    assert ip.user_ns.get("print", builtins.print) is builtins.print
    assert magics.last_report is None  # refused before anything was measured


@pytest.mark.parametrize("name", ["1bad-name", "class", "a.b"])
def test_out_refuses_a_name_python_cannot_bind(
    ip: Any, magics: Any, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    assert ip.run_cell(f"%%argus -n 1 -w 0 -o {name}\nx = 1\n").success is False
    assert "is not a Python variable name" in capsys.readouterr().err
    assert name not in ip.user_ns


def test_a_region_cell_that_raised_is_reported_as_failed(
    ip: Any, magics: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    result = ip.run_cell("%%argus_region boom\nx = 1\n1 / 0\n")
    assert result.success is False
    out = capsys.readouterr()
    text = out.out + out.err
    assert "ZeroDivisionError" in text and "----> 2 1 / 0" in text  # the cell's own traceback
    assert "region boom failed: the cell raised ZeroDivisionError" in text
    assert "argus: region boom: host" not in text  # not reported as a normal timing
    report = magics.last_report
    assert report is not None
    assert report.runs[0].status == "failed"
    assert [(path, n) for path, n, _ in report.errors] == [("boom", 1)]  # the instance is kept, with its error
