"""Executes a plan: each planned run in this process or in a child process, every outcome stored.

* A run whose backends are all in-process collectors runs here (callables can only run here).
* A run with a launcher backend (``ncu``) runs the workload in a child process (``python -m argus_lab.run.child``)
  that the launcher wraps; the child writes Parquet shards which are read here and handed to the sink.
* A run that needs a GPU on a machine without one is stored as ``skipped`` with the reason.
* A run that fails (the workload raised, a backend could not start) or dies (the child was killed) is stored
  with its cause and whatever it finished; the other runs go on (``on_error="continue"``) or the plan stops
  (``on_error="stop"``; the remaining runs are stored as ``not run``).

Everything goes to a :class:`~argus_lab.run.sink.Sink` (the store side implements it) as soon as a run ends.  The
join is not run here: whoever drives the plan runs it where the runs end (:func:`argus_lab.app.measure.run_plan`).
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from argus_lab import config
from argus_lab.errors import ArgusError, PlanError, WorkloadError
from argus_lab.model.batches import rows
from argus_lab.model.statuses import FAILED, MEASURED
from argus_lab.plan.backends import BACKENDS
from argus_lab.plan.catalog import lookup
from argus_lab.plan.model import Plan, PlannedRun
from argus_lab.run import recovery, shards
from argus_lab.run.driver import drive
from argus_lab.run.loader import load_backend
from argus_lab.run.machine import environment, gpu_available, hostname, no_gpu_reason, versions
from argus_lab.run.progress import ChildWatch, KernelCounter, ProgressFn, RunClock, terminal
from argus_lab.run.protocols import RunContext
from argus_lab.run.recovery import ACTIVE_RUNS
from argus_lab.run.sink import Sink
from argus_lab.run.workload import Workload

OnError = Literal["continue", "stop"]


@dataclass(frozen=True)
class RunResult:
    """The outcome of one planned run."""

    run_id: str
    index: int
    status: str  # ok | partial (GPU backends left out) | failed | died | interrupted | skipped | not run
    cause: str
    reps_done: int
    seconds: float
    instances: int = 0
    """Region instances the run's evidence held (what its join reads per instance)."""


@dataclass(frozen=True)
class Execution:
    """The outcome of a whole plan."""

    session_id: str
    request_id: str
    results: tuple[RunResult, ...]

    @property
    def run_ids(self) -> tuple[str, ...]:
        """Ids of every run of the plan, in plan order."""
        return tuple(r.run_id for r in self.results)

    @property
    def instances(self) -> int:
        """Region instances the plan's runs stored, all runs together."""
        return sum(r.instances for r in self.results)

    @property
    def ok(self) -> bool:
        """Whether every executed run finished ok (skipped runs do not count as failures)."""
        return all(r.status in ("ok", "skipped", "partial") for r in self.results)


@functools.cache
def _session_id() -> str:
    return f"s-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def session_id() -> str:
    """The id of this process's session (every request this process measures belongs to it)."""
    return _session_id()


def session_columns(label: str = "") -> dict[str, list[Any]]:
    """The ``sessions`` row of this process (a store keeps the first row written for a session id)."""
    return {
        "session_id": [_session_id()],
        "created_ns": [time.time_ns()],
        "host": [hostname()],
        "user_name": [getpass.getuser()],
        "argus_version": [versions().get("argus_lab", "")],
        "cwd": [os.getcwd()],
        "label": [label],
    }


def execute(
    plan: Plan,
    workload: Workload,
    sink: Sink,
    *,
    on_error: OnError = "continue",
    progress: ProgressFn | None = None,
    timeout_s: float | None = None,
    launch: Sequence[str] = (),
    isolate: bool = False,
    count_kernels: KernelCounter | None = None,
) -> Execution:
    """Execute every run of ``plan`` on ``workload``, handing each run's evidence to ``sink`` as soon as it ends.

    ``launch`` is a command prefix that starts several processes (e.g. ``torchrun --nproc-per-node 2``); every
    run is then a child run started through it, each rank writes its own shards, and they are merged here.
    ``isolate``: every run is a child run in a fresh process (``python -m argus_lab.run.child``), so that nothing
    this process holds (another CUPTI client such as torch.profiler, state left by earlier code) touches the
    measurement; the workload must be one a child can run (a script, ``module:function``, a notebook cell).
    The join is left to the caller (it runs where the runs end: :func:`argus_lab.app.measure.run_plan`).
    ``count_kernels``: called with the id of each timing (CUPTI) run once it ended ``ok`` or ``partial``; the
    kernels it returns are the total the progress of the plan's later ncu runs counts down from.
    """
    if on_error not in ("continue", "stop"):
        msg = f"on_error must be 'continue' or 'stop', got {on_error!r}"
        raise PlanError(msg)
    if isolate and not workload.can_run_in_child:
        msg = (
            f"isolate=True runs every run in a fresh process, which cannot call {workload.describe()!r} (a callable "
            "defined in this process); pass the workload as a script path or as 'module:function'"
        )
        raise WorkloadError(msg)
    sessions = session_columns()
    session_id = sessions["session_id"][0]
    request_id = f"q-{uuid.uuid4().hex[:10]}"
    plan_id = f"p-{uuid.uuid4().hex[:10]}"
    sink.write(
        {
            "sessions": sessions,
            "requests": {
                "request_id": [request_id],
                "session_id": [session_id],
                "created_ns": [time.time_ns()],
                "text": [_request_text(plan)],
                "spec": [json.dumps(plan.request.to_dict(), sort_keys=True)],
            },
            "plans": {
                "plan_id": [plan_id],
                "request_id": [request_id],
                "text": [plan.explain()],
                "spec": [plan.to_json()],
            },
        }
    )
    results: list[RunResult] = []
    with sigterm_as_interrupt():
        _execute_runs(plan, workload, sink, results, session_id, request_id, plan_id, on_error, progress, timeout_s,
                      tuple(launch), isolate, count_kernels)  # fmt: skip
    return Execution(session_id, request_id, tuple(results))


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While a plan runs in this process's main thread, SIGTERM (a scheduler's or ``timeout``'s stop) ends it as
    Ctrl-C does: the current run stops ``interrupted`` with the repetitions it finished stored, then
    ``KeyboardInterrupt("SIGTERM")`` is raised.  A SIGTERM handler of the program's own is left in place."""
    installed = False
    try:
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) in (
            signal.SIG_DFL,
            None,
        ):
            signal.signal(signal.SIGTERM, _raise_sigterm)
            installed = True
    except (ValueError, OSError):  # not the main interpreter, or no signals here
        installed = False
    try:
        yield
    finally:
        if installed:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _raise_sigterm(signum: int, _frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: storing what was measured is not cut short
    raise KeyboardInterrupt("SIGTERM")


def _execute_runs(
    plan: Plan,
    workload: Workload,
    sink: Sink,
    results: list[RunResult],
    session_id: str,
    request_id: str,
    plan_id: str,
    on_error: OnError,
    progress: ProgressFn | None,
    timeout_s: float | None,
    launch: tuple[str, ...],
    isolate: bool,
    count_kernels: KernelCounter | None = None,
) -> None:
    stop = False
    counted: int | None = None  # the kernels the ncu runs will profile, counted in this plan's timing run
    for run in plan.runs:
        run_id = f"r-{uuid.uuid4().hex[:10]}"
        clock = RunClock(run, len(plan.runs), progress, counted=counted if "ncu" in run.backends else None)
        clock.start()
        ACTIVE_RUNS.add(run_id)  # recovery (by another thread's store) never takes a run this process executes
        try:
            _insert_run(sink, run, run_id, session_id, request_id, plan_id, workload)
            if stop:
                result = _finish(
                    sink, run_id, run.index, "not run", "an earlier run failed and on_error='stop'", 0, 0.0
                )
            else:
                result = _execute_run(run, run_id, workload, sink, timeout_s, launch, isolate, clock)
        finally:
            ACTIVE_RUNS.discard(run_id)
        results.append(result)
        clock.end(result.status)
        if count_kernels is not None and progress is not None and "cupti" in run.backends:
            counted = _counted(count_kernels, result) or counted
        if result.status == "interrupted":
            raise KeyboardInterrupt("SIGTERM" if "SIGTERM" in result.cause else "")
        if result.status in FAILED and on_error == "stop":
            stop = True


def _counted(count_kernels: KernelCounter, result: RunResult) -> int | None:
    """The kernels ``count_kernels`` counts in a timing run that ended with evidence (None: it did not, or the
    count failed: progress never stops a measurement)."""
    if result.status not in MEASURED:
        return None
    try:
        return count_kernels(result.run_id)
    except Exception:
        return None


def _request_text(plan: Plan) -> str:
    r = plan.request
    names = ",".join(s.name for s in r.signals)
    return f"signals={names} scope={str(r.scope) or '*'} repeat={r.repeat} warmup={r.warmup}"


def _insert_run(
    sink: Sink, run: PlannedRun, run_id: str, session_id: str, request_id: str, plan_id: str, workload: Workload
) -> None:
    sink.write(
        {
            "runs": {
                "run_id": [run_id],
                "session_id": [session_id],
                "request_id": [request_id],
                "plan_id": [plan_id],
                "plan_index": [run.index],
                "variant": [run.variant],
                "backends": [list(run.backends)],
                "signals": [list(run.signals)],
                "settings": [json.dumps({k: dict(v) for k, v in run.settings.items()}, sort_keys=True)],
                "workload": [workload.describe()],
                "origin": [workload.origin or None],
                "command": [""],
                "env": [json.dumps(environment())],
                "versions": [json.dumps(versions())],
                "status": ["running"],
                "cause": [""],
                "repetitions": [run.repeat],
                "warmup": [run.warmup],
                "reps_done": [0],
                "started_ns": [time.time_ns()],
                "host": [hostname()],
                "pid": [os.getpid()],
                "reason": [run.reason],
            }
        }
    )


def _finish(
    sink: Sink,
    run_id: str,
    index: int,
    status: str,
    cause: str,
    reps: int,
    secs: float,
    command: str | None = None,
    evidence: Mapping[str, Any] | None = None,
    folder_kept: bool = False,
) -> RunResult:
    """Hand the run's end (and its evidence) to the sink.  When the sink refuses the evidence, an in-process run is
    marked failed with the cause, if the store still takes that much; a child run (``folder_kept``) stays
    ``running`` so that recovery stores its run folder once the store can be written again."""
    try:
        sink.finish_run(
            run_id,
            status=status,
            cause=cause,
            reps_done=reps,
            ended_ns=time.time_ns(),
            command=command,
            evidence=evidence,
        )
    except ArgusError as exc:  # the store refused the evidence (a full disk): say so in the run, if it still can
        if evidence and not folder_kept:
            with contextlib.suppress(Exception):
                sink.finish_run(
                    run_id,
                    status="failed",
                    cause=f"{reps} repetition(s) were measured but their evidence could not be stored: {exc}",
                    reps_done=0,
                    ended_ns=time.time_ns(),
                    command=command,
                )
        raise
    return RunResult(run_id, index, status, cause, reps, secs, _instances(evidence))


def _instances(evidence: Mapping[str, Any] | None) -> int:
    """Rows of the evidence's ``region_instances`` (columns, an Arrow table from a child's shards, or batches)."""
    table = (evidence or {}).get("region_instances")
    if table is None:
        return 0
    num_rows = getattr(table, "num_rows", None)
    return int(num_rows) if num_rows is not None else rows(table)


def _execute_run(
    run: PlannedRun,
    run_id: str,
    workload: Workload,
    sink: Sink,
    timeout_s: float | None,
    launch: tuple[str, ...] = (),
    isolate: bool = False,
    clock: RunClock | None = None,
) -> RunResult:
    t0 = time.monotonic()
    if run.needs_gpu and not gpu_available():
        needing = [b for b in run.backends if BACKENDS[b].needs_gpu]
        rest = tuple(b for b in run.backends if b not in needing)
        lost = tuple(s for s in run.signals if lookup(s).backend in needing)
        cause = f"not collected: {', '.join(lost)} need {', '.join(needing)}, but {no_gpu_reason()}"
        if not [b for b in rest if b not in run.attached]:
            return _finish(sink, run_id, run.index, "skipped", cause, 0, 0.0)
        kept = tuple(s for s in run.signals if s not in lost)
        part = replace(run, backends=rest, signals=kept, attached=tuple(b for b in run.attached if b in rest))
        result = _execute_run(part, run_id, workload, sink, timeout_s, launch, isolate, clock)
        if result.status != "ok":
            return result
        done = _finish(sink, run_id, run.index, "partial", cause, result.reps_done, result.seconds)
        return replace(done, instances=result.instances)
    forced = (isolate or config.value(config.ARGUS_FORCE_CHILD) == "1") and workload.can_run_in_child
    if run.launcher is not None or launch or forced:
        return _child_run(run, run_id, workload, sink, timeout_s, t0, launch, clock)
    return _in_process_run(run, run_id, workload, sink, t0, clock)


def _in_process_run(
    run: PlannedRun, run_id: str, workload: Workload, sink: Sink, t0: float, clock: RunClock | None = None
) -> RunResult:
    folder = sink.run_folder(run_id)
    try:
        collectors = [load_backend(b) for b in run.backends]
    except ArgusError as exc:
        return _finish(sink, run_id, run.index, "failed", str(exc), 0, time.monotonic() - t0)
    outcome = drive(
        run_id,
        workload,
        collectors,
        run.signals,
        run.settings,
        run.repeat,
        run.warmup,
        folder,
        on_repetition=None if clock is None else clock.repetitions,
    )
    return _finish(
        sink,
        run_id,
        run.index,
        outcome.status,
        outcome.cause,
        outcome.reps_done,
        time.monotonic() - t0,
        command=f"in-process: {workload.describe()}",
        evidence=outcome.evidence,
    )


def child_command(spec_path: Path) -> list[str]:
    """The command that runs one child run."""
    return [sys.executable, "-m", "argus_lab.run.child", str(spec_path)]


def _child_run(
    run: PlannedRun,
    run_id: str,
    workload: Workload,
    sink: Sink,
    timeout_s: float | None,
    t0: float,
    launch: tuple[str, ...] = (),
    clock: RunClock | None = None,
) -> RunResult:
    folder = sink.run_folder(run_id)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        spec = {
            "run_id": run_id,
            "workload": workload.to_dict(),
            "collectors": [b for b in run.backends if not BACKENDS[b].launches_workload],
            "signals": list(run.signals),
            "settings": {k: dict(v) for k, v in run.settings.items()},
            "repeat": run.repeat,
            "warmup": run.warmup,
            "out_dir": str(folder),
        }
    except ArgusError as exc:
        return _finish(sink, run_id, run.index, "failed", str(exc), 0, time.monotonic() - t0)
    spec_path = folder / "spec.json"
    spec_path.write_text(json.dumps(spec, indent=1))
    cmd = launch_command(launch, child_command(spec_path))
    launcher: Any = None
    ctx = RunContext(run_id, tuple(run.signals), {}, folder)
    if run.launcher is not None:
        ctx = RunContext(run_id, tuple(run.signals), run.settings.get(run.launcher, {}), folder)
        try:
            launcher = load_backend(run.launcher)
            cmd = launcher.command(ctx, cmd)
        except ArgusError as exc:
            return _finish(sink, run_id, run.index, "failed", str(exc), 0, time.monotonic() - t0)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env[config.ARGUS_CHILD], env[config.ARGUS_RUN_ID] = "1", run_id
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    )
    log = folder / "child.log"
    interrupted = False
    with log.open("wb") as out:
        try:
            # a session of its own: Ctrl-C reaches this process, which stops the child's whole process group (the
            # child, and the workload under ncu or torchrun) and still ingests what it finished
            proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=workload.cwd,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            msg = f"cannot start {cmd[0]!r}: {exc.strerror}; check that the tool is installed and on PATH"
            return _finish(sink, run_id, run.index, "failed", msg, 0, time.monotonic() - t0)
        try:
            shards.write_proc(folder, proc.pid, hostname(), time.time_ns())
            code = _wait(proc, timeout_s, None if clock is None else ChildWatch(folder, clock))
        except KeyboardInterrupt:
            interrupted = True
            code = _stop(proc)
    ended = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
    got = recovery.collect(folder, ctx, launcher, ended=ended, interrupted=interrupted)
    return _finish(
        sink,
        run_id,
        run.index,
        got.status,
        got.cause,
        got.reps_done,
        time.monotonic() - t0,
        shlex.join(cmd),
        evidence=got.tables,
        folder_kept=True,
    )


STOP_GRACE_S = 20.0
"""How long a child stopped by Ctrl-C may take to write its shards and status before it is killed."""


POLL_S = 0.25
"""How often a child run's folder is looked at for progress while it runs."""


def _wait(proc: subprocess.Popen[bytes], timeout_s: float | None, watch: ChildWatch | None = None) -> int:
    """The child's exit status; past ``timeout_s`` its process group is killed (status ``-SIGKILL``).  With a
    ``watch``, the child's folder is looked at every :data:`POLL_S` for progress."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        step = left if watch is None else (POLL_S if left is None else min(POLL_S, left))
        try:
            code = proc.wait(timeout=None if step is None else max(step, 0.0))
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
                return -int(signal.SIGKILL)
            if watch is not None:
                watch.poll()
            continue
        if watch is not None:
            watch.poll()
        return code


def _stop(proc: subprocess.Popen[bytes]) -> int:
    """Stop a child after Ctrl-C: SIGINT to its process group (it ends ``interrupted`` and writes what it finished),
    SIGKILL after :data:`STOP_GRACE_S` or at a second Ctrl-C."""
    try:
        _signal_group(proc, signal.SIGINT)
        try:
            return proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    except KeyboardInterrupt:
        pass
    _signal_group(proc, signal.SIGKILL)
    return proc.wait()


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def launch_command(launch: Sequence[str], child: list[str]) -> list[str]:
    """``child`` started through a multi-process launcher (torchrun gets ``--no-python``: the child is a command)."""
    if not launch:
        return child
    prefix = list(launch)
    torchrun = Path(prefix[0]).name == "torchrun" or "torch.distributed.run" in prefix
    if torchrun and "--no-python" not in prefix and "--no_python" not in prefix:
        prefix.append("--no-python")
    return prefix + child


def terminal_progress() -> ProgressFn | None:
    """A tqdm bar per run on a terminal (:func:`argus_lab.run.progress.terminal`), nothing elsewhere."""
    return terminal() if sys.stderr.isatty() else None


def summarize(results: Sequence[RunResult]) -> str:
    """One line per run."""
    return "\n".join(
        f"run {r.index} ({r.run_id}): {r.status}" + (f" - {r.cause.splitlines()[0]}" if r.cause else "")
        for r in results
    )
