"""Read-only look-ups over one evidence store, answered as JSON-ready dicts for the REST handlers.

Every query is parameterized: request values (region paths, run and session ids) are bound, never spliced
into SQL.  Each function opens the store for the length of one call (a short shared-lock, read-only DuckDB
connection through :class:`~argus_lab.store.Store`), so a kernel that writes the store between two calls is
never blocked for long.  Row counts are bounded so that a large store cannot flood the browser.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from argus_lab.store import Store

MAX_ROWS = 500
TIME_SIGNALS = ("gpu.time", "host.wall")  # share-of-time signals, preferred first
_JSON_COLUMNS = frozenset({"settings", "env", "versions", "spec", "clocks"})


def _records(store: Store, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    with store.connect() as con:
        cur = con.execute(sql, list(params))
        names = [d[0] for d in cur.description or ()]
        rows = cur.fetchall()
    out = []
    for row in rows:
        rec = dict(zip(names, row, strict=True))
        for key in _JSON_COLUMNS.intersection(rec):
            rec[key] = _json(rec[key])
        out.append(rec)
    return out


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def sessions(store: Store) -> list[dict[str, Any]]:
    """Sessions, newest first, with their number of runs."""
    return _records(
        store,
        """
        SELECT s.session_id, s.created_ns, s.host, s.user_name, s.argus_version, s.cwd, s.label,
               (SELECT count(*) FROM runs r WHERE r.session_id = s.session_id) AS runs
        FROM sessions s ORDER BY s.created_ns DESC LIMIT ?
        """,
        [MAX_ROWS],
    )


_RUN_COLUMNS = """
    r.run_id, r.session_id, r.request_id, r.plan_id, r.plan_index, r.variant, r.backends, r.signals, r.status,
    r.cause, r.repetitions, r.warmup, r.reps_done, r.started_ns, r.ended_ns,
    (r.ended_ns - r.started_ns) / 1e9 AS seconds, r.reason, q.text AS request
"""


def runs(store: Store, session: str | None = None) -> list[dict[str, Any]]:
    """Runs, newest first (optionally of one session), with status and the request they served."""
    where = "WHERE r.session_id = ?" if session else ""
    params: list[Any] = [session] if session else []
    return _records(
        store,
        f"SELECT {_RUN_COLUMNS} FROM runs r LEFT JOIN requests q ON q.request_id = r.request_id "
        f"{where} ORDER BY r.started_ns DESC, r.plan_index DESC LIMIT ?",
        [*params, MAX_ROWS],
    )


def run_detail(store: Store, run_id: str) -> dict[str, Any] | None:
    """One run with its provenance, the plan and request it belonged to, its sibling runs and artifacts."""
    found = _records(
        store,
        f"SELECT {_RUN_COLUMNS}, r.settings, r.workload, r.command, r.env, r.versions, r.host, r.pid "
        "FROM runs r LEFT JOIN requests q ON q.request_id = r.request_id WHERE r.run_id = ?",
        [run_id],
    )
    if not found:
        return None
    run: dict[str, Any] = found[0]
    plan = _records(store, "SELECT plan_id, text, spec FROM plans WHERE plan_id = ?", [run["plan_id"]])
    request = _records(
        store, "SELECT request_id, text, spec, created_ns FROM requests WHERE request_id = ?", [run["request_id"]]
    )
    siblings = _records(
        store,
        "SELECT run_id, plan_index, status, backends, signals, reason FROM runs WHERE plan_id = ? ORDER BY plan_index",
        [run["plan_id"]],
    )
    return {
        "run": run,
        "provenance": _records(
            store,
            "SELECT provenance_id, backend, backend_version, settings, clocks, timestamps FROM provenance "
            "WHERE run_id = ? ORDER BY backend",
            [run_id],
        ),
        "plan": plan[0] if plan else None,
        "request": request[0] if request else None,
        "plan_runs": siblings,
        "artifacts": _records(
            store, "SELECT kind, path, sha256, bytes, note FROM artifacts WHERE run_id = ? ORDER BY kind", [run_id]
        ),
    }


_PATH_TOTALS = """
WITH inst AS (
    SELECT i.run_id, i.path, coalesce(i.parent_instance_id, 0) = 0 AS is_root, m.signal, m.value
    FROM region_instances i
    JOIN metrics m ON m.run_id = i.run_id AND m.instance_id = i.instance_id
    WHERE m.kernel_key IS NULL AND m.signal IN (SELECT unnest(?::VARCHAR[])) AND NOT coalesce(i.warmup, false)
)
SELECT inst.run_id, inst.path, inst.signal, sum(inst.value) AS total, count(*) AS n,
       any_value(r.started_ns) AS started_ns,
       (SELECT sum(value) FROM inst j WHERE j.run_id = inst.run_id AND j.signal = inst.signal AND j.is_root) AS root
FROM inst JOIN runs r ON r.run_id = inst.run_id
GROUP BY inst.run_id, inst.path, inst.signal
"""


def regions(store: Store, session: str | None = None) -> list[dict[str, Any]]:
    """Every region path seen, with instance counts and its latest measured share of time.

    The share is the region's summed time (``gpu.time`` where the run measured it, else ``host.wall``) over the
    non-warm-up instances of the latest run that timed it, divided by the summed time of that run's top-level
    instances.
    """
    where = "WHERE r.session_id = ?" if session else ""
    params: list[Any] = [session] if session else []
    seen = _records(
        store,
        f"""
        SELECT i.path, any_value(g.name) AS name, any_value(g.kind) AS kind, any_value(g.file) AS file,
               any_value(g.line) AS line, count(*) AS instances, count(DISTINCT i.run_id) AS runs,
               max(r.started_ns) AS last_ns
        FROM region_instances i JOIN runs r ON r.run_id = i.run_id
        LEFT JOIN regions g ON g.region_id = i.region_id
        {where} GROUP BY i.path ORDER BY i.path LIMIT ?
        """,
        [*params, MAX_ROWS],
    )
    totals = _records(store, _PATH_TOTALS, [list(TIME_SIGNALS)])
    best: dict[str, tuple[int, int, dict[str, Any]]] = {}
    for t in totals:
        rank = (t["started_ns"] or 0, -TIME_SIGNALS.index(t["signal"]))
        if t["path"] not in best or rank > best[t["path"]][:2]:
            best[t["path"]] = (*rank, t)
    for rec in seen:
        hit = best.get(rec["path"])
        top = hit[2] if hit else None
        rec["share"] = (top["total"] / top["root"]) if top and top["root"] else None
        rec["share_signal"] = top["signal"] if top else None
        rec["share_run"] = top["run_id"] if top else None
        rec["mean"] = (top["total"] / top["n"]) if top and top["n"] else None
    return seen


def region_detail(store: Store, path: str, run_id: str | None = None) -> dict[str, Any] | None:
    """A region's drill-down: per-signal summary, instances, kernels, counters, facts and attribution classes."""
    run_clause = "AND i.run_id = ?" if run_id else ""
    rp: list[Any] = [path, run_id] if run_id else [path]
    inst_filter = f"i.path = ? {run_clause}"
    instances = _records(
        store,
        f"""
        SELECT i.run_id, i.instance_id, i.instance_index, i.parent_instance_id, i.repetition, i.warmup,
               i.pid, i.end_ns - i.start_ns AS duration_ns, i.cpu_ns, i.error
        FROM region_instances i JOIN runs r ON r.run_id = i.run_id
        WHERE {inst_filter} ORDER BY r.started_ns DESC, i.instance_id LIMIT ?
        """,
        [*rp, MAX_ROWS],
    )
    if not instances:
        return None
    summary = _records(
        store,
        f"""
        SELECT m.run_id, m.signal, count(*) AS n, quantile_cont(m.value, 0.5) AS median,
               quantile_cont(m.value, 0.25) AS p25, quantile_cont(m.value, 0.75) AS p75,
               min(m.value) AS min, max(m.value) AS max, any_value(m.unit) AS unit,
               string_agg(DISTINCT m.attribution, ',') AS attribution, any_value(m.backend) AS backend
        FROM metrics m JOIN region_instances i ON i.run_id = m.run_id AND i.instance_id = m.instance_id
        WHERE {inst_filter} AND m.kernel_key IS NULL AND NOT coalesce(i.warmup, false)
        GROUP BY m.run_id, m.signal ORDER BY m.run_id, m.signal
        """,
        rp,
    )
    values = _records(
        store,
        f"""
        SELECT m.run_id, m.instance_id, m.signal, m.value, m.unit FROM metrics m
        JOIN region_instances i ON i.run_id = m.run_id AND i.instance_id = m.instance_id
        WHERE {inst_filter} AND m.kernel_key IS NULL LIMIT ?
        """,
        [*rp, MAX_ROWS * 8],
    )
    by_instance: dict[tuple[str, int], dict[str, float]] = {}
    for v in values:
        by_instance.setdefault((v["run_id"], v["instance_id"]), {})[v["signal"]] = v["value"]
    for inst in instances:
        inst["values"] = by_instance.get((inst["run_id"], inst["instance_id"]), {})
    kernels = _records(
        store,
        f"""
        SELECT k.name, count(*) AS launches, sum(k.end_ns - k.start_ns) AS total_ns,
               avg(k.end_ns - k.start_ns) AS mean_ns, any_value(k.registers) AS registers,
               any_value(k.grid_x) AS grid_x, any_value(k.block_x) AS block_x, any_value(k.device_id) AS device_id
        FROM kernels k JOIN region_instances i ON i.run_id = k.run_id AND i.instance_id = k.instance_id
        WHERE {inst_filter} GROUP BY k.name ORDER BY total_ns DESC LIMIT ?
        """,
        [*rp, MAX_ROWS],
    )
    counters = _records(
        store,
        f"""
        SELECT m.signal, m.run_id, count(*) AS n, quantile_cont(m.value, 0.5) AS median, any_value(m.unit) AS unit,
               string_agg(DISTINCT m.attribution, ',') AS attribution, any_value(m.backend) AS backend
        FROM metrics m JOIN region_instances i ON i.run_id = m.run_id AND i.instance_id = m.instance_id
        WHERE {inst_filter} AND (m.signal LIKE 'hw:%' OR m.signal LIKE 'pm:%')
        GROUP BY m.signal, m.run_id ORDER BY m.signal LIMIT ?
        """,
        [*rp, MAX_ROWS],
    )
    names = [k["name"] for k in kernels if k["name"]]
    facts = _records(
        store,
        """
        SELECT m.kernel_key, m.signal, m.value, m.unit, m.backend, m.run_id FROM metrics m
        WHERE m.signal LIKE 'compile.%' AND split_part(m.kernel_key, ':', 2) IN (SELECT unnest(?::VARCHAR[]))
        ORDER BY m.kernel_key, m.signal LIMIT ?
        """,
        [names, MAX_ROWS],
    )
    attributions = _records(
        store,
        f"""
        SELECT a.class, a.evidence, count(*) AS n, avg(a.weight) AS mean_weight, any_value(a.reason) AS reason
        FROM attributions a JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id
        WHERE {inst_filter} GROUP BY a.class, a.evidence ORDER BY a.class, a.evidence
        """,
        rp,
    )
    return {
        "path": path,
        "run_id": run_id,
        "summary": summary,
        "instances": instances,
        "kernels": kernels,
        "counters": counters,
        "facts": facts,
        "attributions": attributions,
        "truncated": len(instances) >= MAX_ROWS,
    }
