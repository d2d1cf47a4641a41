"""The IPython magics, driven through a real IPython shell (no Jupyter kernel)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from argus_lab.errors import ArgusError
from argus_lab.faces.magics import ArgusMagics, measure_line


@pytest.fixture(scope="module")
def ip(ipython_shell: Any) -> Any:
    return ipython_shell


@pytest.fixture
def magics(ip: Any, store_path: Path) -> ArgusMagics:
    m = ip.magics_manager.registry["ArgusMagics"]
    m.store_path = str(store_path)
    m.setup_cells.clear()
    m.last_report = None
    ip.run_cell("import argus_lab, time")
    return m


def test_cell_measurement_runs_in_the_user_namespace(ip: Any, magics: ArgusMagics) -> None:
    ip.run_cell("counter = []")
    res = ip.run_cell("%%argus -s host.wall -n 2 -w 1 -o rep\nwith argus_lab.region('inner'):\n    counter.append(1)\n")
    assert res.success
    assert ip.user_ns["counter"] == [1, 1, 1]  # warm-up + 2 repetitions, in the notebook's own namespace
    rep = ip.user_ns["rep"]
    assert rep is magics.last_report
    row = next(r for r in rep.regions if r.path == "inner")
    assert row.instances == 2


def test_magic_errors_are_one_usage_line(ip: Any, magics: ArgusMagics, capsys: pytest.CaptureFixture[str]) -> None:
    res = ip.run_cell("%%argus -s host.wal\nx = 1\n")
    assert not res.success
    err = capsys.readouterr().err
    assert "UsageError: unknown signal 'host.wal'; did you mean 'host.wall'" in err
    assert "Traceback" not in err and "argus_lab/" not in err
    res = ip.run_cell("%argus frobnicate")
    assert not res.success
    assert "unknown %argus command 'frobnicate'" in capsys.readouterr().err
    res = ip.run_cell("%%argus --repeat many\nx = 1\n")
    assert not res.success


def test_user_exception_keeps_its_own_traceback(
    ip: Any, magics: ArgusMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    res = ip.run_cell("%%argus -n 1 -w 0\nwith argus_lab.region('boom'):\n    1 / 0\n")
    assert not res.success
    out = capsys.readouterr()
    text = out.out + out.err
    assert "ZeroDivisionError" in text
    assert "----> 2     1 / 0" in text  # the cell's own frame
    assert "driver.py" not in text and "magics.py" not in text  # no argus frames
    assert "the measured cell raised ZeroDivisionError" in text
    assert magics.last_report is not None
    assert magics.last_report.runs[0].status == "failed"


def test_region_cell_magic_measures_once_and_keeps_the_last_value(
    ip: Any, magics: ArgusMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    res = ip.run_cell("%%argus_region load\ndata = list(range(1000))\nlen(data)\n")
    assert res.success
    out = capsys.readouterr().out
    assert "1000" in out  # the last expression is still displayed
    assert "argus: region load: host.cpu" in out
    assert ip.user_ns["data"][-1] == 999
    assert "__argus_region_marker__" not in ip.user_ns
    assert [r.path for r in magics.last_report.regions if r.signal == "host.wall"] == ["load"]  # type: ignore[union-attr]
    assert ip.run_cell("%%argus_region a/b\nx = 1\n").success is False


def test_region_cell_inside_a_measurement_nests(ip: Any, magics: ArgusMagics) -> None:
    ip.run_cell(
        "def outer():\n"
        "    with argus_lab.region('outer'):\n"
        "        get_ipython().run_cell_magic('argus_region', 'cellpart', 'y = 2')\n"
    )
    res = ip.run_cell("%%argus -n 1 -w 0 -o r2\nouter()\n")
    assert res.success
    assert {r.path for r in ip.user_ns["r2"].regions} == {"outer", "outer/cellpart"}


def test_setup_cells_and_history_for_replays(ip: Any, magics: ArgusMagics) -> None:
    ip.run_cell("%%argus_setup weights\nW = [1, 2, 3]\n")
    assert magics.setup_cells == {"weights": "W = [1, 2, 3]\n"}
    ip.run_cell("%%argus_setup weights\nW = [4]\n")  # re-running replaces it
    assert magics.setup_cells == {"weights": "W = [4]\n"}
    srcs, notes = magics._setup_sources("marked")
    assert srcs == ("W = [4]\n",) and notes == []
    ip.run_cell("%time z = 1", store_history=True)
    ip.run_cell("q = 5", store_history=True)
    ip.run_cell("# the measured cell itself (the last input) is not a setup cell", store_history=True)
    srcs, notes = magics._setup_sources("history")
    assert any("uses IPython syntax" in n and "%time" in n for n in notes)
    assert srcs[-1] == "q = 5\n"
    assert all("get_ipython()" not in s for s in srcs)


def test_a_setup_cell_that_raises_fails_the_magic_and_is_forgotten(
    ip: Any, magics: ArgusMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed setup cell must fail its cell (Run All stops there: the kernel answers "error") and must not be
    replayed; an earlier good version of the same name is forgotten too (it no longer matches the namespace)."""
    assert ip.run_cell("%%argus_setup weights\nW = [1]\n").success
    res = ip.run_cell("%%argus_setup weights\nW = load_weights()\n")
    assert not res.success
    err = capsys.readouterr()
    assert "NameError" in err.out + err.err  # the cell's own traceback
    assert "UsageError: the setup cell 'weights' raised NameError (its traceback is above)" in err.err
    assert "fix the cell and run it again" in err.err
    assert "weights" not in magics.setup_cells


def test_child_replay_runs_setup_then_cell(ip: Any, magics: ArgusMagics, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARGUS_FORCE_CHILD", "1")  # replay in a child process even though host runs in-process
    ip.run_cell("%%argus_setup\nimport argus_lab\nN = 500\n")
    cell = "%%argus -s host.wall -n 2 -w 0 -o child\nwith argus_lab.region('replayed'):\n    sum(range(N))\n"
    res = ip.run_cell(cell)
    assert res.success
    rep = ip.user_ns["child"]
    assert rep.runs[0].status == "ok", rep.runs[0].cause
    assert rep.runs[0].command.startswith(("python", "/")) or "argus_lab.run.child" in rep.runs[0].command
    assert next(r for r in rep.regions if r.path == "replayed").instances == 2


def test_isolate_replays_the_cell_in_a_fresh_process(ip: Any, magics: ArgusMagics) -> None:
    """``%%argus --isolate``: the fix the report names when another CUPTI client holds the kernel's process; the cell
    runs (after its setup cells) in a child process, never in the kernel's own."""
    import os

    ip.run_cell("%%argus_setup\nimport argus_lab\nN = 300\n")
    cell = "%%argus --isolate -s host.wall -n 2 -w 0 -o iso\nwith argus_lab.region('isolated'):\n    sum(range(N))\n"
    res = ip.run_cell(cell)
    assert res.success
    rep = ip.user_ns["iso"]
    (run,) = rep.runs
    assert run.status == "ok", run.cause
    assert "argus_lab.run.child" in run.command  # replayed by a child process
    pids = {p for (p,) in rep.store.rows("SELECT DISTINCT pid FROM region_instances WHERE run_id = ?", [run.run_id])}
    assert pids and os.getpid() not in pids  # its instances ran in another process
    assert next(r for r in rep.regions if r.path == "isolated").instances == 2


def test_line_commands(ip: Any, magics: ArgusMagics, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%%argus -s host.wall -n 1 -w 0 --no-show\nwith argus_lab.region('r'):\n    pass\n")
    ip.run_line_magic("argus", "plan -s host.wall,gpu.time,hw:dram__bytes_read.sum")
    assert magics.last_plan is not None and len(magics.last_plan.runs) == 2
    assert "ncu" in capsys.readouterr().out
    shown = ip.run_line_magic("argus", "show")
    assert "application/vnd.argus.report+json" in shown._repr_mimebundle_()
    runs = ip.run_line_magic("argus", "runs")
    assert magics.last_report.run_ids[0] in repr(runs)  # type: ignore[union-attr]
    out = tmp_path / "nb.html"
    ip.run_line_magic("argus", f"export {out}")
    assert out.exists() and "wrote" in capsys.readouterr().out
    panel = ip.run_line_magic("argus", "panel")
    assert panel.line().startswith("%%argus -s host.wall")


def test_measure_line_quotes_and_omits_defaults() -> None:
    assert measure_line("host.wall") == "%%argus -s host.wall"
    line = measure_line("host.wall,gpu.time", scope="decode/**; instances=2:", repeat=5, warmup=0, setup="history")
    assert line == "%%argus -s host.wall,gpu.time --scope 'decode/**; instances=2:' -n 5 -w 0 --setup history"


def test_kernel_code_measures_region_cells_in_the_kernel(ip: Any, magics: ArgusMagics, store_path: Path) -> None:
    """The code the JupyterLab extension sends (argus_lab.app.cell_code.kernel_code, served by the server) runs
    each region cell as %%argus_region inside one %%argus measurement, quotes whatever the cells hold, and loads
    the magics when %load_ext was not run."""
    from argus_lab.app.cell_code import kernel_code

    ip.run_cell("seen = []")
    cells = [("attn", 'seen.append("it\'s \\"quoted\\"")'), ("m l p", "seen.append(2)")]
    code = kernel_code(cells, "host.wall", repeat=2, warmup=0, store=str(store_path), title="from the panel")
    assert code.splitlines()[-1].startswith("get_ipython().run_cell_magic('argus', \"-s host.wall -n 2 -w 0 --store ")
    res = ip.run_cell(code)
    assert res.success
    assert ip.user_ns["seen"] == ['it\'s "quoted"', 2] * 2
    report = magics.last_report
    assert report is not None and str(report.store.path) == str(store_path)
    assert {r.path for r in report.regions} == {"attn", "m l p"}
    with pytest.raises(ArgusError, match="%%argus_region NAME"):
        kernel_code([], "host.wall")


def test_argus_doctor_prints_the_checks(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    ip.run_line_magic("argus", "doctor")
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert lines[0].startswith("ok    argus_lab")
    assert any(" pass model " in line for line in lines)
    assert lines[-1].endswith("not applicable")


def test_a_scope_that_matches_no_region_is_a_usage_error_with_the_regions_seen(
    ip: Any, magics: ArgusMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    """``%%argus --scope 'sleeep/**'`` on a cell whose region is ``sleep``: one UsageError line that names the
    regions the cell ran and the closest scope, never a report that says ``ok`` over nothing."""
    res = ip.run_cell("%%argus -s host.wall -n 1 -w 0 --scope 'sleeep/**'\nwith argus_lab.region('sleep'):\n    pass\n")
    assert not res.success
    err = capsys.readouterr().err
    assert "UsageError:" in err and "Traceback" not in err
    assert "(sleep)" in err and "did you mean 'sleep/**'" in err
