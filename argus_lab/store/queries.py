"""The small queries that pick runs (and their errors) for a report: every one takes its parameters bound."""

from __future__ import annotations

RUNS = """
SELECT run_id, plan_index, status, backends, signals, repetitions, warmup, reps_done,
       (ended_ns - started_ns) / 1e9 AS seconds, workload, command, cause, reason, versions, env, host, settings
FROM runs WHERE run_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY plan_index
"""

LATEST_REQUEST = "SELECT request_id FROM requests ORDER BY created_ns DESC LIMIT 1"
RUNS_OF_REQUEST = "SELECT run_id FROM runs WHERE request_id = ? ORDER BY plan_index"
REQUESTS_NEWEST_FIRST = """
SELECT q.request_id, q.text, any_value(r.workload) AS workload, list(r.run_id ORDER BY r.plan_index) AS run_ids,
       list(r.status ORDER BY r.plan_index) AS statuses, list(DISTINCT r.cause) FILTER (WHERE r.cause <> '') AS causes
FROM requests q JOIN runs r USING (request_id)
GROUP BY q.request_id, q.text, q.created_ns ORDER BY q.created_ns DESC
"""

INSTANCE_ERRORS = """
SELECT path, count(*) AS n, any_value(error) AS error FROM region_instances
WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND error <> '' GROUP BY path ORDER BY path
"""

FINISHED_INSTANCES = """
SELECT path, count(*) AS n, count(*) FILTER (WHERE coalesce(warmup, false)) AS warmup,
       median(end_ns - start_ns) AS wall_ns, count(*) FILTER (WHERE coalesce(error, '') <> '') AS raised
FROM region_instances WHERE run_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY path ORDER BY path
"""
