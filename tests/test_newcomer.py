"""What a newcomer meets on the command line and in a notebook kernel (issue 12): the implicit region of a workload
that marks none, a failing workload's traceback and finished instances, a request that measured nothing, no stray
lock files or folders, ``%argus show`` in a fresh kernel, regions declared in notebook cells, lanes named after
threads, ``--version``.  Real processes, real DuckDB files, a real IPython shell."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from argus_lab.app.measure import plan, run_plan
from argus_lab.report import Report
from argus_lab.run.machine import gpu_available
from argus_lab.run.workload import Workload
from argus_lab.store import Store

ROOT = Path(__file__).parent.parent
WORKLOADS = ROOT / "tests" / "workloads"


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "argus_lab.faces.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


# -- the command line -------------------------------------------------------------------------------------------
def test_version() -> None:
    from argus_lab.run.machine import package_version

    done = _cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"argus-lab {package_version('argus_lab') or 'unknown'}"


def test_script_without_regions_is_measured_as_one_region_and_says_how_to_mark_more(store_path: Path) -> None:
    done = _cli("run", str(WORKLOADS / "no_regions.py"), "-n", "3", "--store", str(store_path))
    assert done.returncode == 0, done.stderr
    rows = [ln.split() for ln in done.stdout.splitlines() if ln.startswith("no_regions ")]
    assert {r[1] for r in rows} == {"host.wall", "host.cpu"} and {r[2] for r in rows} == {"3"}
    assert "marks no region: the whole workload was measured as region 'no_regions'" in done.stdout
    assert '`with argus_lab.region("name"):`' in done.stdout
    (region,) = Store(store_path).records("SELECT name, module, file, line FROM regions")
    assert region == {"name": "no_regions", "module": "no_regions", "file": str(WORKLOADS / "no_regions.py"), "line": 1}


def test_failing_script_shows_its_traceback_and_keeps_the_finished_instance(store_path: Path) -> None:
    done = _cli("run", str(WORKLOADS / "raises_after_a.py"), "-n", "3", "--store", str(store_path))
    assert done.returncode == 1
    out = done.stdout
    assert "(no region instances were recorded)" not in out
    finished = next(ln.split() for ln in out.splitlines() if ln.startswith("a "))
    assert finished[:3] == ["a", "1", "1"]  # region a: one finished instance, a warm-up one
    assert f'File "{WORKLOADS / "raises_after_a.py"}", line 7, in <module>' in out
    assert 'raise RuntimeError("oops")' in out
    assert "runpy" not in out and "argus_lab/run/driver.py" not in out  # the user's frames only
    show = _cli("show", "--store", str(store_path))
    assert "finished instances" in show.stdout and "(no region instances were recorded)" not in show.stdout


@pytest.mark.skipif(gpu_available(), reason="on a GPU machine gpu.time is measured, not skipped")
def test_a_request_whose_every_run_was_skipped_exits_non_zero_with_the_reason(store_path: Path) -> None:
    done = _cli("run", str(WORKLOADS / "no_regions.py"), "-s", "gpu.time", "-n", "1", "--store", str(store_path))
    assert done.returncode == 3
    assert "nothing was measured: every run was skipped (not collected: gpu.time need cupti" in done.stderr
    assert "--allow-skipped" in done.stderr
    allowed = _cli(
        "run", str(WORKLOADS / "no_regions.py"), "-s", "gpu.time", "--allow-skipped", "--store", str(store_path)
    )
    assert allowed.returncode == 0


def test_reading_never_leaves_a_lock_file(tmp_path: Path, store_path: Path) -> None:
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", readme)
    done = _cli("show", "--store", str(readme))
    assert done.returncode == 2
    assert "'" + str(readme) + "' is not a DuckDB evidence store" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]
    # a store copied without its lock file (a recording, a download): reading it creates none; writing does
    _cli("run", str(WORKLOADS / "no_regions.py"), "-n", "1", "--store", str(store_path))
    copy = tmp_path / "copy" / "s.duckdb"
    copy.parent.mkdir()
    shutil.copy(store_path, copy)
    assert _cli("show", "--store", str(copy)).returncode == 0
    assert Report(Store(copy)).runs
    assert sorted(p.name for p in copy.parent.iterdir()) == ["s.duckdb"]
    Store(copy).execute("UPDATE runs SET cause = cause")
    assert (copy.parent / "s.duckdb.lock").exists()


def test_implicit_region_of_a_workload_that_raises_in_its_first_repetition(store_path: Path) -> None:
    def broken() -> None:
        raise ValueError("bad input")

    report = run_plan(plan("host.wall", repeat=2, warmup=0), Workload.of_callable(broken), str(store_path)).report
    assert report.runs[0].status == "failed"
    assert report.finished == ((("broken", 1, 0, report.finished[0][3], 1)),)
    (error,) = Store(store_path).rows("SELECT error FROM region_instances")
    assert error == ("ValueError: bad input",)


def test_workload_description_travels_to_a_child_process() -> None:
    w = Workload("cell", "x = 1", implicit_region="cell_5", label="cell [5] of q.ipynb", origin='{"a": 1}')
    back = Workload.from_dict(w.to_dict())
    assert (back.implicit_region, back.label, back.describe()) == (
        "cell_5",
        "cell [5] of q.ipynb",
        "cell [5] of q.ipynb",
    )


# -- the magics ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ip(ipython_shell: Any) -> Any:
    return ipython_shell


@pytest.fixture
def magics(ip: Any, store_path: Path) -> Any:
    m = ip.magics_manager.registry["ArgusMagics"]
    m.store_path = str(store_path)
    m.last_report = None
    ip.run_cell("import argus_lab, time")
    return m


def _prompt(ip: Any) -> int:
    from argus_lab.faces.magics import prompt_number

    return prompt_number(ip)


def test_cell_without_regions_is_measured_as_one_region_named_after_its_prompt(
    ip: Any, magics: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    res = ip.run_cell("%%argus -n 3 -o r\nimport time\ntime.sleep(0.001)\n", store_history=True)
    assert res.success
    number = res.execution_count
    report = ip.user_ns["r"]
    assert {row.path for row in report.regions} == {f"cell_{number}"}
    assert next(row for row in report.regions if row.signal == "host.wall").instances == 3
    assert f"measured as region 'cell_{number}'" in capsys.readouterr().out
    # a cell that enters regions is measured as it is, without a cell region around them
    res = ip.run_cell("%%argus -n 2 -o r2\nwith argus_lab.region('inner'):\n    pass\n", store_history=True)
    assert {row.path for row in ip.user_ns["r2"].regions} == {"inner"}
    res = ip.run_cell("%%argus -n 2 --region whole -o r3\nx = 1\n", store_history=True)
    assert {row.path for row in ip.user_ns["r3"].regions} == {"whole"}


def test_store_in_a_missing_folder_is_refused_and_nothing_is_created(
    ip: Any, magics: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = magics.store_path
    with pytest.raises(
        UsageError, match=r"the folder 'missing/dir' of the store 'missing/dir/s.duckdb' does not exist"
    ):
        magics.argus("store missing/dir/s.duckdb")
    assert magics.store_path == before
    with pytest.raises(UsageError, match="does not exist"):
        magics.argus("--store missing/x.duckdb -n 1", "x = 1")
    assert not (tmp_path / "missing").exists()
    with pytest.raises(UsageError, match="is a folder"):
        magics.argus(f"store {tmp_path}")


def test_show_in_a_fresh_kernel_shows_this_kernels_runs_or_says_there_are_none(
    ip: Any, magics: Any, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # an earlier session (another process) left a failed run in the store
    _cli("run", str(WORKLOADS / "raises_after_a.py"), "-n", "1", "--store", str(store_path))
    assert ip.run_line_magic("argus", "show") is None
    out = capsys.readouterr().out
    assert "this kernel has measured nothing yet (1 run(s) of earlier sessions are in" in out
    latest = ip.run_line_magic("argus", "show --latest")
    assert latest.report.runs[0].status == "failed"
    ip.run_cell("%%argus -n 1 -w 0 --no-show\nwith argus_lab.region('mine'):\n    pass\n")
    magics.last_report = None  # what a kernel knows after its own measurement is in the store, not in memory
    shown = ip.run_line_magic("argus", "show")
    assert {r.path for r in shown.report.regions} == {"mine"}
    assert shown.report.runs[0].status == "ok"


def test_regions_declared_in_a_cell_name_the_cell_not_a_temporary_file(ip: Any, magics: Any, store_path: Path) -> None:
    ip.user_ns["__session__"] = "/srv/work/notebooks/quickstart.ipynb"  # what ipykernel sets from Jupyter
    try:
        res = ip.run_cell("def f():\n    with argus_lab.region('declared_here'):\n        pass\n", store_history=True)
        ip.run_cell("%%argus -n 1 -w 0 --no-show\nf()\n", store_history=True)
    finally:
        ip.user_ns.pop("__session__", None)
    (file, line) = Store(store_path).rows("SELECT file, line FROM regions WHERE name = 'declared_here'")[0]
    assert (file, line) == (f"cell [{res.execution_count}] of quickstart.ipynb", 2)


def test_interrupting_a_region_cell_stops_the_measurement(ip: Any, magics: Any, store_path: Path) -> None:
    """IPython shows a cell's KeyboardInterrupt and goes on; inside a measurement the interrupt (the panel's Stop)
    must end the run, stored as interrupted."""
    from argus_lab.app.cell_code import kernel_code

    res = ip.run_cell(kernel_code([("slow", "raise KeyboardInterrupt")], "host.wall", repeat=3))
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert Store(store_path).rows("SELECT status, reps_done FROM runs") == [("interrupted", 0)]


def test_panel_cells_are_named_by_their_position_and_the_run_links_to_them(
    ip: Any, magics: Any, store_path: Path
) -> None:
    from argus_lab.app.cell_code import kernel_code

    origin = {"notebook": "nb/demo.ipynb", "cells": [{"id": "c-2", "name": "attn", "index": 1}]}
    code = kernel_code([("attn", "x = 1")], "host.wall", repeat=1, warmup=0, origin=json.dumps(origin))
    assert ip.run_cell(code).success
    (workload, stored) = Store(store_path).rows("SELECT workload, origin FROM runs")[0]
    assert workload == "cell attn of demo.ipynb"
    assert json.loads(stored) == origin
    (file,) = Store(store_path).rows("SELECT file FROM regions WHERE name = 'attn'")[0]
    assert file == "cell 2 of demo.ipynb"


# -- the timeline -------------------------------------------------------------------------------------------------
def test_timeline_lanes_are_thread_names_with_the_rank_when_there_are_several() -> None:
    """SYNTHETIC columns: two ranks, rank 0 with two threads."""
    from argus_lab.views.timeline import timeline_data

    inst = {
        "instance_id": [1, 2, 3, 4],
        "path": ["step", "step/attn", "load", "step"],
        "instance_index": [0, 0, 0, 0],
        "pid": [10, 10, 10, 20],
        "thread_id": [111, 111, 222, 333],
        "thread_name": ["MainThread", "MainThread", "loader", "MainThread"],
        "rank": [0, 0, 0, 1],
        "start_ns": [0, 1, 2, 0],
        "end_ns": [10, 5, 8, 10],
        "error": ["", "", "", ""],
        "warmup": [False] * 4,
    }
    kern = {"instance_id": [2, 4], "name": ["k", "k"], "start_ns": [2, 3], "end_ns": [3, 4], "device_id": [0, 1],
            "stream_id": [7, 7], "rank": [0, 1]}  # fmt: skip
    labels = [lane["label"] for lane in timeline_data("r", inst, kern)["lanes"]]
    assert labels == [
        "rank 0 · MainThread",
        "rank 0 · MainThread (level 2)",
        "rank 0 · loader",
        "rank 0 · GPU 0 stream 7",
        "rank 1 · MainThread",
        "rank 1 · GPU 1 stream 7",
    ]
    one = {k: v[:3] for k, v in inst.items()}
    assert [lane["label"] for lane in timeline_data("r", one, {})["lanes"]] == [
        "MainThread",
        "MainThread (level 2)",
        "loader",
    ]


def test_a_failed_cells_stored_cause_names_the_cell_and_line(ip: Any, magics: Any, store_path: Path) -> None:
    ip.user_ns["__session__"] = "/srv/work/notebooks/quickstart.ipynb"
    try:
        res = ip.run_cell("%%argus -n 1 -w 0 --no-show\nx = 1\nraise ValueError('bad')\n", store_history=True)
    finally:
        ip.user_ns.pop("__session__", None)
    assert not res.success
    (cause,) = Store(store_path).rows("SELECT cause FROM runs")[0]
    assert f'File "cell [{res.execution_count}] of quickstart.ipynb", line 2, in <module>' in cause
    assert "ipykernel" not in cause and "/tmp/" not in cause
