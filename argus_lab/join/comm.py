"""Communication signals of the join: NCCL kernels, their overlap with compute, exposed communication.

Run by :mod:`argus_lab.join` after the kernel attribution (it reads the join's temporary tables ``_j_k``,
``_j_ke``, ``_j_ka``, ``_j_anc``, ``_j_inst`` and ``_j_prov``).  Definitions, per region instance and inclusive of
its descendants:

``comm.time``
    Sum of the durations of the communication kernels the region launched (weighted like ``gpu.time``).
``comm.kernels``
    How many communication kernels it launched.
``comm.overlap``
    Time during which at least one of its communication kernels ran while some compute kernel (any kernel that
    is not communication, launched by any region or none) ran on the same device.
``comm.exposed``
    Time during which its communication kernels ran with no compute kernel on the device: the communication
    the step waits for.  ``comm.overlap + comm.exposed`` is the union of its communication kernels' intervals.

A kernel is communication when its name matches :data:`COMM_KERNEL_PATTERN` (NCCL's device kernels, including
the one-rank reduction NCCL runs when a group has a single rank).  Intervals are merged per device (rank and
device number: ranks on different hosts share device numbers) before they are intersected, so concurrent
communication kernels (several NCCL channels or streams) count once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from argus_lab.join.attribution_sql import ANCESTORS_IF_MISSING
from argus_lab.plan import catalog

if TYPE_CHECKING:
    import duckdb

COMM_KERNEL_WORDS: tuple[str, ...] = ("nccl", "onerankreduce")
"""Kernel names containing one of these (any case) are communication."""

COMM_KERNEL_PATTERN = "(?i)" + "|".join(COMM_KERNEL_WORDS)
"""The same as a regular expression (DuckDB ``regexp_matches`` syntax)."""

# the words as LIKE patterns: evaluated on the dictionary of the kernels' names, so a million kernels cost little
_NAME_PREFILTER = " OR ".join(f"name ILIKE '%{w}%'" for w in COMM_KERNEL_WORDS)

# runs that get communication values: those with a communication kernel, or that asked for a comm.* signal
COMM_RUNS = f"""
CREATE OR REPLACE TEMP TABLE _j_crun AS
SELECT DISTINCT run_id FROM _j_k WHERE kind = 'kernel' AND ({_NAME_PREFILTER}) AND regexp_matches(name, $pattern)
UNION
SELECT run_id FROM runs
WHERE run_id IN (SELECT run_id FROM _j_runs) AND ',' || array_to_string(signals, ',') LIKE '%,comm.%'
"""

HAS_COMM_RUNS = "SELECT count(*) FROM _j_crun"

# every attributed communication kernel with its instance, class and weight
COMM_KERNELS = """
CREATE OR REPLACE TEMP TABLE _j_ck AS
WITH k AS (
    SELECT run_id, key, rank, device_id FROM _j_k
    WHERE kind = 'kernel' AND run_id IN (SELECT run_id FROM _j_crun) AND regexp_matches(name, $pattern)
)
SELECT e.run_id, e.key, k.rank, k.device_id, e.instance_id, 'exact' AS class, 1.0::DOUBLE AS weight,
       e.start_ns, e.end_ns
FROM _j_ke e JOIN k ON k.run_id = e.run_id AND k.key = e.key
UNION ALL
SELECT a.run_id, a.key, k.rank, k.device_id, a.instance_id, a.class, a.weight, a.start_ns, a.end_ns
FROM _j_ka a JOIN k ON k.run_id = a.run_id AND k.key = a.key
WHERE a.instance_id IS NOT NULL
"""


def merged_intervals(table: str, source: str, keys: str) -> str:
    """``CREATE TEMP TABLE table``: the intervals (``start_ns``, ``end_ns``) of ``source`` merged into disjoint
    ``[s, e)`` per ``keys`` (a running maximum of the ends starts a new group where a start lies beyond it)."""
    return f"""
CREATE OR REPLACE TEMP TABLE {table} AS
WITH c AS ({source}
), o AS (
    SELECT *, max(end_ns) OVER (PARTITION BY {keys} ORDER BY start_ns, end_ns
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
    FROM c
), g AS (
    SELECT *, sum(CASE WHEN reach IS NULL OR start_ns > reach THEN 1 ELSE 0 END)
                  OVER (PARTITION BY {keys} ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING) AS grp
    FROM o
)
SELECT {keys}, min(start_ns) AS s, max(end_ns) AS e FROM g GROUP BY {keys}, grp
"""


# compute kernels merged into disjoint busy intervals per (run, rank, device)
COMPUTE_BUSY = merged_intervals(
    "_j_cbusy",
    """
    SELECT run_id, rank, device_id, start_ns, end_ns FROM _j_k
    WHERE kind = 'kernel' AND run_id IN (SELECT run_id FROM _j_crun) AND NOT regexp_matches(name, $pattern)
      AND end_ns > start_ns""",
    "run_id, rank, device_id",
)

# each instance's communication kernels (its own and its descendants'), merged per (rank, device)
COMM_BUSY = merged_intervals(
    "_j_cmbusy",
    """
    SELECT DISTINCT a.run_id, a.ancestor_id AS instance_id, ck.rank, ck.device_id, ck.key, ck.start_ns, ck.end_ns
    FROM _j_ck ck JOIN _j_anc a ON a.run_id = ck.run_id AND a.instance_id = ck.instance_id
    WHERE ck.end_ns > ck.start_ns""",
    "run_id, instance_id, rank, device_id",
)

COMM_VALUES = """
INSERT INTO _j_iv (run_id, instance_id, signal, inclusive, exclusive, unit, evidence, w_exact, w_ordinal,
                 w_temporal, w_ambiguous, w_mismatch, backend, provenance_id)
WITH x AS (  -- exclusive: the instance's own communication kernels
    SELECT run_id, instance_id, sum(weight * (end_ns - start_ns)) AS dur, sum(weight) AS w FROM _j_ck GROUP BY ALL
), inc AS (
    SELECT a.run_id, a.ancestor_id AS instance_id,
           sum(ck.weight * (ck.end_ns - ck.start_ns)) AS dur, sum(ck.weight) AS w, count(*) AS n,
           coalesce(sum(ck.weight) FILTER (WHERE ck.class = 'exact'), 0) AS w_exact,
           coalesce(sum(ck.weight) FILTER (WHERE ck.class = 'temporal'), 0) AS w_temporal,
           coalesce(sum(ck.weight) FILTER (WHERE ck.class = 'ambiguous'), 0) AS w_ambiguous
    FROM _j_ck ck JOIN _j_anc a ON a.run_id = ck.run_id AND a.instance_id = ck.instance_id
    GROUP BY ALL
), busy AS (
    SELECT run_id, instance_id, sum(e - s) AS union_ns FROM _j_cmbusy GROUP BY ALL
), ov AS (
    SELECT m.run_id, m.instance_id, sum(least(m.e, c.e) - greatest(m.s, c.s)) AS overlap_ns
    FROM _j_cmbusy m JOIN _j_cbusy c
      ON c.run_id = m.run_id AND c.rank = m.rank AND c.device_id = m.device_id AND c.s < m.e AND c.e > m.s
    GROUP BY ALL
), v AS (
    SELECT i.run_id, i.instance_id, s.signal, s.unit,
           CASE s.signal WHEN 'comm.time' THEN coalesce(inc.dur, 0)
                         WHEN 'comm.kernels' THEN coalesce(inc.w, 0)
                         WHEN 'comm.overlap' THEN coalesce(ov.overlap_ns, 0)
                         ELSE coalesce(busy.union_ns, 0) - coalesce(ov.overlap_ns, 0) END AS inclusive,
           CASE s.signal WHEN 'comm.time' THEN coalesce(x.dur, 0)
                         WHEN 'comm.kernels' THEN coalesce(x.w, 0) END AS exclusive,
           coalesce(inc.n, 0) AS n, coalesce(inc.w_exact, 0) AS w_exact, coalesce(inc.w_temporal, 0) AS w_temporal,
           coalesce(inc.w_ambiguous, 0) AS w_ambiguous
    FROM _j_inst i
    JOIN _j_crun r ON r.run_id = i.run_id
    CROSS JOIN (VALUES /*UNITS*/) AS s(signal, unit)
    LEFT JOIN inc ON inc.run_id = i.run_id AND inc.instance_id = i.instance_id
    LEFT JOIN x ON x.run_id = i.run_id AND x.instance_id = i.instance_id
    LEFT JOIN busy ON busy.run_id = i.run_id AND busy.instance_id = i.instance_id
    LEFT JOIN ov ON ov.run_id = i.run_id AND ov.instance_id = i.instance_id
)
SELECT v.run_id, v.instance_id, v.signal, v.inclusive, v.exclusive, v.unit, v.n, v.w_exact, 0, v.w_temporal,
       v.w_ambiguous, 0, 'cupti', pv.provenance_id
FROM v JOIN _j_prov pv ON pv.run_id = v.run_id AND pv.backend = 'cupti'
""".replace(
    "/*UNITS*/",
    ", ".join(f"('{s}', '{catalog.unit(s)}')" for s in ("comm.time", "comm.kernels", "comm.overlap", "comm.exposed")),
)

STATEMENTS = (COMM_KERNELS, COMPUTE_BUSY, COMM_BUSY, COMM_VALUES)


def derive(con: duckdb.DuckDBPyConnection) -> None:
    """Write the communication values of the join's runs (call after the kernel attribution)."""
    params = {"pattern": COMM_KERNEL_PATTERN}
    con.execute(COMM_RUNS, params)
    rows = con.execute(HAS_COMM_RUNS).fetchall()
    if not rows or not rows[0][0]:
        return
    con.execute(ANCESTORS_IF_MISSING)
    for stmt in STATEMENTS:  # DuckDB refuses parameters a statement does not name
        con.execute(stmt, params if "$pattern" in stmt else None)
