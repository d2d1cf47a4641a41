"""The store under faults (issue 16, items 3 and 6): full disks, damaged files, locks held by other processes, and
readers that must not write.

Full disks are real: a child process runs with a file-size limit (``RLIMIT_FSIZE``, SIGXFSZ ignored, so a write
past it fails with ``EFBIG`` as on a full disk), and, where this machine lets us mount one, a 2 MB tmpfs
(``ENOSPC``).  Damaged stores are real DuckDB files cut short or overwritten.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faultkit import WORKLOADS, cli, cli_as_a_user, env, python, start_python

import argus_lab
from argus_lab.errors import StoreError
from argus_lab.store import Store

LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
from argus_lab.faces.cli import main
sys.exit(main({args!r}))
"""


def _measured(path: Path) -> None:
    def step() -> None:
        with argus_lab.region("step"):
            pass

    argus_lab.measure(step, signals="host.wall", repeat=2, warmup=0, store=str(path))


def _clean_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-1000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stderr


def test_a_full_disk_names_the_cause_and_reads_still_work(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    _measured(store)
    size = store.stat().st_size
    args = ["run", str(WORKLOADS / "many_instances.py"), "-n", "1", "-w", "0", "--store", str(store)]
    err = _clean_error(python(LIMITED.format(limit=size + 64 * 1024, args=args)))
    assert "File too large" in err and "ulimit -f" in err
    assert "TransactionException" not in err and "cannot rollback" not in err
    # a read on the full disk: nothing is written, the earlier measurement is all there
    first = Store(store).rows("SELECT run_id FROM runs ORDER BY started_ns LIMIT 1")[0][0]
    show = python(LIMITED.format(limit=0, args=["show", "--store", str(store), "--run", first]))
    assert show.returncode == 0, show.stderr[-2000:]
    assert "step" in show.stdout
    # what the failed run left is said, not lost silently: the run is marked failed (or, if even that could not be
    # written, the next open marks it died)
    _measured(store)
    statuses = [r[0] for r in Store(store).rows("SELECT status FROM runs ORDER BY started_ns")]
    assert statuses[0] == "ok" and statuses[1] in ("failed", "died") and statuses[2] == "ok"
    cause = Store(store).rows("SELECT cause FROM runs ORDER BY started_ns")[1][0]
    assert "File too large" in cause or "ended before it stored the run" in cause


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Path:
    """A 2 MB tmpfs (real ENOSPC); skipped where mounting is not allowed."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode()[:200]}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_no_space_left_on_device_names_the_cause(tiny_tmpfs: Path) -> None:
    store = tiny_tmpfs / "s.duckdb"
    args = ["run", str(WORKLOADS / "many_instances.py"), "-n", "1", "-w", "0", "--store", str(store)]
    err = _clean_error(cli(*args[0:]))
    assert "No space left on device" in err
    assert "free space on the disk" in err and "--store" in err


def _damaged(kind: str, path: Path) -> None:
    if kind == "empty":
        path.write_bytes(b"")
        return
    _measured(path)
    data = path.read_bytes()
    if kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "overwritten":
        path.write_bytes(data[: len(data) // 3] + os.urandom(len(data) // 3) + data[2 * len(data) // 3 :])
    elif kind == "header only":
        path.write_bytes(data[:4096])
    elif kind == "schema text":
        Store(path).execute("UPDATE meta SET value = 'one' WHERE key = 'schema_version'")


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("empty", "empty file (0 bytes)"),
        ("truncated", "is damaged"),
        ("overwritten", "is damaged"),
        ("header only", "is damaged"),
        ("schema text", "unknown schema version ('one')"),
    ],
)
def test_a_damaged_store_gives_a_clean_message(tmp_path: Path, kind: str, words: str) -> None:
    store = tmp_path / "s.duckdb"
    _damaged(kind, store)
    for command in (
        ["show", "--store", str(store), "--all"],
        ["export", "--store", str(store), str(tmp_path / "r.html")],
    ):
        err = _clean_error(cli(*command))
        assert words in err, err[-2000:]
    if kind != "overwritten":  # (random bytes may land where a read never looks)
        with pytest.raises(StoreError, match=words.replace("(", r"\(").replace(")", r"\)")):
            Store(store).records("SELECT * FROM region_instances, runs")


def test_export_to_an_unwritable_place_gives_a_clean_message(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    _measured(store)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    err = _clean_error(cli("export", "--store", str(store), str(blocker / "report.html")))
    assert "cannot write the export" in err and "choose a writable path" in err
    ro = tmp_path / "ro"  # (as root, the export runs without root's right to write anywhere: cli_as_a_user)
    ro.mkdir(mode=0o555)
    err = _clean_error(cli_as_a_user("export", "--store", str(store), str(ro / "report.html")))
    assert "Permission denied" in err and "choose a writable path" in err


def test_readers_create_no_file_beside_the_store(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    store = folder / "s.duckdb"
    _measured(store)
    for extra in folder.iterdir():  # only the store: a writer's lock and run folders are not a reader's business
        if extra != store:
            shutil.rmtree(extra) if extra.is_dir() else extra.unlink()
    outside = tmp_path / "outside-target"
    (folder / "s.duckdb.lock").symlink_to(outside)  # a planted dangling link
    before = sorted(p.name for p in folder.iterdir())
    assert cli("show", "--store", str(store)).returncode == 0
    assert cli("export", "--store", str(store), str(tmp_path / "r.html")).returncode == 0
    argus_lab.Report(Store(store)).text()
    assert sorted(p.name for p in folder.iterdir()) == before
    assert not outside.exists()  # nothing was created through the link


def test_a_writer_never_follows_a_planted_lock_link(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    outside = tmp_path / "elsewhere"
    (tmp_path / "s.duckdb.lock").symlink_to(outside)
    with pytest.raises(StoreError, match="symbolic link"):
        _measured(store)
    assert not outside.exists()


HOLD = """
import duckdb, sys
con = duckdb.connect({path!r}, read_only={read_only})
print("held", flush=True)
sys.stdin.readline()
con.close()
"""


def _holder(path: Path, *, read_only: bool) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD.format(path=str(path), read_only=read_only)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env(),
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _release_after_start(holder: subprocess.Popen[str], other: subprocess.Popen[str], word: str) -> None:
    """Wait until ``other`` says ``word`` (it is about to open the store), give it time to run into the lock,
    then let ``holder`` close its connection."""
    assert other.stdout is not None
    line = other.stdout.readline()
    assert line.strip() == word, (line, other.stderr.read() if other.stderr else "")
    time.sleep(2.0)  # the other process now meets the lock (this is ordering, not a timed assertion)
    assert holder.stdin is not None
    holder.stdin.write("\n")
    holder.stdin.close()
    holder.wait(30)


def test_a_read_waits_for_a_writer_in_another_process(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    _measured(store)
    writer = _holder(store, read_only=False)  # DuckDB's own exclusive lock on the file
    code = f"""
    import sys
    import duckdb, pyarrow, argus_lab.report, argus_lab.store  # imported before the store is opened
    from argus_lab.faces.cli import main
    print("opening", flush=True)
    sys.exit(main(["show", "--store", {str(store)!r}]))
    """
    reader = start_python(code)
    try:
        _release_after_start(writer, reader, "opening")
        out, err = reader.communicate(timeout=60)
    finally:
        for proc in (writer, reader):
            if proc.poll() is None:
                proc.kill()
    assert reader.returncode == 0, err[-2000:]  # it waited (retrying), it did not fail
    assert "step" in out


def test_a_write_waits_for_a_reader_in_another_process(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    _measured(store)
    reader = _holder(store, read_only=True)  # a reader holds DuckDB's shared lock
    code = f"""
    import argus_lab
    import duckdb, pyarrow, argus_lab.app.measure, argus_lab.backends.host  # imported before the store is opened
    print("writing", flush=True)
    argus_lab.measure(lambda: None, signals="host.wall", repeat=1, warmup=0, store={str(store)!r})
    """
    writer = start_python(code)
    try:
        _release_after_start(reader, writer, "writing")
        _, err = writer.communicate(timeout=60)
    finally:
        for proc in (writer, reader):
            if proc.poll() is None:
                proc.kill()
    assert writer.returncode == 0, err[-2000:]
    assert Store(store).rows("SELECT count(*) FROM runs") == [(2,)]


WRITER = """
from argus_lab.store import Store
store = Store({path!r})
for b in range(15):
    store.write({{"region_instances": {{"run_id": [{run!r}] * 40, "instance_id": list(range(b * 40, b * 40 + 40)),
                                        "path": ["a"] * 40, "start_ns": [1] * 40, "end_ns": [2] * 40}}}})
"""
READER = """
import time
from argus_lab.store import Store
store = Store({path!r})
seen = []
while True:
    n = store.rows("SELECT count(*) FROM region_instances")[0][0]
    seen.append(n)
    if n >= {total}:
        break
assert seen == sorted(seen), "a read saw rows disappear"
print("reads", len(seen))
"""


def test_two_writers_and_a_reader_lose_nothing(store_path: Path) -> None:
    Store(store_path).write({"region_instances": {"run_id": ["seed"], "instance_id": [0], "path": ["a"]}})
    writers = [start_python(WRITER.format(path=str(store_path), run=f"w{k}")) for k in range(2)]
    reader = start_python(READER.format(path=str(store_path), total=1 + 2 * 15 * 40))
    for proc in [*writers, reader]:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-2000:]
    rows = Store(store_path).rows("SELECT run_id, count(*) FROM region_instances GROUP BY run_id ORDER BY run_id")
    assert rows == [("seed", 1), ("w0", 600), ("w1", 600)]
