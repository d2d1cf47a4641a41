"""Shared helpers of the fault suite: real Python processes running argus_lab, and waiting for files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import argus_lab

PACKAGE_ROOT = Path(argus_lab.__file__).resolve().parents[1]
"""The folder holding the argus_lab under test (child processes import the same one)."""
WORKLOADS = Path(__file__).parent / "workloads"


def env(**extra: str) -> dict[str, str]:
    """The environment of a process that runs this argus_lab."""
    out = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")])))
    out.pop("ARGUS_FORCE_CHILD", None)
    out.update(extra)
    return out


def python(code: str, *, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a new Python process to its end."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(**extra),
        check=False,
    )


def start_python(code: str, **extra: str) -> subprocess.Popen[str]:
    """Start ``code`` in a new Python process (its own process group, like a command started from a shell).

    Ctrl-C is restored to its default in it: a test suite started as a background job (``cmd &``) inherits SIGINT
    ignored, and Python then never turns SIGINT into KeyboardInterrupt, as it does in a terminal."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(**extra),
        start_new_session=True,
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def cli(*args: str, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess[str]:
    """``argus-lab ARGS`` in a new process."""
    return python(
        f"import sys; from argus_lab.faces.cli import main; sys.exit(main({list(args)!r}))", timeout=timeout, **extra
    )


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll ``check`` until it holds; fail with ``what`` after ``timeout`` seconds (a guard against hangs)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            msg = f"gave up waiting for {what} after {timeout:.0f} s"
            raise AssertionError(msg)
        time.sleep(0.05)


def shards(store: Path) -> list[Path]:
    """Every repetition shard under ``<store>.runs/``."""
    return sorted(store.with_name(store.name + ".runs").glob("*/instances-*.parquet"))


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (and is not a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state != "Z"


def ranges_trace(folder: Path, ranges: list[tuple[float, float, str]]) -> Path:
    """SYNTHETIC: a Chrome trace of ``record_function`` ranges (ts, dur in us, name) on one thread, in ``folder``."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}
        for ts, dur, name in ranges
    ]
    src = folder / "hostile.json"
    src.write_text(json.dumps({"baseTimeNanoseconds": 1_000_000_000, "traceEvents": events}))
    return src
