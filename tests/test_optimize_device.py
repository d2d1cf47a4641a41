"""A session's device phases come from the planner's instrumented run (dev.*), read back from the Report.

The harness is tests/device_cases.py: the real planner, runtime, device collector, store, join and Report over a
probe buffer recorded on the H200 in phase A (3072 x 3072 x 8192, k-step marks); what is not real is labelled
SYNTHETIC there: the CUPTI kernel records (made-up durations) and the "kernel" (a copy of the recorded buffer into
the probe the run hands out).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

pytest.importorskip("torch")

from argus_lab import optimize as opt
from argus_lab.backends.device.decode import decode
from argus_lab.optimize import session as session_module
from argus_lab.optimize.rules import MEMORY_SHARE, TAIL_FRACTION
from argus_lab.regions import Region
from tests.device_cases import PHASES, FakeCupti, cpu_backends, raw

BUFFER = raw("tail3072_kstep")


class Recorded:
    """SYNTHETIC launch: announces a kernel record to FakeCupti; in the instrumented run, writes the recorded buffer
    into the probe (what the GPU wrote on the H200)."""

    facts = None

    def __init__(self, cupti: FakeCupti, duration_ns: int) -> None:
        self.cupti, self.duration_ns = cupti, duration_ns

    def launch(self) -> Any:
        import torch

        import argus_lab.device

        probe = argus_lab.device.probe(
            "persistent_gemm", programs=int(BUFFER[2]), events=int(BUFFER[3]), regions=PHASES, device="cpu"
        )
        if probe is None:
            self.cupti.launch("persistent_gemm", self.duration_ns)
        else:
            self.cupti.launch("persistent_gemm", 10 * self.duration_ns)  # the instrumented launch: never gpu.time
            probe.copy_(torch.from_numpy(BUFFER[: probe.numel()]))
        return np.ones(3)

    def timer(self) -> None:
        return None

    def close(self) -> None:
        return None


class RecordedGemm:
    """A target over the recorded launch (its model is the GEMM's; SYNTHETIC durations: 345 us, 300 us at 64 rows)."""

    name = "SYNTHETIC gemm over a recorded probe"
    region = "gemm_recorded"
    module = "tests.test_optimize_device"
    kernel = "persistent_gemm"
    phase_roles: ClassVar[dict[str, str]] = {"memory": "load", "math": "mma", "epilogue": "epilogue", "step": "load"}
    device = "NVIDIA H200"

    def __init__(self, cupti: FakeCupti) -> None:
        self.cupti = cupti

    def default(self) -> opt.Candidate:
        return opt.Candidate.of({"block_m": 128})

    def space(self) -> opt.Space:
        return opt.Space.of({"block_m": (64, 128)}, {"tile_m": "block_m"})

    def work(self) -> opt.Work:
        return opt.Work(2.0 * 3072 * 3072 * 8192, 2.0 * (2 * 3072 * 8192 + 3072 * 3072), "bf16")

    def model(self, c: opt.Candidate) -> opt.Model:
        bm = int(c.get("block_m") or 128)
        tiles = (3072 // bm) * (3072 // 128)
        return opt.Model(tiles, min(132, tiles), 132, None, 2.0 * bm * 128 * 64)

    def prepare(self, c: opt.Candidate) -> Recorded:
        return Recorded(self.cupti, 345_000 if c.get("block_m") == 128 else 300_000)

    def check(self, output: Any) -> str | None:
        return None


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[opt.Session, list[opt.Evaluation]]:
    cupti = FakeCupti()
    target = RecordedGemm(cupti)
    with cpu_backends(cupti), pytest.MonkeyPatch.context() as mp:
        mp.setattr(session_module, "gpu_available", lambda: True)
        s = opt.Session(target, tmp_path_factory.mktemp("dev") / "d.duckdb", signals="gpu.time", repeat=3, warmup=1)
        evs = [s.evaluate({"block_m": 128}), s.evaluate({"block_m": 64})]
        s.phases = False
        evs.append(s.evaluate({"block_m": 128}, again=True))  # a confirmation without the instrumented run
    return s, evs


def test_phases_come_from_the_instrumented_run_and_agree_with_the_buffer(measured: Any) -> None:
    _, (ev, _, _) = measured
    assert ev.status == "ok", ev.cause
    ph = ev.phases
    assert ph is not None and ph.source.startswith("dev.* of the planned instrumented run")
    assert (ph.programs, ph.sms_used) == (132, 132)
    assert not ph.sampled
    direct = opt.phases_of(decode(BUFFER, PHASES, strict=False), step_region="load")
    assert ph.tail_fraction == pytest.approx(direct.tail_fraction, abs=0.01)  # 19 % of the span, as on the H200
    for name in ("load", "mma"):  # per-CTA medians against totals over CTAs: the same shares within a point
        assert ph.share(name) == pytest.approx(direct.share(name), abs=0.01)
    assert ph.step_period_ns is not None and direct.step_period_ns is not None
    assert ph.step_period_ns == pytest.approx(direct.step_period_ns, rel=0.15)  # includes the steps between tiles
    assert ph.step_efficiency == pytest.approx(2.0 * 128 * 128 * 64 / (989.4e12 / 132) * 1e9 / ph.step_period_ns)
    # the evidence the rules read: a 19 % tail (this space can answer it by tile_m) and loads at 46 % of load + mma
    assert "tail" in {p.rule for p in opt.propose(ev, opt.RuleContext(*_ctx(measured)))}
    load, mma = ph.share("load") or 0.0, ph.share("mma") or 0.0
    assert load / (load + mma) >= MEMORY_SHARE


def _ctx(measured: Any) -> tuple[Any, ...]:
    s = measured[0]
    return (s.space, s.target.model, s.spec, s.target.phase_roles)


def test_gpu_time_is_the_clean_runs_and_each_candidate_has_its_instrumented_run(measured: Any) -> None:
    s, (a, b, again) = measured
    assert a.time is not None and a.time.median == pytest.approx(345_000)  # not the 10x instrumented launch
    assert b.time is not None and b.time.median == pytest.approx(300_000)
    assert len(a.run_ids) == len(b.run_ids) == 2 and len(again.run_ids) == 1 and again.phases is None
    hist = opt.history(s.store)
    assert [(h["candidate"], h["variant"]) for h in hist] == [
        ("block_m=128", "block_m=128"),
        ("block_m=128", "instrumented"),
        ("block_m=64", "block_m=64"),
        ("block_m=64", "instrumented"),
        ("block_m=128", "block_m=128"),
    ]
    identity = Region("gemm_recorded", "host", "tests.test_optimize_device").region_id
    assert {rid for h in hist for rid in h["region_ids"]} == {identity}
    reps = s.store.rows("SELECT repetitions, warmup FROM runs WHERE variant = 'instrumented'")
    assert reps == [(1, 0), (1, 0)]  # one instrumented launch per candidate


def test_phases_of_the_persistent_gemm_recorded_on_the_h200(tmp_path: Path) -> None:
    """tests/data/gpu/device/device_gemm_h200.duckdb: GemmStep(3072, 3072, 1024), k-step marks, gpu.time + dev.*
    measured by argus_lab on the H200 (scripts/gpu/device_gemm.sh); four instrumented launches of 132 CTAs."""
    import shutil

    import argus_lab

    local = tmp_path / "g.duckdb"
    shutil.copy(Path(__file__).parent / "data" / "gpu" / "device" / "device_gemm_h200.duckdb", local)
    store = argus_lab.open_store(str(local))
    report = argus_lab.Report(store)
    inst = [r[0] for r in store.rows("SELECT run_id FROM runs WHERE variant = ?", ["instrumented"])]
    roles = RecordedGemm.phase_roles
    ideal = 2.0 * 128 * 128 * 64 / (989.4e12 / 132) * 1e9
    ph = session_module.device_phases(store, report, inst, path="gemm_step", kernel="persistent_gemm", roles=roles,
                                      ideal=ideal)  # fmt: skip
    assert ph is not None
    assert (ph.programs, ph.sms_used) == (132, 132)
    assert ph.tail_fraction == pytest.approx(8576 / 43040)  # dev.tail over dev.span, as the Report has them
    by = {r.region: r for r in ph.regions}
    assert (by["load"].count, by["mma"].count, by["epilogue"].count) == (9216, 9216, 576)
    # a CTA's time (its regions and its unmarked time) is what its SM was busy: one CTA per SM
    cta = sum(r.per_cta_median_ns for r in ph.regions) / (1 - 26031.9 / 35016.2)
    assert cta == pytest.approx(34384, rel=0.03)  # dev.sm_busy
    assert ph.share("load") == pytest.approx(2527.4 / 35016.2, rel=1e-3)
    assert ph.step_period_ns == pytest.approx((35016.2 - 2063.6) / (9216 / 132), rel=1e-3)  # 472 ns a k-step
    assert ph.step_efficiency == pytest.approx(ideal / ph.step_period_ns)
    # what the rules read in it: a 20 % tail, loads at 37 % of load + mma (the memory rule), an epilogue of 6 %
    load, mma = ph.share("load") or 0.0, ph.share("mma") or 0.0
    assert load / (load + mma) >= MEMORY_SHARE
    assert ph.tail_fraction >= TAIL_FRACTION
