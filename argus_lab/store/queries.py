"""SQL the reports use, kept in one place so the store's shape is visible at a glance."""

from __future__ import annotations

REGION_SUMMARY = """
SELECT i.path,
       m.signal,
       count(*)                                   AS n,
       count(DISTINCT i.instance_id || i.run_id)  AS instances,
       quantile_cont(m.value, 0.5)                AS median,
       quantile_cont(m.value, 0.25)               AS p25,
       quantile_cont(m.value, 0.75)               AS p75,
       min(m.value)                               AS min,
       max(m.value)                               AS max,
       any_value(m.unit)                          AS unit,
       string_agg(DISTINCT m.run_id, ',')         AS runs,
       string_agg(DISTINCT m.attribution, ',')    AS attribution
FROM metrics m
JOIN region_instances i ON i.run_id = m.run_id AND i.instance_id = m.instance_id
WHERE m.run_id IN (SELECT unnest(?::VARCHAR[])) AND NOT coalesce(i.warmup, false) AND m.kernel_key IS NULL
GROUP BY i.path, m.signal
ORDER BY min(i.start_ns), i.path, m.signal
"""

RUNS = """
SELECT run_id, plan_index, status, backends, signals, repetitions, warmup, reps_done,
       (ended_ns - started_ns) / 1e9 AS seconds, workload, command, cause, reason, versions, env, host, settings
FROM runs WHERE run_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY plan_index
"""

RUNS_OF_SESSION = "SELECT run_id FROM runs WHERE session_id = ? ORDER BY started_ns"
LATEST_REQUEST = "SELECT request_id FROM requests ORDER BY created_ns DESC LIMIT 1"
RUNS_OF_REQUEST = "SELECT run_id FROM runs WHERE request_id = ? ORDER BY plan_index"

INSTANCE_ERRORS = """
SELECT path, count(*) AS n, any_value(error) AS error FROM region_instances
WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND error <> '' GROUP BY path ORDER BY path
"""
