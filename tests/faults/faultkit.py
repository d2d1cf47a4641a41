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

import pytest

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


def cli_as_a_user(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``argus-lab ARGS`` in a new process that file permissions hold back as they hold back a user.

    As a user it is :func:`cli`.  As root (CI may run the suite as root), the child is root without the capabilities
    that let root write and search anywhere (``CAP_DAC_OVERRIDE``, ``CAP_DAC_READ_SEARCH``, dropped from its bounding
    set before it starts): a folder of mode 0o555 is then read-only to it, to ``os.access`` and to ``open`` alike, as
    to its owner; the test skips where the suite may not drop them (no ``CAP_SETPCAP``)."""
    if os.geteuid() != 0:
        return cli(*args, timeout=timeout)
    import ctypes

    if not _can_drop_caps():
        pytest.skip("the suite runs as root and may not drop CAP_DAC_OVERRIDE (no CAP_SETPCAP)")

    libc = ctypes.CDLL(None, use_errno=True)

    def drop() -> None:
        for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap})")

    code = f"import sys; from argus_lab.faces.cli import main; sys.exit(main({list(args)!r}))"
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(),
        check=False,
        preexec_fn=drop,
    )


PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_SETPCAP = 1, 2, 8


def _can_drop_caps() -> bool:
    """Whether this process may drop capabilities from a child's bounding set (it holds ``CAP_SETPCAP``)."""
    with open("/proc/self/status") as f:
        eff = next((int(ln.split()[1], 16) for ln in f if ln.startswith("CapEff:")), 0)
    return bool(eff >> CAP_SETPCAP & 1)


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
