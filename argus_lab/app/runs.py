"""Which runs a face shows when asked to show a report: ``argus-lab show`` (the latest request, given runs, every
request one by one or pooled) and ``%argus show`` / ``%argus export`` (given runs, the store's newest request, this
kernel's last report, or the newest request this kernel measured).  The queries are :mod:`argus_lab.report.runs`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from argus_lab.errors import StoreError
from argus_lab.report import Report, runs
from argus_lab.store import Store


@dataclass(frozen=True)
class RunGroup:
    """Runs shown as one report: ``run_ids`` (None: the store's latest request), the request they belong to and its
    workload when the runs are shown request by request."""

    run_ids: tuple[str, ...] | None
    request: str = ""
    workload: str = ""


@dataclass(frozen=True)
class RunsShown:
    """What ``argus-lab show`` shows: a report per group, after ``note`` ("" for none)."""

    store: Store
    groups: tuple[RunGroup, ...]
    note: str = ""


def runs_to_show(store: str | None, run_ids: Sequence[str] | None, *, every: bool, pool: bool) -> RunsShown:
    """The runs of ``argus-lab show``: every request one by one (``every``; its runs belong together: its plan),
    every run pooled into one report (``every`` and ``pool``), the given ``run_ids``, or the latest request.

    Raises :class:`~argus_lab.errors.StoreError` for a run the store does not hold, saying how to list them."""
    st = Store(store)
    if every and not pool:  # one report per request: unrelated workloads are never pooled under one name
        requests = runs.requests_oldest_first(st)
        groups = tuple(RunGroup(tuple(ids), request, workload or "") for request, ids, workload in requests)
        return RunsShown(st, groups)
    if every:
        note = "(every run of the store pooled: instances of one region path from different requests are combined)"
        return RunsShown(st, (RunGroup(tuple(runs.all_runs(st))),), note)
    if run_ids:
        missing = runs.unknown_run(st, run_ids)
        if missing is not None:
            msg = f"no run {missing!r} in {st.path}; list runs with `argus-lab show --all --store {st.path}`"
            raise StoreError(msg)
        return RunsShown(st, (RunGroup(tuple(run_ids)),))
    return RunsShown(st, (RunGroup(None),))


@dataclass(frozen=True)
class KernelReport:
    """The report a notebook's line command shows, or, when there is none, why (``note``)."""

    report: Report | None
    note: str = ""


def kernel_report(
    store: str | None, run_ids: Sequence[str] | None, *, latest: bool, last: Report | None, session: str
) -> KernelReport:
    """The report of ``%argus show`` and ``%argus export``: ``run_ids`` of ``store``, its newest request of any
    session (``latest``), the kernel's ``last`` report (None when it has none or another store was named), or the
    newest request of the kernel's ``session``; else none, with a note saying what the store holds."""
    if run_ids or latest:
        return KernelReport(Report(Store(store), list(run_ids) if run_ids else None))
    if last is not None:
        return KernelReport(last)
    st = Store(store)
    ids = runs.session_latest_runs(st, session)
    if ids is not None:
        return KernelReport(Report(st, ids))
    others = runs.run_count(st)
    where = (
        f" ({others} run(s) of earlier sessions are in {st.path}: `%argus show --latest` shows the newest, "
        "`%argus runs` lists them)"
        if others
        else f" (no store at {st.path} yet)"
    )
    return KernelReport(None, f"this kernel has measured nothing yet{where}")


__all__ = ["KernelReport", "RunGroup", "RunsShown", "kernel_report", "runs_to_show"]
