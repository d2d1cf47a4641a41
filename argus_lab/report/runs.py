"""Which runs a command means: the small queries that pick runs (and their errors) for a report, every one with
its parameters bound, and the two rules every face shares: the runs of the latest request (:func:`latest_runs`) and
run ids checked against the store (:func:`check_known`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from argus_lab.errors import ArgusError, StoreError

if TYPE_CHECKING:
    from argus_lab.store import Store

RUNS = """
SELECT run_id, plan_index, status, backends, signals, repetitions, warmup, reps_done,
       (ended_ns - started_ns) / 1e9 AS seconds, workload, command, cause, reason, versions, env, host, settings
FROM runs WHERE run_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY plan_index
"""

RUN_COUNT = "SELECT count(*) FROM runs"
"""How many runs the store holds (one row, one column)."""
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


CANDIDATE_RUNS = """
SELECT r.run_id, r.variant, r.status, r.cause, r.settings, r.started_ns, a.path AS evaluation,
       (SELECT string_agg(DISTINCT i.region_id, ',') FROM region_instances i WHERE i.run_id = r.run_id) AS region_ids
FROM runs r LEFT JOIN artifacts a ON a.run_id = r.run_id AND a.kind = ?
WHERE json_extract_string(r.settings, '$.optimize.target') IS NOT NULL
  AND (? IS NULL OR json_extract_string(r.settings, '$.optimize.target') = ?) ORDER BY r.started_ns
"""
"""The optimisation loop's candidate runs (parameters: the evaluation artifact's kind, a target name or NULL twice),
in the order they ran (``argus_lab.optimize.history``)."""


def requests_oldest_first(store: Store) -> list[tuple[str, list[str], str | None]]:
    """(request id, its run ids in plan order, workload) of every request, oldest first (a run without a request
    is a request of its own)."""
    rows = store.rows(
        "SELECT coalesce(request_id, run_id), list(run_id ORDER BY plan_index, started_ns), any_value(workload) "
        "FROM runs GROUP BY 1 ORDER BY min(started_ns)"
    )
    return [(str(r), list(ids), w) for r, ids, w in rows]


def runs_by_request(store: Store) -> dict[str, list[str]]:
    """Every run id grouped by its request (a run without one alone), in the order the runs started."""
    groups: dict[str, list[str]] = {}
    for run_id, request_id in store.rows("SELECT run_id, request_id FROM runs ORDER BY started_ns, plan_index"):
        groups.setdefault(request_id or run_id, []).append(run_id)
    return groups


def all_runs(store: Store) -> list[str]:
    """Every run id of the store, in the order the runs started."""
    return [r[0] for r in store.rows("SELECT run_id FROM runs ORDER BY started_ns")]


def run_count(store: Store) -> int:
    """How many runs the store holds (0 for a store that does not exist yet)."""
    return int(store.rows(RUN_COUNT)[0][0]) if store.exists else 0


def kernel_records(store: Store, run_ids: Sequence[str]) -> int:
    """Kernel, copy and set records the runs stored."""
    rows = store.rows("SELECT count(*) FROM kernels WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [list(run_ids)])
    return int(rows[0][0]) if rows else 0


def session_latest_runs(store: Store, session_id: str) -> list[str] | None:
    """The run ids of the newest request of one session (a Python process), in plan order; ``None`` when it made
    no request in this store."""
    if not store.exists:
        return None
    mine = store.rows(
        "SELECT request_id FROM requests WHERE session_id = ? ORDER BY created_ns DESC LIMIT 1", [session_id]
    )
    return request_runs(store, mine[0][0]) if mine else None


def recorded_paths(store: Store, run_ids: Sequence[str]) -> list[str]:
    """The region paths the runs recorded, sorted."""
    rows = store.rows(
        "SELECT DISTINCT path FROM region_instances WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [list(run_ids)]
    )
    return sorted({str(p) for (p,) in rows})


RUNNING = """
SELECT run_id, request_id, pid, host, started_ns, backends, signals, settings, repetitions, warmup
FROM runs WHERE status = 'running' ORDER BY started_ns
"""


def running_runs(store: Store) -> list[dict[str, Any]]:
    """The runs the store marks ``running``, oldest first, with what recovery needs to finish one
    (:mod:`argus_lab.app.recovery`)."""
    return store.records(RUNNING)


def stored_repetitions(store: Store, run_id: str) -> int:
    """How many distinct repetitions of the run have instances in the store."""
    return int(store.rows("SELECT count(DISTINCT repetition) FROM region_instances WHERE run_id = ?", [run_id])[0][0])


def unknown_run(store: Store, run_ids: Sequence[str]) -> str | None:
    """The first of ``run_ids`` the store has no record of (``None``: every one is known)."""
    known = {r[0] for r in store.rows("SELECT run_id FROM runs")}
    return next((r for r in run_ids if r not in known), None)


def newest_runs(store: Store, count: int = 5) -> list[str]:
    """The ids of the ``count`` runs started last, newest first."""
    return [r[0] for r in store.rows("SELECT run_id FROM runs ORDER BY started_ns DESC LIMIT ?", [count])]


def request_runs(store: Store, request_id: str) -> list[str]:
    """The run ids of one request, in plan order."""
    return [r[0] for r in store.rows(RUNS_OF_REQUEST, [request_id])]


def latest_runs(store: Store) -> list[str]:
    """The run ids of the store's latest request, in plan order (none in an empty store)."""
    latest = store.rows(LATEST_REQUEST)
    return request_runs(store, latest[0][0]) if latest else []


def check_known(store: Store, run_ids: Sequence[str], error: type[ArgusError] = StoreError) -> None:
    """Raise ``error`` naming the first of ``run_ids`` the store has no record of, with how to list the known ones."""
    missing = unknown_run(store, run_ids)
    if missing is not None:
        latest = ", ".join(newest_runs(store)) or "(none)"
        msg = (
            f"no run {missing!r} in {store.path}; its latest runs: {latest}; list them all with `argus-lab show "
            f"--all --store {store.path}` (or `%argus runs`)"
        )
        raise error(msg)
