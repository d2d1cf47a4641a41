"""The one facade that measures: plan -> execute -> join -> Report.

Every face uses it: ``argus_lab.measure`` and ``argus_lab.plan``, the command line (``argus-lab run``), the
``%%argus`` and ``%%argus_region`` magics and the signal panel.  The join runs here, where the runs end, so that
a :class:`~argus_lab.report.Report` only ever reads.
"""

from __future__ import annotations

import difflib
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from argus_lab import config
from argus_lab.app.join_process import join_measured_runs
from argus_lab.app.recovery import Recovered, recover_stale, unknown_folders
from argus_lab.errors import ScopeError, StoreError
from argus_lab.join import JoinSummary, attribute_request
from argus_lab.model.statuses import FAILED
from argus_lab.plan import DEFAULT_SIGNALS, Plan, Request
from argus_lab.plan.ncu_settings import KernelCensus
from argus_lab.plan.planner import plan as plan_request
from argus_lab.plan.scope import Scope
from argus_lab.report import Report
from argus_lab.report.census import kernel_census, scoped_kernels
from argus_lab.report.runs import check_known, latest_runs, recorded_paths, request_runs, runs_by_request
from argus_lab.run.progress import ProgressFn
from argus_lab.run.runtime import Execution, OnError, RunResult, execute
from argus_lab.run.workload import Workload
from argus_lab.store import Store, StoreSink
from argus_lab.views.progress import choose as choose_progress


def plan(
    signals: str | list[str] = DEFAULT_SIGNALS,
    *,
    scope: str = "",
    repeat: int = config.REPEAT,
    warmup: int = config.WARMUP,
    census: KernelCensus | None = None,
    allow_unknown_counters: bool = False,
    workload: Workload | None = None,
    store: str | Store | None = None,
) -> Plan:
    """Plan a measurement of ``signals`` without running it; with a ``census`` of an earlier timing run of the
    workload (:func:`argus_lab.report.census.kernel_census`), ncu runs are costed by the kernels they replay.
    ``allow_unknown_counters``: plan ``hw:`` counters the chip's recorded metric names do not know.

    ``workload`` (and ``store``, default the default store): the plan every face measures with (:func:`measure`,
    ``argus-lab run``, ``%%argus``, the panel), its census read from ``workload``'s newest joined timing run in the
    store when none is given (none when the store holds no such run)."""
    if census is None and workload is not None:
        census = kernel_census(open_store(store), workload.describe())
    request = Request.build(
        signals, scope=scope, repeat=repeat, warmup=warmup, allow_unknown_counters=allow_unknown_counters
    )
    return plan_request(request, census=census)


class RequestOptions(Protocol):
    """The request options the CLI and the magics share (parsed ``argparse`` options, a cell's request)."""

    @property
    def signals(self) -> str: ...
    @property
    def scope(self) -> str: ...
    @property
    def repeat(self) -> int: ...
    @property
    def warmup(self) -> int: ...
    @property
    def allow_unknown_counters(self) -> bool: ...


def plan_from_options(
    options: RequestOptions, workload: Workload | None = None, store: str | Store | None = None
) -> Plan:
    """The plan of parsed command-line options (``signals``, ``scope``, ``repeat``, ``warmup``,
    ``allow_unknown_counters``: the request options the CLI and the magics share); with ``workload``, costed by its
    census in ``store`` (:func:`plan`)."""
    return plan(
        options.signals,
        scope=options.scope,
        repeat=options.repeat,
        warmup=options.warmup,
        allow_unknown_counters=options.allow_unknown_counters,
        workload=workload,
        store=store,
    )


@dataclass(frozen=True)
class ExplainedPlan:
    """A plan as a face without a kernel shows it (the JupyterLab panel): its explanation and its JSON form."""

    explain: str
    plan: dict[str, Any]


def explained_plan(
    signals: str, scope: str = "", repeat: int = config.REPEAT, warmup: int = config.WARMUP
) -> ExplainedPlan:
    """The plan of a request with no workload, explained; a malformed scope is refused with its caret message
    (:meth:`argus_lab.plan.scope.Scope.parse`) before planning."""
    Scope.parse(scope)
    planned = plan(signals, scope=scope, repeat=repeat, warmup=warmup)
    return ExplainedPlan(planned.explain(), json.loads(planned.to_json()))


@dataclass(frozen=True)
class Measurement:
    """What running a plan gave: every run's outcome and the report over the runs."""

    execution: Execution
    report: Report

    def failure_details(self) -> list[tuple[RunResult, str]]:
        """The failed runs whose cause carries more than its first line (the workload's own traceback), with it."""
        out = []
        for r in self.execution.results:
            if r.status in FAILED and "\n" in r.cause:
                detail = r.cause.split("\n", 1)[1].strip()
                if detail:
                    out.append((r, detail))
        return out

    def skipped_reasons(self) -> tuple[str, ...]:
        """Why, when every run was skipped (nothing measured: GPU signals on a machine without a GPU); else ()."""
        results = self.execution.results
        if results and all(r.status == "skipped" for r in results):
            return tuple(sorted({r.cause for r in results}))
        return ()


def only_region(report: Report, name: str) -> bool:
    """Whether ``name`` is the one region path ``report`` measured or saw finish: the workload entered no region
    of its own, so it was measured as its implicit region ``name``."""
    return {r.path for r in report.regions} | {f[0] for f in report.finished} == {name}


def open_store(store: str | Store | None = None) -> Store:
    """The evidence store at ``store`` (default ``./argus.duckdb`` or ``$ARGUS_STORE``); a Store is kept as it is."""
    return store if isinstance(store, Store) else Store(store, recover=recover_stale)


def join_runs(store: Store, run_ids: Sequence[str] | None = None, *, every: bool = False) -> list[JoinSummary]:
    """Run the join on stored runs: ``run_ids`` (one join), every run of the store grouped by request (``every``),
    or the latest request's runs.  The runs of one request are joined together (ncu runs match their timing run).

    Raises :class:`~argus_lab.errors.StoreError` naming the unknown run ids, with how to list the known ones.
    """
    if run_ids:
        check_known(store, run_ids)
        return [attribute_request(store, list(run_ids))]
    if every:
        return [attribute_request(store, ids) for ids in runs_by_request(store).values()]
    ids = latest_runs(store)
    return [attribute_request(store, ids)] if ids else []


@dataclass(frozen=True)
class Recovery:
    """What ``argus-lab recover`` did: the runs it finished, the joins it ran, the folders it could not place."""

    recovered: tuple[Recovered, ...]
    joined: tuple[JoinSummary, ...]
    unknown_folders: tuple[str, ...]


def recover_runs(store: str | Store | None = None, *, join: bool = True) -> Recovery:
    """Finish the runs of ``store`` left ``running`` by processes that ended (from their run folders: shards,
    status; see :mod:`argus_lab.app.recovery`), join them (each request's runs together) unless ``join`` is
    false, and list run folders the store has no record of."""
    st = open_store(store)
    st = Store(st.path, recover=False)  # recovered here, explicitly, rather than by the first write
    if not st.exists:
        msg = f"no evidence store at {str(st.path)!r}; pass the store to recover with --store PATH"
        raise StoreError(msg)
    done = recover_stale(st, quiet=True)
    joined: list[JoinSummary] = []
    if join and done:
        requests = sorted({d.request_id for d in done if d.status != "running"})
        for request_id in requests:
            ids = request_runs(st, request_id)
            if ids:
                joined.append(attribute_request(st, ids))
    return Recovery(tuple(done), tuple(joined), tuple(str(p) for p in unknown_folders(st)))


def run_plan(
    the_plan: Plan,
    workload: Workload,
    store: str | Store | None = None,
    *,
    on_error: OnError = "continue",
    progress: ProgressFn | None = None,
    launch: str | Sequence[str] = (),
    timeout_s: float | None = None,
    isolate: bool = False,
) -> Measurement:
    """Execute ``the_plan`` on ``workload`` into ``store``, join the runs' evidence, and read the report
    (``isolate``: every run in a fresh process, :func:`argus_lab.run.runtime.execute`)."""
    st = open_store(store)
    prefix = tuple(shlex.split(launch)) if isinstance(launch, str) else tuple(launch)
    execution = execute(
        the_plan,
        workload,
        StoreSink(st),
        on_error=on_error,
        progress=progress,
        timeout_s=timeout_s,
        launch=prefix,
        isolate=isolate,
        count_kernels=lambda run_id: scoped_kernels(st, run_id, the_plan.request.scope),
    )
    # the join runs where the runs end (attributions + instance values); a long run's in a fresh process, so that the
    # measured process (argus_lab.measure's) never holds its memory
    join_measured_runs(st, execution.run_ids, execution.instances)
    check_scope_matched(st, the_plan, execution.run_ids)
    return Measurement(execution, Report(st, execution.run_ids))


def check_scope_matched(store: Store, the_plan: Plan, run_ids: Sequence[str]) -> None:
    """Raise :class:`~argus_lab.errors.ScopeError` when the request's region globs matched none of the region paths
    the runs recorded (a typo such as ``decod/**``): the message lists the paths seen and the closest ones.  The runs
    stay stored; a scope that matched something, and runs that recorded no region at all, pass."""
    scope = the_plan.request.scope
    if not scope.globs or not run_ids:
        return
    paths = recorded_paths(store, run_ids)
    if not paths or any(scope.matches_path(p) for p in paths):
        return
    close: list[str] = []
    for glob in scope.globs:
        literal = glob.replace("**", "").replace("*", "").strip("/")
        for hit in difflib.get_close_matches(literal, paths, n=2, cutoff=0.6):
            close.append(glob.replace(literal, hit, 1) if literal and literal in glob else hit)
    hint = f"; did you mean {', '.join(repr(c) for c in dict.fromkeys(close))}" if close else ""
    shown = ", ".join(paths[:12]) + (f" and {len(paths) - 12} more" if len(paths) > 12 else "")
    msg = (
        f"the scope {str(scope)!r} matched none of the {len(paths)} region path(s) the run(s) recorded "
        f"({shown}){hint}. The runs are stored ({', '.join(run_ids)}) but their report is empty: "
        "measure again with a scope that names these regions"
    )
    raise ScopeError(msg)


def measure(
    target: Any,
    signals: str | list[str] = DEFAULT_SIGNALS,
    *,
    repeat: int = config.REPEAT,
    warmup: int = config.WARMUP,
    scope: str = "",
    store: str | Store | None = None,
    args: tuple[str, ...] = (),
    on_error: OnError = "continue",
    launch: str | tuple[str, ...] = (),
    isolate: bool = False,
    allow_unknown_counters: bool = False,
    progress: bool | ProgressFn = True,
) -> Report:
    """Plan and run a measurement of ``target``; return its :class:`~argus_lab.report.Report`.

    Parameters
    ----------
    target
        A callable taking no arguments, a script path, or ``"module:function"``.
    signals
        Signal names, comma-separated or a list (``argus-lab signals`` lists them).
    repeat, warmup
        Measured repetitions, and repetitions run first and marked as warm-up.
    scope
        Which region instances the request covers (see docs/scopes.md).
    store
        The evidence store (default ``./argus.duckdb`` or ``$ARGUS_STORE``).
    on_error
        ``"continue"`` runs the remaining runs after a failed one; ``"stop"`` stops the plan.
    launch
        A multi-process launcher prefix, e.g. ``"torchrun --nproc-per-node 2"``: every rank is measured and
        the ranks' evidence merges into one store with the rank in each region instance.
    isolate
        Run every run in a fresh process (``target`` a script path or ``"module:function"``): nothing this
        process holds (torch.profiler's CUPTI subscriber, state left by earlier code) touches the numbers.
    allow_unknown_counters
        Measure ``hw:`` counters the chip's recorded metric names do not know (else the plan stops with the closest
        names).
    progress
        ``True``: one updating line in a notebook, a bar per run on a terminal (repetitions, ncu's kernels, the time
        left); ``False``: quiet; or a callable given each :class:`argus_lab.run.progress.Tick`.
    """
    workload = Workload.from_target(target, args)
    st = open_store(store)
    the_plan = plan(
        signals,
        scope=scope,
        repeat=repeat,
        warmup=warmup,
        allow_unknown_counters=allow_unknown_counters,
        workload=workload,
        store=st,
    )
    shown = choose_progress(progress)
    return run_plan(the_plan, workload, st, on_error=on_error, progress=shown, launch=launch, isolate=isolate).report


__all__ = ["ExplainedPlan", "Measurement", "Recovery", "RequestOptions", "explained_plan", "join_runs", "measure",
           "only_region", "open_store", "plan", "plan_from_options", "recover_runs", "run_plan"]  # fmt: skip
