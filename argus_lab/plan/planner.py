"""Request -> plan: the fewest runs that keep every measurement honest, each with its reason.

The planner reads only the backends' declarations (:class:`~argus_lab.plan.backends.BackendInfo`) and
:func:`~argus_lab.plan.backends.conflict_reason`, so a new backend needs no change here.

How a plan is made (:func:`plan`):

1. The requested signals are grouped by the backend that produces them.
2. The run-time backends (all but ``static`` ones) are partitioned into the fewest groups without a conflicting
   pair, by exact search (there are few backends).  Each group is one run.
3. The group holding a replay backend (``ncu``) is split into as many replay runs as its hardware counters need:
   every run stays within :attr:`PlanSettings.max_passes_per_run` replay passes according to the pass-count model
   (:mod:`argus_lab.plan.passes`); the split uses the fewest runs, found by exact search (a node budget bounds it;
   the plan says when the bound was hit and the count is not proven minimal).
4. Static backends (compiler facts) get no run of their own: they attach to a run that executes the workload,
   preferring the timing (CUPTI) run; only when no other run exists do they get one.
5. Runs are ordered light -> sampling -> replay -> instrumenting, and each gets its settings, cost estimate
   (workload executions x replay passes x the backends' cost factors) and a sentence on why it is separate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from argus_lab.errors import PlanError
from argus_lab.plan.backends import BACKENDS, cupti_launch_identity
from argus_lab.plan.catalog import Signal
from argus_lab.plan.explain import reason
from argus_lab.plan.model import PERTURBATION_ORDER, Plan, PlannedRun, Request
from argus_lab.plan.ncu_settings import KernelCensus, metric_of, ncu_settings
from argus_lab.plan.passes import PassModel, default_pass_model
from argus_lab.plan.search import min_conflict_free_groups, split_counters

_BACKEND_ORDER = {name: i for i, name in enumerate(BACKENDS)}


def _attach_rank(group: Sequence[str]) -> tuple[int, int]:
    """Lower is better for hosting static backends: the timing run first, then other GPU runs, then any."""
    infos = [BACKENDS[b] for b in group]
    if any(i.holds_cupti and i.perturbation == "light" for i in infos):
        return (0, 0)
    worst = max(PERTURBATION_ORDER[i.perturbation] for i in infos)
    return (1 + worst, 0 if any(i.needs_gpu for i in infos) else 1)


def _cost(executions: int, passes: int, backends: Iterable[str], share: float = 1.0) -> float:
    """Workload executions x replay passes x the backends' cost factors; a replay run's passes replay only the
    in-scope share of the kernels (``share``, from a census; 1 when unknown)."""
    return round(executions * passes * share * math.prod(BACKENDS[b].cost_factor for b in backends), 3)


def _replayed_share(settings: dict[str, dict[str, Any]]) -> float:
    return float(next((s["replayed_share"] for s in settings.values() if "replayed_share" in s), 1.0))


def plan(request: Request, passes: PassModel | None = None, census: KernelCensus | None = None) -> Plan:
    """Turn a request into the fewest runs the declared conflicts and the pass bound allow.

    Parameters
    ----------
    request
        What to measure (see :meth:`Request.build`).
    passes
        The ncu pass-count model; by default :func:`argus_lab.plan.passes.default_pass_model` (on a GPU host the
        live count of CUPTI's profiler host API, else the table recorded on the H200).
    census
        Kernels per execution by region path from an earlier timing run of the workload
        (:func:`argus_lab.report.census.kernel_census`): an ncu run's cost then counts only the kernels of the
        scope's instances, the ones it replays.

    Returns
    -------
    Plan
        Runs in execution order; :meth:`Plan.explain` justifies them.
    """
    by_backend: dict[str, list[Signal]] = {}
    for sig in request.signals:
        if sig.backend not in BACKENDS:
            msg = f"signal {sig.name!r} names backend {sig.backend!r}, which is not declared in argus_lab.backends"
            raise PlanError(msg)
        by_backend.setdefault(sig.backend, []).append(sig)
    used = sorted(by_backend, key=_BACKEND_ORDER.__getitem__)
    static = [b for b in used if BACKENDS[b].perturbation == "static"]
    runtime = [b for b in used if BACKENDS[b].perturbation != "static"]
    groups = min_conflict_free_groups(runtime)

    # Replay backends (ncu) collect counters by replaying kernels: their signals are split by the pass model.
    counters = {
        b: [metric_of(sig.name) for sig in by_backend[b]] for b in runtime if BACKENDS[b].perturbation == "replay"
    }
    hw = [m for ms in counters.values() for m in ms]
    model: PassModel | None = (passes if passes is not None else default_pass_model()) if hw else None
    try:
        return _plan(request, model, by_backend, static, runtime, groups, counters, census)
    finally:
        close = getattr(model, "close", None) if passes is None else None
        if close is not None:
            close()  # a live model's worker process ends with the plan (its counts stay cached)


def _plan(
    request: Request,
    model: PassModel | None,
    by_backend: dict[str, list[Signal]],
    static: list[str],
    runtime: list[str],
    groups: list[list[str]],
    counters: dict[str, list[str]],
    census: KernelCensus | None = None,
) -> Plan:
    conflict_groups = len(groups)
    minimal = True
    splits: dict[str, list[list[str]]] = {}
    if model is not None:
        for b, metrics in counters.items():
            parts, proven = split_counters(metrics, model.passes, request.settings.max_passes_per_run)
            order = {m: k for k, m in reversed(list(enumerate(metrics)))}
            splits[b] = [sorted(part, key=order.__getitem__) for part in parts]
            minimal = minimal and proven

    specs: list[Spec] = []
    for gi, g in enumerate(groups):
        replay = next((b for b in g if b in splits), None)
        if replay is None:
            specs.append(Spec(g, None, None, 0, 1, gi))
            continue
        parts = splits[replay]
        specs += [Spec(g if k == 0 else [replay], replay, m, k, len(parts), gi) for k, m in enumerate(parts)]
    if static:
        if specs:
            host = min(range(len(specs)), key=lambda i: (_attach_rank(specs[i].backends), i))
            specs[host].backends = [*specs[host].backends, *static]
        else:
            specs.append(Spec(list(static), None, None, 0, 1, 0))
    specs.sort(
        key=lambda sp: (
            max((PERTURBATION_ORDER[BACKENDS[b].perturbation] for b in sp.backends if b not in static), default=0),
            min(_BACKEND_ORDER[b] for b in sp.backends),
            sp.k,
        )
    )

    runs: list[PlannedRun] = []
    execs = request.executions
    signals_of: dict[str, list[str]] = {}  # each counter's signal names, in request order
    for b in splits:
        for sig in by_backend[b]:
            signals_of.setdefault(metric_of(sig.name), []).append(sig.name)
    totals: dict[str, int] = {}
    by_group: dict[int, list[int]] = {}
    for j, sp in enumerate(specs):
        by_group.setdefault(sp.group, []).append(j)
    for index, spec in enumerate(specs):
        backends = spec.backends
        attached = tuple(b for b in backends if b in static) if set(backends) - set(static) else ()
        signals: list[str] = []
        settings: dict[str, dict[str, Any]] = {}
        n_passes = 1
        passes_from = ""
        for b in backends:
            if b == spec.replay and spec.metrics is not None:
                assert model is not None
                signals += [name for m in spec.metrics for name in signals_of.get(m, ())]
                n_passes = model.passes(spec.metrics)
                origin = getattr(model, "origin", None)
                passes_from = str(origin(spec.metrics)) if origin is not None else ""
                settings[b] = ncu_settings(request, spec.metrics, n_passes, census)
            else:
                signals += [sig.name for sig in by_backend[b]]
        if "cupti" in backends:  # how the timing run ties launches to instances (docs/gpu-backends.md)
            settings["cupti"] = {"launch_identity": cupti_launch_identity(signals)}
        if spec.replay and spec.replay not in totals:
            totals[spec.replay] = model.passes(counters[spec.replay]) if model is not None else 0
        total_passes = totals.get(spec.replay, 0) if spec.replay else 0
        n_counters = len(counters[spec.replay]) if spec.replay else 0
        runs.append(
            PlannedRun(
                index=index,
                backends=tuple(backends),
                signals=tuple(signals),
                repeat=request.repeat,
                warmup=request.warmup,
                reason=reason(specs, index, static, n_passes, total_passes, n_counters, request, model, by_group),
                variant=next((BACKENDS[b].variant for b in backends if b not in static), ""),
                settings=settings,
                passes=n_passes,
                cost=_cost(execs, n_passes, backends, _replayed_share(settings)),
                attached=attached,
                passes_from=passes_from,
            )
        )

    naive_cost = 0.0
    for sig in request.signals:
        p = model.passes([metric_of(sig.name)]) if sig.backend in counters and model is not None else 1
        naive_cost += _cost(execs, p, [sig.backend])
    return Plan(
        request=request,
        runs=tuple(runs),
        minimal=minimal,
        conflict_groups=conflict_groups,
        naive_runs=len(request.signals),
        naive_cost=round(naive_cost, 3),
        pass_source=model.source if model is not None else "",
        pass_assumed=_assumed(model, [metric_of(s.name) for s in request.signals if s.backend in counters]),
    )


def _assumed(model: Any, metrics: Sequence[str]) -> tuple[str, ...]:
    """The metrics a table-based pass model has no record of (their pass count is a conservative guess)."""
    known = getattr(model, "known", None)
    return tuple(m for m in metrics if known is not None and not known(m))


@dataclass
class Spec:
    """A run being planned: its backends, its counters (ncu runs), its split position and conflict group."""

    backends: list[str]
    replay: str | None
    metrics: list[str] | None
    k: int
    count: int
    group: int


__all__ = ["Spec", "plan"]
