"""The exact searches behind a plan: the fewest conflict-free backend groups, the fewest counter sets per pass bound.

Both are depth-first searches over assignments with pruning by the best found so far; there are few backends, so
the first is always exhaustive; the second stops after :data:`SEARCH_BUDGET` nodes and says so, and is not tried at
all past :data:`EXACT_LIMIT` counters (thousands of ``hw:`` signals): first-fit decreasing then gives the split, and
the plan says it is not proven minimal.  Neither recurses deeper than the number of items it places
(:data:`EXACT_LIMIT` at most), so no request can exhaust Python's stack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from argus_lab.plan.backends import BACKENDS, conflict_reason

SEARCH_BUDGET = 20_000
"""Nodes the exact counter-split search may visit before it settles for the best split found."""

EXACT_LIMIT = 64
"""Most counters the exact split search is tried on (its depth); past it the greedy split stands."""

GREEDY_WINDOW = 32
"""Past :data:`EXACT_LIMIT`, first-fit looks at the last this many counter sets only (linear in the counters)."""


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
    whether the search finished within ``budget`` nodes (i.e. the count is proven minimal).  Past
    :data:`EXACT_LIMIT` counters only the greedy split is made (first fit among the last :data:`GREEDY_WINDOW`
    sets) and it is proven minimal only when it is one set.
    """
    if not metrics:
        return [], True
    alone = {m: passes([m]) for m in metrics}
    big = [m for m in metrics if alone[m] > bound]
    first = {m: k for k, m in reversed(list(enumerate(metrics)))}
    rest = sorted((m for m in metrics if alone[m] <= bound), key=lambda m: (-alone[m], first[m]))

    def fits(group: list[str], m: str) -> bool:
        return passes([*group, m]) <= bound

    ffd: list[list[str]] = []
    greedy = len(rest) > EXACT_LIMIT  # only the last GREEDY_WINDOW sets stay open: O(n) pass-model calls
    for m in rest:
        for g in ffd[-GREEDY_WINDOW:] if greedy else ffd:
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

    if greedy:  # the exact search would neither finish nor fit the stack
        return [[m] for m in big] + best, len(best) <= lower
    search(0, [])
    return [[m] for m in big] + best, finished


__all__ = ["EXACT_LIMIT", "GREEDY_WINDOW", "SEARCH_BUDGET", "min_conflict_free_groups", "split_counters"]
