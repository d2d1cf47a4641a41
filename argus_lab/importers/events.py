"""Staged trace events -> the tables of one run (shared by the Kineto and Nsight Systems importers).

An importer stages its events in a DuckDB table ``ev`` with the columns ``kind`` (``annotation``,
``gpu_annotation``, ``kernel``, ``memcpy``, ``memset``, ``launch``, ``meta``), ``name``, ``pid``, ``tid``, ``t`` and
``d`` (integer ns), ``corr`` (correlation id), ``device``, ``context``, ``stream``, ``grid``/``block`` (lists),
``regs``, ``nbytes`` and ``arg_name`` (thread names of ``meta`` rows); :func:`build` then

* nests the annotations of each thread into region instances (:func:`~argus_lab.importers.common.nest`),
* finds each GPU record's launching call by correlation id (the longest call per id) and the innermost instance
  open on that call's thread at its start (ASOF over each thread's innermost-instance timeline, exits before
  entries at an equal nanosecond, as the join orders them): the instance the launch carried,
* keys the records as CUPTI records are keyed (``device/context/correlation/n``),
* optionally cross-checks kernels against the GPU-side annotations (``gpu_annotation`` rows).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from argus_lab.backends.threads import role_of
from argus_lab.importers.common import (
    MAX_DEPTH,
    MAX_PATH_CHARS,
    ImportedTrace,
    SourceInfo,
    arrow_of,
    artifact_rows,
    instance_id_base,
    nest,
    provenance_rows,
    region_rows,
)
from argus_lab.model.innermost import entry_key_sql, exit_key_sql, moment_key_sql

INSTANCES_SQL = """
SELECT pid, tid, t, t + d AS e, name FROM ev WHERE kind = 'annotation' AND t IS NOT NULL ORDER BY pid, tid, t
"""

# each correlation id's launching call: the longest call with that id (``{calls}``: the aggregation, or, when no id
# repeats -- the usual case -- the calls themselves)
# the innermost instance at each launch: the rule of argus_lab.model.innermost, as the join applies it
LAUNCH_SQL = (
    """
CREATE OR REPLACE TEMP TABLE launch AS
WITH l AS ({calls}), seg AS (
    SELECT pid, thread_id::BIGINT AS tid, ENTRY_KEY AS key, instance_id AS inner_id FROM inst
    SEMI JOIN inst_opens USING (instance_id)
    UNION ALL
    SELECT pid, thread_id::BIGINT AS tid, EXIT_KEY AS key, parent_instance_id AS inner_id FROM inst
    SEMI JOIN inst_closes USING (instance_id)
)
SELECT l.corr, l.pid, l.tid, l.t, l.d, nullif(s.inner_id, 0) AS instance_id
FROM l ASOF LEFT JOIN seg s ON s.pid = l.pid AND s.tid = l.tid AND MOMENT_KEY >= s.key
""".replace("ENTRY_KEY", entry_key_sql("start_ns"))
    .replace("EXIT_KEY", exit_key_sql("end_ns"))
    .replace("MOMENT_KEY", moment_key_sql("l.t"))
)
LAUNCH_CALLS = "SELECT corr, pid, tid, t, d FROM ev WHERE kind = 'launch' AND corr IS NOT NULL"
LAUNCH_LONGEST = (
    "SELECT corr, arg_max(pid, d) AS pid, arg_max(tid, d) AS tid, arg_max(t, d) AS t, max(d) AS d "
    "FROM ev WHERE kind = 'launch' AND corr IS NOT NULL GROUP BY corr"
)
LAUNCH_IDS = "SELECT corr FROM ev WHERE kind = 'launch' AND corr IS NOT NULL"

KERNELS_SQL = """
CREATE OR REPLACE TEMP TABLE kern AS
WITH k AS (
    SELECT e.kind, e.name, e.t AS start_ns, e.t + e.d AS end_ns, coalesce(e.device, e.pid, 0)::INTEGER AS device_id,
           coalesce(e.context, 0)::INTEGER AS context_id, coalesce(e.stream, e.tid, 0) AS stream_id,
           coalesce(e.corr, 0) AS correlation_id, e.grid, e.block, e.regs, e.nbytes,
           l.tid AS thread_id, l.t AS api_start_ns, l.t + l.d AS api_end_ns, l.instance_id
    FROM ev e LEFT JOIN launch l ON l.corr = e.corr
    WHERE e.kind IN ('kernel', 'memcpy', 'memset') AND e.t IS NOT NULL
), keyed AS ({keyed})
SELECT $run AS run_id, kind, concat_ws('/', device_id, context_id, correlation_id, nth) AS kernel_key,
       correlation_id, instance_id, name, start_ns, end_ns, device_id, context_id, stream_id,
       grid[1]::INTEGER AS grid_x, grid[2]::INTEGER AS grid_y, grid[3]::INTEGER AS grid_z,
       block[1]::INTEGER AS block_x, block[2]::INTEGER AS block_y, block[3]::INTEGER AS block_z,
       regs::INTEGER AS registers, CASE WHEN kind = 'kernel' THEN 0 ELSE coalesce(nbytes, 0) END AS bytes,
       thread_id::UBIGINT AS thread_id, api_start_ns, api_end_ns, $rank::INTEGER AS rank
FROM keyed
"""
# correlation ids several records share (CUDA graph replays) are numbered in start order; when none is shared (the
# usual case) every record is the 0th of its id
KEYED_SHARED = """
WITH shared AS (SELECT device_id, context_id, correlation_id FROM k GROUP BY ALL HAVING count(*) > 1)
SELECT k.*, 0 AS nth FROM k ANTI JOIN shared s USING (device_id, context_id, correlation_id)
UNION ALL
SELECT k.*, row_number() OVER (PARTITION BY device_id, context_id, correlation_id ORDER BY start_ns, end_ns) - 1
FROM k SEMI JOIN shared s USING (device_id, context_id, correlation_id)
"""
KEYED_UNIQUE = "SELECT k.*, 0 AS nth FROM k"
KERNEL_IDS = """
SELECT coalesce(corr, 0) AS c, coalesce(device, pid, 0)::INTEGER AS d, coalesce(context, 0)::INTEGER AS x
FROM ev WHERE kind IN ('kernel', 'memcpy', 'memset') AND t IS NOT NULL
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


def build(
    con: Any,
    run_id: str,
    rank: int,
    source: SourceInfo,
    module: str,
    extra: dict[str, Any],
    *,
    cross_check: bool,
    check_skipped: str,
    timestamps: str,
    rules: str,
    keep_on_connection: bool = False,
) -> ImportedTrace:
    """The tables of one run from the staged table ``ev`` on ``con`` (see the module's docstring).

    ``keep_on_connection``: the kernels stay in the temporary table ``kern`` on ``con`` and ``tables["kernels"]``
    is the query that reads them (the caller inserts them into a store on the same connection), else an Arrow table.
    """
    import pyarrow as pa

    damage = _drop_negative(con)
    ann = con.execute(INSTANCES_SQL).fetchnumpy()
    names_arr = ann["name"]
    pid = np.asarray(ann["pid"], dtype=np.int64)
    tid = np.asarray(ann["tid"], dtype=np.int64)
    start = np.asarray(ann["t"], dtype=np.int64)
    end = np.asarray(ann["e"], dtype=np.int64)
    group = _group_ids(pid, tid)
    nst = nest(group, start, end, [str(x) for x in names_arr.tolist()], instance_id_base(rank))
    ids, region_cols = region_rows(nst.region_of, module)
    named = [
        (int(a), int(b), [str(x) for x in c if x])
        for a, b, c in con.execute(
            "SELECT pid, tid, list(DISTINCT arg_name ORDER BY arg_name) FROM ev "
            "WHERE kind = 'meta' AND tid IS NOT NULL AND pid IS NOT NULL GROUP BY ALL"
        ).fetchall()
    ]
    # a trace may name a thread twice (Kineto: "thread 804 (python3)" and "thread 804 (pt_autograd_0)"): the name
    # that says what it is wins; "thread 804" alone (a placeholder, e.g. argus_lab's own export of an unnamed
    # thread) names nothing
    thread_names = {
        (p, t): max(real, key=lambda x: (role_of(x) != "", x))
        for p, t, names in named
        if (real := [x for x in names if not _PLACEHOLDER.fullmatch(x)])
    }
    named_ids = list(thread_names)
    threads = pa.table(
        {
            "run_id": pa.array([run_id] * len(named_ids), pa.string()),
            "rank": pa.array([rank] * len(named_ids), pa.int32()),
            "pid": pa.array([p for p, _ in named_ids], pa.int32()),
            "thread_id": pa.array([t for _, t in named_ids], pa.uint64()),
            "name": pa.array([thread_names[k] for k in named_ids], pa.string()),
            "system_name": pa.array([""] * len(named_ids), pa.string()),
            "role": pa.array([role_of(thread_names[k]) for k in named_ids], pa.string()),
        }
    )
    n = len(start)
    inst = pa.table(
        {
            "run_id": pa.array([run_id] * n, pa.string()),
            "instance_id": pa.array(nst.instance_id, pa.int64()),
            "region_id": pa.array([ids[r] for r in nst.region_of], pa.string()),
            "path": pa.DictionaryArray.from_arrays(
                pa.array(nst.path_code, pa.int32()), pa.array(nst.paths, pa.string())
            ),
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
            "thread_name": _per_thread(group, pid, tid, thread_names),
        }
    )
    con.register("inst_arrow", inst)
    con.execute("CREATE OR REPLACE TEMP TABLE inst AS SELECT * FROM inst_arrow")
    for table, mask in (("inst_opens", nst.opens), ("inst_closes", nst.closes)):  # the innermost-instance timeline
        con.register(f"{table}_arrow", pa.table({"instance_id": pa.array(nst.instance_id[mask], pa.int64())}))
        con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT * FROM {table}_arrow")
    con.execute(LAUNCH_SQL.format(calls=LAUNCH_CALLS if _distinct(con, LAUNCH_IDS) else LAUNCH_LONGEST))
    keyed = KEYED_UNIQUE if _distinct(con, KERNEL_IDS) else KEYED_SHARED
    con.execute(KERNELS_SQL.format(keyed=keyed).replace("$run", "?").replace("$rank", "?"), [run_id, rank])
    kernels: Any = "SELECT * FROM kern" if keep_on_connection else arrow_of(con.sql("SELECT * FROM kern"))
    counts_rows = con.execute("SELECT kind, count(*) FROM ev GROUP BY kind").fetchall()
    events = {str(k): int(c) for k, c in counts_rows}
    k_stats = con.execute(
        "SELECT count(*) FILTER (WHERE kind = 'kernel'), count(*) FILTER (WHERE kind <> 'kernel'), "
        "count(*) FILTER (WHERE api_start_ns IS NULL), count(*) FILTER (WHERE instance_id IS NOT NULL), "
        "count(*) FILTER (WHERE end_ns = start_ns), count(*) FILTER (WHERE end_ns - start_ns < 1000), "
        "min(start_ns), max(end_ns) FROM kern"
    ).fetchone()
    check = None
    if cross_check:  # each instance's leaf name, for the kernels' GPU-side annotations to be compared with
        con.execute(
            "CREATE OR REPLACE TEMP TABLE inst_names AS SELECT instance_id, leaf FROM "
            "(SELECT unnest(?::BIGINT[]) AS instance_id, unnest(?::VARCHAR[]) AS leaf)",
            [nst.instance_id.tolist(), nst.region_of],
        )
        check = con.execute(CHECK_SQL).fetchone()
    bounds = con.execute("SELECT min(t), max(t + d) FROM ev WHERE t IS NOT NULL").fetchone()
    assert k_stats is not None
    assert bounds is not None
    n_k, n_copy, no_launch, carried, zero, sub_us = (int(x or 0) for x in k_stats[:6])
    notes: list[str] = []
    if no_launch:
        notes.append(
            f"{no_launch} GPU record(s) have no cuda_runtime/cuda_driver event with their correlation id (the "
            "profiler dropped or did not trace the launch); the join places them by their GPU start time"
        )
    if nst.improper:
        notes.append(
            f"{nst.improper} annotation(s) started inside another of their thread and ended after it: kept beside it "
            "(not nested under it), as Perfetto shows such ranges"
        )
    if nst.capped:
        notes.append(
            f"{nst.capped} annotation(s) nested deeper than {MAX_DEPTH} levels or {MAX_PATH_CHARS} path characters: "
            "placed at the deepest level allowed (beside the one enclosing them)"
        )
    if not n:
        notes.append("the trace has no annotation (record_function / NVTX range): every kernel is unattributed")
    settings = {
        **extra,
        "rank": rank,
        "events_read": events,
        "kernels": n_k,
        "copies_and_sets": n_copy,
        "carried_instance": carried,
        "zero_length": zero,
        "sub_microsecond": sub_us,
        "launch_missing": no_launch,
        "annotation_nesting_improper": nst.improper,
        "annotation_nesting_capped": nst.capped,
        "gpu_user_annotation_check": (
            {"agree": int(check[0]), "differ": int(check[1]), "unchecked": int(check[2])}
            if check is not None
            else check_skipped
        ),
        "rules": rules,
    }
    tables = {
        "regions": pa.table(region_cols),
        "region_instances": inst,
        "threads": threads,
        "kernels": kernels,
        "provenance": pa.table(
            provenance_rows(
                run_id,
                source,
                "cupti",
                settings,
                timestamps,
            )
        ),
        "artifacts": pa.table(artifact_rows(run_id, source, f"{source.tool}, {n_k} kernels, {n} annotations")),
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
        damage=tuple(damage),
        staged=("kern", "launch", "inst", "inst_opens", "inst_closes", "inst_names", "ev")
        if keep_on_connection
        else (),
    )


def _drop_negative(con: Any) -> list[str]:
    """Records that end before they start (values out of range: a damaged or edited file) are left out, said once."""
    row = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE kind = 'annotation'), min(d), arg_min(name, d) FROM ev "
        "WHERE d < 0 AND kind <> 'meta'"
    ).fetchone()
    if not row or not row[0]:
        return []
    con.execute("DELETE FROM ev WHERE d < 0 AND kind <> 'meta'")
    n, ranges, worst, name = int(row[0]), int(row[1]), int(row[2]), row[3]
    return [
        f"{n} record(s) end before they start ({ranges} of them annotation ranges; the most negative: "
        f"{name!r}, {worst} ns): values out of range, left out of the run"
    ]


_PLACEHOLDER = re.compile(r"thread \d+")
"""A thread name that only repeats the thread id."""


def _distinct(con: Any, sql: str) -> bool:
    """Whether no two rows of ``sql`` (non-NULL integer columns, the first one the most selective) are equal.

    Checked in numpy, cheaper than a DuckDB aggregation over a million rows: the rows usually come in order of their
    first column (correlation ids grow with time), and then one comparison of neighbours answers."""
    rel = con.sql(sql)
    first = np.asarray(rel.select(rel.columns[0]).fetchnumpy()[rel.columns[0]])
    if len(first) < 2 or bool(np.all(first[1:] > first[:-1])):
        return True
    cols = [np.asarray(v) for v in rel.fetchnumpy().values()]
    order = np.lexsort(cols[::-1])
    same = np.ones(len(order) - 1, dtype=bool)
    for c in cols:
        s = c[order]
        same &= s[1:] == s[:-1]
    return not bool(same.any())


def _per_thread(group: np.ndarray, pid: np.ndarray, tid: np.ndarray, names: dict[tuple[int, int], str]) -> Any:
    """The name of each instance's thread (``""`` when the trace names none): looked up once per thread."""
    import pyarrow as pa

    _, first = np.unique(group, return_index=True)
    per_group = [names.get((int(pid[i]), int(tid[i])), "") for i in first.tolist()]
    return pa.array(per_group, pa.string()).take(pa.array(group, pa.int64()))


def _group_ids(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    if len(pid) == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((tid, pid))  # the (pid, tid) pairs numbered in sorted order, as np.unique(axis=0) numbers them
    p, t = pid[order], tid[order]
    new = np.r_[True, (p[1:] != p[:-1]) | (t[1:] != t[:-1])]
    ids = np.empty(len(pid), dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids
