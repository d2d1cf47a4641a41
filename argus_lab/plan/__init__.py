"""Planning: from a request (signals x scope x repetitions) to the fewest runs that keep each measurement honest.

Upstream of everything that runs: the signal catalog (:mod:`~argus_lab.plan.catalog`), the backend declarations
(:mod:`~argus_lab.plan.backends`), the scope language (:mod:`~argus_lab.plan.scope`), the ncu pass-count model
(:mod:`~argus_lab.plan.passes`), the values (:mod:`~argus_lab.plan.model`), the exact searches
(:mod:`~argus_lab.plan.search`), the assembly of a plan (:mod:`~argus_lab.plan.planner`), its prose
(:mod:`~argus_lab.plan.explain`) and the ncu settings of replay runs (:mod:`~argus_lab.plan.ncu_settings`).

The package is also the public ``argus_lab.plan`` function: calling it plans a measurement of some signals::

    import argus_lab
    print(argus_lab.plan("host.wall,hw:dram__bytes_read.sum", repeat=5).explain())

(a package and a function cannot share the name ``argus_lab.plan``, since importing ``argus_lab.plan.model``
binds the package to that name; so the package itself is callable, see :func:`plan_signals`).
"""

from __future__ import annotations

import sys
import types

from argus_lab import config
from argus_lab.plan.backends import BACKENDS, BackendInfo, backend_info, conflict_reason
from argus_lab.plan.catalog import CATALOG, Signal, lookup, resolve
from argus_lab.plan.model import DEFAULT_MAX_PASSES_PER_RUN, Plan, PlannedRun, PlanSettings, Request
from argus_lab.plan.planner import plan
from argus_lab.plan.scope import Scope
from argus_lab.plan.search import min_conflict_free_groups, split_counters

DEFAULT_SIGNALS = "host.wall,host.cpu"
"""What a measurement collects when no signals are named."""


def plan_signals(
    signals: str | list[str] = DEFAULT_SIGNALS,
    *,
    scope: str = "",
    repeat: int = config.REPEAT,
    warmup: int = config.WARMUP,
    allow_unknown_counters: bool = False,
) -> Plan:
    """Plan a measurement of ``signals`` without running it (what ``argus_lab.plan(...)`` calls);
    ``allow_unknown_counters`` plans ``hw:`` counters the chip's recorded metric names do not know."""
    request = Request.build(
        signals, scope=scope, repeat=repeat, warmup=warmup, allow_unknown_counters=allow_unknown_counters
    )
    return plan(request)


class _CallablePackage(types.ModuleType):
    """The ``argus_lab.plan`` package, callable as :func:`plan_signals`."""

    def __call__(
        self,
        signals: str | list[str] = DEFAULT_SIGNALS,
        *,
        scope: str = "",
        repeat: int = config.REPEAT,
        warmup: int = config.WARMUP,
        allow_unknown_counters: bool = False,
    ) -> Plan:
        return plan_signals(
            signals, scope=scope, repeat=repeat, warmup=warmup, allow_unknown_counters=allow_unknown_counters
        )

    def __repr__(self) -> str:
        return "<argus_lab.plan: call it to plan a measurement, e.g. argus_lab.plan('host.wall,gpu.time')>"


sys.modules[__name__].__class__ = _CallablePackage


__all__ = [
    "BACKENDS",
    "CATALOG",
    "DEFAULT_MAX_PASSES_PER_RUN",
    "DEFAULT_SIGNALS",
    "BackendInfo",
    "Plan",
    "PlanSettings",
    "PlannedRun",
    "Request",
    "Scope",
    "Signal",
    "backend_info",
    "conflict_reason",
    "lookup",
    "min_conflict_free_groups",
    "plan",
    "plan_signals",
    "resolve",
    "split_counters",
]
