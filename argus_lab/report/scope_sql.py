"""Applying the scopes of a report's runs in SQL: a predicate over ``region_instances``.

Region globs are matched in Python against the few distinct paths of each run (so SQL never sees a glob), the
index sets become integer arithmetic, threads match the recorded thread name or id, and streams or devices keep
the instances that launched a kernel there.  Every literal is built from typed values or quoted here.
"""

from __future__ import annotations

from collections.abc import Mapping

from argus_lab.plan.scope import IndexSet, Scope


def quote(text: str) -> str:
    """A SQL string literal (single quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def _index_condition(column: str, allowed: IndexSet) -> str:
    parts = []
    for r in allowed.ranges:
        cond = [f"{column} >= {int(r.start)}"]
        if r.stop is not None:
            cond.append(f"{column} < {int(r.stop)}")
        if r.step != 1:
            cond.append(f"({column} - {int(r.start)}) % {int(r.step)} = 0")
        parts.append("(" + " AND ".join(cond) + ")")
    return "(" + " OR ".join(parts) + ")" if parts else "FALSE"


def _kernel_condition(alias: str, column: str, allowed: IndexSet) -> str:
    return (
        f"EXISTS (SELECT 1 FROM kernels sk WHERE sk.run_id = {alias}.run_id AND sk.instance_id = {alias}.instance_id "
        f"AND {_index_condition('sk.' + column, allowed)})"
    )


def run_condition(run_id: str, scope: Scope, paths: Mapping[str, int], alias: str = "i") -> str:
    """The instances of ``run_id`` that ``scope`` covers.

    ``paths`` maps each of the run's region paths to its number of warm-up instances: ``instances=`` counts the
    measured instances of a path from 0 (warm-up repetitions come first and are not counted).
    """
    cond = [f"{alias}.run_id = {quote(run_id)}"]
    kept = [p for p in paths if scope.matches_path(p)] if scope.globs else list(paths)
    if scope.instances is not None:
        per_path = [
            f"({alias}.path = {quote(p)} AND "
            f"{_index_condition(f'({alias}.instance_index - {int(paths[p])})', scope.instances)})"
            for p in kept
        ]
        cond.append("(" + " OR ".join(per_path) + ")" if per_path else "FALSE")
    elif scope.globs:
        cond.append(f"{alias}.path IN ({', '.join(quote(p) for p in kept)})" if kept else "FALSE")
    if scope.ranks is not None:
        cond.append(_index_condition(f"coalesce({alias}.rank, 0)", scope.ranks))
    if scope.threads:
        names = ", ".join(quote(t) for t in scope.threads)
        by_name = f"coalesce({alias}.thread_name, '') IN ({names})"
        cond.append(f"({by_name} OR CAST({alias}.thread_id AS VARCHAR) IN ({names}))")
    if scope.streams is not None:
        cond.append(_kernel_condition(alias, "stream_id", scope.streams))
    if scope.devices is not None:
        cond.append(_kernel_condition(alias, "device_id", scope.devices))
    return "(" + " AND ".join(cond) + ")"


def predicate(scopes: Mapping[str, Scope], paths: Mapping[str, Mapping[str, int]], alias: str = "i") -> str | None:
    """A predicate over ``alias`` (a ``region_instances`` row) for the runs in ``scopes``; ``None`` = no restriction.

    ``paths`` maps each run to its region paths and their numbers of warm-up instances.
    """
    if all(s.is_everything for s in scopes.values()):
        return None
    parts = [
        f"{alias}.run_id = {quote(run)}"
        if scope.is_everything
        else run_condition(run, scope, paths.get(run, {}), alias)
        for run, scope in scopes.items()
    ]
    return "(" + " OR ".join(parts) + ")" if parts else None
