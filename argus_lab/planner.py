"""Request -> plan: the fewest runs that keep every measurement honest, each with its reason.

(Skeleton: the data types are final; the grouping and the pass-count split are being completed.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from argus_lab.backends import BACKENDS, conflict_reason
from argus_lab.signals import Signal, resolve


@dataclass(frozen=True)
class Request:
    """Regions x signals x scope x repetitions."""

    signals: tuple[Signal, ...]
    scope: str = ""
    repeat: int = 1
    warmup: int = 0

    @classmethod
    def build(cls, signals: str | list[str] | tuple[str, ...], scope: str = "", repeat: int = 1, warmup: int = 0) -> Request:
        """Resolve signal names and validate the numbers."""
        return cls(resolve(signals), scope, repeat, warmup)


@dataclass(frozen=True)
class PlannedRun:
    """One run of a plan."""

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

    @property
    def needs_gpu(self) -> bool:
        """Whether any backend of the run needs a GPU."""
        return any(BACKENDS[b].needs_gpu for b in self.backends)

    @property
    def launcher(self) -> str | None:
        """The backend that must start the workload itself, if any (the run then uses a child process)."""
        return next((b for b in self.backends if BACKENDS[b].launches_workload), None)

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
        }


@dataclass(frozen=True)
class Plan:
    """An ordered list of runs."""

    request: Request
    runs: tuple[PlannedRun, ...]

    def explain(self) -> str:
        """A readable account of the plan."""
        lines = [f"plan: {len(self.runs)} run(s)"]
        for r in self.runs:
            lines.append(f"  run {r.index}: {', '.join(r.backends)} -> {', '.join(r.signals)}  ({r.reason})")
        return "\n".join(lines)

    def request_text(self) -> str:
        """The request in one line (stored with the run)."""
        r = self.request
        return f"signals={','.join(s.name for s in r.signals)} scope={r.scope or '*'} repeat={r.repeat} warmup={r.warmup}"

    def request_json(self) -> str:
        """The request as JSON (stored with the run)."""
        r = self.request
        return json.dumps({"signals": [s.name for s in r.signals], "scope": str(r.scope), "repeat": r.repeat,
                           "warmup": r.warmup})

    def to_json(self) -> str:
        """The plan as JSON."""
        return json.dumps({"runs": [r.to_dict() for r in self.runs]}, sort_keys=True)


def plan(request: Request) -> Plan:
    """Group the request's signals into runs whose backends do not conflict (greedy skeleton)."""
    by_backend: dict[str, list[str]] = {}
    for s in request.signals:
        by_backend.setdefault(s.backend, []).append(s.name)
    groups: list[list[str]] = []
    for name in by_backend:
        for g in groups:
            if all(conflict_reason(BACKENDS[name], BACKENDS[o]) is None for o in g):
                g.append(name)
                break
        else:
            groups.append([name])
    runs = tuple(
        PlannedRun(
            index=i,
            backends=tuple(g),
            signals=tuple(s for b in g for s in by_backend[b]),
            repeat=request.repeat,
            warmup=request.warmup,
            reason="first run" if i == 0 else "conflicts with the earlier runs",
        )
        for i, g in enumerate(groups)
    )
    return Plan(request, runs)
