"""Import and export through every face: ``argus-lab import|export``, ``argus_lab.import_trace``, ``%argus
import|export``, and the export formats (Perfetto trace of one or several runs, Parquet, HTML).

Inputs: SYNTHETIC torch.profiler traces (tests/kineto_synth.py) and one real host-clock measurement."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from kineto_synth import KinetoTrace

import argus_lab
from argus_lab.app.exporting import ExportError, export, format_of
from argus_lab.faces.cli import main
from argus_lab.run.machine import gpu_available
from argus_lab.store import Store

E = 1_795_938_194_000_000_000


def trace(tmp: Path, name: str = "t.json") -> Path:
    """SYNTHETIC: step{ gemm (20 us), tiny (400 ns) }, and a kernel outside every annotation."""
    t = KinetoTrace()
    t.annotation("step", E + 1_000, E + 90_000)
    t.launch("gemm", E + 2_000, E + 10_000, E + 30_000)
    t.launch("tiny", E + 3_000, E + 31_000, E + 31_400)
    t.launch("late", E + 95_000, E + 96_000, E + 97_000)
    return t.write(tmp / name)


def test_import_trace_is_public_and_lazy() -> None:
    import subprocess
    import sys

    code = "import argus_lab, sys; assert 'argus_lab.app.importing' not in sys.modules; print(argus_lab.import_trace)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "import_trace" in out
    assert "import_trace" in argus_lab.__all__


def test_cli_import_then_export_perfetto_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.duckdb"
    assert main(["import", str(trace(tmp_path)), "--store", str(store)]) == 0
    said = capsys.readouterr().out
    run = Store(store).rows("SELECT run_id FROM runs")[0][0]
    assert f"stored as run {run}" in said and "kernel: exact 2, unattributed 1" in said
    out = tmp_path / "back.json.gz"
    assert main(["export", str(out), "--store", str(store)]) == 0
    assert "perfetto" in capsys.readouterr().out
    events = json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]
    kernels = {e["name"]: e for e in events if e.get("cat") == "kernel"}
    assert {k: (e["args"]["class"], e["dur"]) for k, e in kernels.items()} == {
        "gemm": ("exact", 20.0),
        "tiny": ("exact", 0.4),
        "late": ("unattributed", 1.0),
    }
    # and back again: the exported trace imports with the same kernels
    assert main(["import", str(out), "--store", str(tmp_path / "again.duckdb")]) == 0
    again = Store(tmp_path / "again.duckdb").rows("SELECT name, end_ns - start_ns FROM kernels ORDER BY start_ns")
    assert again == [("gemm", 20_000), ("tiny", 400), ("late", 1_000)]


def test_cli_import_errors_name_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(tmp_path / "missing.json"), "--store", str(tmp_path / "s.duckdb")]) == 2
    assert "no trace file at" in capsys.readouterr().err
    assert main(["import", str(trace(tmp_path)), "--domain", "argus", "--store", str(tmp_path / "s.duckdb")]) == 2
    assert "leave --domain out" in capsys.readouterr().err


def test_a_domain_for_a_kineto_trace_is_refused_for_every_face_before_a_store_is_made(tmp_path: Path) -> None:
    """The check lives in the application (``import_trace``), so ``%argus import`` and ``argus_lab.import_trace`` say
    what the CLI says, instead of the Kineto reader's TypeError."""
    from argus_lab.errors import ImportFormatError

    store = tmp_path / "s.duckdb"
    with pytest.raises(ImportFormatError, match="leave --domain out"):
        argus_lab.import_trace(trace(tmp_path), store, domain="argus")
    assert not store.exists()


def test_export_formats_and_their_errors(tmp_path: Path) -> None:
    assert [format_of(n) for n in ("a.json", "a.JSON.gz", "r.html", "tables", "t.parquet")] == [
        "perfetto",
        "perfetto",
        "html",
        "parquet",
        "parquet",
    ]
    assert format_of("x.bin", "perfetto") == "perfetto"
    with pytest.raises(ExportError, match="cannot tell the export format"):
        format_of("x.pdf")
    with pytest.raises(ExportError, match="unknown export format 'pdf'"):
        format_of("x", "pdf")
    empty = Store(tmp_path / "empty.duckdb")
    empty.write({})
    with pytest.raises(ExportError, match="has no runs to export"):
        export(empty, tmp_path / "x.json")
    argus_lab.import_trace(trace(tmp_path), tmp_path / "s.duckdb")
    with pytest.raises(ExportError, match="no run 'r-nope'"):
        export(tmp_path / "s.duckdb", tmp_path / "x.json", run_ids=["r-nope"])


def test_several_runs_in_one_trace_get_their_own_processes(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    a = argus_lab.import_trace(trace(tmp_path, "a.json"), store).run_id
    b = argus_lab.import_trace(trace(tmp_path, "b.json"), store).run_id
    res = export(store, tmp_path / "both.json", run_ids=[a, b])
    assert res.run_ids == (a, b) and res.counts["kernels"] == 6
    doc = json.loads((tmp_path / "both.json").read_text())
    assert doc["otherData"] == {"argus_runs": [a, b]}
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("ph") == "M" and e["name"] == "process_name"}
    assert {f"{a}: GPU 0", f"{b}: GPU 0"} <= names
    gpu_pids = {e["pid"] for e in doc["traceEvents"] if e.get("cat") == "kernel"}
    assert len(gpu_pids) == 2


def test_parquet_and_html_exports(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    argus_lab.import_trace(trace(tmp_path), store)
    res = export(store, tmp_path / "tables")
    names = {p.name for p in res.files}
    assert {"kernels.parquet", "attributions.parquet", "runs.parquet"} <= names
    assert "attribution_rows.parquet" not in names  # the view is exported, its stored part is not
    import pyarrow.parquet as pq

    att = pq.read_table(tmp_path / "tables" / "attributions.parquet").to_pylist()
    assert sorted((r["evidence_id"], r["class"]) for r in att if r["evidence"] == "kernel") == [
        ("0/1/1/0", "exact"),
        ("0/1/2/0", "exact"),
        ("0/1/3/0", "unattributed"),
    ]
    page = export(store, tmp_path / "r.html", title="imported").path.read_text()
    assert "imported" in page and "<html" in page


def test_magic_import_and_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from IPython.testing.globalipapp import get_ipython, start_ipython

    ip: Any = start_ipython() or get_ipython()  # the one test shell of the session (tests/test_magics.py shares it)
    ip.run_line_magic("load_ext", "argus_lab")
    store = tmp_path / "nb.duckdb"
    magics = ip.magics_manager.registry["ArgusMagics"]
    last = magics.last_report
    ip.run_line_magic("argus", f"import {trace(tmp_path)} --store {store}")
    assert "kernel: exact 2, unattributed 1" in capsys.readouterr().out
    out = tmp_path / "x.json"
    ip.run_line_magic("argus", f"export {out}")  # the imported run is the last report
    assert "wrote" in capsys.readouterr().out
    assert {e["name"] for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "kernel"} == {
        "gemm",
        "tiny",
        "late",
    }
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="cannot tell the export format"):
        ip.run_line_magic("argus", f"export {tmp_path / 'x.pdf'}")
    magics.last_report = last


def _cli(*args: str, cwd: Path) -> Any:
    """``argus-lab`` as a real process in ``cwd``, with no ``$ARGUS_STORE`` (the default store is ./argus.duckdb)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "ARGUS_STORE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-m", "argus_lab.faces.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, check=False, timeout=120)


ROOT = Path(__file__).resolve().parent.parent


def _printed_command(out: str) -> list[str]:
    """The command between backticks after "see it with", as the shell would split it."""
    import shlex

    return shlex.split(out.split("see it with `", 1)[1].split("`", 1)[0])


@pytest.mark.parametrize("where", ["another store", "the default store"])
def test_cli_import_ends_with_a_show_command_that_works_as_printed(tmp_path: Path, where: str) -> None:
    """The printed `argus-lab show` names the store unless it is ./argus.duckdb of the directory it ran in, and,
    pasted into a shell in that directory, shows the imported run."""
    here = tmp_path / "work"
    here.mkdir()
    store = tmp_path / "elsewhere" / "imports.duckdb" if where == "another store" else here / "argus.duckdb"
    imported = _cli("import", str(trace(tmp_path)), *(["--store", str(store)] if where == "another store" else []),
                    cwd=here)  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    (run,) = Store(store).rows("SELECT run_id FROM runs")[0]
    argv = _printed_command(imported.stdout)
    assert argv[:4] == ["argus-lab", "show", "--run", run]
    assert argv[4:] == (["--store", str(store)] if where == "another store" else [])
    shown = _cli(*argv[1:], cwd=here)
    assert shown.returncode == 0, shown.stderr
    assert "step" in shown.stdout and run in shown.stdout


def _measure(store: Path, signals: str) -> None:
    """``argus-lab run examples/nested.py`` with ``signals`` into ``store`` (GPU signals are skipped here)."""
    done = _cli("run", str(ROOT / "examples" / "nested.py"), "--signals", signals, "--repeat", "1", "--store",
                str(store), cwd=store.parent)  # fmt: skip
    assert done.returncode in (0, 3), done.stderr  # 3: every run skipped


def _runs(store: Path) -> dict[str, str]:
    return dict(Store(store).rows("SELECT status, run_id FROM runs ORDER BY started_ns"))


@pytest.mark.skipif(gpu_available(), reason="needs a machine without a GPU, where gpu.time runs are skipped")
def test_cli_export_passes_over_a_latest_request_that_was_skipped_and_says_so(tmp_path: Path) -> None:
    """A demanding user's `argus-lab export report.html` after a GPU request was skipped on a CPU machine: the
    report of the latest request that measured something, and a note naming the skipped request, its run, why,
    and the `--run` that exports it anyway."""
    store = tmp_path / "s.duckdb"
    _measure(store, "host.wall")
    _measure(store, "gpu.time")
    runs = _runs(store)
    out = _cli("export", str(tmp_path / "report.html"), "--store", str(store), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    wrote, note = out.stdout.splitlines()
    assert runs["ok"] in wrote and runs["skipped"] not in wrote
    assert note.startswith("note: request q-") and "measured nothing" in note
    assert f"run {runs['skipped']} was skipped (not collected: gpu.time" in note
    assert f"To export the skipped one anyway, name its runs: --run {runs['skipped']}" in note
    page = (tmp_path / "report.html").read_text()
    assert runs["ok"] in page
    # the skipped run, asked for by name: exported, no note
    again = _cli("export", str(tmp_path / "skipped.html"), "--store", str(store), "--run", runs["skipped"],
                 cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0 and "note:" not in again.stdout and runs["skipped"] in again.stdout


@pytest.mark.skipif(gpu_available(), reason="needs a machine without a GPU, where gpu.time runs are skipped")
def test_export_of_a_store_whose_every_request_was_skipped_exports_the_latest_and_says_why(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    _measure(store, "gpu.time")
    res = export(store, tmp_path / "t.json")
    assert res.run_ids == (_runs(store)["skipped"],)
    (note,) = res.notes
    assert "measured nothing" in note and "No request of this store measured anything" in note
    assert res.text().splitlines()[1] == f"note: {note}"
