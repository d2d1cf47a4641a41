"""Searches replayed over the recorded table: one evolutionary search fed timing only or argus_lab's evidence, and
argus_lab's written rule set, each at a budget of distinct candidates read.

Every candidate of every configuration was measured once on the H200 (bench/record_candidates.py); a search here
*measures* a candidate by reading its recorded samples and evidence (:class:`Reader`), and its budget counts the
distinct candidates it read.  Replaying one recorded table instead of measuring during the search is what lets
three searchers x ten seeds x 47 configurations run at equal budgets from one GPU run: every searcher sees the
same measurement of a candidate, so the comparison is of the searches, not of run-to-run noise.

:func:`evolve` is the search procedure (seeded, steady-state evolutionary): the default, two random candidates,
then each step either explores (a random unread candidate, 15 %) or mutates a parent picked by a two-way
tournament on measured time.  With ``evidence=False`` the mutation is a random nearest unread candidate (the
smallest number of changed parameters).  With ``evidence=True`` the same loop reads the parent's evidence through
``argus_lab.optimize``'s rules (``propose``: compiler facts, occupancy, device-region phases, SM tail, wave
quantisation, roofline position) and takes the highest-priority proposal not yet read, falling back to the same
random mutation when no rule proposes one; candidates the compiler facts rule out before running
(``argus_lab.optimize.prune``: spills, shared memory, residency) are skipped without being read.  Every decision is
kept with the evidence it read and a sentence an agent can be given (:class:`Decision`).

:func:`rules` runs ``argus_lab.optimize.EvidenceGuided`` (the written rule set) through
``argus_lab.optimize.run_search`` on the same reader.  Rule moves step one parameter along its axis; in a recorded
space that is an explicit list, :class:`SnapContext` maps a step to the nearest recorded candidate with the stepped
value.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from argus_lab import optimize as opt
from bench.replay_table import H200, PHASE_ROLES, ConfigTable, evaluation, model, space, static_facts

EXPLORE = 0.15
"""Share of steps that read a random unread candidate (both inputs alike)."""
INITIAL_RANDOM = 2
"""Random candidates read after the default, before the first mutation."""


@dataclass(frozen=True)
class Decision:
    """One step of a search: what it read (or skipped), why, and the evidence it read to decide."""

    step: int
    candidate: str
    action: str
    """``read`` (counted against the budget) or ``skip`` (ruled out by the compiler facts, not read)."""
    source: str
    """``default``, ``random``, ``mutation``, an ``argus_lab.optimize`` rule name, or ``prune``."""
    parent: str | None
    evidence: dict[str, Any]
    text: str


@dataclass
class Replay:
    """One search over one configuration: the candidates read, in order, the best, and every decision."""

    searcher: str
    seed: int
    budget: int
    read: list[str] = field(default_factory=list)
    best: str | None = None
    decisions: list[Decision] = field(default_factory=list)


class Reader:
    """Reads recorded candidates as evaluations and counts the distinct ones read."""

    def __init__(self, t: ConfigTable) -> None:
        self.t = t
        self.read: dict[str, opt.Evaluation] = {}

    def __call__(self, cand: opt.Candidate) -> opt.Evaluation:
        ev = self.read.get(cand.key)
        if ev is None:
            ev = self.read[cand.key] = evaluation(self.t, cand.key)
        return ev

    def best(self) -> str | None:
        ok = [e for e in self.read.values() if e.ok]
        return min(ok, key=lambda e: e.median or float("inf")).candidate.key if ok else None


@dataclass(frozen=True)
class SnapContext(opt.RuleContext):
    """The rules' context over an explicit list of candidates: a one-step move that is not in the list lands on the
    nearest listed candidate that has the moved parameter's new value (fewest other parameters changed)."""

    listed: tuple[opt.Candidate, ...] = ()

    def _snap(self, target: opt.Candidate, name: str) -> opt.Candidate | None:
        if self.space.invalid_reason(target) is None:
            return target
        want = target.get(name)
        axes = dict(self.space.axes)
        tp = target.as_dict()

        def distance(c: opt.Candidate) -> tuple[int, int, str]:
            cp = c.as_dict()
            changed = sum(cp[k] != tp[k] for k in tp)
            steps = sum(abs(axes[k].index(cp[k]) - axes[k].index(tp[k])) for k in tp)
            return changed, steps, c.key

        same = [c for c in self.listed if c.get(name) == want]
        return min(same, key=distance) if same else None

    def move(self, cand: opt.Candidate, role: str, direction: int) -> opt.Candidate | None:
        name = self.space.param(role)
        step = None if name is None else self.space.step(cand, name, direction)
        return None if step is None or name is None else self._snap(step, name)

    def toggle(self, cand: opt.Candidate, role: str) -> opt.Candidate | None:
        name = self.space.param(role)
        flipped = opt.RuleContext.toggle(self, cand, role)
        return None if flipped is None or name is None else self._snap(flipped, name)


def context(t: ConfigTable) -> SnapContext:
    """The rules' context for a recorded configuration."""
    sp = space(t)
    listed = tuple(opt.Candidate.of(r.params) for r in t.candidates.values())

    def mdl(c: opt.Candidate) -> opt.Model:
        return model(t.cfg, c.as_dict())

    return SnapContext(sp, mdl, H200, PHASE_ROLES[t.cfg.kind], listed)


def evidence_of(ev: opt.Evaluation) -> dict[str, Any]:
    """The figures of a candidate's evidence a decision read (plain JSON)."""
    out: dict[str, Any] = {"candidate": ev.candidate.key, "status": ev.status}
    if ev.time is not None:
        out["median_ns"] = round(ev.time.median, 1)
    if ev.roofline is not None:
        out["roofline_fraction"] = round(ev.roofline.fraction, 3)
        out["bound"] = ev.roofline.bound
    c = ev.compiled
    if c is not None:
        out |= {"registers": c.registers, "local_bytes": c.local_bytes, "shared_bytes": c.shared_bytes}
        if c.occupancy is not None:
            out |= {"ctas_fit_per_sm": c.occupancy.ctas_per_sm, "occupancy_limiter": c.occupancy.limiter}
    if ev.model is not None:
        out |= {"programs": ev.model.programs, "waves": round(ev.model.waves, 2),
                "wave_efficiency": round(ev.model.wave_efficiency, 3)}  # fmt: skip
    ph = ev.phases
    if ph is not None:
        out |= {"sm_tail_fraction": round(ph.tail_fraction, 3), "phase_shares": {r.region: round(r.share, 3)
                for r in ph.regions}}  # fmt: skip
        if ph.step_efficiency is not None:
            out["step_efficiency"] = round(ph.step_efficiency, 3)
    return out


def _us(ev: opt.Evaluation) -> str:
    return f"{ev.median / 1e3:.1f} us" if ev.median else ev.status


def evolve(t: ConfigTable, budget: int, seed: int, *, evidence: bool) -> Replay:
    """The evolutionary search (module docstring) over ``t`` at ``budget`` distinct candidates read."""
    name = "evolution+evidence" if evidence else "evolution (timing only)"
    rng = random.Random(seed)
    reader = Reader(t)
    ctx = context(t)
    keys = sorted(t.candidates)
    cands = {k: opt.Candidate.of(t.candidates[k].params) for k in keys}
    out = Replay(name, seed, budget)
    skipped: dict[str, str] = {}

    def admissible(k: str) -> bool:
        if k in reader.read or k in skipped:
            return False
        if not evidence:
            return True
        facts = static_facts(t.candidates[k])
        why = f"the compiler could not build it ({facts[:120]})" if isinstance(facts, str) else None
        why = why or opt.prune(cands[k], ctx, facts if not isinstance(facts, str) else None)
        if why is not None:
            skipped[k] = why
            out.decisions.append(Decision(len(out.read), k, "skip", "prune", None, {}, f"Not read: {why}."))
            return False
        return True

    def read(k: str, source: str, parent: opt.Evaluation | None, text: str) -> None:
        ev = reader(cands[k])
        out.read.append(k)
        seen = evidence_of(parent) if (parent is not None and evidence) else {}
        out.decisions.append(Decision(len(out.read), k, "read", source, parent.candidate.key if parent else None,
                                      seen, f"{text} Read it: {_us(ev)}."))  # fmt: skip

    def random_unread() -> str | None:
        pool = [k for k in keys if admissible(k)]
        return rng.choice(pool) if pool else None

    def mutation(parent: opt.Evaluation) -> str | None:
        pp = parent.candidate.as_dict()
        pool = [k for k in keys if admissible(k)]
        if not pool:
            return None
        dist = {k: sum(t.candidates[k].params[n] != v for n, v in pp.items()) for k in pool}
        near = min(dist.values())
        return rng.choice(sorted(k for k in pool if dist[k] == near))

    start = opt.Candidate.of(t.default()).key
    read(start, "default", None, "Start from the kernel's shipped configuration.")
    for _ in range(INITIAL_RANDOM):
        if len(out.read) >= budget:
            break
        k = random_unread()
        if k is None:
            break
        read(k, "random", None, "A random candidate of the space (the initial population).")
    while len(out.read) < budget:
        ok = [e for e in reader.read.values() if e.ok]
        if not ok or rng.random() < EXPLORE:
            k = random_unread()
            if k is None:
                break
            read(k, "random", None, "Explore: a random unread candidate.")
            continue
        a, b = rng.choice(ok), rng.choice(ok)
        parent = a if (a.median or 0) <= (b.median or 0) else b
        if evidence:
            props = [p for p in opt.propose(parent, ctx) if admissible(p.candidate.key)]
            if props:
                p = props[0]
                read(p.candidate.key, p.rule, parent,
                     f"Parent {parent.candidate.key} ({_us(parent)}): {p.reason}.")  # fmt: skip
                continue
        k = mutation(parent)
        if k is None:
            break
        why = "no rule proposes an unread candidate; " if evidence else ""
        read(k, "mutation", parent,
             f"Parent {parent.candidate.key} ({_us(parent)}): {why}a random nearest unread candidate.")  # fmt: skip
    out.best = reader.best()
    return out


def rules(t: ConfigTable, budget: int, seed: int = 0) -> Replay:
    """argus_lab's written rule set (``EvidenceGuided``) over the recorded table (deterministic: ``seed`` unused)."""
    reader = Reader(t)
    ctx = context(t)

    def lookup(c: opt.Candidate) -> opt.StaticFacts | str | None:
        rec = t.candidates.get(c.key)
        return None if rec is None else static_facts(rec)

    search = opt.EvidenceGuided(ctx.space, opt.Candidate.of(t.default()), ctx, static=lookup)
    res = opt.run_search(search, reader, opt.Budget(candidates=budget), target=t.cfg.label)
    out = Replay("rule set", seed, budget, read=[s.candidate for s in res.steps])
    for i, d in enumerate(res.decisions):
        action = "read" if d.action == "ask" else "skip"
        out.decisions.append(Decision(i, d.candidate, action, d.rule, None, {}, d.reason))
    out.best = reader.best()
    return out


SEARCHERS: dict[str, Callable[[ConfigTable, int, int], Replay]] = {
    "timing": lambda t, b, s: evolve(t, b, s, evidence=False),
    "evidence": lambda t, b, s: evolve(t, b, s, evidence=True),
    "rules": rules,
}
"""The three searchers by short name: the evolutionary search on timing only, on argus_lab's evidence, and the
written rule set."""

__all__ = ["EXPLORE", "SEARCHERS", "Decision", "Reader", "Replay", "SnapContext", "context", "evolve", "rules"]
