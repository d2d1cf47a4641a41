"""The evidence-guided rule set, the occupancy arithmetic and the phase figures.

The evaluations fed to the rules are SYNTHETIC (built here, each test names the evidence it stands for); the phase
figures are read from device-region buffers recorded on the H200 in phase A (tests/data/gpu/device, see the README
there) and from SYNTHETIC buffers (tests/device_synth.py).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from argus_lab import optimize as opt
from argus_lab.backends.device.decode import decode
from argus_lab.device import regions
from argus_lab.device.layout import (
    H_EVENTS_PER_SLOT,
    H_N_SLOTS,
    H_SLOT_WORDS,
    LAUNCH_HEADER_WORDS,
    buffer_words,
    slot_words,
)
from argus_lab.optimize import rules as r
from tests.device_synth import build

DATA = Path(__file__).parent / "data" / "gpu" / "device"
H200 = opt.device_spec("NVIDIA H200")
assert H200 is not None
GEMM_PHASES = regions("load", "mma", "mainloop", "epilogue", module="examples.gpu.persistent_gemm")

AXES = {
    "block_m": (64, 128, 256),
    "block_n": (64, 128, 256),
    "block_k": (32, 64, 128),
    "num_warps": (4, 8),
    "num_stages": (2, 3, 4, 5),
    "ctas_per_sm": (1, 2),
}
ROLES = {
    "tile_m": "block_m",
    "tile_n": "block_n",
    "tile_k": "block_k",
    "warps": "num_warps",
    "stages": "num_stages",
    "ctas_per_sm": "ctas_per_sm",
}
ROLES_OF_PHASES = {"memory": "load", "math": "mma", "epilogue": "epilogue", "step": "load"}
DEFAULT = opt.Candidate.of(
    {"block_m": 128, "block_n": 128, "block_k": 64, "num_warps": 8, "num_stages": 3, "ctas_per_sm": 1}
)


def gemm_model(m: int, n: int, sms: int = 132) -> opt.Model | None:
    """A GEMM's static model (as examples/gpu/optimize_targets.GemmTarget.model): m x n output tiles."""

    def model(c: opt.Candidate) -> opt.Model:
        p = c.as_dict()
        tiles = math.ceil(m / int(p["block_m"])) * math.ceil(n / int(p["block_n"]))
        shared = int(p["num_stages"]) * (int(p["block_m"]) + int(p["block_n"])) * int(p["block_k"]) * 2
        return opt.Model(tiles, min(int(p["ctas_per_sm"]) * sms, tiles), sms, shared, 2.0 * 128 * 128 * 64)

    return model  # type: ignore[return-value]


def context(m: int = 4096, n: int = 4096, roles: dict[str, str] | None = None) -> r.RuleContext:
    space = opt.Space.of(AXES, ROLES)
    return r.RuleContext(space, gemm_model(m, n), H200, roles if roles is not None else ROLES_OF_PHASES)  # type: ignore[arg-type]


def evaluation(
    cand: opt.Candidate = DEFAULT,
    *,
    median: float = 1e6,
    compiled: opt.Compiled | None = None,
    phases: opt.Phases | None = None,
    roofline: opt.Roofline | None = None,
    model: opt.Model | None = None,
) -> opt.Evaluation:
    """A SYNTHETIC evaluation with the given evidence."""
    timing = opt.Timing("gpu.time", "ns", median, median, median, median, median, 10, 0.01)
    return opt.Evaluation(
        "SYNTHETIC gemm",
        {"name": "gemm", "module": "m", "region_id": "0"},
        cand,
        "ok",
        time=timing,
        compiled=compiled,
        phases=phases,
        roofline=roofline,
        model=model,
    )


def phases(
    *,
    tail: float = 0.0,
    sms_used: int = 132,
    shares: dict[str, float] | None = None,
    efficiency: float | None = None,
) -> opt.Phases:
    """SYNTHETIC phase figures: a tail fraction, SMs used, region shares, step efficiency."""
    rows = tuple(opt.PhaseRow(k, 100, 1.0, 1.0, v) for k, v in (shares or {}).items())
    return opt.Phases("SYNTHETIC", sms_used, sms_used, 1e6, tail * 1e6, tail, rows, "load", 500.0, efficiency)


def compiled(registers: int = 128, local: int = 0, shared: int = 98304, warps: int = 8) -> opt.Compiled:
    occ = opt.occupancy(registers, shared, warps, H200)
    return opt.Compiled("persistent_gemm", "SYNTHETIC", registers, local, shared, warps, 3, occ)


def fired(props: list[r.Proposal]) -> set[str]:
    return {p.rule for p in props}


def test_spills_propose_fewer_stages_smaller_tiles_more_warps() -> None:
    ev = evaluation(compiled=compiled(registers=255, local=96, warps=4), cand=DEFAULT.with_params(num_warps=4))
    props = r.rule_spills(ev, context())
    changed = {tuple(sorted(set(p.candidate.as_dict().items()) - set(ev.candidate.as_dict().items()))) for p in props}
    assert (("num_stages", 2),) in changed
    assert (("block_n", 64),) in changed
    assert (("num_warps", 8),) in changed
    assert all("96 B of local memory" in p.reason for p in props)
    assert r.rule_spills(evaluation(compiled=compiled(local=0)), context()) == []


def test_underfill_halves_the_tile_when_fewer_programs_than_sms() -> None:
    """1024 x 1024 with 128 x 128 tiles: 64 tiles, 64 of 132 SMs busy (the evidence: 64 SMs ran a program)."""
    ctx = context(1024, 1024)
    ev = evaluation(phases=phases(sms_used=64))
    props = r.rule_underfill(ev, ctx)
    got = {(p.candidate.get("block_m"), p.candidate.get("block_n")) for p in props}
    assert got == {(64, 128), (128, 64), (64, 64)}
    assert all("only 64 of 132 SMs" in p.reason for p in props)
    assert r.rule_underfill(evaluation(phases=phases(sms_used=132)), context()) == []


def split_context(m: int, n: int) -> r.RuleContext:
    """The GEMM space with a split-K axis and a TMA variant (the recorded table's roles ``split``, ``async_copy``);
    the model counts work units as tiles x slices."""
    axes = AXES | {"split_k": (1, 2, 4), "tma": (False, True)}
    space = opt.Space.of(axes, ROLES | {"split": "split_k", "async_copy": "tma"})
    base = gemm_model(m, n)

    def model(c: opt.Candidate) -> opt.Model:
        one = base(c)  # type: ignore[misc]
        assert one is not None
        units = one.tiles * int(c.get("split_k"))
        return opt.Model(units, min(int(c.get("ctas_per_sm")) * 132, units), 132, one.shared_bytes, one.step_flops)

    return r.RuleContext(space, model, H200, ROLES_OF_PHASES)


def test_underfill_splits_the_inner_loop_first_when_the_space_can() -> None:
    """512 x 512 (16 tiles of 128 x 128): 16 of 132 SMs ran. Splitting K keeps the tile and gives 32 work units; it
    is the first proposal, before the tile halvings; a space without the role proposes no split."""
    ctx = split_context(512, 512)
    cand = DEFAULT.with_params(split_k=1, tma=False)
    props = sorted(r.rule_underfill(evaluation(cand, phases=phases(sms_used=16)), ctx), key=lambda p: -p.priority)
    assert props[0].candidate == cand.with_params(split_k=2)
    assert "split each tile's inner loop" in props[0].reason
    assert {p.candidate.get("split_k") for p in props[1:]} == {1}
    plain = r.rule_underfill(evaluation(phases=phases(sms_used=16)), context(512, 512))
    assert plain and all(p.candidate.get("split_k") is None for p in plain)


def test_memory_share_proposes_bulk_copies_only_to_a_candidate_without_them() -> None:
    ctx = split_context(4096, 4096)
    cand = DEFAULT.with_params(split_k=1, tma=False)
    shares = {"load": 0.115, "mma": 0.135}
    props = r.rule_memory(evaluation(cand, phases=phases(shares=shares)), ctx)
    assert cand.with_params(tma=True) in [p.candidate for p in props]
    on = r.rule_memory(evaluation(cand.with_params(tma=True), phases=phases(shares=shares)), ctx)
    assert all(p.candidate.get("tma") is True for p in on)


def test_tail_proposes_moves_with_better_wave_efficiency_only() -> None:
    """3072 x 3072: 576 tiles on 132 SMs (4.36 waves); the tail evidence (19 %) asks for better-balanced tiles."""
    ctx = context(3072, 3072)
    here = gemm_model(3072, 3072)(DEFAULT)  # type: ignore[misc]
    assert here is not None
    assert here.wave_efficiency == pytest.approx(576 / (5 * 132))
    props = r.rule_tail(evaluation(phases=phases(tail=0.19)), ctx)
    assert props, "a 19 % tail must propose something"
    for p in props:
        m = gemm_model(3072, 3072)(p.candidate)  # type: ignore[misc]
        assert m is not None
        assert m.wave_efficiency >= here.wave_efficiency + r.WAVE_GAIN
    assert (64, 128) in {(p.candidate.get("block_m"), p.candidate.get("block_n")) for p in props}
    assert r.rule_tail(evaluation(phases=phases(tail=0.02)), ctx) == []


def test_tail_toggles_the_tile_order_when_the_space_has_one() -> None:
    space = opt.Space.of(
        {"block_m": (64, 128), "heavy_first": (False, True)}, {"tile_m": "block_m", "order": "heavy_first"}
    )
    ctx = r.RuleContext(space, lambda c: None, H200, {})
    cand = opt.Candidate.of({"block_m": 128, "heavy_first": False})
    props = r.rule_tail(evaluation(cand, phases=phases(tail=0.3)), ctx)
    assert [p.candidate.get("heavy_first") for p in props] == [True]


def test_memory_share_proposes_a_deeper_pipeline() -> None:
    """load is 46 % of load + mma (as recorded for the 3072 x 3072 x 8192 default, tests/data/gpu/optimize)."""
    ev = evaluation(phases=phases(shares={"load": 0.115, "mma": 0.135}))
    props = r.rule_memory(ev, context())
    assert {(p.candidate.get("num_stages"), p.candidate.get("block_k")) for p in props} == {(4, 64), (3, 128)}
    assert r.rule_memory(evaluation(phases=phases(shares={"load": 0.05, "mma": 0.4})), context()) == []


def test_occupancy_asks_for_a_second_cta_only_when_one_fits_and_is_needed() -> None:
    small = compiled(registers=96, shared=65536, warps=4)
    assert small.occupancy is not None and small.occupancy.ctas_per_sm >= 2
    ev = evaluation(compiled=small, phases=phases(shares={"epilogue": 0.12}))
    (p,) = r.rule_occupancy(ev, context())
    assert p.candidate.get("ctas_per_sm") == 2
    assert r.rule_occupancy(evaluation(compiled=small, phases=phases(shares={"epilogue": 0.01})), context()) == []
    big = compiled(registers=168, shared=99328, warps=8)
    assert r.rule_occupancy(evaluation(compiled=big, phases=phases(shares={"epilogue": 0.2})), context()) == []


def test_residency_goes_back_to_one_cta_when_two_do_not_fit() -> None:
    two = DEFAULT.with_params(ctas_per_sm=2)
    (p,) = r.rule_residency(evaluation(two, compiled=compiled(registers=168, warps=8)), context())
    assert p.candidate.get("ctas_per_sm") == 1
    assert "only 1 fit" in p.reason


def test_slow_step_not_memory_bound_proposes_more_math_per_step() -> None:
    ev = evaluation(DEFAULT.with_params(num_warps=4), phases=phases(shares={"load": 0.05, "mma": 0.4}, efficiency=0.4))
    props = r.rule_step(ev, context())
    assert {"num_warps", "block_n", "num_stages"} == {
        next(k for k, v in p.candidate.as_dict().items() if ev.candidate.get(k) != v) for p in props
    }
    memory_bound = evaluation(phases=phases(shares={"load": 0.3, "mma": 0.3}, efficiency=0.4))
    assert r.rule_step(memory_bound, context()) == []


def test_softmax_share_asks_for_longer_kv_blocks() -> None:
    roles = {"math": "qk,pv", "softmax": "softmax", "step": "qk"}
    ev = evaluation(phases=phases(shares={"qk": 0.15, "softmax": 0.5, "pv": 0.2}))
    props = r.rule_softmax(ev, context(roles=roles))
    assert props[0].candidate.get("block_n") == 256
    assert (
        r.rule_softmax(evaluation(phases=phases(shares={"qk": 0.4, "softmax": 0.1, "pv": 0.4})), context(roles=roles))
        == []
    )


def test_propose_orders_by_priority_and_keeps_one_proposal_per_candidate() -> None:
    ev = evaluation(
        compiled=compiled(registers=255, local=64),
        phases=phases(tail=0.2, shares={"load": 0.3, "mma": 0.2}),
    )
    props = r.propose(ev, context(3072, 3072))
    assert props[0].rule == "spills"
    assert len({p.candidate.key for p in props}) == len(props)
    assert [p.priority for p in props] == sorted((p.priority for p in props), reverse=True)
    failed = opt.Evaluation("x", {}, DEFAULT, "wrong_result")
    assert r.propose(failed, context()) == []


def test_prune_refuses_spilling_oversized_and_unresident_candidates() -> None:
    ctx = context()
    spill = opt.StaticFacts("k", 255, 128, 65536, 4, 3)
    assert "spills" in (r.prune(DEFAULT, ctx, spill) or "")
    huge = DEFAULT.with_params(block_m=256, block_n=256, block_k=128, num_stages=5)
    assert "shared memory" in (r.prune(huge, ctx) or "")
    assert r.prune(DEFAULT, ctx, opt.StaticFacts("k", 158, 0, 99328, 8, 3)) is None


def test_done_at_the_roofline() -> None:
    at = opt.Roofline(1e12, 1e9, 989e12, 4.8e12, 1.0e6, "compute", 0.95, 9e14, "NVIDIA H200")
    assert "roofline" in (r.done(evaluation(roofline=at)) or "")
    below = opt.Roofline(1e12, 1e9, 989e12, 4.8e12, 1.0e6, "compute", 0.5, 5e14, "NVIDIA H200")
    assert r.done(evaluation(roofline=below)) is None


def test_occupancy_arithmetic_sm90() -> None:
    """Registers are allocated per warp in units of 256; shared memory adds 1 KiB reserved per CTA."""
    o = opt.occupancy(158, 99328, 8, H200)
    assert o is not None
    assert (o.by_registers, o.limiter, o.ctas_per_sm) == (1, "registers", 1)  # 160 x 32 x 8 = 40960 of 65536
    o = opt.occupancy(64, 32768, 4, H200)
    assert o is not None
    assert o.by_registers == 8 and o.by_shared == 233472 // (32768 + 1024) and o.by_warps == 16
    assert o.ctas_per_sm == 6 and o.limiter == "shared memory"
    assert opt.occupancy(None, 0, 4, H200) is None


def test_roofline_picks_the_binding_peak() -> None:
    work = opt.Work(2.0 * 4096**3, 2.0 * 3 * 4096**2, "bf16")
    rf = opt.roofline(work, 300_000.0, H200)
    assert rf is not None and rf.bound == "compute"
    assert rf.bound_ns == pytest.approx(2.0 * 4096**3 / 989.4e12 * 1e9)
    assert rf.fraction == pytest.approx(rf.bound_ns / 300_000.0)
    assert opt.roofline(work, 300_000.0, None) is None


# -- phase figures ------------------------------------------------------------------------------------------------
def test_phase_figures_of_a_recorded_tile_launch() -> None:
    """The phase-A H200 probe of 3072 x 3072 x 8192 (tile marks): 132 CTAs, tail 59.6 us of a 312.4 us span."""
    buf = np.load(DATA / "raw_tail3072_tile.npz")["buffer"]
    ph = opt.phases_of(decode(buf, GEMM_PHASES, strict=False))
    assert (ph.programs, ph.sms_used) == (132, 132)
    assert ph.span_ns == pytest.approx(312_448, abs=100)
    assert ph.tail_ns == pytest.approx(59_648, abs=100)
    assert ph.share("mainloop") == pytest.approx(0.98, abs=0.01)
    assert not ph.sampled


def capped(buf: np.ndarray, cap: int) -> np.ndarray:
    """The bytes a probe of ``cap`` events per slot holds after the same launch: each slot's header and first ``cap``
    events (the markers write the first ones and count every one), with the launch header saying ``cap``."""
    n_slots, words = int(buf[H_N_SLOTS]), int(buf[H_SLOT_WORDS])
    slots = buf[LAUNCH_HEADER_WORDS : LAUNCH_HEADER_WORDS + n_slots * words].reshape(n_slots, words)
    out = np.zeros(buffer_words(n_slots, cap), dtype=np.int64)
    out[:LAUNCH_HEADER_WORDS] = buf[:LAUNCH_HEADER_WORDS]
    out[H_EVENTS_PER_SLOT], out[H_SLOT_WORDS] = cap, slot_words(cap)
    out[LAUNCH_HEADER_WORDS:] = slots[:, : slot_words(cap)].reshape(-1)
    return out


def test_phase_figures_of_a_capped_kstep_launch() -> None:
    """The same shape with k-step marks (2570 events per CTA), cut to 256 events a slot as a capped probe keeps them."""
    buf = capped(np.load(DATA / "raw_tail3072_kstep.npz")["buffer"], 256)
    ideal = 2 * 128 * 128 * 64 / (989.4e12 / 132) * 1e9
    ph = opt.phases_of(decode(buf, GEMM_PHASES, strict=False), step_region="load", ideal_step_ns=ideal)
    assert ph.sampled and ph.problems  # the dropped events are said, and the shares are over what was kept
    assert ph.share("load") == pytest.approx(0.119, abs=0.01)
    assert ph.share("mma") == pytest.approx(0.137, abs=0.01)
    assert ph.step_period_ns == pytest.approx(487, rel=0.03)  # the uncapped buffer gives 487.4 ns
    assert ph.step_efficiency == pytest.approx(ideal / 487.4, rel=0.03)
    assert ph.tail_fraction == pytest.approx(0.192, abs=0.005)


def test_phase_figures_of_a_synthetic_launch() -> None:
    """SYNTHETIC: two CTAs on two SMs, both begun at t0, the second's events 300 ns later; a k-step every 100 ns."""
    ev_a = [("load", False, 0), ("load", True, 20), ("mma", False, 20), ("mma", True, 60)]
    ev_a += [("load", False, 100), ("load", True, 120), ("mma", False, 120), ("mma", True, 160)]
    ev_b = [(n, x, t + 300) for n, x, t in ev_a]
    buf = build([(0, 0, ev_a), (1, 1, ev_b)], cycles_per_ns=2)
    ph = opt.phases_of(decode(buf, GEMM_PHASES, strict=False), step_region="load", ideal_step_ns=50.0)
    assert ph.sms_used == 2 and ph.programs == 2
    assert ph.step_period_ns == pytest.approx(100.0)
    assert ph.step_efficiency == pytest.approx(0.5)
    assert ph.tail_ns == pytest.approx(150.0)  # ends 260 and 560 ns after t0: last minus the median (410)
    assert ph.share("load") == pytest.approx(80 / (260 + 560))  # 4 loads of 20 ns over the CTAs' recorded time


def tail_split_context(m: int, n: int, *, full_grid: bool = False) -> r.RuleContext:
    """The GEMM space with split-K and a tail split (the recorded table's roles ``split``, ``tail_split``); the
    model counts work in slices (tiles x slices), as bench/recorded_launch.py does for both.  ``full_grid``: a
    target that launches a program on every SM however few tiles there are."""
    axes = AXES | {"split_k": (1, 2, 4), "tail_split": (1, 2, 4)}
    space = opt.Space.of(axes, ROLES | {"split": "split_k", "tail_split": "tail_split"})
    base = gemm_model(m, n)

    def model(c: opt.Candidate) -> opt.Model:
        one = base(c)  # type: ignore[misc]
        assert one is not None
        units = one.tiles * int(c.get("split_k")) * int(c.get("tail_split"))
        grid = int(c.get("ctas_per_sm")) * 132
        return opt.Model(units, grid if full_grid else min(grid, units), 132, one.shared_bytes, one.step_flops)

    return r.RuleContext(space, model, H200, ROLES_OF_PHASES)


def test_a_long_tail_of_several_waves_proposes_splitting_the_last_wave_first() -> None:
    """3072 x 3072 in 128 x 128 tiles: 576 tiles, 4.36 waves of 132 (wave efficiency 0.87), a 19 % SM tail. The
    tail split (0.97) comes before split-K of the same balance, which cuts every tile.  Under a short tail the
    quantised waves still propose the tail split, and nothing else; balanced waves under a short tail, nothing."""
    ctx = tail_split_context(3072, 3072)
    cand = DEFAULT.with_params(split_k=1, tail_split=1)
    props = sorted(r.rule_tail(evaluation(cand, phases=phases(tail=0.19)), ctx), key=lambda p: -p.priority)
    assert props[0].candidate == cand.with_params(tail_split=2)
    assert "split only the last wave's tiles" in props[0].reason and "0.87 -> 0.97" in props[0].reason
    assert cand.with_params(split_k=2) in [p.candidate for p in props[1:]]
    short = r.rule_tail(evaluation(cand, phases=phases(tail=0.02)), ctx)  # quantised waves: only the tail split
    assert [p.candidate for p in short] == [cand.with_params(tail_split=2)]
    assert "the waves are quantised: 4.36 waves" in short[0].reason
    balanced = tail_split_context(4096, 4096)  # 1024 tiles: 7.76 waves, wave efficiency 0.97
    assert r.rule_tail(evaluation(cand, phases=phases(tail=0.02)), balanced) == []


def test_no_tail_split_when_the_tiles_are_fewer_than_the_programs() -> None:
    """1024 x 1024: 64 tiles on a grid of 132 programs, one partial wave (wave efficiency 0.48). Splitting every
    tile is split-K's case, which the tail rule proposes; it proposes no tail split however much it would balance."""
    ctx = tail_split_context(1024, 1024, full_grid=True)
    cand = DEFAULT.with_params(split_k=1, tail_split=1)
    props = r.rule_tail(evaluation(cand, phases=phases(tail=0.3)), ctx)
    assert cand.with_params(split_k=2) in [p.candidate for p in props]
    assert all(p.candidate.get("tail_split") == 1 for p in props)
