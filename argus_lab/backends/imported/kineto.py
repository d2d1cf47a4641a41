"""torch.profiler (Kineto) Chrome-trace JSON -> region instances and kernel evidence of one run.

What a Kineto trace holds, and what it becomes (``libkineto/src/output_json.cpp``):

* ``user_annotation`` complete events (``record_function``, ``ProfilerStep#N``) on a CPU thread (``pid`` = process,
  ``tid`` = thread) become region instances: the path from their nesting on that thread, the instance index per
  path in order of entry, module ``torch.profiler``;
* ``kernel``, ``gpu_memcpy`` and ``gpu_memset`` events (``pid`` = device, ``tid`` = stream; ``args.correlation``
  = CUPTI's correlation id) become ``kernels`` rows with their integer-ns times;
* ``cuda_runtime``/``cuda_driver`` events with the same ``correlation`` are the launching calls: their thread and
  start give the kernel's ``thread_id`` and ``api_start_ns``, and the innermost annotation open on that thread at
  that instant is the kernel's region instance (stored as the instance the launch carried, so the join classes it
  ``exact``: the correlation id ties kernel and launch as CUPTI's external correlation ties them in a measured
  run).  A launch on a thread with no annotation open carries none, and the join's own rules decide (temporal
  while one region is open elsewhere, e.g. autograd's backward thread; ambiguous; unattributed);
* ``gpu_user_annotation`` events (Kineto's GPU-side copy of an annotation, from the first to the last kernel it
  launched) are used as a cross-check only: the provenance counts the kernels whose GPU annotation names the
  region they were attributed to.

Times: Kineto writes ``ts``/``dur`` in microseconds with three decimals, relative to ``baseTimeNanoseconds``
(newer versions) or since the epoch (older).  They are parsed as decimals (DuckDB ``DECIMAL``), never as floats,
so every nanosecond survives; zero-length and sub-microsecond kernels are kept as they are.

Speed: the ``traceEvents`` array is copied to a file of its own while the file is hashed (gzip decompressed on
the way), read by DuckDB's JSON reader with typed columns (no Python object per event), and every table is built
by set-based SQL; only the annotations (far fewer than kernels) are nested in a Python loop.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from argus_lab.backends.imported import chrome_json
from argus_lab.backends.imported.common import (
    ImportedTrace,
    SourceInfo,
    arrow_of,
    artifact_rows,
    instance_id_base,
    nest,
    provenance_rows,
    region_rows,
)
from argus_lab.errors import ImportFormatError

MODULE = "torch.profiler"
"""The module of imported ``record_function`` regions (part of their identity)."""

_CATS = {
    "user_annotation": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_runtime": "launch",
    "cuda_driver": "launch",
    "runtime": "launch",
    "driver": "launch",
}

_ARGS = (
    'STRUCT(correlation BIGINT, "External id" BIGINT, device BIGINT, context BIGINT, stream BIGINT, '
    'grid BIGINT[], block BIGINT[], "registers per thread" BIGINT, bytes BIGINT, name VARCHAR)'
)
_COLUMNS = (
    "{ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', pid: 'VARCHAR', tid: 'VARCHAR', "
    "ts: '%s', dur: 'DECIMAL(18,3)', args: '%s'}"
)
_ARG_FIELDS = (
    ("corr", "correlation", "BIGINT"),
    ("ext", "External id", "BIGINT"),
    ("device", "device", "BIGINT"),
    ("context", "context", "BIGINT"),
    ("stream", "stream", "BIGINT"),
    ("grid", "grid", "BIGINT[]"),
    ("block", "block", "BIGINT[]"),
    ("regs", "registers per thread", "BIGINT"),
    ("nbytes", "bytes", "BIGINT"),
    ("arg_name", "name", "VARCHAR"),
)


# ------------------------------------------------------------------------------------------------------------
# events -> tables
# ------------------------------------------------------------------------------------------------------------
NARROW_TS = "DECIMAL(18,3)"
"""Relative times (Kineto with ``baseTimeNanoseconds``) fit 64-bit decimals: exact and ten times cheaper to convert."""
WIDE_TS = "DECIMAL(24,3)"
"""Epoch microseconds (older Kineto) need 128-bit decimals."""


def _stage(con: Any, events: list[str], base_ns: int, ts_type: str) -> None:
    cats = ", ".join(f"'{c}'" for c in _CATS)
    case = " ".join(f"WHEN '{c}' THEN '{k}'" for c, k in _CATS.items())

    def load(args_type: str, fields: str) -> None:
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE ev AS
            WITH raw AS (
                SELECT * FROM read_json(?, format = 'array', columns = {_COLUMNS % (ts_type, args_type)},
                                        maximum_object_size = 1073741824)
            )
            SELECT CASE WHEN ph = 'M' THEN 'meta' ELSE CASE lower(cat) {case} END END AS kind, ph, name,
                   coalesce(TRY_CAST(pid AS BIGINT), TRY_CAST(regexp_extract(pid, '(-?\\d+)', 1) AS BIGINT)) AS pid,
                   coalesce(TRY_CAST(tid AS BIGINT), TRY_CAST(regexp_extract(tid, '(-?\\d+)', 1) AS BIGINT)) AS tid,
                   CAST(ts * 1000 AS BIGINT) + {int(base_ns)} AS t, coalesce(CAST(dur * 1000 AS BIGINT), 0) AS d,
                   {fields}
            FROM raw
            WHERE (ph = 'X' AND lower(cat) IN ({cats})) OR (ph = 'M' AND name = 'thread_name')
            """,
            [events],
        )

    struct_fields = ", ".join(f'args."{src}" AS {dst}' for dst, src, _ in _ARG_FIELDS)
    try:
        load(_ARGS, struct_fields)
    except Exception as exc:  # an args value of an unexpected type: read args as JSON and cast each value
        if "duckdb" not in type(exc).__module__:
            raise
        json_fields = ", ".join(
            f"TRY_CAST(json_extract(args, '$.\"{src}\"') AS {typ}) AS {dst}"
            if typ != "VARCHAR"
            else f"json_extract_string(args, '$.\"{src}\"') AS {dst}"
            for dst, src, typ in _ARG_FIELDS
        )
        load("JSON", json_fields)


INSTANCES_SQL = """
SELECT pid, tid, t, t + d AS e, name FROM ev WHERE kind = 'annotation' AND t IS NOT NULL ORDER BY pid, tid, t
"""

LAUNCH_SQL = """
CREATE OR REPLACE TEMP TABLE launch AS
WITH l AS (
    SELECT corr, arg_max(pid, d) AS pid, arg_max(tid, d) AS tid, arg_max(t, d) AS t, max(d) AS d
    FROM ev WHERE kind = 'launch' AND corr IS NOT NULL GROUP BY corr
), seg AS (
    SELECT pid, thread_id::BIGINT AS tid, start_ns * 2 + 1 AS key, instance_id AS inner_id FROM inst
    UNION ALL
    SELECT pid, thread_id::BIGINT AS tid, end_ns * 2 AS key, parent_instance_id AS inner_id FROM inst
)
SELECT l.corr, l.pid, l.tid, l.t, l.d, nullif(s.inner_id, 0) AS instance_id
FROM l ASOF LEFT JOIN seg s ON s.pid = l.pid AND s.tid = l.tid AND l.t * 2 + 1 >= s.key
"""

KERNELS_SQL = """
CREATE OR REPLACE TEMP TABLE kern AS
WITH k AS (
    SELECT e.kind, e.name, e.t AS start_ns, e.t + e.d AS end_ns, coalesce(e.device, e.pid, 0)::INTEGER AS device_id,
           coalesce(e.context, 0)::INTEGER AS context_id, coalesce(e.stream, e.tid, 0) AS stream_id,
           coalesce(e.corr, 0) AS correlation_id, e.grid, e.block, e.regs, e.nbytes,
           l.tid AS thread_id, l.t AS api_start_ns, l.t + l.d AS api_end_ns, l.instance_id
    FROM ev e LEFT JOIN launch l ON l.corr = e.corr
    WHERE e.kind IN ('kernel', 'memcpy', 'memset') AND e.t IS NOT NULL
), shared AS (  -- correlation ids several records share (CUDA graph replays): numbered in start order
    SELECT device_id, context_id, correlation_id FROM k GROUP BY ALL HAVING count(*) > 1
), keyed AS (
    SELECT k.*, 0 AS nth FROM k ANTI JOIN shared s USING (device_id, context_id, correlation_id)
    UNION ALL
    SELECT k.*, row_number() OVER (PARTITION BY device_id, context_id, correlation_id ORDER BY start_ns, end_ns) - 1
    FROM k SEMI JOIN shared s USING (device_id, context_id, correlation_id)
)
SELECT $run AS run_id, kind, concat_ws('/', device_id, context_id, correlation_id, nth) AS kernel_key,
       correlation_id, instance_id, name, start_ns, end_ns, device_id, context_id, stream_id,
       grid[1]::INTEGER AS grid_x, grid[2]::INTEGER AS grid_y, grid[3]::INTEGER AS grid_z,
       block[1]::INTEGER AS block_x, block[2]::INTEGER AS block_y, block[3]::INTEGER AS block_z,
       regs::INTEGER AS registers, CASE WHEN kind = 'kernel' THEN 0 ELSE coalesce(nbytes, 0) END AS bytes,
       thread_id::UBIGINT AS thread_id, api_start_ns, api_end_ns, $rank::INTEGER AS rank
FROM keyed
"""

# The GPU-side annotation each kernel ran under (latest one started on its stream), against its attributed region.
CHECK_SQL = """
WITH g AS (
    SELECT pid, tid, t, t + d AS e,
           replace(regexp_replace(name, '^(ProfilerStep)#[0-9]+$', '\\1'), '/', '\u2215') AS rname
    FROM ev WHERE kind = 'gpu_annotation'
), k AS (
    SELECT kern.start_ns, kern.end_ns, kern.device_id, kern.stream_id, r.leaf
    FROM kern LEFT JOIN inst_names r ON r.instance_id = kern.instance_id WHERE kern.kind = 'kernel'
)
SELECT count(*) FILTER (WHERE g.rname IS NOT NULL AND g.e >= k.end_ns AND g.rname = k.leaf) AS agree,
       count(*) FILTER (WHERE g.rname IS NOT NULL AND g.e >= k.end_ns AND g.rname IS DISTINCT FROM k.leaf) AS differ,
       count(*) FILTER (WHERE g.rname IS NULL OR g.e < k.end_ns) AS unchecked
FROM k ASOF LEFT JOIN g ON g.pid = k.device_id AND g.tid = k.stream_id AND k.start_ns >= g.t
"""


CROSS_CHECK_MAX = 200_000
"""Above this many kernels the GPU-annotation cross-check is left out unless asked for (it costs an ASOF join)."""


def read(
    path: str | Path,
    run_id: str,
    *,
    workdir: str | None = None,
    threads: int | None = None,
    cross_check: bool | None = None,
) -> ImportedTrace:
    """Read a Kineto trace (``.json`` or ``.json.gz``) as the evidence of run ``run_id``.

    ``cross_check``: compare each kernel's GPU-side annotation with its attributed region (default: when the trace
    has at most :data:`CROSS_CHECK_MAX` kernels).  ``workdir``: where the event array is copied (default: the
    system's temporary folder).
    """
    import duckdb
    import pyarrow as pa

    p = Path(path)
    n_threads = int(threads or os.cpu_count() or 1)
    with chrome_json.event_parts(p, parts=n_threads, workdir=workdir) as src:
        meta = src.meta
        base_ns = int(meta.get("baseTimeNanoseconds") or 0)
        dist = meta.get("distributedInfo") or {}
        rank = int(dist.get("rank") or 0) if isinstance(dist, dict) else 0
        con = duckdb.connect()
        try:
            con.execute(f"SET threads = {n_threads}")
            con.execute("SET enable_progress_bar = false")
            _read_events(con, src, base_ns, str(p))
            return _build(con, p, run_id, meta, rank, base_ns, src.sha256, src.bytes, pa, cross_check)
        finally:
            con.close()


def _read_events(con: Any, src: chrome_json.Source, base_ns: int, shown: str) -> None:
    """Stage the events (table ``ev``): narrow decimals first, wide on overflow, one part if a cut was bad."""
    import duckdb

    attempts: list[tuple[list[str] | None, str]] = []
    files = [str(f) for f in src.parts]
    if base_ns:
        attempts.append((files, NARROW_TS))
    attempts.append((files, WIDE_TS))
    if len(files) > 1:
        attempts.append((None, WIDE_TS))
    last: Exception | None = None
    for parts, ts_type in attempts:
        try:
            _stage(con, parts if parts is not None else [str(chrome_json.whole_array(src))], base_ns, ts_type)
            return
        except duckdb.Error as exc:
            last = exc
    msg = f"{shown!r}: its trace events could not be read as Chrome-trace JSON ({last})"
    raise ImportFormatError(msg) from last


def _build(
    con: Any,
    p: Path,
    run_id: str,
    meta: dict[str, Any],
    rank: int,
    base_ns: int,
    sha: str,
    size: int,
    pa: Any,
    cross_check: bool | None,
) -> ImportedTrace:
    ann = con.execute(INSTANCES_SQL).fetchnumpy()
    names_arr = ann["name"]
    pid = np.asarray(ann["pid"], dtype=np.int64)
    tid = np.asarray(ann["tid"], dtype=np.int64)
    start = np.asarray(ann["t"], dtype=np.int64)
    end = np.asarray(ann["e"], dtype=np.int64)
    group = _group_ids(pid, tid)
    nst = nest(group, start, end, [str(x) for x in names_arr.tolist()], instance_id_base(rank))
    ids, region_cols = region_rows(nst.region_of, MODULE)
    thread_names = dict(
        ((int(a), int(b)), str(c))
        for a, b, c in con.execute(
            "SELECT pid, tid, any_value(arg_name) FROM ev WHERE kind = 'meta' AND tid IS NOT NULL GROUP BY ALL"
        ).fetchall()
        if a is not None
    )
    n = len(start)
    inst = pa.table(
        {
            "run_id": pa.array([run_id] * n, pa.string()),
            "instance_id": pa.array(nst.instance_id, pa.int64()),
            "region_id": pa.array([ids[r] for r in nst.region_of], pa.string()),
            "path": pa.array(nst.path, pa.string()),
            "instance_index": pa.array(nst.instance_index, pa.int32()),
            "parent_instance_id": pa.array(nst.parent_id, pa.int64()),
            "repetition": pa.array(np.zeros(n, dtype=np.int32), pa.int32()),
            "pid": pa.array(pid, pa.int32()),
            "thread_id": pa.array(tid.astype(np.uint64), pa.uint64()),
            "start_ns": pa.array(start, pa.int64()),
            "end_ns": pa.array(end, pa.int64()),
            "cpu_ns": pa.array(np.full(n, -1, dtype=np.int64), pa.int64()),
            "error": pa.array([""] * n, pa.string()),
            "warmup": pa.array(np.zeros(n, dtype=bool), pa.bool_()),
            "rank": pa.array(np.full(n, rank, dtype=np.int32), pa.int32()),
            "thread_name": pa.array(
                [thread_names.get((a, b), "") for a, b in zip(pid.tolist(), tid.tolist(), strict=True)], pa.string()
            ),
        }
    )
    con.register("inst_arrow", inst)
    con.execute("CREATE OR REPLACE TEMP TABLE inst AS SELECT * FROM inst_arrow")
    con.execute(
        "CREATE OR REPLACE TEMP TABLE inst_names AS SELECT instance_id, leaf FROM "
        "(SELECT unnest(?::BIGINT[]) AS instance_id, unnest(?::VARCHAR[]) AS leaf)",
        [nst.instance_id.tolist(), nst.region_of],
    )
    con.execute(LAUNCH_SQL)
    con.execute(KERNELS_SQL.replace("$run", "?").replace("$rank", "?"), [run_id, rank])
    kernels = arrow_of(con.sql("SELECT * FROM kern"))
    counts_rows = con.execute("SELECT kind, count(*) FROM ev GROUP BY kind").fetchall()
    events = {str(k): int(c) for k, c in counts_rows}
    k_stats = con.execute(
        "SELECT count(*) FILTER (WHERE kind = 'kernel'), count(*) FILTER (WHERE kind <> 'kernel'), "
        "count(*) FILTER (WHERE api_start_ns IS NULL), count(*) FILTER (WHERE instance_id IS NOT NULL), "
        "count(*) FILTER (WHERE end_ns = start_ns), count(*) FILTER (WHERE end_ns - start_ns < 1000), "
        "min(start_ns), max(end_ns) FROM kern"
    ).fetchone()
    checked = cross_check if cross_check is not None else int(k_stats[0] or 0) <= CROSS_CHECK_MAX
    check = con.execute(CHECK_SQL).fetchone() if checked else None
    bounds = con.execute("SELECT min(t), max(t + d) FROM ev WHERE t IS NOT NULL").fetchone()
    assert k_stats is not None and bounds is not None
    n_k, n_copy, no_launch, carried, zero, sub_us = (int(x or 0) for x in k_stats[:6])
    notes: list[str] = []
    if no_launch:
        notes.append(
            f"{no_launch} GPU record(s) have no cuda_runtime/cuda_driver event with their correlation id (the "
            "profiler dropped or did not trace the launch); the join places them by their GPU start time"
        )
    if nst.improper:
        notes.append(f"{nst.improper} annotation(s) overlapped an enclosing one without ending inside it")
    if not n:
        notes.append("the trace has no user_annotation (record_function) events: every kernel is unattributed")
    source = SourceInfo(str(p.resolve()), "kineto", "torch.profiler (Kineto)", sha, size, _tool_version(meta))
    settings = {
        "base_time_ns": base_ns,
        "rank": rank,
        "events_read": events,
        "kernels": n_k,
        "copies_and_sets": n_copy,
        "carried_instance": carried,
        "zero_length": zero,
        "sub_microsecond": sub_us,
        "launch_missing": no_launch,
        "annotation_nesting_improper": nst.improper,
        "gpu_user_annotation_check": (
            {"agree": int(check[0]), "differ": int(check[1]), "unchecked": int(check[2])}
            if check is not None
            else f"not run (more than {CROSS_CHECK_MAX} kernels; pass cross_check=True)"
        ),
        "rules": (
            "kernel -> cuda_runtime/cuda_driver event with its correlation id -> innermost user_annotation open "
            "on that thread at the launch (carried instance); launches outside every annotation left to the join"
        ),
        "device_properties": meta.get("deviceProperties", []),
    }
    tables = {
        "regions": pa.table(region_cols),
        "region_instances": inst,
        "kernels": kernels,
        "provenance": pa.table(
            provenance_rows(
                run_id,
                source,
                "cupti",
                settings,
                "measured by the profiler (CUPTI via Kineto), read from the file as integer ns",
            )
        ),
        "artifacts": pa.table(artifact_rows(run_id, source, f"Kineto trace, {n_k} kernels, {n} annotations")),
    }
    return ImportedTrace(
        run_id=run_id,
        source=source,
        tables=tables,
        counts={"region instances": n, "kernels": n_k, "copies/sets": n_copy},
        started_ns=int(bounds[0] or 0),
        ended_ns=int(bounds[1] or 0),
        notes=tuple(notes),
        settings=settings,
    )


def _group_ids(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    if len(pid) == 0:
        return np.zeros(0, dtype=np.int64)
    pairs = np.stack([pid, tid], axis=1)
    _, inv = np.unique(pairs, axis=0, return_inverse=True)
    return np.asarray(inv, dtype=np.int64).reshape(-1)


def _tool_version(meta: dict[str, Any]) -> str:
    sv = meta.get("schemaVersion")
    return f"Kineto trace schema {sv}" if sv is not None else "Kineto trace"
