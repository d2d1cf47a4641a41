"""Progress of a plan while it runs: what the runtime reports, and how it is shown.

The runtime reports a :class:`Tick` when a run starts, after each repetition (in this process from the driver's
loop; for a child run from the repetition shards it writes), for each kernel Nsight Compute profiled (from ncu's
log, as it writes it) and when a run ends.  A :class:`RunClock` keeps one run's times and estimates what is left
from the measured repetitions (a warm-up repetition is often slower: it is not used while a measured one is
known).  Shown as a tqdm bar per run on a terminal (:func:`terminal`), as one line that updates in place in a
notebook (argus_lab.faces.magics), in the JupyterLab panel (it reads the same line), or not at all (``quiet``).

tqdm is imported only when a terminal view is built; nothing here runs inside a measured child process.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from argus_lab.plan.model import PlannedRun

Event = Literal["start", "repetition", "profiled", "end"]


@dataclass(frozen=True)
class Tick:
    """Where one run of a plan stands."""

    event: Event
    run: PlannedRun
    runs: int
    """Runs in the plan."""
    reps_done: int
    reps_total: int
    """Repetitions of the run, warm-up included."""
    elapsed_s: float
    left_s: float | None = None
    """Estimated time left in this run (None until a repetition finished, or when it cannot be told)."""
    kernels: int = 0
    """Kernels Nsight Compute has profiled so far in this run (ncu runs)."""
    passes: int = 0
    """Replay passes of the kernel profiled last (ncu runs)."""
    status: str = ""
    """The run's status once it ended."""
    kernels_total: int | None = None
    """Kernels the ncu run is expected to profile (the plan's estimate from an earlier timing run of the workload;
    None: not known)."""

    @property
    def label(self) -> str:
        return f"run {self.run.index + 1}/{self.runs} [{', '.join(self.run.backends)}]"

    def text(self) -> str:
        """One line: ``argus: run 1/2 [ncu] repetition 3/6, 12/40 kernels profiled (9 passes each) - 4.1 s, about
        9.6 s left`` (``12 kernels of an unknown total`` when neither a timing run of the same plan nor an earlier one
        told how many there are)."""
        if self.event == "end":
            return f"argus: {self.label} {self.status or 'ended'} after {_seconds(self.elapsed_s)}"
        parts = [f"argus: {self.label}"]
        if self.event == "start":
            parts.append("starting")
        else:
            parts.append(f"repetition {min(self.reps_done + 1, self.reps_total)}/{self.reps_total}")
        if self.kernels:
            passes = f" ({self.passes} pass{'es' if self.passes != 1 else ''} each)" if self.passes else ""
            if self.kernels_total:
                of = f"{self.kernels}/{max(self.kernels_total, self.kernels)} kernels"
            else:  # no timing run (of this plan or an earlier one) told how many kernels it launches
                of = f"{self.kernels} kernel{'s' if self.kernels != 1 else ''} of an unknown total"
            parts[-1] += f", {of} profiled{passes}"
        tail = _seconds(self.elapsed_s)
        if self.left_s is not None:
            tail += f", about {_seconds(self.left_s)} left"
        return f"{' '.join(parts)} - {tail}"

    def to_json(self) -> dict[str, Any]:
        """The fields a notebook output carries for the JupyterLab panel (``application/vnd.argus.progress+json``)."""
        return {
            "text": self.text(),
            "event": self.event,
            "run": self.run.index,
            "runs": self.runs,
            "backends": list(self.run.backends),
            "reps_done": self.reps_done,
            "reps_total": self.reps_total,
            "elapsed_s": round(self.elapsed_s, 3),
            "left_s": None if self.left_s is None else round(self.left_s, 3),
            "kernels": self.kernels,
            "passes": self.passes,
            "kernels_total": self.kernels_total,
            "status": self.status,
        }


ProgressFn = Callable[[Tick], None]

KernelCounter = Callable[[str], "int | None"]
"""Given the id of a timing run that has just ended, the kernels the plan's ncu runs will profile, counted in its
evidence (:func:`argus_lab.report.census.scoped_kernels` over the store); ``None`` when it cannot be told."""


def _seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s"
    minutes, secs = divmod(round(s), 60)
    return f"{minutes} min {secs:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


@dataclass
class RunClock:
    """The times of one run: repetition ends and ncu's kernels, turned into ticks for ``show``."""

    run: PlannedRun
    runs: int
    show: ProgressFn | None
    t0: float = field(default_factory=time.monotonic)
    ends: list[float] = field(default_factory=list)
    kernels: int = 0
    passes: int = 0
    counted: int | None = None
    """The kernels this ncu run will profile as counted in the timing run of the same plan that ran before it
    (:data:`KernelCounter`); preferred to the plan's estimate."""

    @property
    def total(self) -> int:
        return self.run.repeat + self.run.warmup

    def _tick(self, event: Event, status: str = "") -> None:
        if self.show is None:
            return
        now = time.monotonic()
        done = len(self.ends)
        tick = Tick(event, self.run, self.runs, done, self.total, now - self.t0, self.left(now), self.kernels,
                    self.passes, status, self.kernels_total)  # fmt: skip
        try:
            self.show(tick)
        except Exception:  # a view that fails never stops the measurement
            self.show = None

    @property
    def kernels_total(self) -> int | None:
        """The kernels an ncu run is expected to profile: those counted in the timing run of the same plan
        (:attr:`counted`), else the plan's estimate (``replayed_kernels`` of its ncu settings, known when an earlier
        timing run of the workload gave a kernel census), else None."""
        if self.counted:
            return self.counted
        estimate = (self.run.settings.get("ncu") or {}).get("replayed_kernels")
        return max(1, round(estimate)) if isinstance(estimate, int | float) and estimate > 0 else None

    def left(self, now: float) -> float | None:
        """Time left: for an ncu run whose kernel total is known, the time per profiled kernel so far times the
        kernels left; else the mean of the measured repetitions so far (the warm-up's only while none is measured)
        times the repetitions left, less the time the current one has taken already."""
        total_kernels = self.kernels_total
        if self.kernels and total_kernels:
            return (now - self.t0) / self.kernels * max(total_kernels - self.kernels, 0)
        done = len(self.ends)
        if not done or done >= self.total:
            return None
        starts = [self.t0, *self.ends[:-1]]
        durations = [e - s for s, e in zip(starts, self.ends, strict=True)]
        measured = durations[self.run.warmup :] or durations
        per = sum(measured) / len(measured)
        return max(per * (self.total - done) - (now - self.ends[-1]), 0.0)

    def start(self) -> None:
        self.t0 = time.monotonic()
        self._tick("start")

    def repetitions(self, done: int) -> None:
        """``done`` repetitions have finished (a count that only grows)."""
        now = time.monotonic()
        while len(self.ends) < min(done, self.total):
            self.ends.append(now)
            self._tick("repetition")

    def profiled(self, kernels: int, passes: int) -> None:
        if kernels != self.kernels:
            self.kernels, self.passes = kernels, passes
            self._tick("profiled")

    def end(self, status: str) -> None:
        self._tick("end", status)


_PROFILED = re.compile(rb"==PROF== Profiling \".*?\" - \d+: .*? - (\d+) pass", re.M)


@dataclass
class ChildWatch:
    """Follows a child run's folder while it runs: repetition shards (``instances-<rep>.parquet``) and, under
    Nsight Compute, the kernels its log (``ncu.log``) says it profiled, read from where the last read ended."""

    folder: Path
    clock: RunClock
    log_name: str = "ncu.log"
    _offset: int = 0
    _kernels: int = 0
    _passes: int = 0
    _rest: bytes = b""

    def poll(self) -> None:
        try:
            reps = sum(1 for _ in self.folder.glob("instances-*.parquet"))
        except OSError:
            reps = 0
        self._read_log()
        if self._kernels:
            self.clock.profiled(self._kernels, self._passes)
        self.clock.repetitions(reps)

    def _read_log(self) -> None:
        path = self.folder / self.log_name
        try:
            with path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read(1 << 20)
        except OSError:
            return
        self._offset += len(chunk)
        data = self._rest + chunk
        cut = data.rfind(b"\n") + 1
        self._rest = data[cut:][-4096:]
        for m in _PROFILED.finditer(data[:cut]):
            self._kernels += 1
            self._passes = int(m.group(1))


def terminal(file: Any = None) -> ProgressFn:
    """A tqdm bar per run (repetitions; ncu's kernels and the time left as its postfix)."""
    from tqdm import tqdm

    out = file if file is not None else sys.stderr
    bars: dict[int, Any] = {}
    width = _fixed_width(out)

    def show(tick: Tick) -> None:
        i = tick.run.index
        if tick.event == "start":
            bars[i] = tqdm(total=tick.reps_total, desc=f"argus {tick.label}", unit="rep", file=out, leave=True,
                           ncols=width, nrows=None if width is None else 50, dynamic_ncols=width is None)  # fmt: skip
            return
        bar = bars.get(i)
        if bar is None:
            return
        bar.update(tick.reps_done - bar.n)
        of = f"{tick.kernels}/{tick.kernels_total} kernels profiled" if tick.kernels_total else ""
        extra = (of or f"{tick.kernels} kernels profiled (total unknown)") if tick.kernels else ""
        if tick.event == "end":
            bar.set_postfix_str(f"{tick.status}{', ' + extra if extra else ''}")
            bar.close()
            bars.pop(i, None)
        elif extra:
            bar.set_postfix_str(extra)

    return show


def _fixed_width(out: Any) -> int | None:
    """None when the terminal tells its size (tqdm follows it); 100 columns when it says 0 by 0 (a pseudo-terminal
    nobody sized, as under some CI runners), where tqdm would draw nothing (it hides bars below the last row)."""
    try:
        cols = os.get_terminal_size(out.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 100
    return None if cols else 100


def throttled(show: ProgressFn, every_s: float = 0.2) -> ProgressFn:
    """``show`` for every start and end, and for other ticks at most once per ``every_s``."""
    last = [0.0]

    def limited(tick: Tick) -> None:
        now = time.monotonic()
        if tick.event in ("start", "end") or now - last[0] >= every_s:
            last[0] = now
            show(tick)

    return limited


def lines(file: Any = None) -> ProgressFn:
    """One plain line per run start and end (for a log that is not a terminal)."""
    out = file if file is not None else sys.stderr

    def show(tick: Tick) -> None:
        if tick.event in ("start", "end"):
            print(tick.text(), file=out, flush=True)

    return show


__all__ = ["ChildWatch", "KernelCounter", "ProgressFn", "RunClock", "Tick", "lines", "terminal", "throttled"]
