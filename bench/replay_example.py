"""One worked example from the recorded table: a configuration where argus_lab's evidence changed the evolutionary
search's decision and that decision led to a faster kernel than the same search on timing only (same seed, same
budget).  notebooks/optimize.ipynb prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from argus_lab import optimize as opt
from bench.replay_searches import Decision, evolve
from bench.replay_table import ConfigTable


@dataclass(frozen=True)
class Example:
    """The configuration, the decision evidence changed, and both searches' outcomes."""

    label: str
    decision: Decision
    timing_read: str
    """What the timing-only search read at the same step."""
    timing_best: str
    timing_best_ns: float
    evidence_best: str
    evidence_best_ns: float
    budget: int
    seed: int

    @property
    def gain(self) -> float:
        """The timing-only search's best median over the evidence-fed search's best median."""
        return self.timing_best_ns / self.evidence_best_ns


def worked_example(tables: dict[int, ConfigTable], budget: int = 10, seed: int = 0) -> Example | None:
    """The configuration (of those counted) where the evidence-fed search's best gains most over the timing-only
    search's, with the first rule decision that read a candidate the timing-only search did not."""
    rule_names = {name for name, _ in opt.RULES}
    found: Example | None = None
    for t in tables.values():
        if not t.usable:
            continue
        ti, ev = evolve(t, budget, seed, evidence=False), evolve(t, budget, seed, evidence=True)
        if ti.best is None or ev.best is None:
            continue
        tb, eb = t.candidates[ti.best].median, t.candidates[ev.best].median
        if eb >= tb:
            continue
        reads = [d for d in ev.decisions if d.action == "read"]
        pick = next((d for d in reads if d.source in rule_names and d.candidate not in ti.read), None)
        if pick is None:
            continue
        at = min(pick.step, len(ti.read)) - 1
        ex = Example(t.cfg.label, pick, ti.read[at], ti.best, tb, ev.best, eb, budget, seed)
        if found is None or ex.gain > found.gain:
            found = ex
    return found


def example_text(ex: Example) -> str:
    """The example in words: the evidence read, the decision, what timing alone did, the outcome."""
    d = ex.decision
    e: dict[str, Any] = d.evidence
    seen = []
    if "roofline_fraction" in e:
        seen.append(f"{e['roofline_fraction']:.0%} of the roofline ({e.get('bound', '?')}-bound)")
    if e.get("registers") is not None:
        seen.append(f"{e['registers']} registers, {e.get('local_bytes') or 0} B spilled")
    if "ctas_fit_per_sm" in e:
        seen.append(f"{e['ctas_fit_per_sm']} CTA(s) fit per SM ({e.get('occupancy_limiter')})")
    if "sm_tail_fraction" in e:
        seen.append(f"SM tail {e['sm_tail_fraction']:.0%} of the span")
    if "phase_shares" in e:
        seen.append("phases " + ", ".join(f"{k} {v:.0%}" for k, v in e["phase_shares"].items()))
    if "wave_efficiency" in e:
        seen.append(f"wave efficiency {e['wave_efficiency']:.0%}")
    return "\n".join(
        [
            f"{ex.label}, budget {ex.budget} candidates, seed {ex.seed}:",
            f"  step {d.step}: the evidence-fed search read its parent's evidence: {'; '.join(seen) or 'none'}",
            f"  rule '{d.source}' -> read {d.candidate}",
            f"  ({d.text})",
            f"  the timing-only search read {ex.timing_read} at that step",
            f"  best found: timing only {ex.timing_best_ns / 1e3:.1f} us ({ex.timing_best}); "
            f"with evidence {ex.evidence_best_ns / 1e3:.1f} us ({ex.evidence_best}): {ex.gain - 1:+.1%}",
        ]
    )


__all__ = ["Example", "example_text", "worked_example"]
