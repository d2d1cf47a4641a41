"""Two searches over a target's space, and the bookkeeping that holds them to one budget.

* :class:`TimingOnly` is what an autotuner does: the default first, then the valid candidates in a seeded random
  order; it reads nothing but each candidate's time and keeps the fastest.
* :class:`EvidenceGuided` reads each measured candidate's evidence through the rule set (:mod:`.rules`): it asks
  next for the highest-priority proposal derived from the evidence of the best candidate so far (then of the
  others), prunes candidates the compiler or the model rule out before measuring them, falls back to the best
  candidate's neighbours ranked by the model when no rule fires, and stops at the roofline.

A search is stepped by a :class:`SearchRun`: ``next()`` gives the candidate it asks for (``None`` when its budget
is spent or it has nothing left), ``record(evaluation)`` gives it the answer.  Every candidate a search asks for
counts against *its* budget, also when the answer comes from a record another search filled (two searches over
one shared record measure each distinct candidate once, and each pays for what it asked).  :func:`run_search`
drives one search against any ``evaluate`` function (a :class:`~.session.Session`'s, or a shared cache's).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from argus_lab.optimize.candidates import Budget, Candidate, OptimizeError, Space
from argus_lab.optimize.evidence import Evaluation, StaticFacts
from argus_lab.optimize.rules import Proposal, RuleContext, done, propose, prune
from argus_lab.optimize.text import search_text, speedup_text


@dataclass(frozen=True)
class Decision:
    """Why a search asked for (or refused) a candidate."""

    candidate: str
    action: str
    """``ask`` or ``prune``."""
    rule: str
    reason: str


class Search(Protocol):
    """What a :class:`SearchRun` steps."""

    name: str

    def next(self) -> Candidate | None:
        """The candidate to ask for next (``None``: nothing left)."""
        ...

    def observe(self, ev: Evaluation) -> None:
        """The answer for the candidate last asked for."""
        ...

    def lookahead(self, k: int) -> list[Candidate]:
        """Up to ``k`` candidates it would ask for next as things stand (to compile them ahead)."""
        ...

    @property
    def decisions(self) -> list[Decision]:
        """Every decision so far."""
        ...

    @property
    def stopped(self) -> str | None:
        """Why it stopped by itself (``None``: it did not)."""
        ...


class TimingOnly:
    """The default, then the valid candidates in a random order (``seed``); only times are read."""

    name = "timing-only"

    def __init__(self, space: Space, default: Candidate, *, seed: int = 0) -> None:
        rest = [c for c in space.valid() if c != default]
        random.Random(seed).shuffle(rest)
        self._order = [default, *rest]
        self._at = 0
        self._decisions: list[Decision] = []

    def next(self) -> Candidate | None:
        if self._at >= len(self._order):
            return None
        c = self._order[self._at]
        self._at += 1
        self._decisions.append(Decision(c.key, "ask", "default" if self._at == 1 else "random", "random order"))
        return c

    def observe(self, ev: Evaluation) -> None:
        return None

    def lookahead(self, k: int) -> list[Candidate]:
        return self._order[self._at : self._at + k]

    @property
    def decisions(self) -> list[Decision]:
        return list(self._decisions)

    @property
    def stopped(self) -> str | None:
        return None


StaticLookup = Callable[[Candidate], StaticFacts | str | None]
"""The compiler's facts of a candidate before it runs; a text when the compiler could not build it; ``None`` when it
is not compiled yet (or nothing is known)."""


class EvidenceGuided:
    """The rule set over the evidence (module docstring; docs/optimize.md states the policy)."""

    name = "evidence-guided"

    def __init__(
        self, space: Space, default: Candidate, ctx: RuleContext, *, static: StaticLookup | None = None
    ) -> None:
        self.space, self.default, self.ctx = space, default, ctx
        self.static = static
        self._asked: list[Candidate] = []
        self._seen: set[str] = set()
        self._evals: dict[str, Evaluation] = {}
        self._proposals: dict[str, list[Proposal]] = {}
        self._pruned: dict[str, str] = {}
        self._decisions: list[Decision] = []
        self._stopped: str | None = None

    @property
    def incumbent(self) -> Evaluation | None:
        """The fastest correct candidate so far."""
        ok = [e for e in self._evals.values() if e.ok]
        return min(ok, key=lambda e: e.median or float("inf")) if ok else None

    def _queue(self) -> list[tuple[Candidate, str, str]]:
        """Candidates in the order the policy would ask for them now: ``(candidate, rule, reason)``."""
        out: list[tuple[Candidate, str, str]] = []
        if not self._asked:
            return [(self.default, "default", "the default configuration")]
        best = self.incumbent
        order = sorted(self._evals.values(), key=lambda e: (e is not best, e.median or float("inf")))
        seen = set(self._seen)
        for ev in order:  # the incumbent's proposals first, then the other candidates' by their speed
            for p in self._proposals.get(ev.candidate.key, []):
                if p.candidate.key not in seen:
                    seen.add(p.candidate.key)
                    out.append((p.candidate, p.rule, p.reason))
        base = best.candidate if best is not None else self.default
        fallback = sorted(
            (c for c in self.space.neighbors(base) if c.key not in seen), key=lambda c: -self._wave_efficiency(c)
        )
        why = f"no rule proposes more; a neighbour of {base.key} (best wave efficiency first)"
        for c in fallback:
            seen.add(c.key)
            out.append((c, "neighbour", why))
        return out

    def _wave_efficiency(self, cand: Candidate) -> float:
        m = self.ctx.model(cand)
        return m.wave_efficiency if m is not None else 0.0

    def _admit(self, cand: Candidate) -> str | None:
        if cand.key in self._pruned:
            return self._pruned[cand.key]
        facts = self.static(cand) if self.static is not None else None
        if isinstance(facts, str):
            reason: str | None = f"the compiler could not build it ({facts[:200]})"
        else:
            reason = prune(cand, self.ctx, facts)
        if reason is not None:
            self._pruned[cand.key] = reason
        return reason

    def next(self) -> Candidate | None:
        if self._stopped is not None:
            return None
        for cand, rule, reason in self._queue():
            why_not = self._admit(cand) if rule != "default" else None
            if why_not is not None:
                self._seen.add(cand.key)
                self._decisions.append(Decision(cand.key, "prune", "prune", why_not))
                continue
            self._asked.append(cand)
            self._seen.add(cand.key)
            self._decisions.append(Decision(cand.key, "ask", rule, reason))
            return cand
        return None

    def observe(self, ev: Evaluation) -> None:
        self._evals[ev.candidate.key] = ev
        self._proposals[ev.candidate.key] = propose(ev, self.ctx)
        stop = done(ev)
        if stop is not None:
            self._stopped = stop

    def lookahead(self, k: int) -> list[Candidate]:
        if self._stopped is not None:
            return []
        out = []
        for cand, rule, _ in self._queue():
            if rule != "default" and cand.key in self._pruned:
                continue
            out.append(cand)
            if len(out) >= k:
                break
        return out

    @property
    def decisions(self) -> list[Decision]:
        return list(self._decisions)

    @property
    def stopped(self) -> str | None:
        return self._stopped


@dataclass
class Step:
    """One candidate a search asked for, and the answer."""

    index: int
    candidate: str
    params: Mapping[str, Any]
    status: str
    median: float | None
    noise: float | None
    rule: str
    reason: str
    shared: bool
    """Answered from a record another search had filled (still counted against this search's budget)."""


@dataclass
class SearchResult:
    """A finished search: every step, the default, the best, why it stopped."""

    search: str
    target: str
    budget: Budget
    steps: list[Step] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    default: Evaluation | None = None
    best: Evaluation | None = None
    stopped: str = ""
    seconds: float = 0.0

    @property
    def asked(self) -> int:
        """Candidates counted against the budget."""
        return len(self.steps)

    @property
    def speedup(self) -> float | None:
        """The default's median time over the best's (``None`` unless both were measured)."""
        if self.default is None or self.best is None or not self.default.ok or not self.best.median:
            return None
        return (self.default.median or 0.0) / self.best.median

    def speedup_text(self) -> str:
        """The speed-up in words, with both times, or why there is none (the default failed, nothing measured)."""
        return speedup_text(self)

    def text(self) -> str:
        """Every step (status, median, rule, candidate), the speed-up and why the search stopped."""
        return search_text(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON: steps, decisions, default and best (candidate, median, noise), speed-up, stop reason."""

        def short(e: Evaluation | None) -> dict[str, Any] | None:
            if e is None:
                return None
            return {
                "candidate": e.candidate.to_dict(),
                "status": e.status,
                "median": e.median,
                "noise": None if e.time is None else e.time.noise,
                "run_ids": list(e.run_ids),
            }

        return {
            "search": self.search,
            "target": self.target,
            "budget": self.budget.to_dict(),
            "asked": self.asked,
            "steps": [vars(s) | {"params": dict(s.params)} for s in self.steps],
            "decisions": [vars(d) for d in self.decisions],
            "default": short(self.default),
            "best": short(self.best),
            "speedup": self.speedup,
            "stopped": self.stopped,
            "seconds": self.seconds,
        }


class SearchRun:
    """Steps one search under its own budget (see the module docstring)."""

    def __init__(self, search: Search, budget: Budget, *, target: str = "") -> None:
        if not budget.bounded:
            msg = "a search needs a bounded budget: Budget(candidates=N) and/or Budget(seconds=S)"
            raise OptimizeError(msg)
        self.search = search
        self.result = SearchResult(search.name, target, budget)
        self._started: float | None = None  # the seconds budget runs from the first candidate asked for
        self._pending: Candidate | None = None
        self._pending_decision: Decision | None = None
        self._finished = False

    @property
    def finished(self) -> bool:
        """Whether it will ask for nothing more."""
        return self._finished

    def next(self) -> Candidate | None:
        """The candidate to evaluate next, or ``None`` (budget spent or search done; ``result.stopped`` says which)."""
        if self._finished:
            return None
        if self._pending is not None:
            return self._pending
        if self._started is None:
            self._started = time.monotonic()
        spent = self.result.budget.spent(self.result.asked, time.monotonic() - self._started)
        if spent is not None:
            self._finish(spent)
            return None
        cand = self.search.next()
        if cand is None:
            self._finish(self.search.stopped or "the search has no candidate left")
            return None
        self._pending = cand
        asks = [d for d in self.search.decisions if d.action == "ask"]
        self._pending_decision = asks[-1] if asks else None
        return cand

    def record(self, ev: Evaluation, *, shared: bool = False) -> None:
        """The answer for the candidate :meth:`next` gave (``shared``: it came from another search's record)."""
        if self._pending is None or ev.candidate != self._pending:
            asked = self._pending.key if self._pending is not None else "nothing"
            msg = f"record() got {ev.candidate.key!r} but the search asked for {asked!r}"
            raise OptimizeError(msg)
        d = self._pending_decision
        r = self.result
        r.steps.append(
            Step(
                index=len(r.steps),
                candidate=ev.candidate.key,
                params=ev.candidate.as_dict(),
                status=ev.status,
                median=ev.median,
                noise=None if ev.time is None else ev.time.noise,
                rule=d.rule if d else "",
                reason=d.reason if d else "",
                shared=shared,
            )
        )
        if r.default is None:
            r.default = ev
        if ev.ok and (r.best is None or (ev.median or float("inf")) < (r.best.median or float("inf"))):
            r.best = ev
        self._pending = None
        self.search.observe(ev)

    def _finish(self, why: str) -> None:
        self._finished = True
        self.result.stopped = why
        self.result.decisions = self.search.decisions
        self.result.seconds = 0.0 if self._started is None else time.monotonic() - self._started


def run_search(
    search: Search,
    evaluate: Callable[[Candidate], Evaluation],
    budget: Budget,
    *,
    target: str = "",
    record: dict[str, Evaluation] | None = None,
) -> SearchResult:
    """Run ``search`` to the end of its budget, asking ``evaluate``; ``record`` (shared between searches) answers
    candidates already evaluated without evaluating them again (they still count for this search)."""
    run = SearchRun(search, budget, target=target)
    while (cand := run.next()) is not None:
        known = record.get(cand.key) if record is not None else None
        if known is not None:
            run.record(known, shared=True)
            continue
        ev = evaluate(cand)
        if record is not None:
            record[cand.key] = ev
        run.record(ev)
    return run.result


__all__ = [
    "Decision",
    "EvidenceGuided",
    "Search",
    "SearchResult",
    "SearchRun",
    "StaticLookup",
    "Step",
    "TimingOnly",
    "run_search",
]
