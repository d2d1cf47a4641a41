"""The optimisation session: candidates of one region measured by argus_lab, every one kept in the store.

:class:`Session.evaluate` takes a candidate and answers an :class:`~.evidence.Evaluation`:

1. the candidate is checked against the target's space, and the budget is checked (a spent budget answers
   ``over_budget`` and measures nothing; a candidate already evaluated answers from the record);
2. the target prepares it (compiles and loads the variant); a failure is stored as a failed run (``compile_failed``);
3. argus_lab plans and executes the measurement: a timing run (``warmup + repeat`` executions of one launch inside
   the target's region; the run's variant is the candidate's key and its settings carry the parameters) and, for a
   target with device regions, the planner's instrumented run of ``dev.*`` signals with one execution: the workload
   asks ``argus_lab.device.probe`` for each launch's probe, so the same workload launches the clean variant in the
   timing run and the instrumented one there.  The first warm-up output is checked against the reference
   (``wrong_result``, ``launch_failed`` end the run, stored with the cause); the join runs and the Report is read:
   time with its spread, compiler facts, attribution, and the device phases from its ``dev.*`` rows
   (:func:`~.evidence.phases_from_device`);
4. the evaluation's JSON is written next to the run (``<store>.runs/<run>/optimize-evaluation.json``) and listed
   in the store's ``artifacts`` (kind ``optimize.evaluation``).

Every candidate's runs carry the same region identity (name, kind, module), so the store answers "every variant of
this region" with one query (:func:`history`).  One connection to the store is held per evaluation.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from argus_lab import config
from argus_lab.app.measure import open_store, plan, run_plan
from argus_lab.device import instrumented
from argus_lab.errors import CandidateError
from argus_lab.model.statuses import MEASURED
from argus_lab.optimize.candidates import Budget, Candidate, OptimizeError, Space
from argus_lab.optimize.evidence import (
    Compiled,
    DeviceSpec,
    Evaluation,
    Model,
    Phases,
    StaticFacts,
    Status,
    Timing,
    Work,
    device_spec,
    ideal_step_ns,
    occupancy,
    phases_from_device,
    roofline,
)
from argus_lab.regions import Region, region
from argus_lab.report import device as device_sql
from argus_lab.report import runs as runs_sql
from argus_lab.run.machine import gpu_available, no_gpu_reason
from argus_lab.run.workload import Workload
from argus_lab.store import Store
from argus_lab.store.sink import run_folder

if TYPE_CHECKING:
    from argus_lab.report import Report

EVALUATION_FILE = "optimize-evaluation.json"
ARTIFACT_KIND = "optimize.evaluation"
PHASE_SOURCE = "dev.* of the planned instrumented run (one launch), read from the Report (argus_lab.report.device)"
DEVICE_SIGNALS = ("dev.time", "dev.count", "dev.tail", "dev.span", "dev.unmarked", "dev.sm_busy")
"""The signals of the instrumented run a session adds for a target with device regions."""


@runtime_checkable
class Timer(Protocol):
    """CUDA events around each launch, taken alongside argus_lab's timing run."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def elapsed_ns(self) -> list[float]:
        """One value per start/stop pair, in order (synchronises)."""
        ...


class Prepared(Protocol):
    """A candidate built and ready: its launch and the compiler's facts."""

    facts: StaticFacts | None

    def launch(self) -> Any:
        """One launch; returns its output (for the check).  A kernel with device regions asks
        ``argus_lab.device.probe(...)`` for the launch's probe first and launches the clean variant when it is
        ``None`` (every run but the instrumented one) and the instrumented variant with the probe otherwise."""
        ...

    def timer(self) -> Timer | None:
        """CUDA events to time each launch alongside the run (``None``: none)."""
        ...

    def close(self) -> None:
        """Drop what the variant holds (compiled kernels, buffers)."""
        ...


class Target(Protocol):
    """A region to optimise and how to build its variants (docs/optimize.md, "Writing a target").

    ``name`` labels the configuration (kernel and shape); ``region``/``module`` are the region identity every
    candidate is stored under; ``kernel`` is the name of the kernel function the compiler facts and device regions
    are read for; ``phase_roles`` maps the roles the rules know (``memory``, ``math``, ``softmax``, ``epilogue``,
    ``step``) to the device regions the kernel marks (empty: the target has none, no instrumented run is planned).
    """

    name: str
    region: str
    module: str
    kernel: str
    phase_roles: Mapping[str, str]
    device: str | None

    def default(self) -> Candidate:
        """The configuration the target ships with (what the speed-ups are measured against)."""
        ...

    def space(self) -> Space:
        """The candidates a search may ask for."""
        ...

    def work(self) -> Work | None:
        """FLOPs and compulsory bytes of one execution (``None``: no roofline)."""
        ...

    def model(self, candidate: Candidate) -> Model | None:
        """The static model of a candidate (tiles, programs, estimated shared memory)."""
        ...

    def prepare(self, candidate: Candidate) -> Prepared:
        """Build the candidate; raise :class:`CandidateError` when it cannot be compiled or loaded."""
        ...

    def check(self, output: Any) -> str | None:
        """``None`` when ``output`` matches the reference, else what differs (e.g. the largest error)."""
        ...


DEFAULT_SIGNALS = ("gpu.time", "compile.registers", "compile.spills", "compile.shared")
"""The timing run's signals on a GPU: kernel time per region instance (CUPTI) and the compiler backend's facts."""


class Session:
    """Measure candidates of one target under a budget; every evaluation is kept in ``store``.

    Parameters
    ----------
    target
        The region and its variants (:class:`Target`).
    store
        The evidence store (a path or a :class:`~argus_lab.store.Store`; default ``./argus.duckdb``).
    budget
        How many candidates, or how many seconds, the session may measure.
    signals
        The timing run's signals; the first one is the time the candidates are ranked by.  Default on a GPU:
        :data:`DEFAULT_SIGNALS`; pass ``("host.wall",)`` for a host region.
    repeat, warmup
        Measured and warm-up executions of the timing run (one launch each).
    phases
        Whether to plan the instrumented run (``dev.*``, one launch) for the device-region phases of a target that has
        device regions (also settable between evaluations: ``session.phases = False``).
    include_report
        Whether each evaluation carries the whole Report JSON (``Evaluation.report``).
    spec
        The device's peaks and limits (default: looked up by the target's device name).
    """

    def __init__(
        self,
        target: Target,
        store: str | Path | Store | None = None,
        *,
        budget: Budget | None = None,
        signals: tuple[str, ...] | list[str] | str | None = None,
        repeat: int = config.OPTIMIZE_REPEAT,
        warmup: int = 2,
        phases: bool = True,
        include_report: bool = False,
        spec: DeviceSpec | None = None,
    ) -> None:
        self.target = target
        self.store = open_store(store if not isinstance(store, Path) else str(store))
        self.budget = budget or Budget()
        if isinstance(signals, str):
            signals = tuple(s.strip() for s in signals.split(",") if s.strip())
        self.signals: tuple[str, ...] = tuple(signals) if signals else DEFAULT_SIGNALS
        if repeat < 3:
            msg = f"repeat={repeat}: a candidate needs at least 3 measured executions for its noise; use repeat >= 3"
            raise OptimizeError(msg)
        self.repeat, self.warmup = repeat, max(1, warmup)
        self.phases = phases
        self.include_report = include_report
        self.spec = spec or device_spec(target.device)
        self.space = target.space()
        self.identity = Region(name=target.region, kind="host", module=target.module)
        self._plan = plan(",".join(self.signals), repeat=self.repeat, warmup=self.warmup)
        self._plan_phases = (
            plan(",".join((*self.signals, *DEVICE_SIGNALS)), repeat=self.repeat, warmup=self.warmup)
            if target.phase_roles and self._needs_gpu()
            else None
        )
        self._failure_plan = plan("host.wall", repeat=1, warmup=0)
        self._record: dict[str, Evaluation] = {}
        self._measured = 0
        self._started: float | None = None  # the seconds budget runs from the first evaluation

    # -- state ----------------------------------------------------------------------------------------------------
    @property
    def time_signal(self) -> str:
        """The signal candidates are ranked by (the first of :attr:`signals`)."""
        return self.signals[0]

    @property
    def measured(self) -> int:
        """Candidates counted against the budget so far."""
        return self._measured

    @property
    def elapsed_s(self) -> float:
        """Seconds since the first evaluation (0 before it)."""
        return 0.0 if self._started is None else time.monotonic() - self._started

    def spent(self) -> str | None:
        """Why the budget is spent, or ``None``."""
        return self.budget.spent(self._measured, self.elapsed_s)

    @property
    def history(self) -> tuple[Evaluation, ...]:
        """Every evaluation, in the order asked."""
        return tuple(self._record.values())

    @property
    def best(self) -> Evaluation | None:
        """The fastest correct candidate so far."""
        ok = [e for e in self._record.values() if e.ok]
        return min(ok, key=lambda e: e.median or float("inf")) if ok else None

    def summary(self) -> dict[str, Any]:
        """The session as JSON: target, region, space, budget and what is left, every evaluation (short), the best."""
        best = self.best
        return {
            "schema": "argus_lab.optimize-session/1",
            "target": self.target.name,
            "region": self._region_dict(),
            "store": str(self.store.path),
            "signals": list(self.signals),
            "space": self.space.to_dict(),
            "default": self.target.default().to_dict(),
            "budget": self.budget.to_dict(),
            "measured": self._measured,
            "elapsed_s": self.elapsed_s,
            "spent": self.spent(),
            "evaluations": [
                {
                    "candidate": e.candidate.key,
                    "status": e.status,
                    "median": e.median,
                    "noise": None if e.time is None else e.time.noise,
                    "run_ids": list(e.run_ids),
                }
                for e in self._record.values()
            ],
            "best": None if best is None else {"candidate": best.candidate.to_dict(), "median": best.median},
        }

    # -- evaluation -----------------------------------------------------------------------------------------------
    def evaluate(self, candidate: Candidate | Mapping[str, Any], *, again: bool = False) -> Evaluation:
        """Measure one candidate (see the module docstring); raises :class:`OptimizeError` for one off the space.

        A candidate evaluated before is answered from the record (not counted), unless ``again``: then it is
        measured once more in new runs (counted), e.g. to confirm a winner against the default in fresh runs; the
        record keeps the first evaluation.
        """
        cand = Candidate.of(candidate) if not isinstance(candidate, Candidate) else candidate
        self.space.check(cand)
        known = self._record.get(cand.key)
        if known is not None and not again:
            return known
        spent = self.spent()
        if spent is not None:
            return self._evaluation(cand, "over_budget", spent)
        reason = self.space.constraint(cand)
        if reason is not None:
            msg = f"candidate {cand.key!r} is not valid for {self.target.name}: {reason}"
            raise OptimizeError(msg)
        self._measured += 1
        t0 = time.monotonic()
        if self._started is None:
            self._started = t0
        with self.store.connect(write=True):  # one connection for the runs, the join, the report and the record
            ev = self._measure(cand)
            ev = dataclasses.replace(ev, seconds=time.monotonic() - t0)
            self._keep(ev)
        self._record.setdefault(cand.key, ev)
        return ev

    def evaluate_json(self, text: str) -> str:
        """JSON in, JSON out: ``{"params": {...}}`` (or a bare parameter object) -> the evaluation's JSON.

        Errors come back as ``{"error": "..."}`` with the message naming the fix.
        """
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                msg = 'send a JSON object: {"params": {"block_m": 128, ...}}'
                raise OptimizeError(msg)
            ev = self.evaluate(Candidate.from_dict(data.get("candidate", data)))
        except (OptimizeError, json.JSONDecodeError) as exc:
            return json.dumps({"error": str(exc)})
        return json.dumps(ev.to_dict())

    def _region_dict(self) -> dict[str, str]:
        return {"name": self.identity.name, "module": self.identity.module, "region_id": self.identity.region_id}

    def _evaluation(self, cand: Candidate, status: Status, cause: str, **kw: Any) -> Evaluation:
        return Evaluation(
            target=self.target.name,
            region=self._region_dict(),
            candidate=cand,
            status=status,
            cause=cause,
            model=self.target.model(cand),
            store=str(self.store.path),
            **kw,
        )

    def _settings(self, cand: Candidate) -> dict[str, Any]:
        return {"target": self.target.name, "candidate": cand.as_dict(), "key": cand.key}

    def _run_plan(self, which: Any, cand: Candidate, fn: Callable[[], Any]) -> Any:
        """Run ``which`` on ``fn``: the candidate's key is the variant of its runs (the instrumented run keeps the
        variant ``instrumented`` the join knows it by, and runs one execution); settings carry the candidate."""
        settings = {"optimize": self._settings(cand), "compiler": {"sass": False}}
        runs = tuple(
            dataclasses.replace(r, repeat=1, warmup=0, settings={**r.settings, **settings})
            if r.variant == "instrumented"
            else dataclasses.replace(r, variant=cand.key, settings={**r.settings, **settings})
            for r in which.runs
        )
        workload = Workload.of_callable(fn)
        # a timing run that fails (a wrong result) ends the plan: its instrumented run is stored as not run
        return run_plan(dataclasses.replace(which, runs=runs), workload, self.store, on_error="stop")

    def _record_failure(self, cand: Candidate, status: Status, cause: str) -> Evaluation:
        """A candidate that never ran: stored as a failed run of the same region with the cause."""
        marker = region(self.identity.name, module=self.identity.module)

        def fail() -> None:
            with marker:
                raise CandidateError(status, cause)

        m = self._run_plan(self._failure_plan, cand, fail)
        return self._evaluation(cand, status, cause, run_ids=m.execution.run_ids)

    def _needs_gpu(self) -> bool:
        return any(s.startswith(("gpu.", "compile.", "hw:", "pm:", "comm.", "sys.")) for s in self.signals)

    def _measure(self, cand: Candidate) -> Evaluation:
        if self._needs_gpu() and not gpu_available():  # stored as a skipped run with the reason; nothing is built
            m = self._run_plan(self._plan, cand, lambda: None)
            return self._evaluation(cand, "skipped", f"not measured: {no_gpu_reason()}", run_ids=m.execution.run_ids)
        failed: tuple[Status, str] | None = None
        try:
            prepared = self.target.prepare(cand)
        except CandidateError as exc:
            failed = ("compile_failed" if exc.kind == "compile" else "launch_failed", f"{exc.kind} failed: {exc}")
        if failed is not None:  # recorded outside the except block: the stored cause is the failure alone
            return self._record_failure(cand, *failed)
        try:
            return self._measure_prepared(cand, prepared)
        finally:
            prepared.close()

    def _measure_prepared(self, cand: Candidate, prepared: Prepared) -> Evaluation:
        marker = region(self.identity.name, module=self.identity.module)
        timer = prepared.timer()
        failure: list[tuple[Status, str]] = []
        first = [True]

        def step() -> None:
            clean = not instrumented()  # the instrumented run's launch is neither timed by events nor checked
            try:
                with marker:
                    if timer is not None and clean:
                        timer.start()
                    out = prepared.launch()
                    if timer is not None and clean:
                        timer.stop()
            except CandidateError as exc:
                failure.append(("compile_failed" if exc.kind == "compile" else "launch_failed", str(exc)))
                raise
            except Exception as exc:
                failure.append(("launch_failed", f"{type(exc).__name__}: {exc}"))
                raise
            if first[0] and clean:  # the first warm-up output, outside the region: the check's kernels are not timed
                first[0] = False
                problem = self.target.check(out)
                if problem is not None:
                    failure.append(("wrong_result", problem))
                    raise CandidateError("check", f"wrong result: {problem}")

        which = self._plan_phases if self.phases and self._plan_phases is not None else self._plan
        m = self._run_plan(which, cand, step)
        run_ids = m.execution.run_ids
        result = m.execution.results[0]
        if failure:
            return self._evaluation(cand, failure[0][0], failure[0][1], run_ids=run_ids)
        if result.status not in MEASURED:
            return self._evaluation(cand, "failed", f"run {result.status}: {result.cause}", run_ids=run_ids)
        report = m.report
        timing = self._timing(report, timer)
        if timing is None:
            why = result.cause or f"the report has no {self.time_signal} for region {self.identity.name!r}"
            return self._evaluation(cand, "skipped" if result.status == "partial" else "failed", why, run_ids=run_ids)
        model = self.target.model(cand)
        work = self.target.work()
        compiled = self._compiled(report, prepared)
        phases, notes = self._phases(report, m.execution, model, work) if which is self._plan_phases else (None, [])
        return self._evaluation(
            cand,
            "ok",
            "",
            time=timing,
            roofline=roofline(work, timing.median, self.spec) if timing.unit == "ns" else None,
            compiled=compiled,
            phases=phases,
            attribution={a.evidence: dict(a.shares) for a in report.attribution},
            run_ids=run_ids,
            notes=tuple(notes),
            report=report.to_dict() if self.include_report else None,
        )

    def _timing(self, report: Report, timer: Timer | None) -> Timing | None:
        row = next(
            (r for r in report.regions if r.path == self.identity.name and r.signal == self.time_signal and r.n), None
        )
        if row is None:
            return None
        values = report.values(row.path, row.signal)  # the per-instance values the diff judges
        events: list[float] = []
        if timer is not None:
            events = timer.elapsed_ns()[self.warmup :]
        ordered = sorted(events)
        return Timing(
            signal=row.signal,
            unit=row.unit,
            median=row.median,
            p25=row.p25,
            p75=row.p75,
            min=row.min,
            max=row.max,
            n=row.n,
            noise=row.spread,
            values=tuple(float(v) for v in values) if values is not None else (),
            events_median_ns=ordered[len(ordered) // 2] if ordered else None,
            events_n=len(ordered),
        )

    def _compiled(self, report: Report, prepared: Prepared) -> Compiled | None:
        rows = [r for r in report.compiler if r.name == self.target.kernel]
        row = next((r for r in rows if r.source == "triton"), rows[0] if rows else None)
        facts = prepared.facts
        if row is None and facts is None:
            return None
        if row is not None:
            registers = row.registers
            local = None if row.spill_words is None else 4 * row.spill_words
            shared = row.shared_bytes
            warps, stages = row.num_warps, row.num_stages
            source = "compiler backend" if row.source == "triton" else row.source
        if facts is not None:
            if row is None:
                registers, local, shared = facts.registers, facts.local_bytes, facts.shared_bytes
                warps, stages, source = facts.num_warps, facts.num_stages, "cuobjdump -res-usage"
            else:
                registers = registers if registers is not None else facts.registers
                local = local if local is not None else facts.local_bytes
                # the compile step's figure counts the static shared memory as well as Triton's dynamic part
                shared = facts.shared_bytes if facts.shared_bytes is not None else shared
                warps = warps if warps is not None else facts.num_warps
                stages = stages if stages is not None else facts.num_stages
        occ = occupancy(registers, shared, warps, self.spec) if self.spec is not None else None
        return Compiled(self.target.kernel, source, registers, local, shared, warps, stages, occ)

    def _phases(
        self, report: Report, execution: Any, model: Model | None, work: Work | None
    ) -> tuple[Phases | None, list[str]]:
        """The device phases of the instrumented run, from the Report's dev.* rows of the region and kernel."""
        inst = [r for r in execution.results if r.index > 0]
        bad = [r for r in inst if r.status not in MEASURED]
        if bad:
            return None, [f"no device phases: the instrumented run {bad[0].status}: {bad[0].cause[:300]}"]
        phases = device_phases(
            self.store,
            report,
            [r.run_id for r in inst],
            path=self.identity.name,
            kernel=self.target.kernel,
            roles=self.target.phase_roles,
            ideal=ideal_step_ns(model, work, self.spec),
        )
        if phases is None:
            return None, [f"no device phases: no dev.* rows of kernel {self.target.kernel!r} in the report"]
        return phases, []

    def _keep(self, ev: Evaluation) -> None:
        """The evaluation's JSON next to its first run, listed in the store's artifacts."""
        if not ev.run_ids:
            return
        run_id = ev.run_ids[0]
        folder = run_folder(self.store, run_id)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / EVALUATION_FILE
        text = json.dumps({**ev.to_dict(), "report": None})
        path.write_text(text)
        self.store.write(
            {
                "artifacts": {
                    "run_id": [run_id],
                    "kind": [ARTIFACT_KIND],
                    "path": [str(path)],
                    "sha256": [""],
                    "bytes": [len(text)],
                    "note": [f"{self.target.name}: {ev.candidate.key} ({ev.status})"],
                }
            }
        )


def device_phases(
    store: Store,
    report: Report,
    run_ids: Sequence[str],
    *,
    path: str,
    kernel: str,
    roles: Mapping[str, str],
    ideal: float | None = None,
) -> Phases | None:
    """The device phases of ``kernel`` under region ``path`` in the instrumented runs ``run_ids`` of ``report``: its
    ``dev.*`` rows (:func:`~.evidence.phases_from_device`), with the programs and SMs of the runs' last launch from
    the join's per-SM rows and the events its CTAs dropped."""
    rows = [r for r in report.device if r.path == path and r.kernel == kernel and r.run_id in run_ids]
    if not rows:
        return None
    ids = list(run_ids)
    sm = store.records(device_sql.LAST_LAUNCH_SMS, [ids])
    launches = store.records(device_sql.LAUNCH_PROBLEMS, [ids, kernel])
    problems: list[str] = []
    for p in (launches[0]["problems"] or []) if launches else []:
        problems.extend(json.loads(p) if isinstance(p, str) else (p or []))
    return phases_from_device(
        rows,
        programs=int(sm[0]["programs"]) if sm else 0,
        sms_used=int(sm[0]["sms"]) if sm else 0,
        dropped=int(launches[0]["dropped"]) if launches else 0,
        problems=[str(p) for p in problems],
        step_region=roles.get("step"),
        epilogue_region=roles.get("epilogue"),
        ideal_step_ns=ideal,
        source=PHASE_SOURCE,
    )


def history(store: str | Path | Store, target: str | None = None) -> list[dict[str, Any]]:
    """Every candidate run in ``store`` (of one ``target`` name, or all), in the order they ran: run, candidate (its
    key), the run's variant (the candidate's key; ``instrumented`` for the run of its device phases), parameters, the
    run's status and cause, the evaluation's outcome (``ok``, ``wrong_result``, ...) and median (on the timing run),
    the region ids of its instances, and the evaluation file (read from the run folder next to the store)."""
    st = open_store(store if not isinstance(store, Path) else str(store))
    rows = st.records(runs_sql.CANDIDATE_RUNS, [ARTIFACT_KIND, target, target])
    out = []
    for r in rows:
        settings = json.loads(r["settings"]) if isinstance(r["settings"], str) else (r["settings"] or {})
        opt = settings.get("optimize", {})
        outcome, median = None, None
        file = run_folder(st, r["run_id"]) / EVALUATION_FILE
        if file.exists():
            ev = json.loads(file.read_text())
            outcome = ev.get("status")
            median = (ev.get("time") or {}).get("median") if outcome == "ok" else None
        out.append(
            {
                "run_id": r["run_id"],
                "target": opt.get("target"),
                "candidate": opt.get("key", r["variant"]),
                "variant": r["variant"],
                "params": opt.get("candidate", {}),
                "status": r["status"],
                "outcome": outcome,
                "median": median,
                "cause": r["cause"],
                "region_ids": sorted((r["region_ids"] or "").split(",")) if r["region_ids"] else [],
                "evaluation": r["evaluation"],
            }
        )
    return out


def load_evaluation(path: str | Path) -> Evaluation:
    """An evaluation recorded next to its run (``optimize-evaluation.json``)."""
    return Evaluation.from_dict(json.loads(Path(path).read_text()))


__all__ = [
    "ARTIFACT_KIND",
    "DEFAULT_SIGNALS",
    "DEVICE_SIGNALS",
    "EVALUATION_FILE",
    "CandidateError",
    "Prepared",
    "Session",
    "Target",
    "Timer",
    "device_phases",
    "history",
    "load_evaluation",
]
