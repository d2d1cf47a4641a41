"""The evidence-guided rule set: from one candidate's evidence to the candidates worth measuring next.

Each rule reads one kind of evidence of a measured candidate (an :class:`~.evidence.Evaluation`) and proposes
moves of that candidate's parameters, by *role* (``tile_m``, ``stages``, ... of the space), each with the evidence
in words and a priority.  :func:`prune` refuses candidates before they are measured, from the static model and the
compiler's facts.  :func:`done` stops a search whose best candidate is at the roofline.  The thresholds are named
constants; docs/optimize.md states every rule.

The rules (highest priority first):

``spills``      the kernel spills to local memory -> fewer stages, smaller tiles, more warps
``residency``   more CTAs per SM were asked than registers/shared memory let reside -> one CTA per SM
``underfill``   fewer programs ran than the GPU has SMs -> split each tile's inner loop (split-K / split-KV, when
                the space has a ``split`` role), smaller tiles (more tiles)
``tail``        the last SM ends well after the median SM -> tile shapes, splits and orders with better-balanced
                waves; with more than one wave, a long tail or quantised waves (model) -> splitting only the
                last wave's tiles (the ``tail_split`` role, when the space has it) before the rest
``memory``      the memory phase is a large part of each loop step -> one more pipeline stage, bulk asynchronous
                copies (TMA, when the space has an ``async_copy`` role), a longer k-step
``occupancy``   registers and shared memory leave room for a second CTA on each SM, and the epilogue or a slow
                step leaves the tensor cores idle -> two CTAs per SM
``step``        the loop step runs far below the tensor cores' peak without being memory-bound -> more warps,
                larger tiles
``softmax``     the softmax phase dominates an attention step -> longer KV blocks
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from argus_lab.optimize.candidates import Candidate, Space
from argus_lab.optimize.evidence import Evaluation, Model, StaticFacts, occupancy
from argus_lab.optimize.specs import DeviceSpec

SPILL_BYTES = 0
"""Any local memory per thread counts as spilling."""
UNDERFILL = 0.9
"""Programs below this fraction of the SMs leave SMs idle for the whole kernel."""
TAIL_FRACTION = 0.08
"""A tail (last SM end minus median SM end) above this share of the kernel's span is worth balancing."""
WAVE_GAIN = 0.03
"""A tail move must raise the model's wave efficiency by at least this much."""
WAVE_QUANTISED = 0.9
"""A model wave efficiency below which the last wave's idle SMs are worth a tail split, however short the measured
tail (it measures the last SM against the median one)."""
TAIL_SPLIT_FIRST = 0.05
"""Priority a tail split gets over other tail moves of the same wave efficiency: it keeps the full waves' tiles
whole (no partials to store and sum for them), where split-K cuts every tile."""
MEMORY_SHARE = 0.35
"""The memory phase's share of (memory + math) phases above which the loads are on the critical path."""
EPILOGUE_SHARE = 0.08
"""An epilogue share above which a second resident CTA can hide it."""
STEP_EFFICIENCY = 0.6
"""A loop step below this fraction of the tensor cores' peak is slow."""
SOFTMAX_SHARE = 0.4
"""The softmax phase's share of an attention step above which the KV block is too short."""
ROOFLINE_DONE = 0.9
"""A candidate at this fraction of the roofline leaves nothing worth measuring."""


@dataclass(frozen=True)
class Proposal:
    """A candidate to measure, the rule that proposed it, the evidence in words, and its priority."""

    candidate: Candidate
    rule: str
    reason: str
    priority: float


@dataclass(frozen=True)
class RuleContext:
    """What the rules know besides the evidence: the space, the target's model, the device, the phase roles."""

    space: Space
    model: Callable[[Candidate], Model | None]
    spec: DeviceSpec | None = None
    phase_roles: Mapping[str, str] = field(default_factory=dict)

    def move(self, cand: Candidate, role: str, direction: int) -> Candidate | None:
        """``cand`` with the parameter of ``role`` one step up (+1) or down (-1) its axis; ``None`` if impossible."""
        name = self.space.param(role)
        return None if name is None else self.space.step(cand, name, direction)

    def toggle(self, cand: Candidate, role: str) -> Candidate | None:
        """``cand`` with a two-valued parameter of ``role`` switched."""
        name = self.space.param(role)
        if name is None:
            return None
        values = self.space.values(name)
        if len(values) != 2:
            return None
        other = values[1] if cand.get(name) == values[0] else values[0]
        return cand.with_params(**{name: other})

    def value(self, cand: Candidate, role: str) -> object:
        """The value of the parameter playing ``role`` (``None`` when the space has none)."""
        name = self.space.param(role)
        return None if name is None else cand.get(name)


def _share(ev: Evaluation, ctx: RuleContext, role: str) -> float | None:
    """The share of the device region(s) playing ``role`` (a role may name several, comma-separated)."""
    regions = ctx.phase_roles.get(role)
    if ev.phases is None or not regions:
        return None
    shares = [ev.phases.share(r.strip()) for r in regions.split(",")]
    known = [s for s in shares if s is not None]
    return sum(known) if known else None


def _propose(out: list[Proposal], cand: Candidate | None, rule: str, reason: str, priority: float) -> None:
    if cand is not None:
        out.append(Proposal(cand, rule, reason, priority))


def rule_spills(ev: Evaluation, ctx: RuleContext) -> list[Proposal]:
    """Local memory per thread > 0: fewer stages, smaller tiles, more warps (fewer registers per thread)."""
    c = ev.compiled
    if c is None or c.local_bytes is None or c.local_bytes <= SPILL_BYTES:
        return []
    why = f"the kernel spills: {c.local_bytes} B of local memory per thread at {c.registers} registers"
    out: list[Proposal] = []
    for role, d, what in (
        ("stages", -1, "one stage fewer"),
        ("tile_n", -1, "narrower tile"),
        ("warps", 1, "more warps"),
    ):
        _propose(out, ctx.move(ev.candidate, role, d), "spills", f"{why}; {what}", 10.0)
    _propose(out, ctx.move(ev.candidate, "tile_m", -1), "spills", f"{why}; shorter tile", 9.5)
    return out


def rule_residency(ev: Evaluation, ctx: RuleContext) -> list[Proposal]:
    """More CTAs per SM asked than fit: back to one (the extra programs only run as a second wave)."""
    asked = ctx.value(ev.candidate, "ctas_per_sm")
    occ = ev.compiled.occupancy if ev.compiled is not None else None
    if not isinstance(asked, int) or asked < 2 or occ is None or occ.ctas_per_sm >= asked:
        return []
    c = ev.compiled
    why = (
        f"{asked} CTAs per SM asked but only {occ.ctas_per_sm} fit ({occ.limiter}: {c.registers if c else '?'} "
        f"registers x {occ.threads_per_cta} threads, {c.shared_bytes if c else '?'} B shared)"
    )
    out: list[Proposal] = []
    _propose(out, ctx.move(ev.candidate, "ctas_per_sm", -1), "residency", why, 8.5)
    return out


def rule_underfill(ev: Evaluation, ctx: RuleContext) -> list[Proposal]:
    """Fewer programs than SMs: split each tile's inner loop into more work units (the ``split`` role: split-K,
    split-KV; first, as it keeps the tile), or halve the tile along m, along n, or both (more, smaller tiles)."""
    sms = ctx.spec.sms if ctx.spec is not None else None
    used = ev.phases.sms_used if ev.phases is not None and ev.phases.sms_used else None
    model = ev.model or ctx.model(ev.candidate)
    if used is None and model is not None:
        used, sms = model.programs, sms or model.sms
    if not used or not sms or used >= UNDERFILL * sms:
        return []
    why = f"only {used} of {sms} SMs ran a program ({model.tiles if model else '?'} tiles)"
    prio = 8.0 + (1.0 - used / sms)
    out: list[Proposal] = []
    m_down = ctx.move(ev.candidate, "tile_m", -1)
    n_down = ctx.move(ev.candidate, "tile_n", -1)
    _propose(out, m_down, "underfill", f"{why}; halve tile_m", prio)
    _propose(out, n_down, "underfill", f"{why}; halve tile_n", prio - 0.1)
    if m_down is not None:
        _propose(out, ctx.move(m_down, "tile_n", -1), "underfill", f"{why}; halve both", prio - 0.2)
    # first: more work units with the same tile (its MMA shape and loads per step stay as they are)
    split = ctx.move(ev.candidate, "split", 1)
    _propose(out, split, "underfill", f"{why}; split each tile's inner loop into more work units", prio + 0.1)
    return [p for p in out if _programs(ctx, p.candidate) > used]


def _programs(ctx: RuleContext, cand: Candidate) -> int:
    m = ctx.model(cand)
    return m.programs if m is not None else 0


def _wave_efficiency(ctx: RuleContext, cand: Candidate) -> float:
    m = ctx.model(cand)
    return m.wave_efficiency if m is not None else 0.0


def rule_tail(ev: Evaluation, ctx: RuleContext) -> list[Proposal]:
    """A long SM tail: tile shapes, CTAs per SM, splits and tile orders whose waves are better balanced (by the
    model).  Splitting only the last wave's tiles (``tail_split``) is proposed when there is more than one wave
    (fewer tiles than programs is the ``underfill`` rule's case) and either the tail is long or the waves are
    quantised (the model's wave efficiency below :data:`WAVE_QUANTISED`: when fewer than half the SMs idle in the
    last wave, the last SM ends with the median one and the measured tail is short); it takes the fewest slices
    that balance the waves, and comes first among moves of equal balance."""
    ph = ev.phases
    if ph is None:
        return []
    here = _wave_efficiency(ctx, ev.candidate)
    long_tail = ph.tail_fraction >= TAIL_FRACTION
    why = f"SM tail {ph.tail_ns / 1e3:.1f} us = {ph.tail_fraction:.0%} of the {ph.span_ns / 1e3:.1f} us span"
    prio = 6.0 + min(ph.tail_fraction, 0.5)
    out: list[Proposal] = []
    if long_tail:
        moves = [(r, d) for r in ("tile_m", "tile_n", "ctas_per_sm", "split") for d in (-1, 1)]
        for role, d in moves:
            c = ctx.move(ev.candidate, role, d)
            if c is None:
                continue
            eff = _wave_efficiency(ctx, c)
            if eff >= here + WAVE_GAIN:
                what = f"{role} {'down' if d < 0 else 'up'}"
                _propose(out, c, "tail", f"{why}; {what}: wave efficiency {here:.2f} -> {eff:.2f}", prio + eff)
        order = ctx.toggle(ev.candidate, "order")
        if order is not None:
            _propose(out, order, "tail", f"{why}; the other tile order (the longest tiles first or last)", prio + here)
    m = ctx.model(ev.candidate)
    waves = m.waves if m is not None else 0.0
    if waves <= 1.0 or not (long_tail or here < WAVE_QUANTISED):
        return out
    if not long_tail:
        why = f"{why}, but the waves are quantised: {waves:.2f} waves, wave efficiency {here:.2f}"
    c = ctx.move(ev.candidate, "tail_split", 1)
    while c is not None:  # the fewest slices of the last wave's tiles that balance the waves
        eff = _wave_efficiency(ctx, c)
        if eff >= here + WAVE_GAIN and ctx.space.invalid_reason(c) is None:
            what = f"split only the last wave's tiles into {c.get(ctx.space.param('tail_split') or '')} slices"
            reason = f"{why}; {what} ({waves:.2f} waves; the full waves stay whole): wave efficiency {here:.2f} -> "
            _propose(out, c, "tail", f"{reason}{eff:.2f}", prio + eff + TAIL_SPLIT_FIRST)
            break
        c = ctx.move(c, "tail_split", 1)
    return out


def rule_memory(ev: Evaluation, ctx: RuleContext) -> list[Proposal]:
    """The memory phase takes a large part of each step: a deeper pipeline, or a longer k-step."""
    mem, math_ = _share(ev, ctx, "memory"), _share(ev, ctx, "math")
    if mem is None or math_ is None or mem + math_ <= 0:
        return []
    frac = mem / (mem + math_)
    if frac < MEMORY_SHARE:
        return []
    mem_name, math_name = ctx.phase_roles["memory"], ctx.phase_roles["math"]
    why = f"the {mem_name} phase is {frac:.0%} of {mem_name} + {math_name}"
    out: list[Proposal] = []
    _propose(out, ctx.move(ev.candidate, "stages", 1), "memory", f"{why}; one more pipeline stage", 4.0 + frac)
    if ctx.value(ev.candidate, "async_copy") is False:  # a space with a bulk-copy (TMA) variant of the kernel
        tma = ctx.toggle(ev.candidate, "async_copy")
        _propose(out, tma, "memory", f"{why}; bulk asynchronous copies (TMA)", 3.95 + frac)
    _propose(out, ctx.move(ev.candidate, "tile_k", 1), "memory", f"{why}; longer k-step", 3.9 + frac)
    return out


def rule_occupancy(ev: Evaluation, ctx: RuleContext) -> list[Proposal]:
    """Room for a second CTA per SM while the epilogue or a slow step idles the tensor cores: two CTAs per SM."""
    asked = ctx.value(ev.candidate, "ctas_per_sm")
    occ = ev.compiled.occupancy if ev.compiled is not None else None
    if asked != 1 or occ is None or occ.ctas_per_sm < 2:
        return []
    epi = _share(ev, ctx, "epilogue") or 0.0
    eff = ev.phases.step_efficiency if ev.phases is not None else None
    if epi < EPILOGUE_SHARE and (eff is None or eff >= STEP_EFFICIENCY):
        return []
    because = f"epilogue {epi:.0%} of the CTA time" if epi >= EPILOGUE_SHARE else f"step at {eff:.0%} of peak"
    why = f"{occ.ctas_per_sm} CTAs fit per SM ({occ.limiter} limit) and {because}"
    out: list[Proposal] = []
    _propose(out, ctx.move(ev.candidate, "ctas_per_sm", 1), "occupancy", f"{why}; a second CTA per SM", 5.0 + epi)
    return out


def rule_step(ev: Evaluation, ctx: RuleContext) -> list[Proposal]:
    """A slow loop step that is not memory-bound: more warps, then larger tiles (larger MMAs per step)."""
    ph = ev.phases
    if ph is None or ph.step_efficiency is None or ph.step_efficiency >= STEP_EFFICIENCY:
        return []
    mem, math_ = _share(ev, ctx, "memory"), _share(ev, ctx, "math")
    if mem is not None and math_ is not None and mem + math_ > 0 and mem / (mem + math_) >= MEMORY_SHARE:
        return []  # the memory rule owns this case
    why = (
        f"the loop step runs at {ph.step_efficiency:.0%} of the tensor cores' peak ({(ph.step_period_ns or 0):.0f} ns)"
    )
    out: list[Proposal] = []
    _propose(out, ctx.move(ev.candidate, "warps", 1), "step", f"{why}; more warps", 3.0)
    _propose(out, ctx.move(ev.candidate, "tile_n", 1), "step", f"{why}; wider tile", 2.9)
    _propose(out, ctx.move(ev.candidate, "stages", 1), "step", f"{why}; one more stage", 2.8)
    return out


def rule_softmax(ev: Evaluation, ctx: RuleContext) -> list[Proposal]:
    """Softmax dominates the attention step: longer KV blocks amortise the row maximum and the rescale."""
    sm = _share(ev, ctx, "softmax")
    math_ = _share(ev, ctx, "math")
    if sm is None:
        return []
    total = sm + (math_ or 0.0) + (_share(ev, ctx, "memory") or 0.0)
    if total <= 0 or sm / total < SOFTMAX_SHARE:
        return []
    why = f"softmax is {sm / total:.0%} of the attention step"
    out: list[Proposal] = []
    _propose(out, ctx.move(ev.candidate, "tile_n", 1), "softmax", f"{why}; longer KV block", 3.5)
    _propose(out, ctx.move(ev.candidate, "warps", 1), "softmax", f"{why}; more warps", 3.4)
    return out


RULES: tuple[tuple[str, Callable[[Evaluation, RuleContext], list[Proposal]]], ...] = (
    ("spills", rule_spills),
    ("residency", rule_residency),
    ("underfill", rule_underfill),
    ("tail", rule_tail),
    ("occupancy", rule_occupancy),
    ("memory", rule_memory),
    ("step", rule_step),
    ("softmax", rule_softmax),
)
"""Every rule by name, in the order of the module docstring."""


def propose(ev: Evaluation, ctx: RuleContext) -> list[Proposal]:
    """Every rule's proposals for a measured candidate, the highest priority first (one per candidate, valid only)."""
    if not ev.ok:
        return []
    best: dict[str, Proposal] = {}
    for _, rule in RULES:
        for p in rule(ev, ctx):
            if ctx.space.invalid_reason(p.candidate) is not None or p.candidate == ev.candidate:
                continue
            have = best.get(p.candidate.key)
            if have is None or p.priority > have.priority:
                best[p.candidate.key] = p
    return sorted(best.values(), key=lambda p: -p.priority)


def prune(cand: Candidate, ctx: RuleContext, static: StaticFacts | None = None) -> str | None:
    """Why ``cand`` is not worth measuring (``None``: measure it).

    * the compiler says it spills (local memory per thread > 0);
    * its shared memory (compiled, else the model's estimate) is over what one CTA may use;
    * its registers and warps cannot be resident on an SM.
    """
    if static is not None and static.local_bytes is not None and static.local_bytes > SPILL_BYTES:
        regs = static.registers
        return f"the compiler says it spills ({static.local_bytes} B local memory per thread at {regs} registers)"
    model = ctx.model(cand)
    shared = static.shared_bytes if static is not None and static.shared_bytes is not None else None
    if shared is None and model is not None:
        shared = model.shared_bytes
    spec = ctx.spec
    if spec is not None and shared is not None and shared > spec.shared_per_cta:
        return f"{shared} B of shared memory per CTA, over the {spec.shared_per_cta} B one CTA may use"
    if spec is not None and static is not None and static.registers is not None and static.num_warps:
        occ = occupancy(static.registers, shared, static.num_warps, spec)
        if occ is not None and occ.ctas_per_sm < 1:
            size = f"{static.registers} registers x {static.num_warps} warps"
            return f"it cannot be resident on an SM ({occ.limiter}: {size})"
    return None


def done(ev: Evaluation) -> str | None:
    """Why a search can stop at ``ev`` (at the roofline), or ``None``."""
    if ev.ok and ev.roofline is not None and ev.roofline.fraction >= ROOFLINE_DONE:
        return f"at {ev.roofline.fraction:.0%} of the {ev.roofline.bound} roofline: nothing worth measuring is left"
    return None


__all__ = [
    "EPILOGUE_SHARE",
    "MEMORY_SHARE",
    "ROOFLINE_DONE",
    "RULES",
    "SOFTMAX_SHARE",
    "STEP_EFFICIENCY",
    "TAIL_FRACTION",
    "TAIL_SPLIT_FIRST",
    "UNDERFILL",
    "WAVE_QUANTISED",
    "Proposal",
    "RuleContext",
    "done",
    "propose",
    "prune",
]
