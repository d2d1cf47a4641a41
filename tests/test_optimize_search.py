"""The two searches and the bookkeeping that holds them to one budget.

Searches over a SYNTHETIC target (an analytic time model of a persistent kernel: the evaluations below are computed,
not measured) check the policy's decisions; the last test runs both searches through a real Session (host.wall on
the blocked matrix product of tests/optimize_cpu.py) over one shared record.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from argus_lab import optimize as opt
from argus_lab.optimize import rules as r
from tests.optimize_cpu import BlockedMatmul

H200 = opt.device_spec("NVIDIA H200")
SPACE = opt.Space.of(
    {"block_m": (32, 64, 128, 256), "num_stages": (2, 3, 4), "spill": (False, True)},
    {"tile_m": "block_m", "stages": "num_stages"},
    lambda c: (
        "SYNTHETIC: 256 rows need more shared memory" if c.get("block_m") == 256 and c.get("num_stages") == 4 else None
    ),
)
DEFAULT = opt.Candidate.of({"block_m": 128, "num_stages": 2, "spill": False})
ROWS, SMS = 2 * 132 * 128 + 64 * 3, 132  # SYNTHETIC problem: the default's last wave is almost empty


def model(c: opt.Candidate) -> opt.Model:
    tiles = math.ceil(ROWS / int(c.get("block_m") or 1))
    return opt.Model(tiles, min(SMS, tiles), SMS, 1024 * int(c.get("block_m") or 1))


def synthetic(c: opt.Candidate) -> opt.Evaluation:
    """SYNTHETIC evidence of a candidate: time = waves x tile time (more stages are faster; spilling is slower)."""
    m = model(c)
    waves = math.ceil(m.tiles / m.programs)
    tile_ns = int(c.get("block_m") or 1) * 10.0 * (1.0 - 0.05 * (int(c.get("num_stages") or 2) - 2))
    t = waves * tile_ns * (1.5 if c.get("spill") else 1.0)
    last = m.tiles - (waves - 1) * m.programs
    tail = 0.0 if last >= 0.9 * m.programs else tile_ns / t * (1 - last / m.programs)
    ph = opt.Phases("SYNTHETIC", m.programs, m.programs, t, tail * t, tail, (), None)
    timing = opt.Timing("gpu.time", "ns", t, t, t, t, t, 10, 0.0, (t,) * 10)
    return opt.Evaluation("SYNTHETIC", {}, c, "ok", time=timing, phases=ph, model=m)


def ctx() -> r.RuleContext:
    return r.RuleContext(SPACE, model, H200, {})


def facts(c: opt.Candidate) -> opt.StaticFacts | str | None:
    """SYNTHETIC compiler facts: ``spill=True`` variants spill; 32-row tiles do not compile."""
    if c.get("block_m") == 32:
        return "SYNTHETIC: ptxas error"
    return opt.StaticFacts("k", 255 if c.get("spill") else 128, 64 if c.get("spill") else 0, 65536, 4, 2)


def test_timing_only_asks_the_default_then_a_seeded_permutation_of_the_valid_space() -> None:
    a = opt.TimingOnly(SPACE, DEFAULT, seed=3)
    asked = []
    while (c := a.next()) is not None:
        asked.append(c)
    assert asked[0] == DEFAULT
    assert sorted(x.key for x in asked) == sorted(x.key for x in SPACE.valid())
    assert all(SPACE.constraint(x) is None for x in asked)
    b = opt.TimingOnly(SPACE, DEFAULT, seed=3)
    assert [b.next() for _ in range(5)] == asked[:5]
    assert [x.key for x in opt.TimingOnly(SPACE, DEFAULT, seed=4).lookahead(6)] != [x.key for x in asked[:6]]


def test_guided_follows_the_tail_evidence_and_prunes_what_the_compiler_rules_out() -> None:
    search = opt.EvidenceGuided(SPACE, DEFAULT, ctx(), static=facts)
    res = opt.run_search(search, synthetic, opt.Budget(candidates=5), target="SYNTHETIC")
    asked = [s.candidate for s in res.steps]
    assert asked[0] == DEFAULT.key
    second = res.steps[1]
    assert second.rule == "tail"  # the default's last wave runs 3 of 132 programs
    assert model(opt.Candidate.of(second.params)).wave_efficiency > model(DEFAULT).wave_efficiency
    pruned = {d.candidate: d.reason for d in res.decisions if d.action == "prune"}
    assert any("could not build it (SYNTHETIC: ptxas error)" in why for why in pruned.values())
    assert any("spills (64 B local memory" in why for why in pruned.values())
    assert not set(pruned) & set(asked)  # nothing pruned was measured
    assert not any("spill=true" in a for a in asked)
    assert res.best is not None and res.speedup is not None and res.speedup > 1.0
    assert res.stopped.startswith("budget spent: 5 of 5")


def test_guided_falls_back_to_neighbours_when_no_rule_fires() -> None:
    quiet = opt.Candidate.of({"block_m": 64, "num_stages": 2, "spill": False})

    def no_evidence(c: opt.Candidate) -> opt.Evaluation:
        t = 1000.0 + 10 * int(c.get("num_stages") or 0)
        return opt.Evaluation("SYNTHETIC", {}, c, "ok", time=opt.Timing("gpu.time", "ns", t, t, t, t, t, 3, 0.0))

    search = opt.EvidenceGuided(SPACE, quiet, r.RuleContext(SPACE, lambda c: None, H200, {}))
    res = opt.run_search(search, no_evidence, opt.Budget(candidates=3))
    assert [s.rule for s in res.steps] == ["default", "neighbour", "neighbour"]
    assert {s.candidate for s in res.steps[1:]} <= {c.key for c in SPACE.neighbors(quiet)}


def test_guided_stops_at_the_roofline() -> None:
    def at_roofline(c: opt.Candidate) -> opt.Evaluation:
        rf = opt.Roofline(1.0, 1.0, 1.0, 1.0, 950.0, "compute", 0.95, 1.0, "SYNTHETIC")
        return opt.Evaluation(
            "SYNTHETIC", {}, c, "ok", time=opt.Timing("gpu.time", "ns", 1e3, 1e3, 1e3, 1e3, 1e3, 3, 0.0), roofline=rf
        )

    res = opt.run_search(opt.EvidenceGuided(SPACE, DEFAULT, ctx()), at_roofline, opt.Budget(candidates=8))
    assert res.asked == 1
    assert "roofline" in res.stopped


def test_two_searches_share_one_record_and_each_pays_for_what_it_asked() -> None:
    calls: list[str] = []

    def evaluate(c: opt.Candidate) -> opt.Evaluation:
        calls.append(c.key)
        return synthetic(c)

    record: dict[str, opt.Evaluation] = {}
    budget = opt.Budget(candidates=5)
    t = opt.run_search(opt.TimingOnly(SPACE, DEFAULT, seed=1), evaluate, budget, record=record)
    g = opt.run_search(opt.EvidenceGuided(SPACE, DEFAULT, ctx(), static=facts), evaluate, budget, record=record)
    assert t.asked == 5 and g.asked == 5
    assert len(calls) == len(set(calls)) == len(record)  # each distinct candidate measured once
    shared = [s for s in g.steps if s.shared]
    assert shared and shared[0].candidate == DEFAULT.key  # the default was measured by the first search
    assert {s.candidate for s in t.steps} | {s.candidate for s in g.steps} == set(record)
    doc = g.to_dict()
    assert doc["asked"] == 5 and doc["default"]["candidate"]["key"] == DEFAULT.key
    assert doc["speedup"] == pytest.approx(g.speedup)


def test_search_run_bookkeeping() -> None:
    run = opt.SearchRun(opt.TimingOnly(SPACE, DEFAULT, seed=0), opt.Budget(candidates=2))
    c = run.next()
    assert c == DEFAULT and run.next() == c  # asking again before the answer gives the same candidate
    with pytest.raises(opt.OptimizeError, match="asked for"):
        run.record(synthetic(DEFAULT.with_params(num_stages=4)))
    run.record(synthetic(c))
    d = run.next()
    assert d is not None and d != c
    failed = opt.Evaluation("SYNTHETIC", {}, d, "compile_failed", cause="SYNTHETIC")
    run.record(failed)
    assert run.next() is None and run.finished
    res = run.result
    assert res.asked == 2 and res.best is not None and res.best.candidate == DEFAULT
    assert [s.status for s in res.steps] == ["ok", "compile_failed"]
    assert res.speedup == 1.0
    assert res.stopped == "budget spent: 2 of 2 candidates measured"


def test_both_searches_through_a_real_session(tmp_path: Path) -> None:
    target = BlockedMatmul()
    s = opt.Session(target, tmp_path / "s.duckdb", signals="host.wall", repeat=3, warmup=1, phases=False)
    space = s.space
    record: dict[str, opt.Evaluation] = {}
    budget = opt.Budget(candidates=3)
    t = opt.run_search(opt.TimingOnly(space, target.default(), seed=2), s.evaluate, budget, record=record)
    g = opt.run_search(
        opt.EvidenceGuided(space, target.default(), opt.RuleContext(space, target.model, None, {})),
        s.evaluate,
        budget,
        record=record,
    )
    assert t.asked == 3 and g.asked == 3
    assert s.measured == len(record)  # the session measured each distinct candidate once
    hist = opt.history(s.store, target=target.name)
    assert len(hist) == len(record)
    assert {h["variant"] for h in hist} == set(record)
    assert t.default is not None and t.default.ok
