"""What Perfetto's trace processor reads of an exported trace, and the same facts worked out from the file.

Perfetto's processor (``trace_processor_shell``, driven through PyPI's ``perfetto`` library) reports, for a trace
argus_lab exported: its import problems (the ``stats`` rows of severity ``error`` or ``data_loss``), the slices of
each thread track (count, total duration, sum of start times: integer ns), the flows (each by the category and
correlation id of the slices at its two ends), the counter tracks and the attribution class of each GPU slice.
:func:`from_file` works out the same facts from the file itself through :mod:`perfetto_rules` (the importer's rules
replayed), so a recorded processor report (``tests/data/perfetto``) can be compared with a fresh export where the
processor cannot run.

The cases are exports of evidence recorded on the H200 (CUPTI runs, the two-GPU study's run with programmatic
dependent launches, a torch.profiler trace of GPT-2, an Nsight Systems report), imported or joined here, and three
SYNTHETIC edge cases (a zero-length kernel, crossing host ranges, NaN samples); ``BROKEN_TRACE``, SYNTHETIC too, is
what an export must never be: the processor reports its problems.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfetto_rules import replay
from recorded_cases import CASES, DATA, load_case
from test_pgo_recorded import unpacked

from argus_lab import join
from argus_lab.app.importing import import_trace
from argus_lab.store import Store
from argus_lab.views.perfetto import write_trace

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
SPILLED = "slice_spill_overlapping_complete_event"
UNBOUND = "flow_no_enclosing_slice"
"""Perfetto's names (``stats``) for a slice that partially overlaps the open one and for a flow event read where its
track has no open slice; the replay's problems carry the same names."""
FACTS_FILE = DATA / "perfetto" / "processor_facts.json"

PROBLEMS_SQL = (
    "SELECT name, idx, value FROM stats WHERE value > 0 AND severity IN ('error', 'data_loss') ORDER BY name, idx"
)
TRACKS_SQL = """
SELECT p.pid AS pid, t.tid AS tid, count(*) AS n, sum(s.dur) AS dur, sum(s.ts) AS ts
FROM slice s JOIN thread_track tt ON s.track_id = tt.id JOIN thread t USING (utid) LEFT JOIN process p USING (upid)
GROUP BY 1, 2 ORDER BY 1, 2
"""
FLOWS_SQL = """
SELECT so.category AS out_cat, extract_arg(so.arg_set_id, 'args.correlation') AS out_corr,
       si.category AS in_cat, extract_arg(si.arg_set_id, 'args.correlation') AS in_corr, si.ts AS in_ts
FROM flow f JOIN slice so ON so.id = f.slice_out JOIN slice si ON si.id = f.slice_in
"""
COUNTERS_SQL = """
SELECT t.name AS name, count(*) AS n FROM counter c JOIN counter_track t ON c.track_id = t.id GROUP BY 1 ORDER BY 1
"""
CLASSES_SQL = (
    "SELECT extract_arg(arg_set_id, 'args.class') AS cls, count(*) AS n FROM slice "
    f"WHERE category IN {GPU_CATS} GROUP BY 1 ORDER BY 1"
)
THREADS_SQL = """
SELECT p.pid AS pid, t.tid AS tid, t.name AS name FROM thread t LEFT JOIN process p USING (upid)
WHERE t.name IS NOT NULL ORDER BY 1, 2
"""


def _digest(rows: list[tuple[Any, ...]]) -> str:
    return hashlib.sha256(json.dumps(sorted(rows)).encode()).hexdigest()[:16]


def _facts(
    problems: list[list[Any]],
    tracks: list[list[int]],
    flows: list[tuple[Any, ...]],
    counters: list[list[Any]],
    classes: list[list[Any]],
    threads: list[list[Any]],
) -> dict[str, Any]:
    good = sum(1 for o_cat, o_c, i_cat, i_c, _ in flows if o_cat == "cuda_runtime" and i_cat in GPU_CATS and o_c == i_c)
    return {
        "problems": problems,
        "slices": sum(t[2] for t in tracks),
        "tracks": sorted(tracks),
        "flows": len(flows),
        "flows_launch_to_record": good,
        "flows_digest": _digest(flows),
        "counters": sorted(counters),
        "classes": sorted(classes),
        "named_threads": len(threads),
        "threads_digest": _digest([tuple(t) for t in threads]),
    }


def from_processor(tp: Any) -> dict[str, Any]:
    """The facts as Perfetto's processor (a ``perfetto.trace_processor.TraceProcessor`` with the trace loaded)
    reports them."""

    def rows(sql: str, cols: tuple[str, ...]) -> list[list[Any]]:
        return [[getattr(r, c) for c in cols] for r in tp.query(sql)]

    flows = [tuple(r) for r in rows(FLOWS_SQL, ("out_cat", "out_corr", "in_cat", "in_corr", "in_ts"))]
    return _facts(
        rows(PROBLEMS_SQL, ("name", "idx", "value")),
        [[int(x) for x in r] for r in rows(TRACKS_SQL, ("pid", "tid", "n", "dur", "ts"))],
        [(o_cat, _int(o_c), i_cat, _int(i_c), int(ts)) for o_cat, o_c, i_cat, i_c, ts in flows],
        rows(COUNTERS_SQL, ("name", "n")),
        rows(CLASSES_SQL, ("cls", "n")),
        rows(THREADS_SQL, ("pid", "tid", "name")),
    )


def check_shell(shell: str) -> None:
    """Raise, saying how to get one, unless ``shell`` is an executable file."""
    if not os.access(shell, os.X_OK) or Path(shell).is_dir():
        raise FileNotFoundError(
            f"{shell!r} is not an executable trace_processor_shell: build one with "
            "`scripts/build-trace-processor PERFETTO_SOURCE` and pass BUILD_DIR/trace_processor_shell "
            "(--shell, or ARGUS_TRACE_PROCESSOR for the tests)"
        )


def processor(shell: str, trace: Path, load_timeout: int = 60) -> Any:
    """Perfetto's processor (``trace_processor_shell`` at ``shell``, through PyPI's ``perfetto``) with ``trace``
    loaded; the caller closes it."""
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig

    check_shell(shell)
    return TraceProcessor(trace=str(trace), config=TraceProcessorConfig(bin_path=shell, load_timeout=load_timeout))


def read_in_processor(shell: str, trace: Path) -> dict[str, Any]:
    """The facts of the exported file ``trace`` as Perfetto's processor at ``shell`` reads them."""
    tp = processor(shell, trace)
    try:
        return from_processor(tp)
    finally:
        tp.close()


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


def _ns(value: Any) -> int:
    """A ``ts``/``dur`` in microseconds -> ns, rounded as Perfetto rounds it (``llround(us * 1000)``)."""
    return round(float(value) * 1000)


def from_file(doc: dict[str, Any]) -> dict[str, Any]:
    """The same facts worked out from the exported file (through the replay of Perfetto's importer rules)."""
    found = replay(doc)
    ev = doc["traceEvents"]
    problems = [[kind, None, n] for kind, n in sorted(((SPILLED, len(found.overlapping)), (UNBOUND,
                len(found.unbound_flows)), ("pid_tid_out_of_range", len(found.out_of_range_ids)))) if n]  # fmt: skip
    per: dict[tuple[int, int], list[int]] = {}
    for e in ev:
        if e["ph"] == "X":
            t = per.setdefault((int(e["pid"]), int(e["tid"])), [0, 0, 0])
            t[0] += 1
            t[1] += _ns(e["dur"])
            t[2] += _ns(e["ts"])
    flows = []
    for fid, end in found.flow_end.items():
        if fid not in found.flow_start:
            continue  # an end whose start found no slice: no flow (the start is counted as a problem)
        a, b = ev[found.flow_start[fid]], ev[end]
        corr = (a.get("args") or {}).get("correlation"), (b.get("args") or {}).get("correlation")
        flows.append((a["cat"], _int(corr[0]), b["cat"], _int(corr[1]), _ns(b["ts"])))
    counters: Counter[str] = Counter()
    for e in ev:
        if e["ph"] == "C":
            for key in e["args"]:
                counters[f"{e['name']} {key}"] += 1
    classes = Counter(e["args"].get("class") for e in ev if e["ph"] == "X" and e["cat"] in GPU_CATS)
    threads = [[int(e["pid"]), int(e["tid"]), e["args"]["name"]] for e in ev if e["ph"] == "M"
               and e["name"] == "thread_name"]  # fmt: skip
    return _facts(
        problems,
        [[p, t, *v] for (p, t), v in per.items()],
        flows,
        [[k, n] for k, n in counters.items()],
        [[k, n] for k, n in classes.items()],
        threads,
    )


# -- the cases ------------------------------------------------------------------------------------------------------
ZERO_LENGTH_TRACE = {  # SYNTHETIC: two kernels on one stream, the second of no length, each with its launch
    "baseTimeNanoseconds": 1_000_000_000,
    "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "step", "pid": 7, "tid": 7, "ts": 1.0, "dur": 50.0, "args": {}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": 2.0, "dur": 1.0,
         "args": {"correlation": 11}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10.0, "dur": 5.0,
         "args": {"device": 0, "stream": 7, "correlation": 11}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": 4.0, "dur": 1.0,
         "args": {"correlation": 12}},
        {"ph": "X", "cat": "kernel", "name": "empty", "pid": 0, "tid": 7, "ts": 16.0, "dur": 0.0,
         "args": {"device": 0, "stream": 7, "correlation": 12}},
    ],
}  # fmt: skip
CROSSING_TRACE = {  # SYNTHETIC: two annotations of one thread that cross (as NVTX start/end ranges may)
    "baseTimeNanoseconds": 1_000_000_000,
    "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "load", "pid": 7, "tid": 7, "ts": 1.0, "dur": 9.0, "args": {}},
        {"ph": "X", "cat": "user_annotation", "name": "decode", "pid": 7, "tid": 7, "ts": 5.0, "dur": 10.0,
         "args": {}},
    ],
}  # fmt: skip

BROKEN_TRACE = {  # SYNTHETIC: what the export must never write; the processor's problems must show for it
    "traceEvents": [
        {"ph": "X", "cat": "region", "name": "a", "pid": 1, "tid": 1, "ts": 1.0, "dur": 10.0, "args": {}},
        {"ph": "X", "cat": "region", "name": "b", "pid": 1, "tid": 1, "ts": 5.0, "dur": 10.0, "args": {}},
        {"ph": "s", "cat": "launch", "name": "launch", "id": 3, "pid": 1, "tid": 2, "ts": 20.0},
        {"ph": "f", "bp": "e", "cat": "launch", "name": "launch", "id": 3, "pid": 1, "tid": 1, "ts": 2.0},
    ],
}  # fmt: skip
""""b" partially overlaps "a" on one thread; the flow starts on a thread without a slice."""


def _recorded(names: list[str]) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        st = Store(tmp / "rec.duckdb")
        for name in names:
            load_case(st, CASES / name, name)
        join.attribute_request(st, names)
        out = tmp / "export.json"
        write_trace(st, names, out)
        return out

    return build


def _pdl(tmp: Path) -> Path:
    out = tmp / "export.json"
    write_trace(Store(unpacked("ddp-m-b25", tmp)), "r-ead2cad0d1", out)
    return out


def _imported(source: Path | dict[str, Any]) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        if isinstance(source, dict):
            path = tmp / "source.json"
            path.write_text(json.dumps(source))
        else:
            path = source
        st = Store(tmp / "imp.duckdb")
        run = import_trace(path, st).run_id
        out = tmp / "export.json"
        write_trace(st, run, out)
        return out

    return build


def _nan(tmp: Path) -> Path:
    st = Store(tmp / "nan.duckdb")
    load_case(st, CASES / "nested", "nested")
    join.attribute_request(st, ["nested"])
    t = st.rows("SELECT min(start_ns) FROM region_instances WHERE run_id = 'nested'")[0][0]
    st.write({"samples": {"run_id": ["nested"] * 3, "device_id": [0] * 3, "signal": ["sys.power"] * 3,
                          "t_ns": [t + 1, t + 2, t + 3], "value": [float("nan"), float("inf"), 250.0],
                          "unit": ["W"] * 3}})  # fmt: skip
    out = tmp / "export.json"
    write_trace(st, "nested", out)
    return out


CASES_BUILT: dict[str, Callable[[Path], Path]] = {
    "nested": _recorded(["nested"]),
    "two_streams": _recorded(["two_streams"]),
    "backward": _recorded(["backward"]),
    "two_runs": _recorded(["nested", "two_streams"]),
    "ddp_pdl": _pdl,
    "kineto_gpt2": _imported(DATA / "traces" / "kineto_gpt2.json.gz"),
    "nsys_regions": _imported(DATA / "traces" / "nsys_regions.sqlite"),
    "zero_length": _imported(ZERO_LENGTH_TRACE),
    "crossing_ranges": _imported(CROSSING_TRACE),
    "nan_samples": _nan,
}
"""Each case: a function that writes its export into a folder and returns the file."""
