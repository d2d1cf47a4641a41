"""Request -> plan: the fewest runs that keep every measurement honest, each with its reason.

The planner reads only the backends' declarations (:class:`~argus_lab.backends.base.BackendInfo`) and
:func:`~argus_lab.backends.base.conflict_reason`, so a new backend needs no change here.

How a plan is made (:func:`plan`):

1. The requested signals are grouped by the backend that produces them.
2. The run-time backends (all but ``static`` ones) are partitioned into the fewest groups without a conflicting
   pair, by exact search (there are few backends).  Each group is one run.
3. The group holding a replay backend (``ncu``) is split into as many replay runs as its hardware counters need:
   every run stays within :attr:`PlanSettings.max_passes_per_run` replay passes according to the pass-count model
   (:mod:`argus_lab.passes`); the split uses the fewest runs, found by exact search (a node budget bounds it;
   the plan says when the bound was hit and the count is not proven minimal).
4. Static backends (compiler facts) get no run of their own: they attach to a run that executes the workload,
   preferring the timing (CUPTI) run; only when no other run exists do they get one.
5. Runs are ordered light -> sampling -> replay -> instrumenting, and each gets its settings, cost estimate
   (workload executions x replay passes x the backends' cost factors) and a sentence on why it is separate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from argus_lab.backends import BACKENDS, conflict_reason
from argus_lab.errors import PlanError
from argus_lab.passes import PassModel, default_pass_model
from argus_lab.scope import Scope
from argus_lab.signals import Signal, resolve

ReplayMode = Literal["kernel", "application", "range", "app-range"]
ClockControl = Literal["base", "none", "reset"]
CacheControl = Literal["all", "none"]

DEFAULT_MAX_PASSES_PER_RUN = 16
"""Default bound on the ncu replay passes of one run (see :class:`PlanSettings`)."""

SEARCH_BUDGET = 20_000
"""Nodes the exact counter-split search may visit before it settles for the best split found."""

_ORDER = {"light": 0, "sampling": 1, "replay": 2, "instrumenting": 3, "static": 4}
_BACKEND_ORDER = {name: i for i, name in enumerate(BACKENDS)}


@dataclass(frozen=True)
class PlanSettings:
    """Measurement settings of a request that shape the plan.

    Attributes
    ----------
    max_passes_per_run
        The most ncu replay passes one run may take.  Each pass replays every selected kernel once (with
        memory save/restore), so the bound caps how long one replay run takes and how much is lost when one
        fails; a counter set needing more passes is split over several runs.  A single metric that needs more
        passes than the bound still gets one run of its own.
    replay_mode
        ncu ``--replay-mode``.  ``kernel`` (the default) replays each selected kernel in place and works for any
        workload; ``application`` reruns the whole workload per pass and needs it to be deterministic; ``range``
        and ``app-range`` give metrics per NVTX range instead of per kernel.
    clock_control
        ncu ``--clock-control``: ``base`` (ncu's default: lock base clocks, for repeatable counters), ``none``
        (clocks as the GPU chooses) or ``reset``.
    cache_control
        ncu ``--cache-control``: ``all`` (ncu's default: flush caches before every pass, so passes agree) or
        ``none`` (keep caches warm, closer to the real run, passes may disagree).
    """

    max_passes_per_run: int = DEFAULT_MAX_PASSES_PER_RUN
    replay_mode: ReplayMode = "kernel"
    clock_control: ClockControl = "base"
    cache_control: CacheControl = "all"

    def validate(self) -> PlanSettings:
        """Return ``self`` or raise :class:`PlanError` saying which setting is wrong and how to fix it."""
        if not isinstance(self.max_passes_per_run, int) or self.max_passes_per_run < 1:
            msg = f"max_passes_per_run must be an integer >= 1, got {self.max_passes_per_run!r}"
            raise PlanError(msg)
        for name, allowed in (
            ("replay_mode", ("kernel", "application", "range", "app-range")),
            ("clock_control", ("base", "none", "reset")),
            ("cache_control", ("all", "none")),
        ):
            value = getattr(self, name)
            if value not in allowed:
                msg = f"{name} must be one of {', '.join(allowed)}; got {value!r}"
                raise PlanError(msg)
        return self


@dataclass(frozen=True)
class Request:
    """Regions x signals x scope x repetitions (the regions are the scope's globs)."""

    signals: tuple[Signal, ...]
    scope: Scope = field(default_factory=Scope)
    repeat: int = 1
    warmup: int = 0
    settings: PlanSettings = field(default_factory=PlanSettings)

    @classmethod
    def build(
        cls,
        signals: str | list[str] | tuple[str, ...],
        scope: str | Scope | None = "",
        repeat: int = 1,
        warmup: int = 0,
        settings: PlanSettings | None = None,
        **setting_overrides: Any,
    ) -> Request:
        """Resolve signal names, parse the scope and validate the numbers.

        ``setting_overrides`` set fields of :class:`PlanSettings` (e.g. ``max_passes_per_run=8``).

        Raises
        ------
        UnknownSignalError
            For an unknown signal, with the closest known names.
        ScopeSyntaxError
            For a malformed scope, with a caret under the bad character.
        PlanError
            For a repeat below 1, a negative warm-up count or a bad setting.
        """
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            msg = f"repeat must be an integer >= 1 (measured repetitions per run), got {repeat!r}"
            raise PlanError(msg)
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            msg = f"warmup must be an integer >= 0 (unmeasured repetitions before each run), got {warmup!r}"
            raise PlanError(msg)
        base = settings or PlanSettings()
        unknown = sorted(set(setting_overrides) - set(PlanSettings.__dataclass_fields__))
        if unknown:
            msg = f"unknown plan setting(s) {', '.join(unknown)}; known: {', '.join(PlanSettings.__dataclass_fields__)}"
            raise PlanError(msg)
        final = replace(base, **setting_overrides).validate()
        return cls(resolve(signals), Scope.parse(scope), repeat, warmup, final)

    @property
    def executions(self) -> int:
        """Workload executions per run (warm-ups included)."""
        return self.repeat + self.warmup

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (signals by name, scope in its canonical text)."""
        return {
            "signals": [s.name for s in self.signals],
            "scope": str(self.scope),
            "repeat": self.repeat,
            "warmup": self.warmup,
            "settings": {k: getattr(self.settings, k) for k in PlanSettings.__dataclass_fields__},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Request:
        """The inverse of :meth:`to_dict`."""
        return cls.build(
            list(data["signals"]),
            data.get("scope", ""),
            int(data.get("repeat", 1)),
            int(data.get("warmup", 0)),
            PlanSettings(**data.get("settings", {})),
        )


@dataclass(frozen=True)
class PlannedRun:
    """One run of a plan.

    Attributes
    ----------
    index
        Position in the plan (0 = first run).
    backends
        Backends active in the run, attached static ones included (see ``attached``).
    signals
        The signals this run supplies (each requested signal is supplied by exactly one run).
    repeat, warmup
        Measured and unmeasured workload executions.
    reason
        Why this is a run of its own (which declared conflict or pass bound forced it).
    variant
        Program variant (``""`` = the unmodified program).
    settings
        Per-backend settings; for ``ncu``: ``metrics``, ``replay_mode``, ``clock_control``, ``cache_control``,
        ``nvtx_include`` and the command-line ``args`` built from them.
    passes
        Replay passes per workload execution (1 for runs without replay).
    cost
        Estimated cost: executions x passes x the product of the backends' cost factors.
    attached
        Static backends riding on this run (they read what the run loads; no run of their own).
    """

    index: int
    backends: tuple[str, ...]
    signals: tuple[str, ...]
    repeat: int
    warmup: int
    reason: str
    variant: str = ""
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    passes: int = 1
    cost: float = 1.0
    attached: tuple[str, ...] = ()

    @property
    def needs_gpu(self) -> bool:
        """Whether any backend of the run needs a GPU."""
        return any(BACKENDS[b].needs_gpu for b in self.backends)

    @property
    def launcher(self) -> str | None:
        """The backend that must start the workload itself, if any (the run then uses a child process)."""
        return next((b for b in self.backends if BACKENDS[b].launches_workload), None)

    @property
    def perturbation(self) -> str:
        """The strongest perturbation class among the run's run-time backends."""
        classes = [BACKENDS[b].perturbation for b in self.backends if b not in self.attached] or ["static"]
        return max(classes, key=_ORDER.__getitem__)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "index": self.index,
            "backends": list(self.backends),
            "signals": list(self.signals),
            "repeat": self.repeat,
            "warmup": self.warmup,
            "reason": self.reason,
            "variant": self.variant,
            "settings": {k: dict(v) for k, v in self.settings.items()},
            "passes": self.passes,
            "cost": self.cost,
            "attached": list(self.attached),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlannedRun:
        """The inverse of :meth:`to_dict`."""
        return cls(
            index=int(data["index"]),
            backends=tuple(data["backends"]),
            signals=tuple(data["signals"]),
            repeat=int(data["repeat"]),
            warmup=int(data["warmup"]),
            reason=str(data["reason"]),
            variant=str(data.get("variant", "")),
            settings={k: dict(v) for k, v in data.get("settings", {}).items()},
            passes=int(data.get("passes", 1)),
            cost=float(data.get("cost", 1.0)),
            attached=tuple(data.get("attached", ())),
        )


@dataclass(frozen=True)
class Plan:
    """An ordered list of runs, with what is needed to justify it.

    Attributes
    ----------
    request
        The request it answers.
    runs
        The runs, in execution order.
    minimal
        Whether the run count is proven to be the fewest the declared conflicts and the pass bound allow.
    conflict_groups
        How many conflict-free backend groups the exact search found (before counter splits).
    naive_runs, naive_cost
        Run count and cost of the naive plan that gives every signal a run of its own.
    pass_source
        Where the ncu pass counts come from ("" when no counters were requested).
    """

    request: Request
    runs: tuple[PlannedRun, ...]
    minimal: bool = True
    conflict_groups: int = 0
    naive_runs: int = 0
    naive_cost: float = 0.0
    pass_source: str = ""
    pass_assumed: tuple[str, ...] = ()

    @property
    def cost(self) -> float:
        """Total estimated cost of the plan."""
        return round(sum(r.cost for r in self.runs), 3)

    def run_for(self, signal: str) -> PlannedRun:
        """The run that supplies ``signal``."""
        for r in self.runs:
            if signal in r.signals:
                return r
        msg = f"signal {signal!r} is not in this plan; it supplies {', '.join(s.name for s in self.request.signals)}"
        raise KeyError(msg)

    def explain(self) -> str:
        """A readable account of the plan: every run, its settings and cost, why it is separate, and totals."""
        req = self.request
        lines = [
            f"plan: {len(self.runs)} run(s) for {len(req.signals)} signal(s); "
            f"each run executes the workload {req.warmup} warm-up + {req.repeat} measured time(s); "
            f"scope: {str(req.scope) or '(everything)'}",
        ]
        for r in self.runs:
            static = f" (+ {', '.join(r.attached)} attached)" if r.attached else ""
            runtime = [b for b in r.backends if b not in r.attached] or list(r.attached)
            gpu = "needs a GPU" if r.needs_gpu else "runs without a GPU"
            where = f"child process under {r.launcher}" if r.launcher else "in process"
            lines.append(f"run {r.index} [{r.perturbation}] {', '.join(runtime)}{static}: {where}, {gpu}")
            lines.append(f"    variant: {r.variant or 'plain program'}")
            lines.append(f"    signals: {', '.join(r.signals)}")
            for backend, settings in r.settings.items():
                shown = {k: v for k, v in settings.items() if k != "args"}
                parts = [f"{k}={_show(v)}" for k, v in shown.items()]
                lines.append(f"    {backend}: {'; '.join(parts)}")
                if "args" in settings:
                    lines.append(f"    command: {backend} {' '.join(_quote(a) for a in settings['args'])} <workload>")
            factors = " x ".join(f"{BACKENDS[b].cost_factor:g}" for b in r.backends)
            lines.append(
                f"    cost: {req.executions} execution(s) x {r.passes} pass(es) x cost factors {factors} = {r.cost:g}"
            )
            lines.append(f"    why: {r.reason}")
        if self.minimal and not self.conflict_groups:
            lines.append("minimum: only static backends were requested; one run loads the kernels they read")
        elif self.minimal:
            lines.append(
                f"minimum: {len(self.runs)} run(s) is the fewest the declared conflicts and the pass bound allow "
                f"({self.conflict_groups} conflict-free backend group(s) found by exact search"
                + (", counters split by exact search)" if self.pass_source else ")")
            )
        else:
            lines.append(
                f"not proven minimal: the counter split search stopped after {SEARCH_BUDGET} nodes; "
                f"{len(self.runs)} run(s) is the best it found"
            )
        lines.append(
            f"naive plan (one run per signal): {self.naive_runs} run(s), cost {self.naive_cost:g}; "
            f"this plan: {len(self.runs)} run(s), cost {self.cost:g}"
        )
        if self.pass_source:
            lines.append(f"pass counts: {self.pass_source}")
        if self.pass_assumed:
            lines.append(
                f"not in the pass table: {', '.join(self.pass_assumed)}; each is assumed to need as many passes as "
                "the costliest recorded counter (on a GPU, a live count replaces this estimate)"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "request": self.request.to_dict(),
            "runs": [r.to_dict() for r in self.runs],
            "minimal": self.minimal,
            "conflict_groups": self.conflict_groups,
            "naive_runs": self.naive_runs,
            "naive_cost": self.naive_cost,
            "pass_source": self.pass_source,
            "pass_assumed": list(self.pass_assumed),
        }

    def to_json(self) -> str:
        """The plan as JSON (:meth:`from_json` reads it back to an equal plan)."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=1)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """Read a plan written by :meth:`to_json`."""
        data = json.loads(text)
        return cls(
            request=Request.from_dict(data["request"]),
            runs=tuple(PlannedRun.from_dict(r) for r in data["runs"]),
            minimal=bool(data.get("minimal", True)),
            conflict_groups=int(data.get("conflict_groups", 0)),
            naive_runs=int(data.get("naive_runs", 0)),
            naive_cost=float(data.get("naive_cost", 0.0)),
            pass_source=str(data.get("pass_source", "")),
            pass_assumed=tuple(data.get("pass_assumed", ())),
        )


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]" if value else "[] (none)"
    return str(value)


def _quote(arg: str) -> str:
    return f'"{arg}"' if any(c in arg for c in " *?[]()|^$\\") else arg


# -- search ---------------------------------------------------------------------------------------


def min_conflict_free_groups(names: Sequence[str]) -> list[list[str]]:
    """The fewest groups of backends such that no group holds a conflicting pair (exact search).

    Among equally small partitions the first in depth-first order of ``names`` is returned, so each backend
    joins the earliest group it fits.
    """
    n = len(names)
    ok = [[conflict_reason(BACKENDS[a], BACKENDS[b]) is None for b in names] for a in names]
    best: list[list[int]] = [[i] for i in range(n)]

    def search(i: int, groups: list[list[int]]) -> None:
        nonlocal best
        if len(groups) >= len(best):
            return
        if i == n:
            best = [list(g) for g in groups]
            return
        for g in groups:
            if all(ok[i][j] for j in g):
                g.append(i)
                search(i + 1, groups)
                g.pop()
        groups.append([i])
        search(i + 1, groups)
        groups.pop()

    if n:
        best = [[i] for i in range(n)]
        search(0, [])
    return [[names[i] for i in g] for g in best]


def split_counters(
    metrics: Sequence[str], passes: Callable[[Iterable[str]], int], bound: int, budget: int = SEARCH_BUDGET
) -> tuple[list[list[str]], bool]:
    """Split ``metrics`` into the fewest sets whose pass count stays within ``bound``.

    A metric that alone exceeds the bound gets a set of its own.  Exact depth-first search over assignments
    (metrics in decreasing pass order, first-fit-decreasing as the starting bound); returns the sets and
    whether the search finished within ``budget`` nodes (i.e. the count is proven minimal).
    """
    if not metrics:
        return [], True
    alone = {m: passes([m]) for m in metrics}
    big = [m for m in metrics if alone[m] > bound]
    rest = sorted((m for m in metrics if alone[m] <= bound), key=lambda m: (-alone[m], metrics.index(m)))

    def fits(group: list[str], m: str) -> bool:
        return passes([*group, m]) <= bound

    ffd: list[list[str]] = []
    for m in rest:
        for g in ffd:
            if fits(g, m):
                g.append(m)
                break
        else:
            ffd.append([m])
    best = [list(g) for g in ffd]
    lower = 1 if rest else 0
    nodes = 0
    finished = True

    def search(i: int, groups: list[list[str]]) -> None:
        nonlocal best, nodes, finished
        if len(best) <= lower or len(groups) >= len(best):
            return
        nodes += 1
        if nodes > budget:
            finished = False
            return
        if i == len(rest):
            best = [list(g) for g in groups]
            return
        m = rest[i]
        for g in groups:
            if fits(g, m):
                g.append(m)
                search(i + 1, groups)
                g.pop()
        groups.append([m])
        search(i + 1, groups)
        groups.pop()

    search(0, [])
    return [[m] for m in big] + best, finished


# -- planning -------------------------------------------------------------------------------------


def _attach_rank(group: Sequence[str]) -> tuple[int, int]:
    """Lower is better for hosting static backends: the timing run first, then other GPU runs, then any."""
    infos = [BACKENDS[b] for b in group]
    if any(i.holds_cupti and i.perturbation == "light" for i in infos):
        return (0, 0)
    worst = max(_ORDER[i.perturbation] for i in infos)
    return (1 + worst, 0 if any(i.needs_gpu for i in infos) else 1)


def _conflict_between(a: Sequence[str], b: Sequence[str]) -> str | None:
    for x in a:
        for y in b:
            why = conflict_reason(BACKENDS[x], BACKENDS[y])
            if why is not None:
                return why
    return None


def _ncu_settings(request: Request, metrics: Sequence[str], passes: int) -> dict[str, Any]:
    s = request.settings
    includes = list(request.scope.nvtx_includes())
    args = [
        "--metrics",
        ",".join(metrics),
        "--replay-mode",
        s.replay_mode,
        "--clock-control",
        s.clock_control,
        "--cache-control",
        s.cache_control,
    ]
    if includes:
        args.append("--nvtx")
        for inc in includes:
            args += ["--nvtx-include", inc]
    return {
        "metrics": list(metrics),
        "replay_mode": s.replay_mode,
        "clock_control": s.clock_control,
        "cache_control": s.cache_control,
        "nvtx_include": includes,
        "passes": passes,
        "args": args,
    }


def _metric(signal: str) -> str:
    """The metric a counter signal names (``hw:dram__bytes_read.sum`` -> ``dram__bytes_read.sum``)."""
    return signal.split(":", 1)[1] if ":" in signal else signal


def _cost(executions: int, passes: int, backends: Iterable[str]) -> float:
    return round(executions * passes * math.prod(BACKENDS[b].cost_factor for b in backends), 3)


def plan(request: Request, passes: PassModel | None = None) -> Plan:
    """Turn a request into the fewest runs the declared conflicts and the pass bound allow.

    Parameters
    ----------
    request
        What to measure (see :meth:`Request.build`).
    passes
        The ncu pass-count model; by default :func:`argus_lab.passes.default_pass_model` (the table recorded on
        the H200).  On a GPU machine a model that asks the GPU can be passed here.

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
    conflict_groups = len(groups)

    # Replay backends (ncu) collect counters by replaying kernels: their signals are split by the pass model.
    counters = {
        b: [_metric(sig.name) for sig in by_backend[b]] for b in runtime if BACKENDS[b].perturbation == "replay"
    }
    hw = [m for ms in counters.values() for m in ms]
    model: PassModel | None = None
    minimal = True
    splits: dict[str, list[list[str]]] = {}
    if hw:
        model = passes if passes is not None else default_pass_model()
        for b, metrics in counters.items():
            parts, proven = split_counters(metrics, model.passes, request.settings.max_passes_per_run)
            splits[b] = [sorted(part, key=metrics.index) for part in parts]
            minimal = minimal and proven

    specs: list[_Spec] = []
    for gi, g in enumerate(groups):
        replay = next((b for b in g if b in splits), None)
        if replay is None:
            specs.append(_Spec(g, None, None, 0, 1, gi))
            continue
        parts = splits[replay]
        specs += [_Spec(g if k == 0 else [replay], replay, m, k, len(parts), gi) for k, m in enumerate(parts)]
    if static:
        if specs:
            host = min(range(len(specs)), key=lambda i: (_attach_rank(specs[i].backends), i))
            specs[host].backends = [*specs[host].backends, *static]
        else:
            specs.append(_Spec(list(static), None, None, 0, 1, 0))
    specs.sort(
        key=lambda sp: (
            max((_ORDER[BACKENDS[b].perturbation] for b in sp.backends if b not in static), default=0),
            min(_BACKEND_ORDER[b] for b in sp.backends),
            sp.k,
        )
    )

    runs: list[PlannedRun] = []
    execs = request.executions
    for index, spec in enumerate(specs):
        backends = spec.backends
        attached = tuple(b for b in backends if b in static) if set(backends) - set(static) else ()
        signals: list[str] = []
        settings: dict[str, dict[str, Any]] = {}
        n_passes = 1
        for b in backends:
            if b == spec.replay and spec.metrics is not None:
                assert model is not None
                signals += [sig.name for sig in by_backend[b] if _metric(sig.name) in spec.metrics]
                n_passes = model.passes(spec.metrics)
                settings[b] = _ncu_settings(request, spec.metrics, n_passes)
            else:
                signals += [sig.name for sig in by_backend[b]]
        total_passes = model.passes(counters[spec.replay]) if model is not None and spec.replay else 0
        n_counters = len(counters[spec.replay]) if spec.replay else 0
        runs.append(
            PlannedRun(
                index=index,
                backends=tuple(backends),
                signals=tuple(signals),
                repeat=request.repeat,
                warmup=request.warmup,
                reason=_reason(specs, index, static, n_passes, total_passes, n_counters, request, model),
                variant=next((BACKENDS[b].variant for b in backends if b not in static), ""),
                settings=settings,
                passes=n_passes,
                cost=_cost(execs, n_passes, backends),
                attached=attached,
            )
        )

    naive_cost = 0.0
    for sig in request.signals:
        p = model.passes([_metric(sig.name)]) if sig.backend in counters and model is not None else 1
        naive_cost += _cost(execs, p, [sig.backend])
    return Plan(
        request=request,
        runs=tuple(runs),
        minimal=minimal,
        conflict_groups=conflict_groups,
        naive_runs=len(request.signals),
        naive_cost=round(naive_cost, 3),
        pass_source=model.source if model is not None else "",
        pass_assumed=_assumed(model, [_metric(s.name) for s in request.signals if s.backend in counters]),
    )


def _assumed(model: Any, metrics: Sequence[str]) -> tuple[str, ...]:
    """The metrics a table-based pass model has no record of (their pass count is a conservative guess)."""
    known = getattr(model, "known", None)
    return tuple(m for m in metrics if known is not None and not known(m))


@dataclass
class _Spec:
    """A run being planned: its backends, its counters (ncu runs), its split position and conflict group."""

    backends: list[str]
    replay: str | None
    metrics: list[str] | None
    k: int
    count: int
    group: int


def _runs_text(indexes: Sequence[int]) -> str:
    if len(indexes) == 1:
        return f"run {indexes[0]}"
    return "runs " + ", ".join(str(i) for i in indexes[:-1]) + f" and {indexes[-1]}"


def _reason(
    specs: Sequence[_Spec],
    index: int,
    static: Sequence[str],
    n_passes: int,
    total_passes: int,
    n_counters: int,
    request: Request,
    model: PassModel | None,
) -> str:
    spec = specs[index]
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
    seen: list[int] = []
    for other in specs:
        if other.group == spec.group or other.group in seen:
            continue
        seen.append(other.group)
        members = [j for j, sp in enumerate(specs) if sp.group == other.group]
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


__all__ = [
    "DEFAULT_MAX_PASSES_PER_RUN",
    "Plan",
    "PlanSettings",
    "PlannedRun",
    "Request",
    "min_conflict_free_groups",
    "plan",
    "split_counters",
]
