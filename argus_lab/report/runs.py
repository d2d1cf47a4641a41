"""Which runs a command means: the small queries that pick runs (and their errors) for a report, every one with
its parameters bound, and the two rules every face shares: the runs of the latest request (:func:`latest_runs`) and
run ids checked against the store (:func:`check_known`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from argus_lab.errors import ArgusError, StoreError

if TYPE_CHECKING:
    from argus_lab.store import Store

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


def request_runs(store: Store, request_id: str) -> list[str]:
    """The run ids of one request, in plan order."""
    return [r[0] for r in store.rows(RUNS_OF_REQUEST, [request_id])]


def latest_runs(store: Store) -> list[str]:
    """The run ids of the store's latest request, in plan order (none in an empty store)."""
    latest = store.rows(LATEST_REQUEST)
    return request_runs(store, latest[0][0]) if latest else []


def check_known(store: Store, run_ids: Sequence[str], error: type[ArgusError] = StoreError) -> None:
    """Raise ``error`` naming the first of ``run_ids`` the store has no record of, with how to list the known ones."""
    known = {r[0] for r in store.rows("SELECT run_id FROM runs")}
    missing = [r for r in run_ids if r not in known]
    if missing:
        msg = (
            f"no run {missing[0]!r} in {store.path}; list its runs with `argus-lab show --all --store "
            f"{store.path}` (or `%argus runs`)"
        )
        raise error(msg)
