"""A disk that fills during ``argus-lab import``: one message naming the store and the fix, no traceback, no empty
store left behind, and an existing store left as it was.  The disk is a 1 MiB tmpfs where this test may mount one
(root in a sandbox that permits it: ENOSPC), else a 1 MiB file-size limit on the importing process (EFBIG)."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from argus_lab.store import Store
from tests.faults.faultkit import python

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
LIMIT = 1 << 20


@contextlib.contextmanager
def small_disk(folder: Path, size: int = LIMIT) -> Iterator[str]:
    """``folder`` as a tmpfs of ``size`` bytes (yields ``"tmpfs"``), or left as it is (yields ``"fsize"``: limit
    the process)."""
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True, check=False,
    )  # fmt: skip
    try:
        yield "tmpfs" if done.returncode == 0 else "fsize"
    finally:
        if done.returncode == 0:
            subprocess.run(["umount", str(folder)], check=False)


def _big_trace(path: Path, kernels: int = 40_000) -> None:
    """SYNTHETIC: one annotation and ``kernels`` kernels, each launched inside it (a few MB of store tables)."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 10 * kernels + 10,
           "args": {}}]  # fmt: skip
    for i in range(kernels):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10 * i + 1,
                   "dur": 1, "args": {"correlation": i + 1}})  # fmt: skip
        ev.append({"ph": "X", "cat": "kernel", "name": f"kernel_{i}_" + "x" * 40, "pid": 0, "tid": 7,
                   "ts": 10 * i + 2, "dur": 3, "args": {"correlation": i + 1, "device": 0, "stream": 7}})  # fmt: skip
    path.write_text(json.dumps({"baseTimeNanoseconds": 1_000_000_000, "traceEvents": ev}))


def _import(trace: Path, store: Path, how: str, limit_bytes: int = LIMIT) -> subprocess.CompletedProcess[str]:
    limit = (
        f"import resource, signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit_bytes}, {limit_bytes}))\n"
        if how == "fsize"
        else ""
    )
    return python(
        f"{limit}import sys; from argus_lab.faces.cli import main; "
        f"sys.exit(main(['import', {str(trace)!r}, '--store', {str(store)!r}]))"
    )


def _told(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("argus-lab: error: cannot write the evidence store"), done.stderr
    assert "No space left on device" in done.stderr or "File too large" in done.stderr


def test_disk_full_during_an_import_into_a_new_store_leaves_nothing(tmp_path: Path) -> None:
    trace = tmp_path / "big.json"
    _big_trace(trace)
    with small_disk(tmp_path / "disk") as how:
        store = tmp_path / "disk" / "s.duckdb"
        done = _import(trace, store, how)
        _told(done)
        assert list((tmp_path / "disk").iterdir()) == []  # no store, lock, WAL or spill folder


def test_disk_full_during_an_import_into_an_existing_store_keeps_its_runs(tmp_path: Path) -> None:
    trace = tmp_path / "big.json"
    _big_trace(trace)
    with small_disk(tmp_path / "disk", 16 * LIMIT) as how:
        store = tmp_path / "disk" / "s.duckdb"
        assert _import(TRACES / "nsys_regions.sqlite", store, "none").returncode == 0
        with Store(store).connect() as con:
            before = con.execute("SELECT run_id, status FROM runs").fetchall()
        if how == "tmpfs":  # fill the disk but for a few blocks
            free = shutil.disk_usage(store.parent).free
            (store.parent / "filler").write_bytes(b"\0" * max(0, free - 256 * 1024))
        done = _import(trace, store, how, store.stat().st_size + 256 * 1024)
        _told(done)
        with Store(store).connect() as con:
            after = con.execute("SELECT run_id, status FROM runs").fetchall()
        if after != before:  # the run was written, the join could not be: the message says how to join it
            assert len(after) == len(before) + 1
            assert "but not joined" in done.stderr and "argus-lab join --run" in done.stderr
        else:
            assert after == before
