"""The values of planning: a request, its settings, and the plan of runs that answers it, with their JSON form.

:func:`argus_lab.plan.planner.plan` makes a :class:`Plan` from a :class:`Request`; :meth:`Plan.explain` words it
(:mod:`argus_lab.plan.explain`); :meth:`Plan.to_json` and :meth:`Plan.from_json` store it with the runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from argus_lab.errors import PlanError, UnknownSignalError
from argus_lab.plan import metric_names
from argus_lab.plan.backends import BACKENDS, setting_problems
from argus_lab.plan.catalog import Signal, resolve
from argus_lab.plan.explain import explain_plan
from argus_lab.plan.scope import Scope

ReplayMode = Literal["kernel", "application", "range", "app-range"]
ClockControl = Literal["base", "none", "reset"]
CacheControl = Literal["all", "none"]

DEFAULT_MAX_PASSES_PER_RUN = 16
"""Default bound on the ncu replay passes of one run (see :class:`PlanSettings`)."""

PERTURBATION_ORDER = {"light": 0, "sampling": 1, "replay": 2, "instrumenting": 3, "static": 4}
"""Perturbation classes from the least to the most disturbing (static last: it has no run of its own)."""


def _check_counters(signals: Sequence[Signal]) -> None:
    """Raise :class:`UnknownSignalError` for ``hw:`` counters the chip's recorded metric names do not know."""
    bad = metric_names.unknown([s.name[3:] for s in signals if s.name.startswith("hw:")])
    if not bad:
        return
    parts = []
    for metric, close in bad[:5]:
        hint = f" (did you mean {', '.join(repr('hw:' + c) for c in close)}?)" if close else ""
        parts.append(f"'hw:{metric}'{hint}")
    known = metric_names.names()
    source = known.source if known is not None else "the recorded metric names"
    if len(bad) > 5:
        parts.append(f"and {len(bad) - 5} more")
    msg = (
        f"unknown Nsight Compute metric(s): {'; '.join(parts)}: not among the metric names of {source}; fix the "
        "name, or pass --allow-unknown-counters (allow_unknown_counters=True) to measure it anyway"
    )
    raise UnknownSignalError(msg)


MAX_REPETITIONS = 10_000_000
"""The most repetitions a run may have: repetition numbers are stored as 32-bit integers, and a run of more than
ten million repetitions is a mistake (a missing ``warmup=`` or a unit typo) rather than a plan."""


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
    allow_unknown_counters: bool = False
    """Plan ``hw:`` counters the recorded metric names of the chip do not know (``plan.metric_names``) instead of
    stopping with the closest names (a metric of a newer ncu, say)."""

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
        if repeat + warmup > MAX_REPETITIONS:
            msg = (
                f"repeat + warmup = {repeat + warmup:,} repetitions is more than one run can record "
                f"(at most {MAX_REPETITIONS:,}); measure fewer repetitions, e.g. repeat=100"
            )
            raise PlanError(msg)
        base = settings or PlanSettings()
        unknown = sorted(set(setting_overrides) - set(PlanSettings.__dataclass_fields__))
        if unknown:
            msg = f"unknown plan setting(s) {', '.join(unknown)}; known: {', '.join(PlanSettings.__dataclass_fields__)}"
            raise PlanError(msg)
        final = replace(base, **setting_overrides).validate()
        resolved = resolve(signals)
        if not final.allow_unknown_counters:
            _check_counters(resolved)
        return cls(resolved, Scope.parse(scope), repeat, warmup, final)

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
    passes_from
        Where the pass count of a replay run comes from (live CUPTI count, recorded table, estimate, assumption);
        ``""`` for runs without replay.
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
    passes_from: str = ""

    def __post_init__(self) -> None:
        problems = setting_problems(self.settings)
        if problems:  # at plan time, not when the run starts (replace() on a planned run checks again)
            msg = f"run {self.index} of the plan: {'; '.join(problems)}; fix the setting and plan again"
            raise PlanError(msg)

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
        return max(classes, key=PERTURBATION_ORDER.__getitem__)

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
            **({"passes_from": self.passes_from} if self.passes_from else {}),
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
            passes_from=str(data.get("passes_from", "")),
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
        return explain_plan(self)

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


__all__ = [
    "DEFAULT_MAX_PASSES_PER_RUN",
    "PERTURBATION_ORDER",
    "CacheControl",
    "ClockControl",
    "Plan",
    "PlanSettings",
    "PlannedRun",
    "ReplayMode",
    "Request",
]
