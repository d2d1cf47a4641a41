"""The planner: coverage, conflicts, minimal run counts, counter splits, explanations and JSON."""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from argus_lab.errors import PlanError, ScopeSyntaxError, UnknownSignalError
from argus_lab.plan import Plan, PlanSettings, Request, min_conflict_free_groups, plan, split_counters
from argus_lab.plan import passes as passes_mod
from argus_lab.plan.backends import BACKENDS, conflict_reason
from argus_lab.plan.catalog import CATALOG, lookup, resolve
from argus_lab.plan.ncu_settings import SCOPE_INCLUDE
from argus_lab.plan.passes import AssumedPassModel, PassModel, TablePassModel, base_counter, default_pass_model
from argus_lab.plan.scope import Scope

DATA = Path(__file__).parent / "data"
RECORDED = passes_mod.DATA / "ncu_passes_gh100.json"  # package data (shipped in the wheel)
SYNTHETIC = DATA / "synthetic" / "ncu_passes_gh100_synthetic.json"
GOLDEN = Path(__file__).parent / "golden"

SYNTHETIC_MODEL = TablePassModel.load(SYNTHETIC)
TABLE_MODEL = TablePassModel.load(RECORDED) if RECORDED.exists() else SYNTHETIC_MODEL
"""The H200 table once it is recorded; until then the synthetic one."""

RUNTIME_POOL = [n for n, s in CATALOG.items() if BACKENDS[s.backend].perturbation != "static"]
STATIC_POOL = [n for n, s in CATALOG.items() if BACKENDS[s.backend].perturbation == "static"]
PM_POOL = ["pm:sm__cycles_active.avg", "pm:dram__throughput.avg.pct_of_peak_sustained_elapsed"]


# -- an exhaustive reference for the fewest runs ------------------------------------------------------


def brute_force_min_runs(request: Request, model: PassModel) -> int:
    """Fewest blocks over all set partitions of (run-time backends, each counter) that are feasible.

    A block is feasible when no two of its backends conflict (counters count as ``ncu``) and its counters fit
    in the pass bound (a lone counter always fits).  Static backends need a run only when nothing else runs.
    """
    backends = sorted({s.backend for s in request.signals})
    items: list[tuple[str, str | None]] = [
        (b, None) for b in backends if b != "ncu" and BACKENDS[b].perturbation != "static"
    ]
    items += [("ncu", s.name[3:]) for s in request.signals if s.backend == "ncu"]
    if not items:
        return 1 if backends else 0
    bound = request.settings.max_passes_per_run

    def feasible(block: list[tuple[str, str | None]]) -> bool:
        names = {b for b, _ in block}
        for a, b in itertools.combinations(sorted(names), 2):
            if conflict_reason(BACKENDS[a], BACKENDS[b]) is not None:
                return False
        metrics = [m for _, m in block if m is not None]
        return len(metrics) <= 1 or model.passes(metrics) <= bound

    best = len(items)

    def partitions(i: int, blocks: list[list[tuple[str, str | None]]]) -> None:
        nonlocal best
        if i == len(items):
            best = min(best, len(blocks))
            return
        for block in blocks:
            block.append(items[i])
            if feasible(block):
                partitions(i + 1, blocks)
            block.pop()
        blocks.append([items[i]])
        partitions(i + 1, blocks)
        blocks.pop()

    partitions(0, [])
    return best


def check_plan(p: Plan, model: PassModel) -> None:
    """The invariants every plan must satisfy."""
    req = p.request
    supplied = [s for r in p.runs for s in r.signals]
    assert sorted(supplied) == sorted(s.name for s in req.signals), "every signal exactly once"
    assert [r.index for r in p.runs] == list(range(len(p.runs)))
    for r in p.runs:
        for a, b in itertools.combinations(r.backends, 2):
            assert conflict_reason(BACKENDS[a], BACKENDS[b]) is None, (r.backends, a, b)
        for sig in r.signals:
            assert lookup(sig).backend in r.backends
        assert r.repeat == req.repeat
        assert r.warmup == req.warmup
        factor = math.prod(BACKENDS[b].cost_factor for b in r.backends)
        assert r.cost == pytest.approx(req.executions * r.passes * factor, abs=1e-3)
        assert r.reason.endswith(".")
        if "ncu" in r.backends:
            metrics = r.settings["ncu"]["metrics"]
            assert [f"hw:{m}" for m in metrics] == [s for s in r.signals if s.startswith("hw:")]
            assert r.passes == model.passes(metrics)
            assert r.passes <= req.settings.max_passes_per_run or len(metrics) == 1
            assert r.settings["ncu"]["replay_mode"] == req.settings.replay_mode
            # the scope reaches ncu through the recorder's scope ranges: one filter, whatever the scope
            assert r.settings["ncu"]["nvtx_include"] == [SCOPE_INCLUDE]
            assert r.settings["ncu"]["scope"] == str(req.scope)
            assert r.settings["ncu"]["region_filters"] == list(req.scope.nvtx_includes())
        else:
            assert r.passes == 1
        static = [b for b in r.backends if BACKENDS[b].perturbation == "static"]
        if len(static) < len(r.backends):
            assert list(r.attached) == static
    runtime_runs = [r for r in p.runs if any(BACKENDS[b].perturbation != "static" for b in r.backends)]
    if runtime_runs:
        assert all(r in runtime_runs for r in p.runs), "a static backend never gets a run of its own"
    assert p.naive_runs == len(req.signals)
    assert Plan.from_json(p.to_json()) == p


# -- strategies -------------------------------------------------------------------------------------


@st.composite
def random_tables(draw: st.DrawFn) -> TablePassModel:
    """Random pass tables whose recorded combinations come from a hidden monotone "true" pass count.

    The truth shares a random number of passes between counters, so recorded sets are cheaper than the sum of
    their parts and the model must use them rather than its calibrated estimate.
    """
    names = [f"unit{i}__counter_{i}.sum" for i in range(6)]
    singles = {n: draw(st.integers(1, 9)) for n in names}
    share = draw(st.integers(0, min(singles.values())))

    def truth(subset: list[str]) -> int:
        return max(max(singles[m] for m in subset), sum(singles[m] for m in subset) - share * (len(subset) - 1))

    combos: dict[frozenset[str], int] = {}
    for _ in range(draw(st.integers(0, 3))):
        subset = draw(st.lists(st.sampled_from(names), min_size=2, max_size=5, unique=True))
        combos[frozenset(subset)] = truth(subset)
    return TablePassModel(singles, combos, "random test table", synthetic=True)


@st.composite
def requests(draw: st.DrawFn, model: TablePassModel) -> Request:
    runtime = draw(st.lists(st.sampled_from(RUNTIME_POOL), max_size=5, unique=True))
    static = draw(st.lists(st.sampled_from(STATIC_POOL), max_size=2, unique=True))
    pm = draw(st.lists(st.sampled_from(PM_POOL), max_size=1))
    metrics = sorted(model.metrics)
    hw = draw(st.lists(st.sampled_from(metrics), max_size=4, unique=True))
    names = runtime + static + pm + [f"hw:{m}" for m in hw]
    if not names:
        names = ["host.wall"]
    order = draw(st.permutations(names))
    scope = draw(st.sampled_from(["", "decode/*/attn", "**/mlp; instances=2:", "a/b ranks=0"]))
    return Request.build(
        list(order),
        scope,
        repeat=draw(st.integers(1, 5)),
        warmup=draw(st.integers(0, 3)),
        max_passes_per_run=draw(st.integers(1, 20)),
        allow_unknown_counters=model.synthetic,  # a random table's names are not the chip's
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_requests_with_the_h200_table(data: st.DataObject) -> None:
    request = data.draw(requests(TABLE_MODEL))
    p = plan(request, TABLE_MODEL)
    check_plan(p, TABLE_MODEL)
    assert p.minimal
    assert len(p.runs) == brute_force_min_runs(request, TABLE_MODEL)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_requests_with_random_pass_tables(data: st.DataObject) -> None:
    model = data.draw(random_tables())
    request = data.draw(requests(model))
    p = plan(request, model)
    check_plan(p, model)
    assert len(p.runs) == brute_force_min_runs(request, model)


# -- the search helpers -----------------------------------------------------------------------------


def test_conflict_groups_are_exact() -> None:
    groups = min_conflict_free_groups(["host", "cupti", "nvml", "pm", "ncu"])
    assert len(groups) == 3
    assert groups[0] == ["host", "cupti", "nvml"]
    assert ["ncu"] in groups
    assert min_conflict_free_groups([]) == []


def test_split_counters_beats_first_fit_decreasing() -> None:
    # first-fit-decreasing packs 7+6 | 5+4+3 | 3 into bins of 14; the optimum is 7+4+3 | 6+5+3
    sizes = {"a": 3, "b": 4, "c": 5, "d": 3, "e": 6, "f": 7}

    def model(ms: Iterable[str]) -> int:
        return sum(sizes[m] for m in ms)

    groups, proven = split_counters(list(sizes), model, 14)
    assert proven
    assert len(groups) == 2
    assert all(model(g) == 14 for g in groups)
    assert sorted(m for g in groups for m in g) == sorted(sizes)


def test_split_counters_reports_a_search_cut_short() -> None:
    sizes = {f"m{i}": 3 + (i % 5) for i in range(14)}

    def model(ms: Iterable[str]) -> int:
        return sum(sizes[m] for m in ms)

    groups, proven = split_counters(list(sizes), model, 11, budget=5)
    assert not proven
    assert sorted(m for g in groups for m in g) == sorted(sizes)
    assert all(model(g) <= 11 for g in groups)


def test_a_metric_over_the_bound_gets_its_own_run() -> None:
    req = Request.build(
        ["hw:sm__throughput.avg.pct_of_peak_sustained_elapsed", "hw:gpu__time_duration.sum"],
        max_passes_per_run=2,
    )
    p = plan(req, SYNTHETIC_MODEL)
    assert [r.settings["ncu"]["metrics"] for r in p.runs] == [
        ["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
        ["gpu__time_duration.sum"],
    ]
    assert p.runs[0].passes == 6
    assert "alone needs 6 replay passes, more than max_passes_per_run=2" in p.runs[0].reason


# -- pass model -------------------------------------------------------------------------------------


def test_table_model_uses_recorded_combinations() -> None:
    model = TABLE_MODEL
    for combo, recorded in model.combinations.items():
        assert model.passes(combo) == recorded
    for metric, alone in model.metrics.items():
        assert model.passes([metric]) == alone


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_table_model_is_monotone(data: st.DataObject) -> None:
    model = data.draw(st.one_of(st.just(TABLE_MODEL), random_tables()))
    names = sorted(model.metrics)
    subset = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=6, unique=True))
    extra = data.draw(st.sampled_from(names))
    assert model.passes([*subset, extra]) >= model.passes(subset) >= max(model.single(m) for m in subset)


def test_shared_allowance_is_calibrated_on_the_combinations() -> None:
    model = SYNTHETIC_MODEL
    # synthetic: reference_3 sums to 10 and was seen as 9 -> 0.5 per extra counter is the tightest allowance
    assert model.shared == pytest.approx(0.5)
    estimate = model.passes(["dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum"])
    assert estimate == math.ceil(3 + 3 + 1 - 2 * 0.5)


def test_unknown_metrics_and_same_counter_rollups() -> None:
    model = SYNTHETIC_MODEL
    assert model.single("dram__bytes_read.max") == model.single("dram__bytes_read.sum")
    assert model.known("dram__bytes_read.max")
    assert not model.known("foo__bar.sum")
    assert model.single("foo__bar.sum") == max(model.metrics.values())
    assert base_counter("sm__throughput.avg.pct_of_peak_sustained_elapsed") == "sm__throughput"
    # two rollups of one counter count once
    assert model.passes(["dram__bytes_read.sum", "dram__bytes_read.max"]) == model.single("dram__bytes_read.sum")


def test_assumed_model() -> None:
    model = AssumedPassModel(3)
    assert model.passes(["a__b.sum", "a__b.max", "c__d.sum"]) == 6
    assert "ASSUMED" in model.source


def test_default_model_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARGUS_NCU_PASS_TABLE", str(SYNTHETIC))
    model = default_pass_model()
    assert isinstance(model, TablePassModel)
    assert model.synthetic
    assert "SYNTHETIC" in model.source


def test_default_model_without_any_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ARGUS_NCU_PASS_TABLE", raising=False)
    monkeypatch.setattr(passes_mod, "_candidates", lambda: [tmp_path / "missing.json"])
    model = default_pass_model()
    assert isinstance(model, AssumedPassModel)
    p = plan(Request.build("hw:dram__bytes_read.sum"))
    assert "ASSUMED" in p.explain()


def test_bad_table_file(tmp_path: Path) -> None:
    bad = tmp_path / "t.json"
    bad.write_text("{not json")
    with pytest.raises(PlanError, match="record it again"):
        TablePassModel.load(bad)
    bad.write_text(json.dumps({"metrics": {}}))
    with pytest.raises(PlanError, match="no `metrics` entries"):
        TablePassModel.load(bad)


@pytest.mark.skipif(not RECORDED.exists(), reason="tests/data/ncu_passes_gh100.json is not recorded yet")
def test_recorded_table_is_real_and_complete() -> None:
    data = json.loads(RECORDED.read_text())
    assert data["synthetic"] is False
    assert data["chip"] == "GH100"
    assert data["ncu_version"].startswith("2025.3.1")
    assert "record_ncu_passes.py" in data["command"]
    assert len(data["metrics"]) >= 20
    assert data["combinations"], "no combination was recorded"
    # seen on the H200 before (../shared/reference/gpu-apis.md section 8): the duration metric alone takes 1 pass
    assert data["metrics"]["gpu__time_duration.sum"] == 1


# -- requests and errors ----------------------------------------------------------------------------


def test_build_parses_the_scope_and_keeps_a_scope_value() -> None:
    req = Request.build("host.wall", "decode/*/attn; instances=2:")
    assert isinstance(req.scope, Scope)
    assert req.scope == Scope.parse("decode/*/attn instances=2:")
    assert Request.build("host.wall", req.scope).scope is req.scope
    assert Request.build("host.wall").scope.is_everything


@pytest.mark.parametrize(
    ("kwargs", "phrase"),
    [
        ({"repeat": 0}, "repeat must be an integer >= 1"),
        ({"repeat": 1.5}, "repeat must be an integer >= 1"),
        ({"warmup": -1}, "warmup must be an integer >= 0"),
        ({"max_passes_per_run": 0}, "max_passes_per_run must be an integer >= 1"),
        ({"replay_mode": "fast"}, "replay_mode must be one of kernel, application, range, app-range"),
        ({"cache_control": "some"}, "cache_control must be one of all, none"),
        ({"clock_controll": "base"}, "unknown plan setting(s) clock_controll"),
    ],
)
def test_build_rejects_bad_numbers_and_settings(kwargs: dict[str, object], phrase: str) -> None:
    with pytest.raises(PlanError) as info:
        Request.build("host.wall", **kwargs)  # type: ignore[arg-type]
    assert phrase in str(info.value)


def test_build_rejects_a_malformed_scope() -> None:
    with pytest.raises(ScopeSyntaxError, match="column 5"):
        Request.build("host.wall", "attn$")


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("gpu.tme", "'gpu.time'"),
        ("host.wal", "'host.wall'"),
        ("compile.register", "'compile.registers'"),
        ("sys.temprature", "'sys.temperature'"),
        ("hw.dram__bytes_read.sum", "hw:"),
    ],
)
def test_unknown_signals_suggest_close_names(name: str, suggestion: str) -> None:
    with pytest.raises(UnknownSignalError) as info:
        lookup(name)
    assert suggestion in str(info.value)
    assert "argus-lab signals" in str(info.value)
    with pytest.raises(UnknownSignalError):
        Request.build(["host.wall", name])


def test_bad_counter_names_and_empty_requests() -> None:
    with pytest.raises(UnknownSignalError, match=r"unit__counter\.rollup"):
        lookup("hw:DRAM bytes")
    with pytest.raises(UnknownSignalError, match="no signals were requested"):
        resolve(" , ")
    assert [s.name for s in resolve("gpu.*")] == [n for n in CATALOG if n.startswith("gpu.")]
    assert [s.name for s in resolve(["host.wall", "host.wall", "hw:a__b.sum"])] == ["host.wall", "hw:a__b.sum"]


# -- specific plans ---------------------------------------------------------------------------------


def test_static_backend_attaches_to_the_timing_run() -> None:
    p = plan(Request.build("host.wall,compile.registers,pm:sm__cycles_active.avg,gpu.time,sys.power"))
    assert len(p.runs) == 2
    timing = p.run_for("gpu.time")
    assert timing.attached == ("compiler",)
    assert "compile.registers" in timing.signals
    assert "compiler (static) gets no run of its own" in timing.reason
    assert p.run_for("pm:sm__cycles_active.avg").attached == ()


def test_static_only_request_gets_one_run() -> None:
    p = plan(Request.build("compile.registers,compile.spills"))
    assert len(p.runs) == 1
    assert p.runs[0].backends == ("compiler",)
    assert p.runs[0].attached == ()
    assert "no other run executes it" in p.runs[0].reason


def test_host_only_plan_needs_no_gpu() -> None:
    p = plan(Request.build("host.wall,host.cpu", repeat=3))
    assert len(p.runs) == 1
    assert not p.runs[0].needs_gpu
    assert p.runs[0].launcher is None
    assert p.pass_source == ""


def test_ncu_settings_follow_scope_and_settings() -> None:
    req = Request.build(
        "hw:dram__bytes_read.sum",
        "decode/*/attn **/mlp; instances=1:",
        replay_mode="application",
        clock_control="none",
        cache_control="none",
    )
    ncu = plan(req, SYNTHETIC_MODEL).runs[0].settings["ncu"]
    assert ncu["args"] == [
        "--metrics",
        "dram__bytes_read.sum",
        "--replay-mode",
        "application",
        "--clock-control",
        "none",
        "--cache-control",
        "none",
        "--nvtx",
        "--nvtx-include",
        "argus-scope@in/",
    ]
    # the whole scope (globs and instance ranges) travels to the child's recorder, which opens the `in` ranges
    assert ncu["scope"] == "decode/*/attn; **/mlp; instances=1:"
    assert ncu["region_filters"] == ["regex:argus@decode/.*/attn/", "argus@mlp/"]


def test_an_ncu_run_without_a_scope_still_replays_only_kernels_inside_regions() -> None:
    """Issue 15: with no scope, ncu got no NVTX filter and replayed the model construction before any region."""
    unscoped = plan(Request.build("hw:dram__bytes_read.sum"), SYNTHETIC_MODEL).runs[0]
    args = unscoped.settings["ncu"]["args"]
    assert args[args.index("--nvtx") :] == ["--nvtx", "--nvtx-include", "argus-scope@in/"]
    assert unscoped.settings["ncu"]["scope"] == ""
    assert (
        "replays: only kernels launched inside instances of the scope (every region"
        in plan(Request.build("hw:dram__bytes_read.sum"), SYNTHETIC_MODEL).explain()
    )
    assert unscoped.settings["ncu"]["clock_control"] == "base"
    assert unscoped.settings["ncu"]["cache_control"] == "all"
    assert unscoped.settings["ncu"]["replay_mode"] == "kernel"


def test_plan_costs_and_naive_comparison() -> None:
    req = Request.build("host.wall,gpu.time,hw:gpu__time_duration.sum,hw:dram__bytes_read.sum", repeat=4, warmup=1)
    p = plan(req, SYNTHETIC_MODEL)
    host, cupti = BACKENDS["host"].cost_factor, BACKENDS["cupti"].cost_factor
    assert [r.cost for r in p.runs] == [
        round(5 * host * cupti, 3),
        5 * SYNTHETIC_MODEL.passes(["gpu__time_duration.sum", "dram__bytes_read.sum"]),
    ]
    assert p.naive_runs == 4
    assert p.naive_cost == pytest.approx(5 * host + 5 * cupti + 5 * 1 + 5 * 3, abs=0.01)
    assert "naive plan (one run per signal): 4 run(s)" in p.explain()


def test_planning_is_deterministic() -> None:
    names = ["hw:dram__bytes_read.sum", "gpu.time", "host.wall", "pm:sm__cycles_active.avg", "compile.spills"]
    assert plan(Request.build(names), SYNTHETIC_MODEL) == plan(Request.build(names), SYNTHETIC_MODEL)


# -- golden plans -----------------------------------------------------------------------------------

GOLDEN_CASES: dict[str, dict[str, object]] = {
    "mixed": {
        "signals": "host.wall,gpu.time,gpu.kernels,compile.registers,compile.spills,hw:gpu__time_duration.sum,"
        "hw:dram__bytes_read.sum,hw:dram__bytes_write.sum,hw:sm__throughput.avg.pct_of_peak_sustained_elapsed,"
        "hw:lts__t_sector_hit_rate.pct,hw:smsp__inst_executed.sum,"
        "hw:sm__warps_active.avg.pct_of_peak_sustained_active",
        "scope": "decode/*/attn; instances=2:",
        "repeat": 5,
        "warmup": 2,
        "max_passes_per_run": 8,
    },
    "host_only": {"signals": "host.wall,host.cpu", "scope": "", "repeat": 3, "warmup": 1},
    "compiler_only": {"signals": "compile.registers,compile.spills", "scope": "", "repeat": 1, "warmup": 0},
    "cupti_pm_nvml": {
        "signals": "gpu.time,pm:sm__cycles_active.avg,sys.sm_clock,sys.power,host.wall",
        "scope": "**/layer instances=1: devices=0",
        "repeat": 10,
        "warmup": 2,
    },
}


def _golden_plan(name: str) -> Plan:
    case = dict(GOLDEN_CASES[name])
    signals = str(case.pop("signals"))
    scope = str(case.pop("scope"))
    repeat = int(str(case.pop("repeat")))
    warmup = int(str(case.pop("warmup")))
    return plan(Request.build(signals, scope, repeat, warmup, **case), SYNTHETIC_MODEL)


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden_plans(name: str) -> None:
    p = _golden_plan(name)
    check_plan(p, SYNTHETIC_MODEL)
    text = p.explain() + "\n"
    as_json = p.to_json() + "\n"
    text_file = GOLDEN / f"plan_{name}.txt"
    json_file = GOLDEN / f"plan_{name}.json"
    if os.environ.get("ARGUS_UPDATE_GOLDEN") == "1":
        text_file.write_text(text)
        json_file.write_text(as_json)
    assert text == text_file.read_text(), f"regenerate with ARGUS_UPDATE_GOLDEN=1 if {text_file.name} is outdated"
    assert as_json == json_file.read_text()
    assert Plan.from_json(json_file.read_text()) == p


def test_settings_default_and_round_trip() -> None:
    s = PlanSettings()
    assert (s.max_passes_per_run, s.replay_mode, s.clock_control, s.cache_control) == (16, "kernel", "base", "all")
    req = Request.build("host.wall", max_passes_per_run=4, cache_control="none")
    assert Request.from_dict(json.loads(json.dumps(req.to_dict()))) == req


def test_counters_missing_from_the_pass_table_are_named_in_the_explanation() -> None:
    if not RECORDED.exists():
        pytest.skip("the recorded H200 pass table is not in tests/data")
    model = TablePassModel.load(RECORDED)
    the_plan = plan(Request.build("hw:launch__grid_size,hw:dram__bytes_read.sum"), passes=model)
    assert the_plan.pass_assumed == ("launch__grid_size",)
    text = the_plan.explain()
    assert "not in the pass table: launch__grid_size" in text
    assert Plan.from_json(the_plan.to_json()).pass_assumed == ("launch__grid_size",)


def test_the_plan_states_each_backends_measured_overhead() -> None:
    text = plan(Request.build("host.wall,gpu.time,gpu.kernels,gpu.span,sys.power")).explain()
    host, cupti = BACKENDS["host"], BACKENDS["cupti"]
    assert f"    overhead of host: {host.overhead_text()}" in text
    assert f"    overhead of cupti: {cupti.overhead_text()}" in text
    assert "overhead of nvml: not measured" in text
    for o in (*host.overhead, *cupti.overhead):
        assert f"{o.ratio:.2f}x" in text and o.source in text


def test_measured_cost_factors_follow_the_declared_overheads() -> None:
    """A backend with measured overheads costs its worst measured ratio, over what its run always adds (host)."""
    for info in BACKENDS.values():
        if not info.overhead:
            continue
        for o in info.overhead:
            assert o.low <= o.ratio <= o.high, (info.name, o)
        base = {o.workload: o.ratio for o in BACKENDS["host"].overhead} if info.name != "host" else {}
        worst = max(o.ratio / base.get(o.workload, 1.0) for o in info.overhead)
        assert info.cost_factor == pytest.approx(worst, abs=0.01), info.name


def test_an_ncu_run_is_costed_by_the_kernels_of_the_scope_it_replays() -> None:
    """With a census of an earlier timing run (SYNTHETIC numbers), an ncu run's cost counts only the kernels of the
    scope's instances: here 3 of 44 (instances 1-3 of matmul; not instance 0, not the 10 kernels per execution
    outside regions)."""
    from argus_lab.plan.ncu_settings import KernelCensus, PathCensus

    census = KernelCensus((PathCensus("matmul", 1.0, 1.0),), outside=10.0, source="timing run r-t")
    req = Request.build("hw:dram__bytes_read.sum", "matmul; instances=1:", repeat=4, warmup=0)
    with_census = plan(req, SYNTHETIC_MODEL, census=census).runs[0]
    without = plan(req, SYNTHETIC_MODEL).runs[0]
    assert with_census.settings["ncu"]["replayed_kernels"] == 3.0
    assert with_census.cost == pytest.approx(without.cost * 3 / 44, abs=1e-3)
    assert (
        "about 3 of the 44 kernels its 4 execution(s) launch (timing run r-t)"
        in plan(req, SYNTHETIC_MODEL, census=census).explain()
    )
    assert without.settings["ncu"]["replayed_kernels"] is None
    assert "every measured instance of the covered region paths" in without.settings["ncu"]["replays"]
    # nested paths count with the instance that encloses them; the scope's instance share applies to both
    nested = KernelCensus((PathCensus("step", 1.0, 2.0), PathCensus("step/attn", 2.0, 3.0)))
    est = plan(Request.build("hw:dram__bytes_read.sum", "step; instances=2:", repeat=4), SYNTHETIC_MODEL, census=nested)
    assert est.runs[0].settings["ncu"]["replayed_kernels"] == pytest.approx((2 * 1 * 4 + 3 * 2 * 4) * 2 / 4)
