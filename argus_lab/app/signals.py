"""The signals a face offers: the catalog as rows (``argus-lab signals``, ``GET argus-lab/signals``), why a choice of
signals cannot share one run, and which of a plan's signals this machine cannot collect (the signal panel)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from argus_lab.errors import ArgusError
from argus_lab.plan import Plan
from argus_lab.plan.backends import BACKENDS, conflict_reason
from argus_lab.plan.catalog import CATALOG, FAMILIES, lookup


@dataclass(frozen=True)
class SignalInfo:
    """One signal of the catalog as a face lists it."""

    name: str
    unit: str
    backend: str
    description: str
    needs_gpu: bool
    perturbation: str


@dataclass(frozen=True)
class FamilyInfo:
    """An open family of signals (``hw:<ncu metric>``, ``pm:<metric>``): its prefix, backend and what it measures."""

    prefix: str
    backend: str
    description: str


def catalog() -> tuple[SignalInfo, ...]:
    """Every named signal of the catalog, in the catalog's order."""
    return tuple(
        SignalInfo(s.name, s.unit, s.backend, s.description, s.needs_gpu, s.perturbation) for s in CATALOG.values()
    )


def families() -> tuple[FamilyInfo, ...]:
    """The open families of signals, in the catalog's order."""
    return tuple(FamilyInfo(prefix, backend, description) for prefix, (backend, description) in FAMILIES.items())


def conflicts(signals: Sequence[str]) -> list[str]:
    """Why the backends of ``signals`` cannot all share one run: ``"a / b: why"`` for each pair that conflicts
    (names the catalog does not know are left out: planning says what is wrong with them)."""
    chosen: list[str] = []
    for name in signals:
        try:
            backend = lookup(name).backend
        except ArgusError:
            continue
        if backend not in chosen:
            chosen.append(backend)
    out = []
    for a, b in itertools.combinations(chosen, 2):
        why = conflict_reason(BACKENDS[a], BACKENDS[b])
        if why:
            out.append(f"{a} / {b}: {why}")
    return out


def needing_gpu(the_plan: Plan) -> list[str]:
    """The signals of ``the_plan``'s runs that only a machine with a GPU collects."""
    return [s for r in the_plan.runs for s in r.signals if lookup(s).needs_gpu]


__all__ = ["FamilyInfo", "SignalInfo", "catalog", "conflicts", "families", "needing_gpu"]
