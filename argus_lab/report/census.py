"""How many kernels a workload launches per region path: the census the planner uses to cost an ncu run.

:func:`kernel_census` reads the newest joined timing (CUPTI) run of a workload in a store: per region path the
measured instances per execution and the kernels each instance launched itself (the join's exclusive
``gpu.kernels``), and the kernels per execution launched outside every region.  The planner then says how many
kernels an ncu run replays (only those of the scope's instances) and costs it by that share
(:func:`argus_lab.plan.ncu_settings.replay_estimate`).
"""

from __future__ import annotations

from argus_lab.plan.ncu_settings import KernelCensus, PathCensus
from argus_lab.plan.scope import Scope
from argus_lab.run.nvtx_scope import ScopeGate
from argus_lab.store import Store

_LATEST = """
SELECT r.run_id, r.repetitions, r.warmup, r.reps_done FROM runs r
JOIN provenance j ON j.run_id = r.run_id AND j.backend = 'join'
WHERE list_contains(r.backends, 'cupti') AND r.status IN ('ok', 'partial') AND (? IS NULL OR r.workload = ?)
ORDER BY r.started_ns DESC LIMIT 1
"""

_PATHS = """
SELECT i.path, count(*) AS instances, count(DISTINCT i.repetition) AS reps, avg(v.exclusive) AS kernels
FROM region_instances i
LEFT JOIN instance_values v ON v.run_id = i.run_id AND v.instance_id = i.instance_id AND v.signal = 'gpu.kernels'
WHERE i.run_id = ? AND NOT coalesce(i.warmup, false)
GROUP BY i.path ORDER BY i.path
"""

_OUTSIDE = """
SELECT count(*) FROM attributions WHERE run_id = ? AND evidence = 'kernel' AND class = 'unattributed'
"""


def kernel_census(store: Store, workload: str | None = None) -> KernelCensus | None:
    """The census of the newest joined timing run of ``workload`` (its description as runs store it; ``None``: any
    workload) in ``store``; ``None`` when the store holds none (or cannot be read)."""
    if not store.exists:
        return None
    try:
        rows = store.records(_LATEST, [workload, workload])
        if not rows:
            return None
        run = rows[0]
        executions = max(1, int(run["reps_done"] or 0))
        measured = max(1, executions - int(run["warmup"] or 0))
        paths = tuple(
            PathCensus(str(r["path"]), int(r["instances"]) / measured, float(r["kernels"] or 0.0))
            for r in store.records(_PATHS, [run["run_id"]])
        )
        outside = store.rows(_OUTSIDE, [run["run_id"]])[0][0] / executions
    except Exception:  # a store of another version, a locked or broken file: plan without a census
        return None
    return KernelCensus(paths, float(outside), f"timing run {run['run_id']}")


_ENTRIES = """
SELECT instance_id, parent_instance_id, path, repetition, coalesce(warmup, false) AS warmup, rank, thread_id,
       thread_name
FROM region_instances WHERE run_id = ? ORDER BY rank NULLS FIRST, start_ns, instance_id
"""

_KERNELS_BY_INSTANCE = """
SELECT instance_id, count(*) FROM kernels
WHERE run_id = ? AND coalesce(kind, 'kernel') = 'kernel' AND instance_id IS NOT NULL GROUP BY instance_id
"""


def scoped_kernels(store: Store, run_id: str, scope: Scope | str) -> int | None:
    """How many kernels an ncu run of the same plan will profile, counted in timing run ``run_id`` (no join needed):
    the kernels launched inside a region instance the request's ``scope`` covers, or nested in one, in measured
    repetitions only.  Instances are decided as the ncu child's scope gate decides them at region entry
    (:class:`~argus_lab.run.nvtx_scope.ScopeGate`: the globs, ``instances=`` over each path's measured instances
    in entry order, ``ranks=``, ``threads=``), one gate per rank.  ``None`` when the run recorded no kernels (or
    the store cannot be read)."""
    the_scope = Scope.parse(scope)
    try:
        entries = store.records(_ENTRIES, [run_id])
        kernels = dict(store.rows(_KERNELS_BY_INSTANCE, [run_id]))
    except Exception:  # a store of another version, a locked or broken file: no total, as before
        return None
    if not kernels:
        return None
    gates: dict[int | None, ScopeGate] = {}
    covered: dict[int, bool] = {}
    for e in entries:
        gate = gates.get(e["rank"])
        if gate is None:
            gate = gates[e["rank"]] = ScopeGate(the_scope, 0, e["rank"])
        inside = not e["warmup"] and gate.decide(
            str(e["path"]), int(e["repetition"] or 0), (str(e["thread_name"] or ""), str(e["thread_id"]))
        )
        covered[int(e["instance_id"])] = inside or covered.get(e["parent_instance_id"], False)
    return sum(int(n) for iid, n in kernels.items() if covered.get(int(iid), False))


__all__ = ["kernel_census", "scoped_kernels"]
