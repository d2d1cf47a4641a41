"""What an optimizer gets back for one candidate: the :class:`Evaluation` and its parts, with their JSON form.

* :class:`Timing`: the region's time over the measured repetitions of the timing run (median, quartiles, noise),
  from the Report; CUDA events taken alongside when the target has them.
* :class:`Roofline`: the shape's work (FLOPs, compulsory DRAM bytes) against the device's peaks.
* :class:`Compiled`: registers, local memory (spills), shared memory, warps, stages, and the occupancy they allow.
* :class:`Phases`: device-region figures of one instrumented launch: phase times and shares, the period of the
  loop step, the SM tail; from the Report's ``dev.*`` rows (:func:`phases_from_device`, what a session uses) or
  from a decoded probe buffer (:func:`phases_of`).
* :class:`Model`: the target's static model of a candidate (tiles, programs, waves, estimated shared memory).

Every value is plain JSON (:meth:`Evaluation.to_dict`); docs/optimize.md lists the fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from argus_lab.optimize.candidates import Candidate
from argus_lab.optimize.specs import DEVICES, DeviceSpec, device_spec
from argus_lab.optimize.text import evaluation_text

if TYPE_CHECKING:
    from argus_lab.backends.device.decode import DecodedLaunch

SCHEMA = "argus_lab.optimize/1"

Status = Literal["ok", "compile_failed", "launch_failed", "wrong_result", "failed", "skipped", "over_budget"]
STATUSES: tuple[str, ...] = (
    "ok",
    "compile_failed",
    "launch_failed",
    "wrong_result",
    "failed",
    "skipped",
    "over_budget",
)
"""``ok``: measured and correct; ``compile_failed``/``launch_failed``: the variant could not be built or launched;
``wrong_result``: its output differs from the reference; ``failed``: the run failed otherwise; ``skipped``: not
measured here (no GPU); ``over_budget``: not measured, the budget is spent."""


# -- parts of an evaluation ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Work:
    """What one execution of the region computes: FLOPs and compulsory DRAM bytes, and the input type."""

    flops: float
    bytes: float
    dtype: str


@dataclass(frozen=True)
class Model:
    """A target's static model of one candidate (no measurement): what the rules reason with before measuring.

    ``tiles``: work units of the persistent loop; ``programs``: the launch grid; ``waves``: tiles per program;
    ``wave_efficiency``: tiles / (programs x the most tiles one program runs), 1.0 when every program gets the same
    number; ``shared_bytes``: estimated shared memory per CTA (``None`` when unknown); ``step_flops``: FLOPs of one
    step of the inner loop of one tile (a k-step, a KV block), for the ideal step time.
    """

    tiles: int
    programs: int
    sms: int
    shared_bytes: int | None = None
    step_flops: float | None = None
    note: str = ""

    @property
    def waves(self) -> float:
        """Tiles per program."""
        return self.tiles / self.programs if self.programs else 0.0

    @property
    def wave_efficiency(self) -> float:
        """Tiles over the tile slots of the waves the programs run (1.0: every program runs as many tiles)."""
        if not self.programs or not self.tiles:
            return 0.0
        return self.tiles / (math.ceil(self.tiles / self.programs) * self.programs)

    def to_dict(self) -> dict[str, Any]:
        """The fields with ``waves`` and ``wave_efficiency``."""
        out = _clean(self)
        out["waves"] = self.waves
        out["wave_efficiency"] = self.wave_efficiency
        return out


@dataclass(frozen=True)
class StaticFacts:
    """What the compiler says of a variant before it is launched (``cuobjdump -res-usage`` and Triton metadata)."""

    kernel: str
    registers: int | None
    local_bytes: int | None
    shared_bytes: int | None
    num_warps: int | None
    num_stages: int | None


@dataclass(frozen=True)
class Timing:
    """The region's time per execution over the measured repetitions (the Report's row; warm-up excluded)."""

    signal: str
    unit: str
    median: float
    p25: float
    p75: float
    min: float
    max: float
    n: int
    noise: float
    """Interquartile range over the median: the run-to-run spread of this candidate's repetitions."""
    values: tuple[float, ...] = ()
    """The per-instance values (for a comparison against noise)."""
    events_median_ns: float | None = None
    """CUDA events around the same launches, taken alongside (``None`` when the target has no events)."""
    events_n: int = 0


@dataclass(frozen=True)
class Roofline:
    """The shape's work against the device's peaks: how close the measured time is to the best possible."""

    flops: float
    bytes: float
    peak_flops: float
    dram_bytes_per_s: float
    bound_ns: float
    bound: str
    """``compute`` or ``memory``: which peak sets the bound."""
    fraction: float
    """``bound_ns`` over the measured median (1.0 = at the roofline)."""
    achieved_flops_per_s: float
    device: str


@dataclass(frozen=True)
class Occupancy:
    """CTAs one SM can hold, by each limit, and the smallest."""

    threads_per_cta: int
    by_registers: int
    by_shared: int
    by_warps: int
    ctas_per_sm: int
    limiter: str


@dataclass(frozen=True)
class Compiled:
    """Compiler facts of the candidate's kernel."""

    kernel: str
    source: str
    """Where they were read: ``compiler backend`` (the timing run's compiler backend), ``cupti launch record``,
    or ``cuobjdump -res-usage`` (the compile step, before any launch)."""
    registers: int | None
    local_bytes: int | None
    """Local memory per thread: register spills (and local arrays); 0 = no spills."""
    shared_bytes: int | None
    num_warps: int | None
    num_stages: int | None
    occupancy: Occupancy | None = None


@dataclass(frozen=True)
class PhaseRow:
    """One device region in an instrumented launch."""

    region: str
    count: int
    per_cta_median_ns: float
    occurrence_ns: float
    """One occurrence: the median occurrence (:func:`phases_of`), or the per-CTA median over the occurrences per CTA
    (:func:`phases_from_device`)."""
    share: float
    """The region's time over the CTAs' time (:func:`phases_from_device`: the per-CTA medians of the regions and of
    ``dev.unmarked``; :func:`phases_of`: the recorded time, first marker to last recorded exit)."""


@dataclass(frozen=True)
class Phases:
    """Device-region figures of one instrumented launch of the candidate."""

    source: str
    programs: int
    sms_used: int
    span_ns: float
    tail_ns: float
    """Last SM's end minus the median SM's end."""
    tail_fraction: float
    """``tail_ns`` over ``span_ns``."""
    regions: tuple[PhaseRow, ...]
    step_region: str | None = None
    step_period_ns: float | None = None
    """Median time from one start of the loop's step region to the next in the same CTA (one k-step, one KV block)."""
    step_efficiency: float | None = None
    """Ideal step time at the device's peak (``Model.step_flops`` over one SM's share of the peak) over the period."""
    sampled: bool = False
    """Whether CTAs recorded more events than their slot holds: shares are then over the first recorded events."""
    problems: tuple[str, ...] = ()

    def share(self, region: str) -> float | None:
        """The share of ``region`` (``None`` when it was not recorded)."""
        return next((r.share for r in self.regions if r.region == region), None)


@dataclass(frozen=True)
class Evaluation:
    """Everything measured (or not) about one candidate: the answer of :meth:`Session.evaluate`."""

    target: str
    region: Mapping[str, str]
    """``{"name", "module", "region_id"}``: the one region identity every candidate of the target is stored under."""
    candidate: Candidate
    status: Status
    cause: str = ""
    time: Timing | None = None
    roofline: Roofline | None = None
    compiled: Compiled | None = None
    phases: Phases | None = None
    model: Model | None = None
    attribution: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Per evidence kind (``kernel``, ``instance``, ...): shares of its weight per attribution class."""
    run_ids: tuple[str, ...] = ()
    store: str = ""
    seconds: float = 0.0
    """Wall time the evaluation took (compile, runs, join, report, instrumented launch)."""
    notes: tuple[str, ...] = ()
    report: Mapping[str, Any] | None = None
    """The Report's JSON (docs/report-json.md) when the session was asked for it."""

    @property
    def ok(self) -> bool:
        """Measured and correct."""
        return self.status == "ok" and self.time is not None

    @property
    def median(self) -> float | None:
        """The median time (``None`` unless ok)."""
        return self.time.median if self.ok and self.time is not None else None

    def text(self) -> str:
        """The evidence for people: a labelled line per part, numbers with their units, attribution in words."""
        return evaluation_text(self)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (docs/optimize.md)."""
        out: dict[str, Any] = {"schema": SCHEMA}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "candidate":
                out[f.name] = value.to_dict()
            elif f.name == "model":
                out[f.name] = None if value is None else value.to_dict()
            else:
                out[f.name] = _clean(value)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evaluation:
        """The inverse of :meth:`to_dict` (for recorded evaluations)."""
        if data.get("schema") != SCHEMA:
            msg = f"not an optimisation evaluation of schema {SCHEMA!r} (got {data.get('schema')!r})"
            raise ValueError(msg)
        t = data.get("time")
        c = data.get("compiled")
        p = data.get("phases")
        m = data.get("model")
        return cls(
            target=str(data["target"]),
            region=dict(data["region"]),
            candidate=Candidate.from_dict(data["candidate"]),
            status=data["status"],
            cause=str(data.get("cause", "")),
            time=None if t is None else Timing(**{**t, "values": tuple(t.get("values", ()))}),
            roofline=None if data.get("roofline") is None else Roofline(**data["roofline"]),
            compiled=None
            if c is None
            else Compiled(**{**c, "occupancy": None if c.get("occupancy") is None else Occupancy(**c["occupancy"])}),
            phases=None
            if p is None
            else Phases(
                **{
                    **p,
                    "regions": tuple(PhaseRow(**r) for r in p["regions"]),
                    "problems": tuple(p.get("problems", ())),
                }
            ),
            model=None if m is None else Model(**{k: v for k, v in m.items() if k not in ("waves", "wave_efficiency")}),
            attribution={k: dict(v) for k, v in data.get("attribution", {}).items()},
            run_ids=tuple(data.get("run_ids", ())),
            store=str(data.get("store", "")),
            seconds=float(data.get("seconds", 0.0)),
            notes=tuple(data.get("notes", ())),
            report=data.get("report"),
        )


def _clean(value: Any) -> Any:
    """JSON-safe copy: dataclasses become dicts, tuples lists, NaN/inf ``None``."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _clean(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return _clean(value.item())
    return value


# -- derived figures ---------------------------------------------------------------------------------------------
def roofline(work: Work | None, median_ns: float, spec: DeviceSpec | None) -> Roofline | None:
    """The roofline of ``work`` on ``spec`` against a measured median (``None`` when either is unknown)."""
    if work is None or spec is None or not median_ns > 0:
        return None
    peak = spec.peak_flops.get(work.dtype)
    if peak is None:
        return None
    t_compute = work.flops / peak * 1e9
    t_memory = work.bytes / spec.dram_bytes_per_s * 1e9
    bound_ns = max(t_compute, t_memory)
    return Roofline(
        flops=work.flops,
        bytes=work.bytes,
        peak_flops=peak,
        dram_bytes_per_s=spec.dram_bytes_per_s,
        bound_ns=bound_ns,
        bound="compute" if t_compute >= t_memory else "memory",
        fraction=bound_ns / median_ns,
        achieved_flops_per_s=work.flops / (median_ns * 1e-9),
        device=spec.name,
    )


def occupancy(
    registers: int | None, shared_bytes: int | None, num_warps: int | None, spec: DeviceSpec
) -> Occupancy | None:
    """CTAs per SM the kernel's registers, shared memory and warps allow (sm_90 allocation rules).

    Registers are allocated per warp in units of 256 (a thread's count rounded up to a multiple of 8); shared
    memory per CTA adds the reserved 1 KiB.
    """
    if registers is None or num_warps is None or num_warps < 1:
        return None
    regs_per_warp = math.ceil(max(registers, 1) * 32 / 256) * 256
    by_regs = spec.registers_per_sm // (regs_per_warp * num_warps)
    smem = max(shared_bytes or 0, 0)
    by_shared = spec.shared_per_sm // (smem + spec.reserved_shared_per_cta) if smem else spec.max_ctas_per_sm
    if smem > spec.shared_per_cta:
        by_shared = 0
    by_warps = spec.max_warps_per_sm // num_warps
    limits = {"registers": by_regs, "shared memory": by_shared, "warps": by_warps, "CTA slots": spec.max_ctas_per_sm}
    limiter = min(limits, key=lambda k: limits[k])
    return Occupancy(
        threads_per_cta=num_warps * 32,
        by_registers=by_regs,
        by_shared=by_shared,
        by_warps=by_warps,
        ctas_per_sm=limits[limiter],
        limiter=limiter,
    )


def phases_of(
    launch: DecodedLaunch,
    *,
    step_region: str | None = None,
    ideal_step_ns: float | None = None,
    source: str = "",
) -> Phases:
    """Device-region figures of one decoded instrumented launch (:mod:`argus_lab.backends.device.decode`).

    Times are GPU ns: spans and ends on ``%globaltimer``, durations from each CTA's cycles at its measured clock.
    ``step_region`` names the region each inner-loop step starts with (``load`` for a GEMM k-step, ``qk`` for an
    attention KV block): its period is the median gap between consecutive starts in one CTA; ``ideal_step_ns`` (one
    step's FLOPs at one SM's share of the peak, :func:`ideal_step_ns`) over that period is the step efficiency.
    """
    pr, iv = launch.programs, launch.intervals
    names = np.array(launch.region_names(), dtype=object)
    problems = tuple(launch.problems)
    sampled = bool((pr.dropped > 0).any())
    if len(pr.cta) == 0:
        return Phases(source, 0, 0, 0.0, 0.0, 0.0, (), step_region, problems=problems, sampled=sampled)
    span = float(pr.t_end.max() - pr.t_begin.min())
    sms, inv = np.unique(pr.sm, return_inverse=True)
    ends = np.zeros(len(sms), dtype=np.int64)
    np.maximum.at(ends, inv, pr.t_end)
    tail = float(ends.max() - np.median(ends))
    # the recorded time of each CTA: from its begin to the end of its last recorded interval (all of it when nothing
    # was dropped), so that shares stay right when a capped slot kept only the first events
    cta_index = {int(c): i for i, c in enumerate(pr.cta)}
    covered_end = pr.t_end.copy() if not sampled else pr.t_begin.copy()
    if sampled and len(iv):
        idx = np.array([cta_index[int(c)] for c in iv.cta], dtype=np.int64)
        np.maximum.at(covered_end, idx, iv.t_end)
    covered = float(np.maximum(covered_end - pr.t_begin, 0).sum())
    rows = []
    for name in sorted(set(names.tolist())):
        sel = names == name
        ctas, cinv = np.unique(iv.cta[sel], return_inverse=True)
        per_cta = np.bincount(cinv, weights=iv.dur_ns[sel], minlength=len(ctas))
        top = sel & (iv.depth == 0)
        total_top = float(iv.dur_ns[top].sum()) if top.any() else float(iv.dur_ns[sel].sum())
        rows.append(
            PhaseRow(
                region=str(name),
                count=int(sel.sum()),
                per_cta_median_ns=float(np.median(per_cta)),
                occurrence_ns=float(np.median(iv.dur_ns[sel])),
                share=total_top / covered if covered > 0 else 0.0,
            )
        )
    period = _step_period(launch, names, step_region) if step_region else None
    efficiency = ideal_step_ns / period if period and ideal_step_ns else None
    return Phases(
        source=source,
        programs=len(pr.cta),
        sms_used=len(sms),
        span_ns=span,
        tail_ns=tail,
        tail_fraction=tail / span if span > 0 else 0.0,
        regions=tuple(rows),
        step_region=step_region,
        step_period_ns=period,
        step_efficiency=efficiency,
        sampled=sampled,
        problems=problems,
    )


LAUNCH = "(launch)"
"""The region name of the Report's device rows about a whole launch (``argus_lab.report.device.LAUNCH``)."""


def phases_from_device(
    rows: Sequence[Any],
    *,
    programs: int,
    sms_used: int,
    dropped: int = 0,
    problems: Sequence[str] = (),
    step_region: str | None = None,
    epilogue_region: str | None = None,
    ideal_step_ns: float | None = None,
    source: str = "",
) -> Phases | None:
    """Device-region figures of one instrumented launch from the Report's ``dev.*`` rows of one host region path and
    kernel (:class:`argus_lab.report.device.DeviceRow`: ``region``, ``signal``, ``median``).

    A CTA's time is the sum of its regions' ``dev.time`` and its ``dev.unmarked`` (per-CTA medians; the regions are
    top-level); a region's share is its ``dev.time`` over that; the tail is ``dev.tail`` over ``dev.span``; the loop
    step's period is the CTA's time outside the epilogue over the steps one CTA ran (``dev.count`` of the step
    region over the programs).  When CTAs dropped events (``dropped`` > 0: their slots were full), the regions hold
    the first events only: shares are then over the regions' own time and there is no step period.  ``None`` when
    the rows hold no launch.
    """
    value = {(str(r.region), str(r.signal)): float(r.median) for r in rows}
    span = value.get((LAUNCH, "dev.span"))
    if span is None:
        return None
    tail = value.get((LAUNCH, "dev.tail"), 0.0)
    unmarked = value.get((LAUNCH, "dev.unmarked"), 0.0)
    names = sorted({str(r.region) for r in rows if r.region != LAUNCH})
    per_cta = {n: value.get((n, "dev.time"), 0.0) for n in names}
    count = {n: value.get((n, "dev.count"), 0.0) for n in names}
    sampled = dropped > 0
    cta_time = sum(per_cta.values()) + (0.0 if sampled else unmarked)
    n_programs = max(programs, 1)
    out = []
    for n in names:
        per = count[n] / n_programs
        out.append(
            PhaseRow(
                region=n,
                count=round(count[n]),
                per_cta_median_ns=per_cta[n],
                occurrence_ns=per_cta[n] / per if per > 0 else 0.0,
                share=per_cta[n] / cta_time if cta_time > 0 else 0.0,
            )
        )
    period = None
    if step_region is not None and count.get(step_region) and not sampled:
        steps = count[step_region] / n_programs
        period = (cta_time - per_cta.get(epilogue_region or "", 0.0)) / steps if steps > 0 else None
    return Phases(
        source=source,
        programs=programs,
        sms_used=sms_used,
        span_ns=span,
        tail_ns=tail,
        tail_fraction=tail / span if span > 0 else 0.0,
        regions=tuple(out),
        step_region=step_region,
        step_period_ns=period,
        step_efficiency=ideal_step_ns / period if period and ideal_step_ns else None,
        sampled=sampled,
        problems=tuple(problems),
    )


def ideal_step_ns(model: Model | None, work: Work | None, spec: DeviceSpec | None) -> float | None:
    """One inner-loop step of one tile at one SM's share of the device's peak (``None`` when unknown)."""
    if model is None or work is None or spec is None or not model.step_flops:
        return None
    peak = spec.peak_flops.get(work.dtype)
    return model.step_flops / (peak / spec.sms) * 1e9 if peak else None


def _step_period(launch: DecodedLaunch, names: np.ndarray, step_region: str) -> float | None:
    """Median gap between consecutive starts of ``step_region`` within one CTA, from the SM's cycle counter."""
    iv, pr = launch.intervals, launch.programs
    sel = np.flatnonzero(names == step_region)
    if len(sel) < 2:
        return None
    cta = iv.cta[sel]
    clk = iv.clk_start[sel]
    order = np.lexsort((clk, cta))
    cta, clk = cta[order], clk[order]
    same = cta[1:] == cta[:-1]
    if not same.any():
        return None
    rate = pr.cycles_per_ns
    rate_of = {int(c): float(r) for c, r in zip(pr.cta, rate, strict=True)}
    gaps = (clk[1:] - clk[:-1])[same].astype(np.float64)
    rates = np.array([rate_of.get(int(c), math.nan) for c in cta[1:][same]])
    ok = np.isfinite(rates) & (rates > 0)
    if not ok.any():
        return None
    return float(np.median(gaps[ok] / rates[ok]))


def values_of(evaluations: Sequence[Evaluation]) -> list[float]:
    """The medians of the evaluations that are ok (a small helper for searches and reports)."""
    return [e.time.median for e in evaluations if e.ok and e.time is not None]


__all__ = [
    "DEVICES",
    "SCHEMA",
    "STATUSES",
    "Compiled",
    "DeviceSpec",
    "Evaluation",
    "Model",
    "Occupancy",
    "PhaseRow",
    "Phases",
    "Roofline",
    "StaticFacts",
    "Status",
    "Timing",
    "Work",
    "device_spec",
    "ideal_step_ns",
    "occupancy",
    "phases_from_device",
    "phases_of",
    "roofline",
]
