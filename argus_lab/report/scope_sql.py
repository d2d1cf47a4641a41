"""Applying the scopes of a report's runs in SQL: a predicate over ``region_instances`` with bound parameters.

Region globs are matched in Python against the few distinct paths of each run (so SQL never sees a glob), the
index sets become integer arithmetic, threads match the recorded thread name or id, and streams or devices keep
the instances that launched a kernel there.  No value is ever spliced into the SQL text: every run id, path, thread
name and number is a bound parameter (:class:`ScopeFilter`), and :func:`scoped` puts the predicate into a query as a
leading ``_scope`` CTE, so its parameters come first.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from argus_lab.plan.scope import IndexSet, Scope


@dataclass(frozen=True)
class ScopeFilter:
    """A predicate over a ``region_instances`` row (alias ``i``) and the values bound to its ``?`` placeholders."""

    sql: str
    params: tuple[Any, ...] = ()


IN_SCOPE = "EXISTS (SELECT 1 FROM _scope s WHERE s.run_id = i.run_id AND s.instance_id = i.instance_id)"
"""What a query's scope marker becomes: the row ``i`` is an instance in scope."""


class _Builder:
    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.params: list[Any] = []

    def bind(self, value: Any) -> str:
        self.params.append(value)
        return "?"

    def among(self, column: str, values: Sequence[Any]) -> str:
        if not values:
            return "FALSE"
        return f"{column} IN ({', '.join(self.bind(v) for v in values)})"

    def index(self, column: str | Callable[[], str], allowed: IndexSet) -> str:
        """``column`` in ``allowed``; a column given as a function is built anew (its parameters bound) per use."""
        col = column if callable(column) else lambda: column
        parts = []
        for r in allowed.ranges:
            cond = [f"{col()} >= {self.bind(int(r.start))}"]
            if r.stop is not None:
                cond.append(f"{col()} < {self.bind(int(r.stop))}")
            if r.step != 1:
                cond.append(f"({col()} - {self.bind(int(r.start))}) % {self.bind(int(r.step))} = 0")
            parts.append("(" + " AND ".join(cond) + ")")
        return "(" + " OR ".join(parts) + ")" if parts else "FALSE"

    def measured_index(self, warm: int) -> str:
        """The instance index counted from the path's first measured (not warm-up) instance."""
        return f"({self.alias}.instance_index - {self.bind(warm)})"

    def kernels(self, column: str, allowed: IndexSet) -> str:
        a = self.alias
        return (
            f"EXISTS (SELECT 1 FROM kernels sk WHERE sk.run_id = {a}.run_id AND sk.instance_id = {a}.instance_id "
            f"AND {self.index('sk.' + column, allowed)})"
        )

    def run(self, run_id: str, scope: Scope, paths: Mapping[str, int]) -> str:
        a = self.alias
        cond = [f"{a}.run_id = {self.bind(run_id)}"]
        kept = [p for p in paths if scope.matches_path(p)] if scope.globs else list(paths)
        if scope.instances is not None:
            instances = scope.instances
            per_path = []
            for p in kept:
                warm = int(paths[p])
                path = f"{a}.path = {self.bind(p)}"
                measured = self.index(functools.partial(self.measured_index, warm), instances)
                per_path.append(f"({path} AND {measured})")
            cond.append("(" + " OR ".join(per_path) + ")" if per_path else "FALSE")
        elif scope.globs:
            cond.append(self.among(f"{a}.path", kept))
        if scope.ranks is not None:
            cond.append(self.index(f"coalesce({a}.rank, 0)", scope.ranks))
        if scope.threads:
            by_name = self.among(f"coalesce({a}.thread_name, '')", scope.threads)
            by_id = self.among(f"CAST({a}.thread_id AS VARCHAR)", scope.threads)
            cond.append(f"({by_name} OR {by_id})")
        if scope.streams is not None:
            cond.append(self.kernels("stream_id", scope.streams))
        if scope.devices is not None:
            cond.append(self.kernels("device_id", scope.devices))
        return "(" + " AND ".join(cond) + ")"


def run_condition(run_id: str, scope: Scope, paths: Mapping[str, int], alias: str = "i") -> ScopeFilter:
    """The instances of ``run_id`` that ``scope`` covers.

    ``paths`` maps each of the run's region paths to its number of warm-up instances: ``instances=`` counts the
    measured instances of a path from 0 (warm-up repetitions come first and are not counted).
    """
    b = _Builder(alias)
    return ScopeFilter(b.run(run_id, scope, paths), tuple(b.params))


def predicate(
    scopes: Mapping[str, Scope], paths: Mapping[str, Mapping[str, int]], alias: str = "i"
) -> ScopeFilter | None:
    """A predicate over ``alias`` (a ``region_instances`` row) for the runs in ``scopes``; ``None`` = no restriction.

    ``paths`` maps each run to its region paths and their numbers of warm-up instances.
    """
    if all(s.is_everything for s in scopes.values()):
        return None
    b = _Builder(alias)
    parts = [
        f"{alias}.run_id = {b.bind(run)}" if scope.is_everything else b.run(run, scope, paths.get(run, {}))
        for run, scope in scopes.items()
    ]
    return ScopeFilter("(" + " OR ".join(parts) + ")", tuple(b.params)) if parts else None


def kernel_predicate(scopes: Mapping[str, Scope], alias: str = "k") -> ScopeFilter | None:
    """A predicate over ``alias`` (a ``kernels`` row) keeping the records of the ranks, devices and streams the
    runs' scopes allow (region globs, instance indexes and threads say nothing about a kernel outside every
    region, so they are not applied here); ``None`` = no restriction."""
    if all(s.ranks is None and s.devices is None and s.streams is None for s in scopes.values()):
        return None
    b = _Builder(alias)
    parts = []
    for run, scope in scopes.items():
        cond = [f"{alias}.run_id = {b.bind(run)}"]
        for column, allowed in (("rank", scope.ranks), ("device_id", scope.devices), ("stream_id", scope.streams)):
            if allowed is not None:
                cond.append(b.index(f"coalesce({alias}.{column}, 0)", allowed))
        parts.append("(" + " AND ".join(cond) + ")")
    return ScopeFilter("(" + " OR ".join(parts) + ")", tuple(b.params))


def conjoin(a: ScopeFilter | None, b: ScopeFilter | None) -> ScopeFilter | None:
    """Both predicates (``None`` = no restriction); the parameters of ``a`` come first, as in the SQL text."""
    if a is None or b is None:
        return a if b is None else b
    return ScopeFilter(f"({a.sql} AND {b.sql})", (*a.params, *b.params))


def scoped(sql: str, scope: ScopeFilter | None) -> tuple[str, list[Any]]:
    """``sql`` (a query starting with ``WITH``) with its scope markers applied, and the scope's parameters, which
    come before the query's own: ``/*SCOPE*/`` keeps only instances in scope (``AND``), ``/*SCOPE_OR*/`` also lets
    them through an ``OR``.  Without a scope the markers vanish (``OR TRUE`` for the second)."""
    if scope is None:
        return sql.replace("/*SCOPE*/", "").replace("/*SCOPE_OR*/", "OR TRUE"), []
    body = sql.lstrip()
    if not body.startswith("WITH "):
        msg = "internal: a scoped query must start with WITH"
        raise ValueError(msg)
    cte = f"WITH _scope AS (SELECT i.run_id, i.instance_id FROM region_instances i WHERE {scope.sql}),\n"
    out = cte + body[len("WITH ") :]
    return out.replace("/*SCOPE*/", f"AND {IN_SCOPE}").replace("/*SCOPE_OR*/", f"OR {IN_SCOPE}"), list(scope.params)


__all__ = ["IN_SCOPE", "ScopeFilter", "conjoin", "kernel_predicate", "predicate", "run_condition", "scoped"]
