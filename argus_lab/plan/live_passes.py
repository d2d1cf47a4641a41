"""Live pass counts: CUPTI's profiler host API asked, for the chip at hand, how many passes a metric set needs.

The count comes from the libcupti a pip install brings (see :mod:`argus_lab.backends.cupti.profiler_host`), asked
through a short worker process started by module name (``python -m argus_lab.backends.cupti.profiler_host
--serve``): the planning process never loads libcupti itself, so a later in-process CUPTI run finds none but its
own, and a crash in the library ends only the worker.  The worker starts on the first count a plan needs and stops
when the plan is made (:meth:`LivePassModel.close`); counts are kept per chip and libcupti in a small JSON cache
(``$ARGUS_CACHE_DIR`` or ``$XDG_CACHE_HOME/argus_lab``, file ``passes/<chip>-<cupti version>-<library>.json``), so
the same set is asked once per machine.

From CUPTI's schedule to ncu's passes: Nsight Compute replays a kernel once per pass of the same scheduler, and
takes one pass more when the schedule has more than one (:func:`ncu_passes`): on GH100 with ncu 2025.3.1 that
holds for every set of the recorded table (``argus_lab/data/ncu_passes_gh100.json``, checked against the real
libcupti by ``tests/test_live_passes.py``) and ``tests/gpu/test_ncu_passes_gpu.py`` compares it with ncu on the
H200.  Metrics that are no counters (``launch__*``, ``device__attribute_*``: ncu reads them from the launch) need
no pass; metrics CUPTI does not know (ncu-derived ratios, misspellings) get the fallback model's count (the
recorded table, else the assumed count), and the plan names them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from argus_lab import config

if TYPE_CHECKING:  # a type only: passes.py loads this module when it wants a live count
    from argus_lab.plan.passes import PassModel

WORKER_MODULE = "argus_lab.backends.cupti.profiler_host"
"""The worker, run by name (``plan/`` imports nothing downstream)."""

NON_COUNTER_PREFIXES = ("launch__", "device__attribute")
"""Metrics ncu reads from the launch or the device, not from counters: they need no pass."""

START_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 30.0
_DROP_ENV = ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "CUDA_INJECTION32_PATH")


class LiveUnavailable(RuntimeError):
    """The live count cannot be had here; the message says why."""


def ncu_passes(cupti_passes: int) -> int:
    """ncu's replay passes for a set CUPTI schedules in ``cupti_passes`` passes: one more when it is more than one.

    Observed on GH100 with Nsight Compute 2025.3.1 for every recorded set (1 -> 1, 2 -> 3, 5 -> 6, 8 -> 9, 9 -> 10,
    10 -> 11); monotone, as the planner's split search needs.
    """
    return cupti_passes + 1 if cupti_passes > 1 else max(1, cupti_passes)


def cupti_version_text(api: int) -> str:
    """``cuptiGetVersion``'s number as text: 130001 -> ``13.0 (API 130001)``."""
    return f"{api // 10000}.{api // 100 % 100} (API {api})" if api else "unknown version"


def is_counter(metric: str) -> bool:
    """Whether ``metric`` is read from counters (and so takes passes) rather than from the launch or device."""
    return not metric.startswith(NON_COUNTER_PREFIXES)


def cache_root() -> Path:
    """``$ARGUS_CACHE_DIR``, else ``$XDG_CACHE_HOME/argus_lab`` (``~/.cache/argus_lab``)."""
    explicit = config.get(config.ARGUS_CACHE_DIR)
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME", "") or Path.home() / ".cache") / "argus_lab"


def _read_line(stream: IO[str], timeout: float) -> str:
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        return ""
    return stream.readline()


class Worker:
    """The worker process: one JSON request line in, one JSON answer line out."""

    def __init__(self, chip: str | None, *, timeout: float = START_TIMEOUT_S, capability_only: bool = False) -> None:
        env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
        cmd = [sys.executable, "-m", WORKER_MODULE, "--serve", *(["--chip", chip] if chip else [])]
        if capability_only:
            cmd.append("--chip-from-capability")
        self._err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (lives as long as the worker; closed in close())
        try:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True, env=env
            )
        except OSError as exc:
            self._err.close()
            msg = f"cannot start the pass-count worker ({exc})"
            raise LiveUnavailable(msg) from None
        line = _read_line(self._stdout, timeout)
        try:
            self.hello: dict[str, Any] = json.loads(line) if line else {}
        except ValueError:
            self.hello = {"ok": False, "error": f"unreadable answer {line[:200]!r}"}
        if not self.hello.get("ok"):
            why = self.hello.get("error") or self._failure(timeout)
            self.close()
            raise LiveUnavailable(str(why))

    @property
    def _stdout(self) -> IO[str]:
        assert self.proc.stdout is not None
        return self.proc.stdout

    def _failure(self, timeout: float) -> str:
        code = self.proc.poll()
        self._err.seek(0)
        tail = " | ".join(self._err.read().strip().splitlines()[-3:])
        if code is None:
            return f"the pass-count worker did not answer within {timeout:.0f} s"
        return f"the pass-count worker ended with status {code}" + (f": {tail}" if tail else "")

    def ask(self, metrics: Iterable[str], timeout: float = REQUEST_TIMEOUT_S) -> dict[str, Any]:
        """The worker's answer for one metric set; :class:`LiveUnavailable` when it died or hangs."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"metrics": list(metrics)}) + "\n")
            self.proc.stdin.flush()
        except OSError:
            raise LiveUnavailable(self._failure(timeout)) from None
        line = _read_line(self._stdout, timeout)
        if not line:
            why = self._failure(timeout)
            self.close()
            raise LiveUnavailable(why)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """End the worker (its input closes; killed if it does not end within 5 s)."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._err.close()


class LivePassModel:
    """Pass counts from CUPTI's profiler host API for one chip (see the module docstring).

    Attributes
    ----------
    chip
        The chip counted for (``GH100``).
    hello
        What the worker said about itself: library path, CUPTI version, how the chip was found, the device name.
    fallback
        The model that counts the metrics CUPTI does not know (the recorded table, else the assumed count).
    """

    def __init__(self, worker: Worker, fallback: PassModel, *, chip_given: bool) -> None:
        self._worker: Worker | None = worker
        self.hello = dict(worker.hello)
        self.chip = str(self.hello["chip"])
        self.chip_given = chip_given
        self.fallback = fallback
        self.cache_path = self._cache_path()
        self._raw: dict[frozenset[str], int] = {}
        self._rejected: set[str] = set()
        self._dirty = False
        self.broken = ""  # why the worker stopped answering mid-plan ("" while it answers)
        self._load_cache()

    # -- cache ----------------------------------------------------------------------------------------------------
    def _cache_path(self) -> Path:
        lib = str(self.hello.get("library", ""))
        digest = hashlib.sha256(lib.encode()).hexdigest()[:10]
        return cache_root() / "passes" / f"{self.chip}-{self.hello.get('cupti_version', 0)}-{digest}.json"

    def _load_cache(self) -> None:
        try:
            data = json.loads(self.cache_path.read_text())
        except (OSError, ValueError):
            return
        if data.get("library") != self.hello.get("library") or data.get("chip") != self.chip:
            return
        self._raw = {frozenset(k.split(",")): int(v) for k, v in data.get("sets", {}).items()}
        self._rejected = set(data.get("rejected", ()))

    def save(self) -> None:
        """Write the counts asked so far to the cache file (atomically; a failure to write is ignored)."""
        if not self._dirty:
            return
        data = {
            "chip": self.chip,
            "library": self.hello.get("library"),
            "cupti_version": self.hello.get("cupti_version"),
            "note": "CUPTI profiler host pass counts (range profiler), written by argus_lab.plan.live_passes",
            "sets": {",".join(sorted(k)): v for k, v in sorted(self._raw.items(), key=lambda kv: sorted(kv[0]))},
            "rejected": sorted(self._rejected),
        }
        try:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.cache_path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh, indent=1)
            os.replace(tmp, self.cache_path)
            self._dirty = False
        except OSError:
            return

    # -- counting -------------------------------------------------------------------------------------------------
    def _ask(self, metrics: frozenset[str]) -> int:
        if self._worker is None:
            self._worker = Worker(self.chip)
        answer = self._worker.ask(sorted(metrics))
        if "passes" in answer:
            return int(answer["passes"])
        rejected = set(answer.get("rejected", ()))
        if not rejected:
            msg = f"CUPTI could not schedule {sorted(metrics)} on {self.chip}: {answer.get('error')}"
            raise LiveUnavailable(msg)
        self._rejected |= rejected
        self._dirty = True
        return -1

    def cupti_passes(self, metrics: Iterable[str]) -> int:
        """CUPTI's pass count for the counters of ``metrics`` it knows (0 when none)."""
        key = frozenset(m for m in metrics if is_counter(m) and m not in self._rejected)
        while key:
            got = self._raw.get(key)
            if got is not None:
                return got
            n = self._ask(key)
            if n >= 0:
                self._raw[key] = n
                self._dirty = True
                return n
            key = frozenset(m for m in key if m not in self._rejected)
        return 0

    def unknown(self, metrics: Iterable[str]) -> list[str]:
        """The counters of ``metrics`` CUPTI refused (known after they were counted)."""
        return sorted(m for m in set(metrics) if is_counter(m) and m in self._rejected)

    def passes(self, metrics: Iterable[str]) -> int:
        key = frozenset(metrics)
        if not key:
            return 0
        try:
            live = ncu_passes(self.cupti_passes(key))
        except LiveUnavailable as exc:
            self.broken = self.broken or str(exc)
            return self.fallback.passes(key)
        rest = self.unknown(key)
        return max(live, self.fallback.passes(rest)) if rest else live

    def origin(self, metrics: Iterable[str]) -> str:
        """Where the count of ``metrics`` comes from, in a few words."""
        key = frozenset(metrics)
        self.passes(key)
        if self.broken and not self._is_cached(key):
            return f"{_kind(self.fallback)} (the live count failed: {self.broken})"
        rest = self.unknown(key)
        where = f"live: CUPTI profiler host API, {self.chip}"
        if not rest:
            return where
        return f"{where}, except {', '.join(rest)} (not known to CUPTI: {_kind(self.fallback)})"

    def _is_cached(self, metrics: Iterable[str]) -> bool:
        key = frozenset(m for m in metrics if is_counter(m) and m not in self._rejected)
        return not key or key in self._raw

    def known(self, metric: str) -> bool:
        """Whether CUPTI knows ``metric`` (or it needs no counters)."""
        if not is_counter(metric):
            return True
        try:
            self.cupti_passes([metric])
        except LiveUnavailable as exc:
            self.broken = self.broken or str(exc)
            return True
        return metric not in self._rejected

    @property
    def source(self) -> str:
        lib = self.hello.get("library", "?")
        version = cupti_version_text(int(self.hello.get("cupti_version", 0) or 0))
        chip = f"chip {self.chip} ({'given' if self.chip_given else self.hello.get('chip_from', '')}"
        chip += f", {self.hello['device']})" if self.hello.get("device") else ")"
        broken = f"; the live count failed during this plan ({self.broken})" if self.broken else ""
        return (
            f"live: CUPTI profiler host API of {lib} (CUPTI {version}), {chip}; "
            "ncu takes one pass more than CUPTI's schedule when that has more than one; "
            f"metrics CUPTI does not know are counted by the {_kind(self.fallback)}{broken}"
        )

    def close(self) -> None:
        """Stop the worker and save the cache (a later count starts a worker again)."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()
        self.save()


def _kind(model: PassModel) -> str:
    source = model.source
    return source.split(";")[0]


_OPENED: dict[tuple[str, ...], LivePassModel | str] = {}


def live_model(chip: str | None, fallback_for: Callable[[str], PassModel]) -> LivePassModel:
    """The live model for ``chip`` (``None``: the chip of CUDA device 0), with ``fallback_for(chip)`` counting what
    CUPTI does not know.  One per process and setting; :class:`LiveUnavailable` (also remembered) says why not."""
    key = (
        chip or "",
        os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        config.get(config.ARGUS_LIBCUPTI),
        config.get(config.ARGUS_CACHE_DIR),
    )
    got = _OPENED.get(key)
    if isinstance(got, str):
        raise LiveUnavailable(got)
    if got is not None:
        return got
    t0 = time.monotonic()
    try:
        worker = Worker(chip)
    except LiveUnavailable as exc:
        first = str(exc)
        if chip or "ended with status -" not in first:  # only a worker killed by a signal is retried
            _OPENED[key] = f"{first} (after {time.monotonic() - t0:.1f} s)"
            raise
        try:  # it died asking CUPTI for the chip: find the chip by compute capability instead
            worker = Worker(None, capability_only=True)
        except LiveUnavailable as exc2:
            _OPENED[key] = f"{first}; then {exc2} (after {time.monotonic() - t0:.1f} s)"
            raise LiveUnavailable(_OPENED[key]) from None
        worker.hello["chip_from"] = f"{worker.hello.get('chip_from')}; the first worker {first}"
    model = LivePassModel(worker, fallback_for(str(worker.hello["chip"])), chip_given=bool(chip))
    _OPENED[key] = model
    return model


def forget() -> None:
    """Close and forget every live model of this process (tests; a changed environment)."""
    for got in _OPENED.values():
        if isinstance(got, LivePassModel):
            got.close()
    _OPENED.clear()


__all__ = [
    "NON_COUNTER_PREFIXES",
    "WORKER_MODULE",
    "LivePassModel",
    "LiveUnavailable",
    "Worker",
    "cache_root",
    "cupti_version_text",
    "forget",
    "is_counter",
    "live_model",
    "ncu_passes",
]
