"""The run driver: executes a workload's repetitions under a region recorder and the run's collectors.

It is the part of a run that lives inside the measured process (this process for in-process runs, a child
process for tool-launched runs), so it stays light: no polars, plotly or ipywidgets.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from argus_lab.model.batches import BATCH_ROWS, TableBatches, in_batches, rows
from argus_lab.regions import NVTX_SCOPE_ENV, Recorder, Region, RegionMarker, nvtx_scope_on, nvtx_state, source_name
from argus_lab.regions.capture import WORKERS_DIR, WorkerCapture, WorkerInstances
from argus_lab.regions.worker import stop_worker
from argus_lab.run.protocols import Collector, Columns, Evidence, RunContext
from argus_lab.run.workload import Workload

if TYPE_CHECKING:
    from argus_lab.run.nvtx_scope import ScopeGate

AfterRepetition = Callable[[int, Evidence], None]
"""Called with each finished repetition's evidence: its ``region_instances`` and the tables that collectors marked
``per_repetition`` derive from those instances alone (the host clocks' values)."""


@dataclass(frozen=True)
class RunOutcome:
    """What a driven run produced, whatever its status."""

    status: str  # ok | failed | interrupted
    cause: str
    reps_done: int
    evidence: Evidence


def drive(
    run_id: str,
    workload: Workload,
    collectors: Sequence[Collector],
    signals: Sequence[str],
    settings: Mapping[str, Mapping[str, Any]],
    repeat: int,
    warmup: int,
    out_dir: Path,
    after_repetition: AfterRepetition | None = None,
    on_repetition: Callable[[int], None] | None = None,
    after_workers: Callable[[Evidence], None] | None = None,
) -> RunOutcome:
    """Run ``warmup + repeat`` repetitions and gather the evidence of every collector.

    The evidence of each finished repetition is handed to ``after_repetition`` (a child process writes it to a
    shard there, so it survives if the process dies later): the instances, and the values of the collectors that
    derive them from the instances alone (``per_repetition = True``, the host backend), which are then not given
    again at the end.  A workload that raises ends the run as ``failed`` with the exception as cause; what was
    measured before is kept.  ``on_repetition(done)`` is told after each repetition (progress).  A process
    forked by the workload that returns into this loop exits here (:func:`_leave_forked_child`): it never records
    into, nor reports, the parent's run.

    Processes the workload starts while it runs (DataLoader workers, ``multiprocessing`` children, forks) record
    their own regions into the run folder's ``workers/`` spool (:mod:`argus_lab.regions.worker`); they are merged
    into the run's instances when it stops, and handed to ``after_workers`` as well (a child process writes them to
    a shard there, since its instances go through ``after_repetition``).
    """
    hooks = [h for c in collectors for h in c.hooks()]
    gate = None
    if "ncu" in settings or NVTX_SCOPE_ENV in os.environ:  # an ncu run: scope ranges tell ncu what to replay
        from argus_lab.run.nvtx_scope import gate_of_run

        gate = gate_of_run(settings, warmup)
        if gate is not None:
            nvtx_scope_on()  # from the spec: not only when the environment variable reached this process
    recorder = Recorder(run_id, hooks, cpu_clock="host.cpu" in signals, nvtx_gate=gate)
    capture = WorkerCapture(Path(out_dir) / WORKERS_DIR, run_id, cpu_clock=recorder.cpu_clock)
    status, cause, done = "ok", "", 0
    started: list[Collector] = []
    per_rep: list[Collector] = []
    sent = 0

    def hand_over(rep: int, rows: dict[str, Any]) -> None:
        assert after_repetition is not None
        cols = _columns(rows, run_id, warmup, recorder.rank, recorder.thread_names_of)
        after_repetition(rep, merge_evidence([{"region_instances": cols}, *(c.evidence(cols) for c in per_rep)]))

    try:
        fn = workload.load()
        implicit = _implicit_marker(workload)
        for c in collectors:
            ctx = RunContext(run_id, tuple(signals), settings.get(c.info.name, {}), out_dir)
            c.start(ctx)
            started.append(c)
            if after_repetition is not None and getattr(c, "per_repetition", False):
                per_rep.append(c)
        stop_worker()  # a process started by another run's workload measures its own run now
        with recorder, capture:
            for rep in range(warmup + repeat):
                recorder.repetition = rep
                capture.note_repetition(rep)
                if rep == 0 and implicit is not None:
                    fn = _first_repetition(recorder, fn, implicit)
                else:
                    _call(fn, recorder)
                done = rep + 1
                if after_repetition is not None:
                    rows = recorder.columns(sent)
                    sent += len(rows["instance_id"])
                    hand_over(rep, rows)
                if on_repetition is not None:
                    on_repetition(done)
    except KeyboardInterrupt as exc:
        how = "by SIGTERM" if exc.args and exc.args[0] == "SIGTERM" else "by the user"
        status, cause = "interrupted", f"interrupted {how} after {done} of {warmup + repeat} repetitions"
    except BaseException as exc:  # the user's workload may raise anything; it is recorded, not lost
        status = "failed"
        cause = f"{type(exc).__name__}: {exc} (after {done} of {warmup + repeat} repetitions)\n" + user_traceback(exc)
    finally:
        if after_repetition is not None and recorder.count() > sent:  # the partial repetition, if any
            hand_over(done, recorder.columns(sent))
        for c in reversed(started):
            try:
                c.stop()
            except Exception as exc:
                status = "failed" if status == "ok" else status
                cause += f"\n{c.info.name} failed to stop: {exc}"
    if gate is not None:
        _write_scope_state(out_dir, gate)
    instances = _columns(recorder.columns(), run_id, warmup, recorder.rank, recorder.thread_names_of)
    regions = recorder.regions
    workers = capture.collect(lambda: _as_list(instances["path"]), recorder.rank)
    if workers is not None:
        own = _columns(workers.columns, run_id, warmup, recorder.rank, lambda *_: workers.columns["thread_name"])
        if after_workers is not None:
            after_workers(merge_evidence([{"region_instances": own}, *(c.evidence(own) for c in per_rep)]))
        instances = _with_workers(instances, own)
        regions = {r.region_id: r for r in workers.regions} | regions
        cause += _unreadable(workers)
    parts: list[Evidence] = [{"region_instances": instances, "regions": regions_columns(regions.values())}]
    for c in started:
        if c in per_rep:  # already handed over with each repetition
            continue
        try:
            parts.append(c.evidence(instances))
        except Exception as exc:
            status = "failed" if status == "ok" else status
            cause += f"\n{c.info.name} could not produce its evidence: {exc}"
    return RunOutcome(status, cause.strip(), done, streamed(merge_evidence(parts)))


def _write_scope_state(out_dir: Path, gate: ScopeGate) -> None:
    """What the NVTX scope gate of an ncu run saw (never fails the run: it is a diagnostic)."""
    from argus_lab.run.nvtx_scope import STATE_FILE

    state = {
        **nvtx_state(),
        "scope": str(gate.scope),
        "scope_from": gate.source,
        "warmup": gate.warmup,
        "opened_in": gate.opened[1],
        "opened_out": gate.opened[0],
    }
    try:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / STATE_FILE).write_text(json.dumps(state))
    except OSError:
        pass


def _leave_forked_child(exc: BaseException | None) -> None:
    """End a process forked by the workload that returned into the measurement loop.

    Its recorder was switched off at the fork (:attr:`Recorder.forked`); letting it go on would run the parent's
    remaining repetitions a second time and hand the parent's run to the store from two processes, while the
    parent may wait for it.  It exits at once, with status 0 (1 if the workload raised in it)."""
    print(
        f"argus_lab: process {os.getpid()} was forked by the measured workload and returned into the measurement "
        "loop; it exits here without recording (end forked children with os._exit(), or use multiprocessing)",
        file=sys.stderr,
        flush=True,
    )
    sys.stdout.flush()
    stop_worker()  # what it recorded as a started process is written first (os._exit runs no exit hook)
    os._exit(0 if exc is None or (isinstance(exc, SystemExit) and exc.code in (None, 0)) else 1)


def _call(fn: Callable[[], None], recorder: Recorder) -> None:
    """One repetition of the workload; a process it forked that returns here leaves (:func:`_leave_forked_child`)."""
    try:
        fn()
    except SystemExit as exc:
        if recorder.forked:
            _leave_forked_child(exc)
        if exc.code not in (None, 0):
            raise
    except BaseException as exc:
        if recorder.forked:
            _leave_forked_child(exc)
        raise
    if recorder.forked:
        _leave_forked_child(None)


def _implicit_marker(workload: Workload) -> RegionMarker | None:
    """The marker of the workload's implicit region (None when it has none)."""
    name = workload.implicit_region
    if not name:
        return None
    if workload.kind == "script":
        module, file = os.path.splitext(os.path.basename(workload.target))[0], workload.target
    elif workload.kind == "function":
        module, file = workload.target.partition(":")[0], workload.target
    else:
        module, file = "__main__", workload.label or workload.kind
    return RegionMarker(Region(name=name, kind="host", module=module, file=file, line=1))


def _first_repetition(recorder: Recorder, fn: Callable[[], None], marker: RegionMarker) -> Callable[[], None]:
    """Run the first repetition; when it recorded no region instance, record it as one instance of the implicit
    region (timed here, around the call) and return ``fn`` wrapped in that region for the other repetitions."""
    before = recorder.count()
    t0, c0 = time.time_ns(), time.thread_time_ns()
    error = ""
    try:
        _call(fn, recorder)
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        if recorder.count() == before:
            cpu = time.thread_time_ns() - c0 if recorder.cpu_clock else -1
            recorder.record_span(marker, t0, time.time_ns(), cpu, error)
            implicit = True
        else:
            implicit = False
    if not implicit:
        return fn

    def in_region() -> None:
        with marker:
            _call(fn, recorder)

    return in_region


def user_traceback(exc: BaseException, limit: int = 8) -> str:
    """The traceback of ``exc`` in the user's code: argus_lab's and runpy's frames left out, the last ``limit``
    frames kept (file and line of each; files named by :func:`argus_lab.regions.source_name`)."""
    frames = [
        traceback.FrameSummary(source_name(f.filename), f.lineno, f.name, lookup_line=False, line=f.line)
        for f in traceback.extract_tb(exc.__traceback__)
        if not _internal(f.filename)
    ]  # a notebook kernel's temporary cell file reads as `cell [4] of quickstart.ipynb`
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames[-limit:])]
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _internal(filename: str) -> bool:
    name = os.path.abspath(filename) if filename and not filename.startswith("<") else filename
    return (
        name.startswith(_PACKAGE + os.sep)
        or os.path.basename(name) == "runpy.py"
        or name in ("<frozen runpy>", "<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
    )


def _columns(
    cols: dict[str, Any],
    run_id: str,
    warmup: int,
    rank: int = 0,
    names: Callable[[Sequence[int], Sequence[int]], list[str]] | None = None,
) -> dict[str, Any]:
    """The recorder's columns (:meth:`Recorder.columns`) completed into ``region_instances`` columns: the run, rank,
    thread name and warm-up of each instance, as arrays (no Python object per instance)."""
    import numpy as np

    from argus_lab.regions import instance_columns as ic

    n = len(cols["instance_id"])
    cols["run_id"] = ic.constant(run_id, n)
    cols["rank"] = np.full(n, rank, np.int32)
    tids, starts = np.asarray(cols["thread_id"], np.int64), np.asarray(cols["start_ns"], np.int64)
    cols["thread_name"] = ic.looked_up(names, tids, starts) if names is not None else ic.constant("", n)
    cols["warmup"] = np.asarray(cols["repetition"], np.int64) < warmup
    return cols


def _with_workers(instances: dict[str, Any], workers: dict[str, Any]) -> dict[str, list[Any]]:
    """The run's instances followed by those of the processes it started (columns as lists: whatever the recorder
    handed, list or array, is converted)."""
    return {name: _as_list(col) + _as_list(workers[name]) for name, col in instances.items()}


def _unreadable(workers: WorkerInstances) -> str:
    if not workers.unreadable:
        return ""
    return (
        f"\n{len(workers.unreadable)} region chunk file(s) of started processes could not be read and were left "
        f"out: {'; '.join(workers.unreadable[:3])}"
    )


def regions_columns(regions: Any) -> dict[str, list[Any]]:
    """Columns of the ``regions`` table for some :class:`~argus_lab.regions.Region` values."""
    rs: list[Region] = list(regions)
    return {
        "region_id": [r.region_id for r in rs],
        "name": [r.name for r in rs],
        "kind": [r.kind for r in rs],
        "module": [r.module for r in rs],
        "file": [source_name(r.file) for r in rs],
        "line": [r.line for r in rs],
    }


def merge_evidence(parts: Sequence[Evidence]) -> Evidence:
    """Concatenate evidence tables of several collectors (columns absent in a part become ``None``).  A table only
    one part gives is passed on as it is (its columns may be numpy or Arrow arrays: the kernel records of a long run
    are never turned into a Python object per value)."""
    givers: dict[str, int] = {}
    for part in parts:
        for table, cols in part.items():
            if _nrows(cols):
                givers[table] = givers.get(table, 0) + 1
    out: dict[str, Any] = {}
    lists: dict[str, dict[str, list[Any]]] = {}
    sizes: dict[str, int] = {}
    for part in parts:
        for table, cols in part.items():
            n = _nrows(cols)
            if n == 0:
                continue
            if givers[table] == 1:
                out[table] = cols
                continue
            if isinstance(cols, TableBatches):  # several givers: the rows as lists, to be concatenated
                cols = cols.to_table().to_pydict()
            dest = lists.setdefault(table, {})
            have = sizes.get(table, 0)
            for name in set(dest) | set(cols):
                col = dest.setdefault(name, [None] * have)
                col.extend(_as_list(cols[name]) if name in cols else [None] * n)
            sizes[table] = have + n
    out.update(lists)
    return out


def streamed(evidence: Evidence) -> Evidence:
    """Tables of at least :data:`BATCH_ROWS` rows given as columns made :class:`TableBatches`: the store writes them
    under its bounded write memory, a batch at a time (a run's million instances and their host values)."""
    return {
        table: in_batches(cols) if not isinstance(cols, TableBatches) and rows(cols) >= BATCH_ROWS else cols
        for table, cols in evidence.items()
    }


def _as_list(values: Any) -> list[Any]:
    """A column as a list of Python values (numpy and Arrow arrays converted, lists as they are)."""
    if hasattr(values, "to_pylist"):
        return list(values.to_pylist())
    if hasattr(values, "tolist"):
        return list(values.tolist())
    return list(values)


def _nrows(cols: Columns | TableBatches) -> int:
    return rows(cols)
