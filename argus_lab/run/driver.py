"""The run driver: executes a workload's repetitions under a region recorder and the run's collectors.

It is the part of a run that lives inside the measured process (this process for in-process runs, a child
process for tool-launched runs), so it stays light: no polars, plotly or ipywidgets.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from argus_lab.regions import NVTX_SCOPE_ENV, Recorder, Region
from argus_lab.run.protocols import Collector, Columns, Evidence, RunContext
from argus_lab.run.workload import Workload

AfterRepetition = Callable[[int, dict[str, list[Any]]], None]


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
) -> RunOutcome:
    """Run ``warmup + repeat`` repetitions and gather the evidence of every collector.

    The instances of each finished repetition are handed to ``after_repetition`` (a child process writes
    them to a shard there, so they survive if the process dies later).  A workload that raises ends the
    run as ``failed`` with the exception as cause; what was measured before is kept.
    """
    hooks = [h for c in collectors for h in c.hooks()]
    gate = None
    if NVTX_SCOPE_ENV in os.environ:  # an ncu run: the scope ranges tell ncu which instances to replay
        from argus_lab.run.nvtx_scope import gate_from_env

        gate = gate_from_env(warmup)
    recorder = Recorder(run_id, hooks, cpu_clock="host.cpu" in signals, nvtx_gate=gate)
    status, cause, done = "ok", "", 0
    started: list[Collector] = []
    sent = 0
    try:
        fn = workload.load()
        for c in collectors:
            ctx = RunContext(run_id, tuple(signals), settings.get(c.info.name, {}), out_dir)
            c.start(ctx)
            started.append(c)
        with recorder:
            for rep in range(warmup + repeat):
                recorder.repetition = rep
                try:
                    fn()
                except SystemExit as exc:
                    if exc.code not in (None, 0):
                        raise
                done = rep + 1
                if after_repetition is not None:
                    rows = recorder.columns(sent)
                    sent += len(rows["instance_id"])
                    after_repetition(rep, _columns(rows, run_id, warmup, recorder.rank, recorder.thread_names))
    except KeyboardInterrupt:
        status, cause = "interrupted", f"interrupted by the user after {done} of {warmup + repeat} repetitions"
    except BaseException as exc:  # the user's workload may raise anything; it is recorded, not lost
        status = "failed"
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        cause = f"{type(exc).__name__}: {exc} (after {done} of {warmup + repeat} repetitions)\n" + "".join(tb[-6:])
    finally:
        if after_repetition is not None and recorder.count() > sent:  # the partial repetition, if any
            rest = recorder.columns(sent)
            after_repetition(done, _columns(rest, run_id, warmup, recorder.rank, recorder.thread_names))
        for c in reversed(started):
            try:
                c.stop()
            except Exception as exc:
                status = "failed" if status == "ok" else status
                cause += f"\n{c.info.name} failed to stop: {exc}"
    instances = _columns(recorder.columns(), run_id, warmup, recorder.rank, recorder.thread_names)
    parts: list[Evidence] = [{"region_instances": instances, "regions": regions_columns(recorder.regions.values())}]
    for c in started:
        try:
            parts.append(c.evidence(instances))
        except Exception as exc:
            status = "failed" if status == "ok" else status
            cause += f"\n{c.info.name} could not produce its evidence: {exc}"
    return RunOutcome(status, cause.strip(), done, merge_evidence(parts))


def _columns(
    cols: dict[str, list[Any]], run_id: str, warmup: int, rank: int = 0, names: Mapping[int, str] | None = None
) -> dict[str, list[Any]]:
    n = len(cols["instance_id"])
    cols["run_id"] = [run_id] * n
    cols["rank"] = [rank] * n
    cols["thread_name"] = [(names or {}).get(t, "") for t in cols["thread_id"]]
    cols["warmup"] = [rep < warmup for rep in cols["repetition"]]
    return cols


def regions_columns(regions: Any) -> dict[str, list[Any]]:
    """Columns of the ``regions`` table for some :class:`~argus_lab.regions.Region` values."""
    rs: list[Region] = list(regions)
    return {
        "region_id": [r.region_id for r in rs],
        "name": [r.name for r in rs],
        "kind": [r.kind for r in rs],
        "module": [r.module for r in rs],
        "file": [r.file for r in rs],
        "line": [r.line for r in rs],
    }


def merge_evidence(parts: Sequence[Evidence]) -> Evidence:
    """Concatenate evidence tables of several collectors (columns absent in a part become ``None``)."""
    out: dict[str, dict[str, list[Any]]] = {}
    sizes: dict[str, int] = {}
    for part in parts:
        for table, cols in part.items():
            n = _nrows(cols)
            if n == 0:
                continue
            dest = out.setdefault(table, {})
            have = sizes.get(table, 0)
            for name in set(dest) | set(cols):
                col = dest.setdefault(name, [None] * have)
                col.extend(cols[name] if name in cols else [None] * n)
            sizes[table] = have + n
    return dict(out)


def _nrows(cols: Columns) -> int:
    return max((len(v) for v in cols.values()), default=0)
