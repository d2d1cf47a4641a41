"""The optimisation loop in words: an evaluation, its attribution and a search's speed-up, as people read them.

Every number carries its unit at a readable precision (:func:`argus_lab.units.fmt`: ``257 µs``, ``99.3 kB``;
:func:`argus_lab.units.percent`), attribution is a sentence (``kernels: 64% exact, 36% unattributed``), and a
speed-up that cannot be given says why (the default failed, nothing was measured).  ``Evaluation.text()``,
``SearchResult.text()`` and ``SearchResult.speedup_text()`` call these; the JSON forms (``to_dict``) keep the raw
numbers for agents.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from argus_lab.units import fmt, percent, times

if TYPE_CHECKING:
    from argus_lab.optimize.evidence import Evaluation, Phases, Timing
    from argus_lab.optimize.search import SearchResult

EVIDENCE_WORDS: dict[str, str] = {
    "instance": "region instances",
    "kernel": "kernels",
    "compiler": "compiler facts",
    "device_launch": "instrumented launches",
    "ncu_kernel": "counter replays",
    "sample": "samples",
    "memcpy": "copies",
    "memset": "memsets",
}
"""The join's evidence kinds as people call them."""

LABEL = 12
"""Width of the label column of :func:`evaluation_text`."""


def attribution_text(attribution: Mapping[str, Mapping[str, float]]) -> str:
    """``kernels: 64% exact, 36% unattributed; region instances, compiler facts: all exact`` (largest shares first;
    the evidence kinds wholly of one class share a clause)."""
    if not attribution:
        return "nothing attributed (no join results for these runs)"
    whole: dict[str, list[str]] = {}
    split: list[str] = []
    for kind, shares in attribution.items():
        name = EVIDENCE_WORDS.get(kind, kind.replace("_", " "))
        parts = sorted(((c, s) for c, s in shares.items() if s > 0), key=lambda cs: -cs[1])
        if len(parts) == 1:
            whole.setdefault(parts[0][0], []).append(name)
        elif parts:
            split.append(f"{name}: " + ", ".join(f"{percent(s)} {c}" for c, s in parts))
    clauses = split + [f"{', '.join(names)}: all {cls}" for cls, names in whole.items()]
    return "; ".join(clauses) or "nothing attributed"


def timing_text(t: Timing) -> str:
    """``median 252 µs over 10 launches (p25..p75 252 µs..253 µs, spread 0.2%); CUDA events alongside: 257 µs``."""
    unit = t.unit or "ns"
    line = (
        f"median {fmt(t.median, unit)} over {t.n} launch{'es' if t.n != 1 else ''} "
        f"(p25..p75 {fmt(t.p25, unit)}..{fmt(t.p75, unit)}, spread {percent(t.noise)})"
    )
    if t.events_median_ns is not None:
        line += f"; CUDA events alongside: median {fmt(t.events_median_ns, 'ns')}"
    return line


def phases_text(p: Phases) -> list[str]:
    """The phases of an instrumented launch: the launch, then one line per device region."""
    head = (
        f"{p.programs} CTAs on {p.sms_used} SMs, span {fmt(p.span_ns, 'ns')}, SM tail {fmt(p.tail_ns, 'ns')} "
        f"({percent(p.tail_fraction)} of the span)"
    )
    if p.sampled:
        head += "; shares over the first recorded events (CTAs recorded more than their slots hold)"
    lines = [head]
    width = max((len(r.region) for r in p.regions), default=0)
    for r in p.regions:
        share = percent(r.share)
        lines.append(
            f"  {r.region.ljust(width)}  {share:>5} of the CTAs' time, one occurrence {fmt(r.occurrence_ns, 'ns')}"
        )
    if p.step_period_ns:
        peak = f", {percent(p.step_efficiency)} of the tensor cores' peak" if p.step_efficiency else ""
        lines.append(f"  one {p.step_region} step every {fmt(p.step_period_ns, 'ns')}{peak}")
    lines += [f"  problem: {x}" for x in p.problems]
    return lines


def evaluation_text(ev: Evaluation) -> str:
    """One candidate's evidence, a labelled line per part (what is missing is said, never printed as ``None``)."""
    out: list[tuple[str, str]] = [("candidate", ev.candidate.key or "(no parameters)")]
    if ev.status != "ok":
        first, _, more = ev.cause.strip().partition("\n")
        cause = f": {first}" + (" (the whole cause in .cause)" if more else "") if first else ""
        out.append(("status", ev.status + cause))
    out.append(("time", timing_text(ev.time) if ev.time else f"not measured ({ev.status})"))
    if ev.roofline:
        r = ev.roofline
        out.append(
            (
                "roofline",
                f"{r.bound}-bound at {fmt(r.bound_ns, 'ns')}: {percent(r.fraction)} of it reached "
                f"({r.achieved_flops_per_s / 1e12:.0f} TFLOP/s on {r.device})",
            )
        )
    if ev.compiled:
        c = ev.compiled
        local = "no spills (0 B local)" if c.local_bytes == 0 else f"{fmt(c.local_bytes, 'byte')} local (spills)"
        parts = [
            f"{c.registers} registers" if c.registers is not None else "registers unknown",
            local if c.local_bytes is not None else "local memory unknown",
            f"{fmt(c.shared_bytes, 'byte')} shared" if c.shared_bytes is not None else "shared memory unknown",
        ]
        if c.num_warps is not None:
            parts.append(f"{c.num_warps} warps")
        if c.num_stages is not None:
            parts.append(f"{c.num_stages} stages")
        line = ", ".join(parts) + (f" ({c.source})" if c.source else "")
        if c.occupancy:
            line += f"; {c.occupancy.ctas_per_sm} CTA/SM (limited by {c.occupancy.limiter})"
        out.append(("compiler", line))
    if ev.model:
        m = ev.model
        out.append(
            (
                "model",
                f"{m.tiles} tiles on {m.programs} programs: {m.waves:.2f} waves, "
                f"wave efficiency {percent(m.wave_efficiency)}",
            )
        )
    if ev.phases:
        first, *rest = phases_text(ev.phases)
        out.append(("phases", first))
        out += [("", line) for line in rest]
    out.append(("attribution", attribution_text(ev.attribution)))
    out += [("note", n) for n in ev.notes]
    return "\n".join(f"{label.ljust(LABEL)}{text}".rstrip() for label, text in out)


def no_speedup_reason(result: SearchResult) -> str | None:
    """Why ``result.speedup`` is ``None`` (``None`` when there is one)."""
    d, b = result.default, result.best
    if d is None:
        return f"the search measured nothing ({result.stopped or 'no candidate was asked for'})"
    if not d.ok:
        cause = f": {d.cause.splitlines()[0]}" if d.cause else ""
        return (
            f"the default {d.candidate.key} was not measured ({d.status}{cause}), and a speed-up is over the "
            "default's time; fix the default or measure it again"
        )
    if b is None or not b.median:
        return f"no candidate was measured ok in {result.asked} asked"
    return None


def speedup_text(result: SearchResult) -> str:
    """``speed-up of the best over the default: x1.223 (252 µs -> 206 µs, best ...)``, or why there is none."""
    why = no_speedup_reason(result)
    if why is not None:
        return f"no speed-up of the best over the default: {why}"
    d, b = result.default, result.best
    if d is None or b is None:  # no_speedup_reason said both were measured; this keeps the type checker told
        return "no speed-up of the best over the default"
    unit = d.time.unit if d.time else "ns"
    if b.candidate == d.candidate:
        return (
            f"speed-up of the best over the default: {times(result.speedup)}: the default "
            f"({fmt(d.median, unit)}) stayed the best of {result.asked} candidate(s)"
        )
    return (
        f"speed-up of the best over the default: {times(result.speedup)} ({fmt(d.median, unit)} -> "
        f"{fmt(b.median, unit)}, best {b.candidate.key})"
    )


def search_text(result: SearchResult) -> str:
    """A finished search: one line per step, then the speed-up and why it stopped."""
    lines = [f"{result.search} search of {result.target or 'the target'}: {result.asked} candidate(s) asked"]
    for s in result.steps:
        median = fmt(s.median, "ns") if s.median is not None else "-"
        lines.append(f"  {s.index}. {s.status:14s} {median:>9s}  [{s.rule or '?'}] {s.candidate}")
    lines.append(speedup_text(result))
    lines.append(f"stopped: {result.stopped or 'still running'}")
    return "\n".join(lines)


__all__ = [
    "EVIDENCE_WORDS",
    "attribution_text",
    "evaluation_text",
    "no_speedup_reason",
    "phases_text",
    "search_text",
    "speedup_text",
    "timing_text",
]
