"""Progress while a measurement runs: per run, per repetition and per ncu kernel, with the time left, in the API,
in a child run, on a terminal (tqdm through a real pty), in a real Jupyter kernel (one display updated in place,
never a growing log), and quiet when asked.
"""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import argus_lab
from argus_lab.app.measure import plan
from argus_lab.plan.ncu_settings import KernelCensus, PathCensus
from argus_lab.run.progress import ChildWatch, RunClock, Tick, terminal

ROOT = Path(__file__).resolve().parents[1]
NCU_LOG = ROOT / "tests" / "data" / "gpu" / "ncu" / "triton_nested.ncu.log"  # recorded by ncu on the H200


def test_measure_tells_every_repetition_with_the_time_left(tmp_path: Path) -> None:
    ticks: list[Tick] = []

    def step() -> None:
        with argus_lab.region("work"):
            time.sleep(0.002)

    argus_lab.measure(step, "host.wall", repeat=15, warmup=1, store=str(tmp_path / "s.duckdb"), progress=ticks.append)
    events = [t.event for t in ticks]
    assert events[0] == "start" and events[-1] == "end" and events.count("repetition") == 16
    reps = [t for t in ticks if t.event == "repetition"]
    assert [t.reps_done for t in reps] == list(range(1, 17)) and {t.reps_total for t in reps} == {16}
    assert all(t.left_s is not None for t in reps[:-1]) and reps[-1].left_s is None
    assert "repetition 3/16" in reps[1].text() and "left" in reps[1].text()
    assert ticks[-1].status == "ok" and "ok after" in ticks[-1].text()


def test_quiet_measure_shows_nothing(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    argus_lab.measure(lambda: None, "host.wall", repeat=2, store=str(tmp_path / "s.duckdb"), progress=False)
    out = capfd.readouterr()
    assert "argus: run" not in out.out + out.err


def test_the_time_left_comes_from_measured_repetitions_not_the_warm_up() -> None:
    run = plan("host.wall", repeat=4, warmup=1).runs[0]
    clock = RunClock(run, 1, None)
    clock.t0 = 0.0
    clock.ends = [10.0, 11.0, 12.0]  # a 10 s warm-up, then 1 s repetitions
    assert clock.left(12.0) == pytest.approx(2.0)  # 2 left at 1 s each, not at the 4 s mean with the warm-up
    assert clock.left(12.5) == pytest.approx(1.5)  # half of the current one is done already
    clock.ends = [10.0]
    assert clock.left(10.0) == pytest.approx(40.0)  # only the warm-up known: its time stands for the others


def test_a_child_runs_progress_is_read_from_its_shards_and_ncus_log(tmp_path: Path) -> None:
    """ncu's log as ncu writes it (recorded on the H200: 6 kernels, 1 pass each), appended in pieces that cut
    lines in half, and repetition shards appearing: each read picks up only what is complete."""
    run = plan("host.wall", repeat=2, warmup=1).runs[0]
    ticks: list[Tick] = []
    watch = ChildWatch(tmp_path, RunClock(run, 1, ticks.append))
    log = NCU_LOG.read_bytes()
    cut = log.index(b"==PROF== Profiling", log.index(b"==PROF== Profiling") + 1) + 30  # inside the 2nd line
    (tmp_path / "ncu.log").write_bytes(log[:cut])
    watch.poll()
    assert [t.kernels for t in ticks] == [1]
    (tmp_path / "instances-00000.parquet").write_bytes(b"")
    with (tmp_path / "ncu.log").open("ab") as f:
        f.write(log[cut:])
    watch.poll()
    assert ticks[-1].kernels == 6 and ticks[-1].passes == 1 and ticks[-1].reps_done == 1
    assert "6 kernels of an unknown total profiled (1 pass each)" in ticks[-1].text()
    watch.poll()  # nothing new: no tick
    assert len(ticks) == 3


def _ncu_run(census: KernelCensus | None) -> Any:
    the_plan = plan("hw:sm__throughput.avg.pct_of_peak_sustained_elapsed", repeat=2, warmup=1, census=census)
    return next(r for r in the_plan.runs if "ncu" in r.backends)


def test_an_ncu_run_whose_kernel_total_is_known_says_k_of_n_and_the_time_left() -> None:
    """The plan's estimate (a census of an earlier timing run: 20 kernels a step, 2 measured steps) is the total."""
    census = KernelCensus((PathCensus("step", 1.0, 20.0),), source="timing run r-1")
    clock = RunClock(_ncu_run(census), 1, None)
    assert clock.kernels_total == 40
    clock.t0, clock.kernels = 0.0, 10
    assert clock.left(5.0) == pytest.approx(15.0)  # 10 kernels in 5 s: 30 left at 0.5 s each
    ticks: list[Tick] = []
    clock = RunClock(_ncu_run(census), 1, ticks.append)
    clock.start()
    clock.profiled(12, 9)
    assert "12/40 kernels profiled (9 passes each)" in ticks[-1].text()
    assert "left" in ticks[-1].text() and ticks[-1].to_json()["kernels_total"] == 40


def test_an_ncu_run_without_a_census_says_its_kernel_total_is_unknown() -> None:
    ticks: list[Tick] = []
    clock = RunClock(_ncu_run(None), 1, ticks.append)
    assert clock.kernels_total is None
    clock.start()
    clock.profiled(12, 9)
    assert "12 kernels of an unknown total profiled (9 passes each)" in ticks[-1].text()


def test_the_terminal_bar_of_an_ncu_run_says_k_of_n_kernels_or_that_the_total_is_unknown() -> None:
    census = KernelCensus((PathCensus("step", 1.0, 20.0),), source="timing run r-1")
    for known, said in ((census, "12/40 kernels profiled"), (None, "12 kernels profiled (total unknown)")):
        out = io.StringIO()
        clock = RunClock(_ncu_run(known), 1, terminal(out))
        clock.start()
        clock.profiled(12, 9)
        clock.end("ok")
        assert said in out.getvalue(), out.getvalue()


def test_a_child_run_reports_repetitions_as_they_finish(tmp_path: Path) -> None:
    ticks: list[Tick] = []
    script = tmp_path / "slow.py"
    script.write_text(
        "import time, argus_lab\nwith argus_lab.region('step'):\n    time.sleep(0.4)\n"
    )  # 0.4 s a repetition: the parent looks every 0.25 s, so it sees them one by one
    argus_lab.measure(
        str(script), "host.wall", repeat=3, warmup=1, store=str(tmp_path / "s.duckdb"), isolate=True,
        progress=ticks.append,
    )  # fmt: skip
    reps = [t.reps_done for t in ticks if t.event == "repetition"]
    assert reps == [1, 2, 3, 4], [t.text() for t in ticks]
    assert ticks[-1].status == "ok"


def _read_pty(fd: int, proc: subprocess.Popen[bytes]) -> bytes:
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    return out


def test_the_cli_draws_a_bar_per_run_on_a_terminal_and_lines_in_a_log(tmp_path: Path) -> None:
    script = str(ROOT / "examples" / "nested.py")
    cmd = [sys.executable, "-m", "argus_lab.faces.cli", "run", script, "--signals", "host.wall", "--repeat", "6",
           "--store", str(tmp_path / "s.duckdb")]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="120")
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower, env=env)
    os.close(follower)
    text = _read_pty(leader, proc).decode(errors="replace")
    os.close(leader)
    assert proc.wait() == 0
    assert "argus run 1/1 [host]" in text and "7/7" in text and "rep" in text, text  # tqdm: warm-up + 6
    piped = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    assert "argus: run 1/1 [host] starting" in piped.stderr and "argus: run 1/1 [host] ok after" in piped.stderr
    assert "\r" not in piped.stderr  # no bar drawn into a log
    quiet = subprocess.run([*cmd, "--quiet"], capture_output=True, text=True, env=env, check=True)
    assert "argus: run" not in quiet.stderr


def test_a_notebook_cell_shows_one_progress_line_updated_in_place(tmp_path: Path) -> None:
    """A real Jupyter kernel runs ``%%argus -n 15``: the cell gets one display (with a display id) and then only
    updates of it, carrying each repetition; ``--quiet`` sends none."""
    jupyter_client = pytest.importorskip("jupyter_client")
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3", cwd=str(tmp_path),
                                                     env=dict(os.environ, PYTHONPATH=str(ROOT)))  # fmt: skip
    try:
        setup = f"%load_ext argus_lab\n%argus store {tmp_path / 's.duckdb'}\nimport argus_lab, time"
        _execute(kc, setup)
        cell = "%%argus -s host.wall -n 15 -w 1 --no-show\nwith argus_lab.region('work'):\n    time.sleep(0.3)"
        msgs = _execute(kc, cell)
        quiet = _execute(kc, cell.replace("--no-show", "--no-show --quiet"))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    mime = "application/vnd.argus.progress+json"
    shown = [m for m in msgs if m["msg_type"] == "display_data" and mime in m["content"]["data"]]
    updates = [m for m in msgs if m["msg_type"] == "update_display_data" and mime in m["content"]["data"]]
    assert len(shown) == 1, [m["msg_type"] for m in msgs]
    display_id = shown[0]["content"]["transient"]["display_id"]
    assert {m["content"]["transient"]["display_id"] for m in updates} == {display_id}
    steps = [m["content"]["data"][mime] for m in updates]
    done = sorted({s["reps_done"] for s in steps if s["event"] == "repetition"})
    assert len(done) >= 10 and steps[-1]["event"] == "end" and steps[-1]["reps_total"] == 16, steps[-3:]
    assert any(s["left_s"] for s in steps) and steps[-1]["text"].startswith("argus: run 1/1 [host] ok after")
    assert not [m for m in quiet if mime in m["content"].get("data", {})]


def _execute(kc: Any, code: str, timeout: float = 120.0) -> list[dict[str, Any]]:
    """Run ``code`` in the kernel; every iopub message of that execution."""
    msg_id = kc.execute(code)
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        out.append(msg)
        if msg["msg_type"] == "error":
            raise AssertionError("\n".join(msg["content"]["traceback"]))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return out
    raise AssertionError(f"the kernel did not finish {code!r} in {timeout} s")
