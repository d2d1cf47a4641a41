"""Threads of a timing run: their names, what they are, and the calls that hand one thread's work to another.

The join ties a kernel to a region through the thread that launched it (``exact`` only on that thread).  A kernel
that autograd's device thread launches during ``loss.backward()`` belongs, by the rule users expect, to the region
of the thread that called ``backward()``; to apply it the join needs to know which threads are autograd's and who
was inside a ``backward()`` call when.  This module gathers both, inside the measured process:

* :func:`role_of`: a thread's role from its names: ``autograd`` for torch's autograd engine threads, which the
  engine names ``pt_autograd_<device>`` (visible to the system, so the CUPTI extension reads it at the thread's
  first launch, and to Kineto, which writes it into its traces);
* :class:`ThreadStarts`: the Python name of every thread started while a timing run records, taken at its start;
* :class:`BackwardCalls`: while a timing run records, every call into autograd's engine (``backward()`` and
  ``torch.autograd.grad`` both run ``Variable._execution_engine.run_backward``) is timed on its calling thread, by a
  thin proxy put in front of the engine object for the run and taken away after it.

The rows go to the store's ``threads`` and ``host_calls`` tables.  Standard library and the markers only (runs in
measured processes).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from argus_lab.regions import note_thread_name

AUTOGRAD_THREAD = re.compile(r"\bpt_autograd_\d+")
"""How torch's autograd engine names its device threads (``Engine::thread_init``: ``pt_autograd_<device>``)."""

BACKWARD_CALL = "autograd.backward"
"""The ``host_calls.call`` of a call into autograd's engine (``backward()``, ``torch.autograd.grad``)."""

THREAD_COLUMNS = ("run_id", "rank", "pid", "thread_id", "name", "system_name", "role")
CALL_COLUMNS = ("run_id", "rank", "pid", "thread_id", "call", "start_ns", "end_ns")


def role_of(*names: str) -> str:
    """``autograd`` when one of a thread's names is an autograd engine thread's, else ``""``."""
    return "autograd" if any(AUTOGRAD_THREAD.search(n or "") for n in names) else ""


def python_thread_names() -> dict[int, str]:
    """The names Python gave the threads alive now, by thread id (``threading.get_ident``)."""
    return {t.ident: t.name for t in threading.enumerate() if t.ident is not None}


def threads_table(
    run_id: str,
    rank: int,
    pid: int,
    system: Iterable[tuple[int, str]],
    python: Mapping[int, str],
) -> dict[str, list[Any]]:
    """``threads`` rows for the launching threads (``system``: pthread id and system name, from the CUPTI extension)
    with the Python name of those Python knows (``python``), each thread once."""
    rows: dict[int, tuple[str, str]] = {}
    for tid, sysname in system:
        rows.setdefault(int(tid), (python.get(int(tid), ""), sysname))
    out: dict[str, list[Any]] = {c: [] for c in THREAD_COLUMNS}
    for tid, (name, sysname) in rows.items():
        for col, v in zip(THREAD_COLUMNS, (run_id, rank, pid, tid, name, sysname, role_of(name, sysname)), strict=True):
            out[col].append(v)
    return out


class ThreadStarts:
    """While installed, every Python thread that starts notes its name at its start (``threading.Thread``'s bootstrap,
    on the new thread), so that a short-lived thread that launches kernels without opening a region (a per-step
    worker, a data-loader thread) is named by Python, not only by the system, even once it has ended."""

    def __init__(self) -> None:
        self._original: Callable[..., Any] | None = None

    def install(self) -> bool:
        original = threading.Thread.__dict__.get("_bootstrap_inner")
        if original is None or self._original is not None:
            return False

        def _bootstrap_inner(thread: threading.Thread) -> Any:
            note_thread_name(threading.get_ident(), thread.name)
            return original(thread)

        self._original = original
        threading.Thread._bootstrap_inner = _bootstrap_inner  # type: ignore[attr-defined]
        return True

    def remove(self) -> None:
        original, self._original = self._original, None
        if original is not None:
            threading.Thread._bootstrap_inner = original  # type: ignore[attr-defined]


class _EngineProxy:
    """Stands in for ``Variable._execution_engine`` while a run records: ``run_backward`` is timed on its calling
    thread; every other attribute (``queue_callback``, ``is_checkpoint_valid`` ...) is the engine's own."""

    __slots__ = ("_calls", "_engine")

    def __init__(self, engine: Any, calls: list[tuple[int, int, int]]) -> None:
        self._engine = engine
        self._calls = calls

    def run_backward(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.time_ns()
        try:
            return self._engine.run_backward(*args, **kwargs)
        finally:
            self._calls.append((threading.get_ident(), t0, time.time_ns()))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


class BackwardCalls:
    """Times every call into autograd's engine while it is installed (see the module docstring).

    ``install()`` does nothing when torch is not imported or its engine is not where torch 2 keeps it (the note then
    says so); ``remove()`` puts the engine back only if the proxy is still the one in place.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int]] = []  # (thread id, start ns, end ns), appended under the GIL
        self.note = ""
        self._owner: Any = None
        self._proxy: _EngineProxy | None = None

    def install(self) -> bool:
        torch = sys.modules.get("torch")
        if torch is None:
            self.note = "torch is not imported: no backward() call to time"
            return False
        try:
            owner = torch.autograd.variable.Variable
            engine = owner.__dict__["_execution_engine"]
        except (AttributeError, KeyError):
            self.note = "torch keeps no Variable._execution_engine here: backward() calls are not timed"
            return False
        if isinstance(engine, _EngineProxy):  # another run's proxy was left in place: time through its engine
            engine = engine._engine
        self.calls = []
        self._proxy = _EngineProxy(engine, self.calls)
        owner._execution_engine = self._proxy
        self._owner = owner
        self.note = "backward() calls timed through a proxy of torch's autograd engine"
        return True

    def remove(self) -> None:
        owner, proxy = self._owner, self._proxy
        self._owner = self._proxy = None
        if owner is not None and proxy is not None and owner.__dict__.get("_execution_engine") is proxy:
            owner._execution_engine = proxy._engine

    def table(self, run_id: str, rank: int, pid: int) -> dict[str, list[Any]]:
        """The ``host_calls`` rows of the calls timed."""
        calls = list(self.calls)
        n = len(calls)
        return {
            "run_id": [run_id] * n,
            "rank": [rank] * n,
            "pid": [pid] * n,
            "thread_id": [c[0] for c in calls],
            "call": [BACKWARD_CALL] * n,
            "start_ns": [c[1] for c in calls],
            "end_ns": [c[2] for c in calls],
        }


__all__ = [
    "AUTOGRAD_THREAD",
    "BACKWARD_CALL",
    "CALL_COLUMNS",
    "THREAD_COLUMNS",
    "BackwardCalls",
    "ThreadStarts",
    "python_thread_names",
    "role_of",
    "threads_table",
]
