"""Exports under faults: a target that cannot be written is one message naming the problem and the fix (exit 2),
and an export is written whole or not at all: killed with SIGKILL in the middle of writing, it leaves nothing under
the name asked for, and the next export to that name clears what the killed one left beside it.

Each case runs ``argus-lab export`` in a real child process.  The killed exports are paused at a known point of
their writing (a wrapper around the writer, in the child only, that writes a marker file and sleeps once part of
the export is written), then killed with SIGKILL: the fault is real, the moment is chosen.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from faultkit import cli, cli_as_a_user, env, start_python, wait_for

import argus_lab

TMP_MARK = ".argus-tmp-"
"""How the temporary name of an export begins after its target's name (argus_lab.views.target.TMP_MARK)."""

PAUSED = """
import sys, time
from pathlib import Path
from argus_lab.report import trace_rows
from argus_lab.views import perfetto
def pause():
    Path({mark!r}).write_text("paused")
    time.sleep(3600)
{patch}
from argus_lab.faces.cli import main
sys.exit(main({args!r}))
"""
PAUSE_TRACE = """
real = perfetto._Writer.complete
seen = [0]
def complete(self, *a, **k):
    real(self, *a, **k)
    seen[0] += 1
    if seen[0] == 5:  # five events written (and flushed): the file is half-written
        self.f.flush()
        pause()
perfetto._Writer.complete = complete
"""
PAUSE_PARQUET = """
real = trace_rows._sql_path
seen = [0]
def sql_path(p):
    seen[0] += 1
    if seen[0] == 5:  # four tables written, the fifth about to be
        pause()
    return real(p)
trace_rows._sql_path = sql_path
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("exports") / "s.duckdb"

    def step() -> None:
        with argus_lab.region("step"), argus_lab.region("inner"):
            pass

    argus_lab.measure(step, signals="host.wall", repeat=4, warmup=0, store=str(path))
    return path


def _killed_while_writing(store: Path, out: Path, patch: str, mark: Path) -> None:
    args = ["export", "--store", str(store), str(out)]
    proc = start_python(PAUSED.format(mark=str(mark), patch=patch, args=args))
    try:
        wait_for("the export to pause mid-write", lambda: mark.exists() or proc.poll() is not None, timeout=120)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _left_beside(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}{TMP_MARK}"))


def test_a_perfetto_export_killed_mid_write_leaves_nothing_under_its_name(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    _killed_while_writing(store, out, PAUSE_TRACE, tmp_path / "paused")
    assert not out.exists(), f"a torn trace of {out.stat().st_size} bytes under the final name"
    assert len(_left_beside(out)) == 1  # the killed export's own temporary file, beside the target
    done = cli("export", "--store", str(store), str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(out.read_text())["traceEvents"]  # whole
    assert _left_beside(out) == []  # the killed export's temporary file was cleared


def test_a_parquet_export_killed_mid_write_leaves_no_partial_folder(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "tables"
    _killed_while_writing(store, out, PAUSE_PARQUET, tmp_path / "paused")
    assert not out.exists(), f"a folder of {len(list(out.iterdir()))} tables under the final name"
    done = cli("export", "--store", str(store), str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert {"runs.parquet", "region_instances.parquet"} <= {p.name for p in out.iterdir()}
    assert _left_beside(out) == []


def test_a_parquet_export_replaces_an_earlier_one_whole(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "tables"
    assert cli("export", "--store", str(store), str(out)).returncode == 0
    (out / "stale.parquet").write_bytes(b"from an older export")
    again = cli("export", "--store", str(store), str(out))
    assert again.returncode == 0, again.stderr[-2000:]
    assert not (out / "stale.parquet").exists() and (out / "runs.parquet").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tables"]


def _refused(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-1000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("afile/t.json", ["'afile' is a file, not a folder", "choose a writable path in a folder"]),
        ("afile/tables", ["'afile' is a file, not a folder", "choose a writable path in a folder"]),
        ("afile/r.html", ["'afile' is a file, not a folder", "choose a writable path in a folder"]),
        ("dir.json", ["'dir.json': it is a folder", "name a file in it, e.g. 'dir.json/trace.json'"]),
        ("dir.json/../r.html/", ["r.html': it is a folder", "name a file in it"]),
        ("existing", ["'existing': it is a file, and a Parquet export writes a folder", "choose a new name"]),
        ("mixed", ["holds files other than Parquet files (notes.txt)", "choose a new or empty folder"]),
        ("nonexist/dir/r.html", ["the folder 'nonexist/dir' does not exist", "mkdir -p 'nonexist/dir'"]),
        ("nonexist2/dir/t.json", ["the folder 'nonexist2/dir' does not exist", "mkdir -p 'nonexist2/dir'"]),
        ("nonexist3/tables", ["the folder 'nonexist3' does not exist", "mkdir -p 'nonexist3'"]),
    ],
)
def test_an_export_target_that_cannot_be_written_is_one_message(
    store: Path, tmp_path: Path, target: str, words: list[str]
) -> None:
    (tmp_path / "afile").write_text("")
    (tmp_path / "dir.json").mkdir()
    (tmp_path / "r.html").mkdir()
    (tmp_path / "existing").write_text("")
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "notes.txt").write_text("mine")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    proc = subprocess.run(
        [*_cli_argv(), "export", "--store", str(store), target],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env(),
        check=False,
        timeout=120,
    )
    err = _refused(proc)
    for w in words:
        assert w in err, err
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before  # nothing created


def test_an_export_into_a_read_only_folder_is_one_message(store: Path, tmp_path: Path) -> None:
    ro = tmp_path / "ro"  # (as root, the export runs without root's right to write anywhere: cli_as_a_user)
    ro.mkdir(mode=0o555)
    for name in ("t.json", "tables", "r.html"):
        err = _refused(cli_as_a_user("export", "--store", str(store), str(ro / name)))
        assert "is not writable (Permission denied)" in err and "choose a writable path" in err
    assert list(ro.iterdir()) == []  # nothing written, not even a temporary


def test_the_printed_export_path_is_escaped(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "e\x1b[31mx.json"
    done = cli("export", "--store", str(store), str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "\x1b" not in done.stdout and "e\\x1b[31mx.json" in done.stdout
    assert out.exists()


def _cli_argv() -> list[str]:
    return [sys.executable, "-c", "import sys; from argus_lab.faces.cli import main; sys.exit(main(sys.argv[1:]))"]
