"""Damaged, truncated and hostile input files given to ``argus-lab import``: each answered with one message naming
the file, what is wrong and the fix (never a traceback), a damaged file that still reads stored as ``partial`` with
the damage as its cause, and nothing left behind by a failed or killed import."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from argus_lab.store import Store
from tests.faults.faultkit import cli

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
NCU = TRACES / "ncu_regions.ncu-rep"
NSYS = TRACES / "nsys_regions.sqlite"
KINETO = TRACES / "kineto_gpt2.json.gz"


def _runs(store: Path) -> list[tuple[str, str]]:
    with Store(store).connect() as con:
        return [(str(s), str(c)) for s, c in con.execute("SELECT status, cause FROM runs").fetchall()]


def _refused(done: subprocess.CompletedProcess[str], *words: str) -> None:
    """One error line naming the problem, no traceback."""
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("argus-lab: error: "), done.stderr
    for w in words:
        assert w in done.stderr, done.stderr


def test_a_truncated_ncu_report_is_stored_partial_and_says_so(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    half = tmp_path / "half.ncu-rep"
    data = NCU.read_bytes()
    half.write_bytes(data[: len(data) // 2])
    store = tmp_path / "s.duckdb"
    done = cli("import", str(half), "--store", str(store))
    assert done.returncode == 0, done.stderr
    assert "DAMAGED FILE: it is truncated" in done.stdout
    [(status, cause)] = _runs(store)
    assert status == "partial"
    assert "is damaged: it is truncated" in cause
    shown = cli("show", "--store", str(store))
    assert "partial: the imported file" in shown.stdout


def test_byte_flips_in_an_ncu_report_are_never_imported_as_ok(tmp_path: Path) -> None:
    """SYNTHETIC damage: 200 random bit flips (fixed seeds) in a recorded report; each copy is refused with a message
    or stored as partial, none as ok."""
    pytest.importorskip("ncu_report")
    data = NCU.read_bytes()
    for seed in range(3):
        rnd = random.Random(seed)
        buf = bytearray(data)
        for _ in range(200):
            buf[rnd.randrange(len(buf))] ^= 1 << rnd.randrange(8)
        flipped = tmp_path / f"flip{seed}.ncu-rep"
        flipped.write_bytes(bytes(buf))
        store = tmp_path / f"f{seed}.duckdb"
        done = cli("import", str(flipped), "--store", str(store))
        assert "Traceback" not in done.stderr, done.stderr
        if done.returncode == 0:
            assert [s for s, _ in _runs(store)] == ["partial"]
        else:
            _refused(done, "damaged", "profile again")
            assert not store.exists()


def test_a_three_kilobyte_ncu_report_is_one_message_without_the_readers_traceback(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    tiny = tmp_path / "tiny.ncu-rep"
    tiny.write_bytes(NCU.read_bytes()[:3000])
    done = cli("import", str(tiny), "--store", str(tmp_path / "s.duckdb"))
    _refused(done, "tiny.ncu-rep", "truncated", "profile again")
    assert len(done.stderr.strip().splitlines()) == 1
    assert 'File "' not in done.stderr


def test_a_truncated_gzip_trace_is_named_and_leaves_no_store(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(KINETO.read_bytes()[:60_000])
    store = tmp_path / "s.duckdb"
    done = cli("import", str(cut), "--store", str(store))
    _refused(done, "cut.json.gz", "damaged gzip file", "truncated", "record it again")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.json.gz"]  # no store, lock or WAL left behind


def test_a_failed_import_leaves_an_existing_store_as_it_was(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    assert cli("import", str(NSYS), "--store", str(store)).returncode == 0
    before = _runs(store)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(KINETO.read_bytes()[:60_000])
    _refused(cli("import", str(cut), "--store", str(store)), "damaged gzip file")
    assert _runs(store) == before


@pytest.mark.parametrize("name", ["d.json", "d.json.gz", "d.sqlite", "d.ncu-rep", "d.nsys-rep"])
def test_a_folder_given_as_the_trace_is_one_message_and_leaves_no_store(tmp_path: Path, name: str) -> None:
    (tmp_path / name).mkdir()  # e.g. a tensorboard_trace_handler folder passed instead of a trace in it
    store = tmp_path / "s.duckdb"
    _refused(cli("import", str(tmp_path / name), "--store", str(store)), "is a folder, not a trace file")
    _refused(cli("import", str(tmp_path / name), "--format", "kineto", "--store", str(store)), "is a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no store, lock or WAL left behind


def test_a_named_pipe_given_as_the_trace_is_refused_instead_of_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "t.json"
    os.mkfifo(fifo)  # nothing ever writes it: before, the import waited on it forever
    done = cli("import", str(fifo), "--store", str(tmp_path / "s.duckdb"), timeout=20)
    _refused(done, "'" + str(fifo) + "' is a named pipe (FIFO), not a trace file")


@pytest.mark.parametrize("damage", ["half", "junk"])
def test_a_damaged_nsys_sqlite_export_is_one_message(tmp_path: Path, damage: str) -> None:
    bad = tmp_path / "bad.sqlite"
    if damage == "half":
        bad.write_bytes(NSYS.read_bytes()[:100_000])
    else:  # SYNTHETIC: an SQLite signature followed by random bytes
        bad.write_bytes(b"SQLite format 3\0" + random.Random(1).randbytes(5000))
    store = tmp_path / "s.duckdb"
    done = cli("import", str(bad), "--store", str(store))
    _refused(done, "bad.sqlite", "could not be read as an SQLite database", "nsys export --type sqlite")
    assert not store.exists()


def test_a_wrong_typed_cell_in_an_nsys_export_names_its_column(tmp_path: Path) -> None:
    edited = tmp_path / "edited.sqlite"
    shutil.copy(NSYS, edited)
    con = sqlite3.connect(edited)  # SYNTHETIC damage: one kernel's start is text
    con.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'abc' WHERE rowid = (SELECT min(rowid) FROM "
        "CUPTI_ACTIVITY_KIND_KERNEL)"
    )
    con.commit()
    con.close()
    done = cli("import", str(edited), "--store", str(tmp_path / "s.duckdb"))
    _refused(done, "edited.sqlite", "column 'start' of CUPTI_ACTIVITY_KIND_KERNEL", "'abc'", "export the report again")


def test_negative_durations_are_left_out_and_the_run_marked_partial(tmp_path: Path) -> None:
    """SYNTHETIC: a kernel whose ``dur`` is -50 us, launched inside an annotation."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 100, "args": {}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "k_bad", "pid": 0, "tid": 7, "ts": 20, "dur": -50,
         "args": {"correlation": 1, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 30, "dur": 5,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "k_good", "pid": 0, "tid": 7, "ts": 40, "dur": 10,
         "args": {"correlation": 2, "device": 0, "stream": 7}},
    ]  # fmt: skip
    src = tmp_path / "neg.json"
    src.write_text(json.dumps({"baseTimeNanoseconds": 1_000_000_000, "traceEvents": events}))
    store = tmp_path / "s.duckdb"
    done = cli("import", str(src), "--store", str(store))
    assert done.returncode == 0, done.stderr
    assert "DAMAGED FILE: 1 record(s) end before they start" in done.stdout
    with Store(store).connect() as con:
        assert con.execute("SELECT name FROM kernels").fetchall() == [("k_good",)]
    assert [s for s, _ in _runs(store)] == ["partial"]


def test_temporary_folders_of_a_killed_import_are_swept_by_the_next(tmp_path: Path) -> None:
    """A folder left by an import killed with -9 (its process is gone) is removed; a live process's folder stays."""
    work = tmp_path / "work"
    work.mkdir()
    gone = _ended_pid()
    stale = work / f"argus-trace-{gone}-abc"
    stale.mkdir()
    (stale / "part0.json").write_bytes(b"[" + b" " * 1000 + b"]")
    live = work / f"argus-trace-{os.getpid()}-def"
    live.mkdir()
    other = work / "argus-trace-notmine"
    other.mkdir()
    from argus_lab.importers import kineto

    kineto.read(KINETO, "r-x", workdir=str(work))
    assert sorted(p.name for p in work.iterdir()) == sorted([live.name, other.name])


def _ended_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_trace_path_with_control_characters_is_escaped_in_the_summary(tmp_path: Path) -> None:
    odd = tmp_path / "t\x1b[31mred\x07.json.gz"
    with gzip.open(KINETO) as src:
        odd.write_bytes(gzip.compress(src.read()))
    done = cli("import", str(odd), "--store", str(tmp_path / "s.duckdb"))
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "red" in done.stdout


def test_the_folder_of_an_import_killed_with_sigkill_is_removed_by_the_next_import(tmp_path: Path) -> None:
    """A real import (SYNTHETIC 100,000-kernel trace) killed with -9 once its temporary folder exists; the next import
    with the same temporary directory removes that folder."""
    from tests.faults.faultkit import start_python, wait_for

    work = tmp_path / "tmp"
    work.mkdir()
    big = tmp_path / "big.json"
    events = [{"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 10**7,
               "args": {}}]  # fmt: skip
    events += [
        {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 10 * i, "dur": 3,
         "args": {"correlation": i + 1, "device": 0, "stream": 7}}
        for i in range(100_000)
    ]  # fmt: skip
    big.write_text(json.dumps({"baseTimeNanoseconds": 1_000_000_000, "traceEvents": events}, indent=1))
    proc = start_python(
        f"import argus_lab; argus_lab.import_trace({str(big)!r}, {str(tmp_path / 'a.duckdb')!r})", TMPDIR=str(work)
    )
    wait_for("the import's temporary folder", lambda: any(work.glob("argus-trace-*/*")))
    proc.kill()
    proc.wait()
    left = list(work.glob("argus-trace-*"))
    assert left, "the killed import left no folder (nothing to sweep)"
    done = cli("import", str(NSYS), "--store", str(tmp_path / "b.duckdb"), TMPDIR=str(work))
    assert done.returncode == 0, done.stderr
    assert not any(p.exists() for p in left)
