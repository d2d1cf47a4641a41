"""The prose of planning: a plan's account of itself, and the sentence that says why each run is separate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from argus_lab.plan.backends import BACKENDS, conflict_reason
from argus_lab.plan.search import EXACT_LIMIT, SEARCH_BUDGET

if TYPE_CHECKING:
    from argus_lab.plan.model import Plan, Request
    from argus_lab.plan.passes import PassModel
    from argus_lab.plan.planner import Spec


def explain_plan(plan: Plan) -> str:
    """A readable account of ``plan``: every run, its settings and cost, why it is separate, and totals."""
    req = plan.request
    lines = [
        f"plan: {len(plan.runs)} run(s) for {len(req.signals)} signal(s); "
        f"each run executes the workload {req.warmup} warm-up + {req.repeat} measured time(s); "
        f"scope: {str(req.scope) or '(everything)'}",
    ]
    for r in plan.runs:
        static = f" (+ {', '.join(r.attached)} attached)" if r.attached else ""
        runtime = [b for b in r.backends if b not in r.attached] or list(r.attached)
        gpu = "needs a GPU" if r.needs_gpu else "runs without a GPU"
        where = f"child process under {r.launcher}" if r.launcher else "in process"
        lines.append(f"run {r.index} [{r.perturbation}] {', '.join(runtime)}{static}: {where}, {gpu}")
        lines.append(f"    variant: {r.variant or 'plain program'}")
        lines.append(f"    signals: {', '.join(r.signals)}")
        for backend, settings in r.settings.items():
            hidden = ("args", "region_filters", "scope", "replays", "replayed_kernels", "replayed_share")
            shown = {k: v for k, v in settings.items() if k not in hidden}
            parts = [f"{k}={_show(v)}" for k, v in shown.items()]
            lines.append(f"    {backend}: {'; '.join(parts)}")
            if "args" in settings:
                lines.append(f"    command: {backend} {' '.join(_quote(a) for a in settings['args'])} <workload>")
            if "scope" in settings:
                lines.append(
                    "    replays: only kernels launched inside instances of the scope "
                    f"({settings['scope'] or 'every region'}; measured repetitions); nothing outside them"
                    + (f"; {settings['replays']}" if settings.get("replays") else "")
                )
        factors = " x ".join(f"{BACKENDS[b].cost_factor:g}" for b in r.backends)
        share = next((s["replayed_share"] for s in r.settings.values() if s.get("replayed_kernels") is not None), None)
        of = f" x {share:.3g} of the kernels (the in-scope ones)" if share is not None and share < 1 else ""
        lines.append(
            f"    cost: {req.executions} execution(s) x {r.passes} pass(es){of} x cost factors {factors} = {r.cost:g}"
        )
        if r.passes_from:
            lines.append(f"    passes: {r.passes} ({r.passes_from})")
        for b in r.backends:
            if BACKENDS[b].perturbation != "static":
                lines.append(f"    overhead of {b}: {BACKENDS[b].overhead_text()}")
        lines.append(f"    why: {r.reason}")
        for b in r.backends:
            if BACKENDS[b].note:
                lines.append(f"    note: {BACKENDS[b].note}.")
        if r.variant and not any(not x.variant and BACKENDS["cupti"].name in x.backends for x in plan.runs):
            lines.append(
                "    overhead: no run of the plain program traces kernels, so the overhead of the "
                f"{r.variant} variant cannot be measured; add gpu.time to the request to measure it"
            )
    if plan.minimal and not plan.conflict_groups:
        lines.append("minimum: only static backends were requested; one run loads the kernels they read")
    elif plan.minimal:
        lines.append(
            f"minimum: {len(plan.runs)} run(s) is the fewest the declared conflicts and the pass bound allow "
            f"({plan.conflict_groups} conflict-free backend group(s) found by exact search"
            + (", counters split by exact search)" if plan.pass_source else ")")
        )
    else:
        counters = sum(1 for s in plan.request.signals if s.backend == "ncu")
        if counters > EXACT_LIMIT:
            lines.append(
                f"not proven minimal: {counters} counters are more than the exact split search takes "
                f"({EXACT_LIMIT}); they were split greedily (first fit, largest pass counts first) into "
                f"{len(plan.runs)} run(s); ask for fewer counters per request for a proven minimum"
            )
        else:
            lines.append(
                f"not proven minimal: the counter split search stopped after {SEARCH_BUDGET} nodes; "
                f"{len(plan.runs)} run(s) is the best it found"
            )
    lines.append(
        f"naive plan (one run per signal): {plan.naive_runs} run(s), cost {plan.naive_cost:g}; "
        f"this plan: {len(plan.runs)} run(s), cost {plan.cost:g}"
    )
    if plan.pass_source:
        lines.append(f"pass counts: {plan.pass_source}")
    if plan.pass_assumed and plan.pass_source.startswith("live"):
        lines.append(
            f"not known to CUPTI on this chip: {', '.join(plan.pass_assumed)} (metrics ncu derives itself, or "
            "misspelled names: check them with `ncu --query-metrics`); their passes come from the recorded table"
        )
    elif plan.pass_assumed:
        lines.append(
            f"not in the pass table: {_few(plan.pass_assumed)}; each is assumed to need as many passes as "
            "the costliest recorded counter (on a GPU, a live count replaces this estimate)"
        )
    return "\n".join(lines)


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]" if value else "[] (none)"
    return str(value)


def _quote(arg: str) -> str:
    return f'"{arg}"' if any(c in arg for c in " *?[]()|^$\\") else arg


def _conflict_between(a: Sequence[str], b: Sequence[str]) -> str | None:
    for x in a:
        for y in b:
            why = conflict_reason(BACKENDS[x], BACKENDS[y])
            if why is not None:
                return why
    return None


def _few(names: Sequence[str], shown: int = 10) -> str:
    """Names joined by commas, the first ``shown`` of them and how many more."""
    more = f", and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _runs_text(indexes: Sequence[int]) -> str:
    if len(indexes) == 1:
        return f"run {indexes[0]}"
    return "runs " + ", ".join(str(i) for i in indexes[:-1]) + f" and {indexes[-1]}"


def reason(
    specs: Sequence[Spec],
    index: int,
    static: Sequence[str],
    n_passes: int,
    total_passes: int,
    n_counters: int,
    request: Request,
    model: PassModel | None,
    by_group: Mapping[int, Sequence[int]] | None = None,
) -> str:
    """Why run ``index`` is separate (``by_group``: the spec indexes of each conflict group, if known)."""
    spec = specs[index]
    if by_group is None:
        grouped: dict[int, list[int]] = {}
        for j, sp in enumerate(specs):
            grouped.setdefault(sp.group, []).append(j)
        by_group = grouped
    own = [b for b in spec.backends if b not in static]
    if not own:
        verb = "needs" if len(spec.backends) == 1 else "need"
        return (
            f"{', '.join(spec.backends).capitalize()} {verb} one execution of the workload to load the kernels and "
            "no other run executes it."
        )
    parts: list[str] = []
    if spec.metrics is not None and spec.count > 1:
        bound = request.settings.max_passes_per_run
        over = [m for m in spec.metrics if model is not None and model.passes([m]) > bound]
        if over:
            parts.append(
                f"counter set {spec.k + 1} of {spec.count}: {over[0]} alone needs {n_passes} replay passes, more "
                f"than max_passes_per_run={bound}, so it gets a replay run of its own"
            )
        else:
            parts.append(
                f"counter set {spec.k + 1} of {spec.count}: the {n_counters} requested counters together need "
                f"{total_passes} replay passes, more than max_passes_per_run={bound}, so they are split into the "
                f"fewest replay runs that stay within the bound (this one takes {n_passes})"
            )
    for group, members in by_group.items():
        if group == spec.group:
            continue
        other = specs[members[0]]
        why = _conflict_between(own, [b for b in other.backends if b not in static])
        if why is not None:
            parts.append(f"kept apart from {_runs_text(members)} because {why}")
    if not parts:
        parts.append(f"the only run: every requested backend ({', '.join(own)}) fits in one execution of the workload")
    sentence = "; ".join(parts)
    att = [b for b in spec.backends if b in static]
    if att:
        sentence += (
            f"; {', '.join(att)} (static) gets no run of its own and reads the compiled artefacts this run loads"
        )
    return sentence[0].upper() + sentence[1:] + "."
