"""Device regions through plan, run, store, join and Report, without a GPU.

The probe buffers are the ones recorded on the H200 in phase A (``tests/data/gpu/device/raw_*.npz``, written by
``scripts/gpu_probe_device.py``); the kernel records around them are SYNTHETIC (:class:`tests.device_cases.FakeCupti`),
so the nesting, the classes and the overhead rule are checked here, and the dev.* values are checked against an
independent numpy computation from the stored rows.  ``tests/test_device_recorded.py`` checks the same on the run
recorded on the H200 through argus_lab (``scripts/gpu/device_gemm.sh``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import argus_lab
from argus_lab.backends.device.decode import decode
from argus_lab.join import attribute_request
from argus_lab.store import Store
from tests.device_cases import DATA, PHASES, FakeCupti, GemmStep, measure, raw
from tests.device_reference import summarize


@pytest.fixture(scope="module")
def kstep(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """gpu.time + dev.* on the recorded k-step buffer (148,032 intervals per launch): 1 warm-up + 3 launches."""
    store = Store(tmp_path_factory.mktemp("dev") / "kstep.duckdb")
    return measure(store, raw("tail3072_kstep"))


def _device_run(m: Any) -> str:
    return next(r.run_id for r in m.report.runs if "device" in r.backends)


def _clean_run(m: Any) -> str:
    return next(r.run_id for r in m.report.runs if "cupti" in r.backends)


# -- the recorded buffers themselves ------------------------------------------------------------------------------
def test_decoding_a_recorded_buffer_gives_the_rows_decoded_on_the_h200() -> None:
    d = decode(raw("tail3072_tile"), PHASES, strict=True)
    rows = np.load(DATA / "rows_tail3072_tile.npz", allow_pickle=False)
    cols = d.columns()
    for name in ("cta", "sm", "depth", "seq", "t_start_ns", "t_end_ns", "clk_start", "clk_end"):
        np.testing.assert_array_equal(cols[name], rows[name], err_msg=name)
    np.testing.assert_allclose(cols["dur_ns"], rows["dur_ns"])
    assert cols["region"].astype(str).tolist() == rows["region"].astype(str).tolist()


@pytest.mark.parametrize("name", ["tail3072_tile", "tail3072_kstep", "8192_tile"])
def test_recorded_buffers_give_the_figures_printed_on_the_h200(name: str) -> None:
    """device_probe.json holds what phase A printed on the H200 for each buffer: span, tail, per-region times."""
    shape, marks = name.rsplit("_", 1)
    want = json.loads((DATA / "device_probe.json").read_text())["shapes"][shape][marks]
    d = decode(raw(name), PHASES, strict=True)
    assert len(d.intervals) == want["intervals"]
    f = summarize(d)
    assert f.span_ns / 1e3 == pytest.approx(want["span_us"])
    # phase A took the median of epoch-ns SM ends in float64, which rounds to 256 ns; the figure here is exact
    assert f.tail_imbalance_ns == pytest.approx(want["tail_imbalance_us"] * 1e3, abs=256)
    for r in want["regions"]:
        got = next(x for x in f.regions if x.region == r["region"])
        assert got.count == r["count"]
        assert got.time_per_cta_median_ns == pytest.approx(r["time_per_cta_median_ns"])


# -- plan ----------------------------------------------------------------------------------------------------------
def test_dev_signals_get_an_instrumented_run_of_their_own_and_gpu_time_stays_clean() -> None:
    p = argus_lab.plan("gpu.time,dev.time,dev.tail,host.wall")
    clean = p.run_for("gpu.time")
    inst = p.run_for("dev.time")
    assert clean is not inst and clean.variant == "" and inst.variant == "instrumented"
    assert inst.backends == ("device",) and inst.perturbation == "instrumenting"
    assert p.run_for("host.wall") is clean  # host clocks of the instrumented variant would be perturbed too
    text = p.explain()
    assert "device needs program variant 'instrumented'" in text
    assert "gpu.* stay on the clean variant" in text and "through the launch's correlation id" in text
    assert "add gpu.time to the request to measure it" not in text
    alone = argus_lab.plan("dev.*").explain()
    assert "add gpu.time to the request to measure it" in alone


def test_probe_is_none_outside_an_instrumented_run() -> None:
    assert argus_lab.device.instrumented() is False
    assert argus_lab.device.probe("k", programs=4, events=8, regions=PHASES) is None
    with pytest.raises(argus_lab.errors.RegionMisuseError, match=r"argus_lab\.device\.regions"):
        argus_lab.device.probe("k", programs=4, events=8, regions=("load",))  # type: ignore[arg-type]
    with pytest.raises(argus_lab.errors.RegionMisuseError, match=r"pass the @triton\.jit function or its name"):
        argus_lab.device.probe(object(), programs=4, events=8, regions=PHASES)


# -- the join: nesting, values, overhead ---------------------------------------------------------------------------
def test_device_regions_nest_under_their_kernel_and_the_host_instance(kstep: Any) -> None:
    store, dev = kstep.report.store, _device_run(kstep)
    rows = store.records(
        "SELECT a.evidence_id, a.instance_id, a.class, i.path, v.kernel_key, k.name, k.instance_id AS k_instance, "
        "l.instance_id AS asked_in, l.thread_id, k.thread_id AS k_thread, k.api_start_ns, l.probe_ns "
        "FROM attributions a JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id "
        "JOIN device_launches l ON l.run_id = a.run_id AND 'launch:' || l.launch = a.evidence_id "
        "JOIN (SELECT DISTINCT run_id, launch, kernel_key FROM device_values) v "
        "  ON v.run_id = l.run_id AND v.launch = l.launch "
        "JOIN kernels k ON k.run_id = a.run_id AND k.kernel_key = v.kernel_key "
        "WHERE a.run_id = ? AND a.evidence = 'device_launch' ORDER BY l.launch",
        [dev],
    )
    assert len(rows) == 4
    for r in rows:
        assert r["class"] == "exact" and r["path"] == "gemm_step"
        assert r["name"] == "persistent_gemm"  # never the kernel launched between the probe and the launch
        assert r["instance_id"] == r["k_instance"] == r["asked_in"]  # CUPTI's correlation and the host stack agree
        assert r["api_start_ns"] >= r["probe_ns"]
    assert len({r["kernel_key"] for r in rows}) == 4
    ids = {r[0] for r in store.rows("SELECT DISTINCT region_id FROM device_intervals WHERE run_id = ?", [dev])}
    assert ids == {PHASES.region(n).region_id for n in ("load", "mma", "epilogue")}
    kinds = store.rows(
        "SELECT DISTINCT kind, module FROM regions WHERE region_id IN (SELECT unnest(?::VARCHAR[]))", [list(ids)]
    )
    assert kinds == [("device", "examples.gpu.persistent_gemm")]


def _numpy_values(store: Store, run: str, launch: int) -> dict[tuple[str, str], dict[str, float]]:
    """Independent of the join's SQL: every dev.* figure of one launch from the stored rows, with numpy."""
    iv = store.records(
        "SELECT r.name, d.cta, d.depth, d.dur_ns FROM device_intervals d JOIN regions r USING (region_id) "
        "WHERE d.run_id = ? AND d.launch = ?",
        [run, launch],
    )
    pr = store.records(
        "SELECT cta, sm, t_begin_ns, t_end_ns FROM device_programs WHERE run_id = ? AND launch = ?", [run, launch]
    )
    out: dict[tuple[str, str], dict[str, float]] = {}
    names = sorted({r["name"] for r in iv})
    for name in names:
        per_cta: dict[int, list[float]] = {}
        for r in iv:
            if r["name"] == name:
                per_cta.setdefault(r["cta"], []).append(r["dur_ns"])
        t = np.array([sum(v) for v in per_cta.values()])
        c = np.array([len(v) for v in per_cta.values()], dtype=float)
        out[(name, "dev.time")] = {"value": np.median(t), "p10": np.percentile(t, 10), "p90": np.percentile(t, 90),
                                   "min": t.min(), "max": t.max(), "n": len(t)}  # fmt: skip
        out[(name, "dev.count")] = {"value": c.sum(), "p10": np.percentile(c, 10), "p90": np.percentile(c, 90),
                                    "min": c.min(), "max": c.max(), "n": len(c)}  # fmt: skip
    by_sm: dict[int, list[tuple[int, int]]] = {}
    for p in pr:
        by_sm.setdefault(p["sm"], []).append((p["t_begin_ns"], p["t_end_ns"]))
    busy, ends = [], []
    for spans in by_sm.values():
        covered, last_end = 0, None
        for b, e in sorted(spans):
            if last_end is None or b > last_end:
                covered += e - b
                last_end = e
            elif e > last_end:
                covered += e - last_end
                last_end = e
        busy.append(covered)
        ends.append(max(e for _, e in spans))
    first = min(p["t_begin_ns"] for p in pr)
    busy_a, ends_a = np.array(busy, dtype=float), np.array([e - first for e in ends], dtype=float)
    out[("", "dev.sm_busy")] = {"value": np.median(busy_a), "p10": np.percentile(busy_a, 10),
                                "p90": np.percentile(busy_a, 90), "min": busy_a.min(), "max": busy_a.max(),
                                "n": len(busy_a)}  # fmt: skip
    out[("", "dev.tail")] = {"value": ends_a.max() - np.median(ends_a), "n": len(ends_a)}
    out[("", "dev.span")] = {"value": max(p["t_end_ns"] for p in pr) - min(p["t_begin_ns"] for p in pr), "n": len(pr)}
    top: dict[int, float] = {}
    for r in iv:
        if r["depth"] == 0:
            top[r["cta"]] = top.get(r["cta"], 0.0) + r["dur_ns"]
    u = np.array([(p["t_end_ns"] - p["t_begin_ns"]) - top.get(p["cta"], 0.0) for p in pr])
    out[("", "dev.unmarked")] = {"value": np.median(u), "p10": np.percentile(u, 10), "p90": np.percentile(u, 90),
                                 "min": u.min(), "max": u.max(), "n": len(u)}  # fmt: skip
    return out


def check_values_against_numpy(store: Store, run: str) -> int:
    """Every device_values row of ``run`` equals the numpy figure of its launch; returns the rows checked."""
    got = store.records(
        "SELECT v.launch, coalesce(r.name, '') AS region, v.signal, v.value, v.p10, v.p90, v.min, v.max, v.n "
        "FROM device_values v LEFT JOIN regions r USING (region_id) WHERE v.run_id = ? ORDER BY v.launch",
        [run],
    )
    checked = 0
    for launch in sorted({g["launch"] for g in got}):
        want = _numpy_values(store, run, launch)
        mine = [g for g in got if g["launch"] == launch]
        assert {(g["region"], g["signal"]) for g in mine} == set(want)
        for g in mine:
            w = want[(g["region"], g["signal"])]
            for key, value in w.items():
                assert g[key] == pytest.approx(value, rel=1e-9, abs=1e-6), (launch, g["region"], g["signal"], key)
            checked += 1
    return checked


def test_dev_values_equal_an_independent_numpy_computation(kstep: Any) -> None:
    assert check_values_against_numpy(kstep.report.store, _device_run(kstep)) == 4 * (3 * 2 + 4)


def test_tail_is_the_h200_figure_and_the_per_sm_rows_explain_it(kstep: Any) -> None:
    store, dev = kstep.report.store, _device_run(kstep)
    want = json.loads((DATA / "device_probe.json").read_text())["shapes"]["tail3072"]["kstep"]
    tails = [
        r[0] for r in store.rows("SELECT value FROM device_values WHERE run_id = ? AND signal = 'dev.tail'", [dev])
    ]
    assert tails == pytest.approx([want["tail_imbalance_us"] * 1e3] * 4, abs=256)  # see the test above: 256 ns
    ends = [r[0] for r in store.rows("SELECT t_end_ns FROM device_programs WHERE run_id = ? AND launch = 0", [dev])]
    idle = store.rows("SELECT min(idle_tail_ns), max(idle_tail_ns) FROM device_sm WHERE run_id = ? AND launch = 0",
                      [dev])  # fmt: skip
    assert idle == [(0, max(ends) - min(ends))]  # per SM: how long before the last SM it finished
    sms = store.rows("SELECT count(*), sum(programs) FROM device_sm WHERE run_id = ? AND launch = 0", [dev])
    assert sms == [(132, 132)]  # persistent: one program per SM
    # 576 tiles on 132 programs: 48 of them run a fifth epilogue
    fifth = store.rows(
        "SELECT count(*) FROM (SELECT cta, count(*) AS n FROM device_intervals d JOIN regions r USING (region_id) "
        "WHERE d.run_id = ? AND d.launch = 0 AND r.name = 'epilogue' GROUP BY cta) WHERE n = 5",
        [dev],
    )
    assert fifth == [(576 - 4 * 132,)]


def test_overhead_is_instrumented_against_clean_kernel_time_of_the_same_launches(kstep: Any) -> None:
    o = kstep.report.device_overhead
    assert len(o) == 1
    (row,) = o
    assert row.kernel == "persistent_gemm" and row.launches == 3  # the warm-up launch is left out
    assert row.clean_runs == (_clean_run(kstep),)
    assert row.ratio_median == pytest.approx(350_600 / 345_100)
    prov = next(p for p in kstep.report.provenance if p.backend == "device.overhead")
    assert {x["clean_ns"] for x in prov.settings["launches"]} == {345_100}
    assert "same ordinal" in prov.settings["rule"]


def test_gpu_values_come_from_the_clean_run_and_dev_values_from_the_instrumented_one(kstep: Any) -> None:
    store, dev, clean = kstep.report.store, _device_run(kstep), _clean_run(kstep)
    sig = dict(store.rows("SELECT DISTINCT signal, run_id FROM instance_values WHERE signal LIKE 'gpu.%' "
                          "OR signal LIKE 'dev.%'"))  # fmt: skip
    assert sig["gpu.time"] == clean and sig["dev.span"] == dev and sig["dev.tail"] == dev
    rows = {(r.path, r.signal): r for r in kstep.report.regions}
    assert rows[("gemm_step", "gpu.time")].median == 345_100
    assert rows[("gemm_step", "dev.tail")].runs == dev
    device = {(d.region, d.signal): d for d in kstep.report.device}
    assert device[("load", "dev.time")].launches == 3
    assert device[("(launch)", "dev.span")].attribution == "exact"
    assert "device regions (instrumented runs; GPU ns)" in kstep.report.text()
    js = json.loads(kstep.report.to_json())
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(js, json.loads((Path(__file__).parents[1] / "docs" / "report-json.schema.json").read_text()))
    assert {d["signal"] for d in js["device"]} >= {"dev.time", "dev.count", "dev.sm_busy", "dev.tail"}
    assert js["device_overhead"][0]["kernel"] == "persistent_gemm"


def test_joining_again_gives_the_same_rows(kstep: Any) -> None:
    store = kstep.report.store
    ids = list(kstep.report.run_ids)
    before = [store.rows(f"SELECT count(*) FROM {t}") for t in ("device_values", "device_sm", "attributions")]
    attribute_request(store, ids)
    after = [store.rows(f"SELECT count(*) FROM {t}") for t in ("device_values", "device_sm", "attributions")]
    assert before == after
    assert len(store.rows("SELECT * FROM provenance WHERE backend = 'device.overhead'")) == 1


@pytest.mark.parametrize(
    ("mode", "klass", "path", "phrase"),
    [
        ("elsewhere", "mismatch", "gemm_step/other", "but the probe was asked in instance"),
        ("unlaunched", "temporal", "gemm_step", "no kernel record of persistent_gemm followed the probe"),
        ("outside", "unattributed", None, "asked outside every recorded region"),
    ],
)
def test_launches_that_do_not_nest_cleanly_say_why(
    tmp_path: Path, mode: str, klass: str, path: str | None, phrase: str
) -> None:
    cupti = FakeCupti()
    step = GemmStep(cupti, raw("tail3072_tile"), mode=mode)
    m = measure(Store(tmp_path / "s.duckdb"), step.buffer, repeat=2, warmup=0, step=step)
    dev = _device_run(m)
    rows = m.report.store.records(
        "SELECT a.class, a.reason, i.path FROM attributions a LEFT JOIN region_instances i USING (run_id, instance_id)"
        " WHERE a.run_id = ? AND a.evidence = 'device_launch'",
        [dev],
    )
    assert [r["class"] for r in rows] == [klass, klass]
    assert all(r["path"] == path and phrase in r["reason"] for r in rows)
    if mode == "unlaunched":  # the buffer stayed empty: no values, nothing invented
        assert m.report.store.rows("SELECT count(*) FROM device_values WHERE run_id = ?", [dev]) == [(0,)]


def test_without_cupti_device_regions_still_nest_under_the_host_instance(tmp_path: Path) -> None:
    from argus_lab.backends.device.collector import DeviceCollector
    from argus_lab.errors import BackendUnavailableError
    from tests.device_cases import cpu_backends

    class NoCupti(FakeCupti):
        def start(self, ctx: Any) -> None:
            msg = "cupti-python is not installed"
            raise BackendUnavailableError(msg)

    step = GemmStep(FakeCupti(), raw("tail3072_tile"))
    with cpu_backends(step.cupti), pytest.MonkeyPatch.context() as mp:
        from argus_lab.run import runtime

        mp.setattr(runtime, "load_backend", lambda name: DeviceCollector(cupti=NoCupti()))
        from argus_lab.app.measure import plan, run_plan
        from argus_lab.run.workload import Workload

        m = run_plan(plan("dev.*", repeat=2, warmup=0), Workload.from_target(step), Store(tmp_path / "s.duckdb"))
    classes = m.report.store.rows("SELECT DISTINCT class FROM attributions WHERE evidence = 'device_launch'")
    assert classes == [("temporal",)]
    prov = next(p for p in m.report.provenance if p.backend == "device")
    assert prov.settings["kernel_records"] == "none"
    assert "cupti-python is not installed" in prov.settings["notes"][0]
    assert any("clean timing run" in c for c in m.report.coverage())
    assert check_values_against_numpy(m.report.store, _device_run(m)) == 2 * (2 * 2 + 4)


def test_decoder_problems_reach_the_coverage_with_their_fix(tmp_path: Path) -> None:
    """SYNTHETIC buffer: a CTA recorded 12 events into a slot of 8."""
    from tests.device_synth import build

    tile = [("mainloop", False, 0), ("mainloop", True, 50), ("epilogue", False, 50), ("epilogue", True, 60)]
    events = tile + [(n, x, t + 100) for n, x, t in tile] + [(n, x, t + 200) for n, x, t in tile]
    step = GemmStep(FakeCupti(), build([(0, 0, events)], events_per_slot=8), events=8)
    m = measure(Store(tmp_path / "s.duckdb"), step.buffer, repeat=1, warmup=0, step=step)
    cov = [c for c in m.report.coverage() if c.startswith("device launch")]
    assert cov and "allocate the probe with events_per_cta >= 12" in cov[0]
    assert m.report.store.rows("SELECT dropped FROM device_launches") == [(4,)]
