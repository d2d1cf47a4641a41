"""Runs' evidence as a trace Perfetto (ui.perfetto.dev, trace_processor) and chrome://tracing open.

The format is Chrome's Trace Event JSON (the "JSON Object Format"), written as Kineto writes it so that
argus_lab's own Kineto importer reads it back exactly (the round trip the tests check):

* times are integer ns written as microseconds with exactly three decimals, relative to the top-level
  ``baseTimeNanoseconds`` (a double holds such relative values exactly; epoch microseconds it would round);
* region instances are complete events (``ph: X``, ``cat: user_annotation``) on their process and thread (one
  process per rank: ``pid`` = the recorded pid, or ``rank`` when none was recorded), named after the region, with
  the path, instance id and index, repetition and the instance's values in ``args``.  The instances of one thread
  nest; ranges imported from another tool that do not (NVTX start/end ranges, say) go to overlap lanes of the
  thread, with the thread in ``args``, as GPU records do below;
* GPU records are complete events (``cat: kernel``, ``gpu_memcpy``, ``gpu_memset``) on a process per device
  (``pid`` = :data:`GPU_PID` + device) and a thread per stream, with the attribution class, weight, reason and the
  instance path in ``args``.  A record that starts before the previous one on its stream has ended and ends after
  it (programmatic dependent launch lets a kernel start while the one before it finishes) cannot nest on the
  stream's track: Perfetto would drop it, or move it to an overflow track with an import error.  It goes to an
  overlap lane of the stream instead, a track of its own named after the stream (:class:`Lanes`);
* each record's launching call becomes a ``cuda_runtime`` slice on its host thread, and a flow (``ph: s`` after
  the call's slice, ``ph: f`` with ``bp: e`` after the GPU record's; ``cat: ac2g`` as Kineto names it) links the
  two.  The order matters: Perfetto binds a flow event to the slice on top of its track when it reads the event,
  and at one timestamp it reads complete events before flows except zero-length ones, which keep their place in
  the file; a flow end written before its zero-length kernel would bind to the kernel before it;
* time samples (NVML, PM sampling) are counter events (``ph: C``) on their device's process, one track per signal;
  a NaN or infinite value (a sample or an instance value) is left out, as JSON cannot hold it;
* ``process_name`` / ``thread_name`` metadata events name every track;
* several runs go into one file, run ``k``'s process ids offset by ``k *`` :data:`RUN_PID_STRIDE` and its process
  names prefixed with its run id.

Events are written while the store's rows stream by, so a run of millions of kernels is held neither in Python nor
in DuckDB: each kind of row is read in windows of time of at most :data:`~argus_lab.report.trace_rows.WINDOW_ROWS`
rows (:func:`~argus_lab.report.trace_rows.windows`, counted in DuckDB), one sorted join per window, in the order the
file needs, fetched a batch at a time, and the JSON is written as they come to a temporary name renamed when whole.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from argus_lab.errors import ExportError
from argus_lab.report.names import demangle
from argus_lab.report.runs import check_known
from argus_lab.report.trace_rows import (
    INSTANCES,
    KERNELS,
    SAMPLES,
    copy_tables,
    launch_thread_names,
    rank_pids,
    stream_rows,
    trace_start,
    windows,
)
from argus_lab.store import Store

GPU_PID = 1_000_000
"""Process id of device 0's track (device d: ``GPU_PID + d``)."""

_CAT = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset"}


def us(ns: int) -> str:
    """Non-negative integer ns as microseconds with three decimals (exact)."""
    return f"{ns // 1000}.{ns % 1000:03d}"


RUN_PID_STRIDE = 10_000_000
"""Several runs in one trace: run ``k``'s process ids are offset by ``k * RUN_PID_STRIDE`` (run 0's are as stored)."""

LANE_TID_STEP = 100_000_000
"""Overlap lane ``n`` of a stream is the thread ``stream + n * LANE_TID_STEP`` (Perfetto reads ids as 32-bit)."""
MAX_LANE = 41
"""The last lane (``41 * LANE_TID_STEP`` plus a thread id stays under 2**32); an event that fits no earlier lane goes
there even if it overlaps (42 records open at once on one stream or thread: not seen in any recording)."""


class Lanes:
    """Places complete events, given per track in Perfetto's order (by start, longest first), on lanes where each
    nests or follows the others as Perfetto's importer requires: lane 0 is the track itself, lane ``n`` the first
    whose open slices the event neither partially overlaps nor outlasts."""

    def __init__(self) -> None:
        self._open: dict[tuple[int, int], list[list[tuple[int, int]]]] = {}

    def lane(self, track: tuple[int, int], start: int, dur: int) -> int:
        """The lane of an event of ``track`` from ``start`` lasting ``dur`` (ns)."""
        lanes = self._open.setdefault(track, [])
        for n, stack in enumerate(lanes):
            while stack:  # Perfetto closes what ended before the start (or at it, unless both have no length)
                s0, d0 = stack[-1]
                if s0 + d0 < start or (s0 + d0 == start and not (d0 == 0 and dur == 0)):
                    stack.pop()
                    continue
                break
            if not stack or start + dur <= stack[-1][0] + stack[-1][1] or n == MAX_LANE:
                stack.append((start, dur))
                return n
        lanes.append([(start, dur)])
        return len(lanes) - 1


def lane_tid(tid: int, lane: int) -> int:
    """The thread id of ``lane`` of the track of thread ``tid`` (lane 0: ``tid`` itself)."""
    return tid if lane == 0 else tid % LANE_TID_STEP + lane * LANE_TID_STEP


def lane_name(name: str, lane: int) -> str:
    """The name of ``lane`` of the track called ``name`` (lane 0: ``name`` itself)."""
    return f"{name} (overlap lane {lane})" if lane else name


def write_trace(store: Store, run_ids: str | Sequence[str], path: str | Path) -> dict[str, int]:
    """Write runs of ``store`` as one Chrome-trace JSON file; returns the counts of what was written.

    ``run_ids``: one run id or several (each run's tracks get their own processes, named after the run).  Raises
    :class:`~argus_lab.errors.ExportError` (a :class:`ValueError`) naming the store's latest runs when a run is not
    one of them (:func:`argus_lab.report.runs.check_known`).  The file is written under a
    temporary name beside ``path`` and renamed when whole (:func:`argus_lab.views.target.written_file`); the rows
    are read through :meth:`Store.read`, which takes the read again with a larger memory limit when DuckDB runs out.
    """
    from argus_lab.views.target import written_file

    runs = [run_ids] if isinstance(run_ids, str) else list(dict.fromkeys(run_ids))
    check_known(store, runs, ExportError)
    out = Path(path)
    with written_file(out) as tmp:
        return store.read(lambda con: _write_trace(con, runs, tmp, out.name))


def _write_trace(con: Any, runs: list[str], tmp: Path, name: str) -> dict[str, int]:
    base = trace_start(con, runs)
    counts = {"instances": 0, "kernels": 0, "flows": 0, "counters": 0}
    other = {"argus_run": runs[0]} if len(runs) == 1 else {"argus_runs": runs}
    with tmp.open("w", encoding="utf-8") as f:  # (a read taken again writes the file again from its start)
        f.write('{\n  "schemaVersion": 1,\n  "displayTimeUnit": "ns",\n')
        f.write(f'  "baseTimeNanoseconds": {base},\n  "otherData": {json.dumps(other)},\n')
        f.write('  "traceEvents": [\n')
        w = _Writer(f)
        for k, run_id in enumerate(runs):
            label = f"{run_id}: " if len(runs) > 1 else ""
            _write_run(con, w, run_id, base, k * RUN_PID_STRIDE, label, counts)
        f.write('\n  ],\n  "traceName": ' + json.dumps(name) + "\n}\n")
    return counts


def _write_run(con: Any, w: _Writer, run_id: str, base: int, off: int, label: str, counts: dict[str, int]) -> None:
    """The events of one run (process ids offset by ``off``, process names prefixed with ``label``)."""
    host_pid = {int(rk): int(pid or 0) or int(rk) for rk, pid in rank_pids(con, run_id)}
    launchers = launch_thread_names(con, run_id)
    tracks: dict[tuple[int, int], str] = {}
    procs: dict[int, str] = {}
    lanes = Lanes()
    for r in stream_rows(con, INSTANCES, run_id, windows(con, "region_instances", "start_ns", run_id)):
        pid = (int(r["pid"]) or int(r["rank"])) + off
        thread = int(r["tid"]) % (1 << 32)
        t0, dur = int(r["start_ns"]) - base, int(r["end_ns"]) - int(r["start_ns"])
        lane = lanes.lane((pid, thread), t0, max(dur, 0))  # > 0 only for imported ranges that do not nest
        tid = lane_tid(thread, lane)
        procs.setdefault(pid, f"{label}rank {r['rank']} (pid {r['pid']})")
        tracks.setdefault((pid, tid), lane_name(str(r["thread_name"] or f"thread {thread}"), lane))
        args: dict[str, Any] = {
            "path": r["path"],
            "instance_id": r["instance_id"],
            "instance_index": r["instance_index"],
            "repetition": r["repetition"],
        }
        if r["error"]:
            args["error"] = r["error"]
        if r["vals"]:
            args.update({str(k): v for k, v in dict(r["vals"]).items() if v is not None})
        if lane:
            args["thread"] = thread
        w.complete("user_annotation", str(r["name"]), pid, tid, t0, dur, args)
        counts["instances"] += 1
    for r in stream_rows(con, KERNELS, run_id, windows(con, "kernels", "start_ns", run_id)):
        dev = GPU_PID + int(r["device"]) + off
        stream = int(r["stream"])
        t0 = int(r["start_ns"]) - base
        dur = int(r["end_ns"]) - int(r["start_ns"])
        lane = lanes.lane((dev, stream), t0, max(dur, 0))
        gtid = lane_tid(stream % (1 << 32), lane)
        procs.setdefault(dev, f"{label}GPU {r['device']}")
        tracks.setdefault((dev, gtid), lane_name(f"stream {stream}", lane))
        args = {
            "class": r["class"],
            "weight": r["weight"],
            "region": r["path"],
            "reason": r["reason"],
            "correlation": r["correlation_id"],
            "kernel_key": r["kernel_key"],
            "device": r["device"],
            "stream": stream,
        }
        name = str(r["name"])
        shown = demangle(name)  # as Kineto's traces name kernels; the recorded name stays in the args
        if shown != name:
            args["mangled"] = name
        if r["kind"] == "kernel" and r["grid_x"] is not None:
            args["grid"] = [r["grid_x"], r["grid_y"], r["grid_z"]]
            args["block"] = [r["block_x"], r["block_y"], r["block_z"]]
        if r["kind"] != "kernel":
            args["bytes"] = r["bytes"]
        if r["candidates"] and r["candidates"] > 1:
            args["candidates"] = r["candidates"]
        api = r["api_start_ns"]
        flow = 0
        if api and int(r["api_end_ns"] or 0) > int(api):  # a zero-length row is a boundary probe's bound, no call
            hpid = host_pid.get(int(r["rank"]), int(r["rank"])) + off
            htid = int(r["thread_id"] or 0) % (1 << 32)
            procs.setdefault(hpid, f"{label}rank {r['rank']} (pid {hpid - off})")
            tracks.setdefault((hpid, htid), launchers.get((int(r["rank"]), htid), f"thread {htid}"))
            a0 = int(api) - base
            a1 = int(r["api_end_ns"] or api) - base
            w.complete("cuda_runtime", "launch", hpid, htid, a0, max(a1 - a0, 0),
                       {"correlation": r["correlation_id"]})  # fmt: skip
            counts["flows"] += 1
            flow = counts["flows"]
            w.flow("s", flow, hpid, htid, a0)
        w.complete(_CAT.get(str(r["kind"]), "kernel"), shown, dev, gtid, t0, dur, args)
        if flow:  # after the record's slice: it binds to the slice on top of the track
            w.flow("f", flow, dev, gtid, t0)
        counts["kernels"] += 1
    for r in stream_rows(con, SAMPLES, run_id, windows(con, "samples", "t_ns", run_id)):
        dev = GPU_PID + int(r["device"]) + off
        procs.setdefault(dev, f"{label}GPU {r['device']}")
        name = f"{r['signal']} ({r['unit']})" if r["unit"] else str(r["signal"])
        if not math.isfinite(float(r["value"])):  # JSON has no NaN: Perfetto would reject the file
            continue
        w.counter(name, dev, int(r["t_ns"]) - base, float(r["value"]))
        counts["counters"] += 1
    for pid, name in procs.items():
        w.meta("process_name", pid, 0, name)
    for (pid, tid), name in tracks.items():
        w.meta("thread_name", pid, tid, name)


class _Writer:
    """Writes events separated by commas (Kineto's layout: one event per line)."""

    def __init__(self, f: IO[str]) -> None:
        self.f = f
        self.first = True

    def _emit(self, text: str) -> None:
        if not self.first:
            self.f.write(",\n")
        self.first = False
        self.f.write("  " + text)

    def complete(self, cat: str, name: str, pid: int, tid: int, t: int, d: int, args: dict[str, Any]) -> None:
        a = json.dumps({k: v for k, v in args.items() if v is not None and _finite(v)}, default=str)
        self._emit(
            f'{{"ph": "X", "cat": "{cat}", "name": {json.dumps(name)}, "pid": {pid}, "tid": {tid}, '
            f'"ts": {us(max(t, 0))}, "dur": {us(max(d, 0))}, "args": {a}}}'
        )

    def flow(self, ph: str, fid: int, pid: int, tid: int, t: int) -> None:
        bind = ', "bp": "e"' if ph == "f" else ""
        self._emit(
            f'{{"ph": "{ph}", "id": {fid}, "pid": {pid}, "tid": {tid}, "ts": {us(max(t, 0))}, '
            f'"cat": "ac2g", "name": "launch"{bind}}}'
        )

    def counter(self, name: str, pid: int, t: int, value: float) -> None:
        self._emit(
            f'{{"ph": "C", "name": {json.dumps(name)}, "pid": {pid}, "tid": 0, "ts": {us(max(t, 0))}, '
            f'"args": {{"value": {json.dumps(value)}}}}}'
        )

    def meta(self, what: str, pid: int, tid: int, name: str) -> None:
        self._emit(
            f'{{"ph": "M", "name": "{what}", "pid": {pid}, "tid": {tid}, "args": {{"name": {json.dumps(name)}}}}}'
        )


def _finite(value: Any) -> bool:
    """False for a NaN or infinite float: ``json.dumps`` writes them as ``NaN``/``Infinity``, which is not JSON and
    which Perfetto's parser rejects (such an argument is left out)."""
    return not isinstance(value, float) or math.isfinite(value)


def write_parquet(store: Store, folder: str | Path, run_ids: Sequence[str] | None = None) -> list[Path]:
    """Every table of the store as ``<folder>/<table>.parquet`` (only ``run_ids``' rows where a table has runs).

    Views are written under their own name and the tables behind them are left out (``attributions.parquet``
    holds every attribution, stored or derived; ``instance_values.parquet`` every value with its run and signal).
    The folder is written under a temporary name beside ``folder`` and renamed when every table is in it
    (:func:`argus_lab.views.target.written_folder`: an earlier export there is replaced); the tables are read
    through :meth:`Store.read` (a larger memory limit when DuckDB runs out)."""
    from argus_lab.views.target import written_folder

    out = Path(folder)
    with written_folder(out) as tmp:
        names = store.read(lambda con: copy_tables(con, tmp, run_ids))
    return [out / n for n in names]


__all__ = ["GPU_PID", "LANE_TID_STEP", "RUN_PID_STRIDE", "Lanes", "lane_tid", "write_parquet", "write_trace"]
