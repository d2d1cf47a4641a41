"""The Report's kernel summary within bounds: the first rows of its kernel table and the rest counted in DuckDB.

A long run's kernel table (``Report.kernels``: one row per run, region path, ordinal, kernel and class) can hold
hundreds of thousands of rows; its text and its summary show a few.  :func:`read_kernel_summary` reads the first
``limit`` rows of the main kernel-sequence groups, how many such rows there are, and per region path the launches
and kernels of the other groups, without a row beyond the first ``limit`` reaching Python.  :meth:`KernelSummary.of`
makes the same summary from rows already read whole: both give the same value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from argus_lab.report import rows as rt
from argus_lab.report.rows import KernelRow
from argus_lab.report.scope_sql import ScopeFilter
from argus_lab.store import Store

SUMMARY_ROWS = 200
"""Rows of the main kernel-sequence groups a summary holds by default (the text tables show at most 200)."""


@dataclass(frozen=True)
class KernelSummary:
    """The first rows of the kernel table's main kernel-sequence groups and what the others add up to.

    ``rows``: the first ``limit`` rows whose ``main_group`` is true, in the table's order; ``main_rows``: how many such
    rows the table has; ``other_groups``: per region path, ``(launches, distinct kernels)`` of its rows outside the main
    group (collapsed in the tables), in the order those rows come."""

    rows: tuple[KernelRow, ...]
    main_rows: int
    other_groups: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def more_rows(self) -> int:
        """Main-group rows beyond :attr:`rows`."""
        return self.main_rows - len(self.rows)

    def __bool__(self) -> bool:
        return bool(self.main_rows or self.other_groups)

    @classmethod
    def of(cls, rows: Sequence[KernelRow], limit: int = SUMMARY_ROWS) -> KernelSummary:
        """The summary of a kernel table read whole."""
        main = [r for r in rows if r.main_group]
        launches: dict[str, int] = {}
        names: dict[str, set[str]] = {}
        for k in rows:
            if not k.main_group:
                launches[k.path] = launches.get(k.path, 0) + int(k.launches)
                names.setdefault(k.path, set()).add(k.name)
        other = {p: (n, len(names[p])) for p, n in launches.items()}
        return cls(tuple(main[:limit]), len(main), other)


def read_kernel_summary(
    store: Store, ids: list[str], scope: ScopeFilter | None = None, limit: int = SUMMARY_ROWS
) -> KernelSummary:
    """The summary of the report's kernel table, its rows beyond the first ``limit`` counted and summed in DuckDB."""
    _, main_rows = rt.read_kernel_count(store, ids, scope)
    first = rt.read_kernels(store, ids, scope, limit, main_only=True) if main_rows and limit > 0 else ()
    return KernelSummary(first, main_rows, rt.read_other_kernel_groups(store, ids, scope))


__all__ = ["SUMMARY_ROWS", "KernelSummary", "read_kernel_summary"]
