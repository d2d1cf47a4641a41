"""The verdicts and the aggregation of bench/timing_overhead.py (the H200 runs it once: its logic is checked here).

Inputs are SYNTHETIC numbers and, for the store queries, the store recorded on the H200
(tests/data/gpu/e2e_nested_h200.duckdb).  No timing is asserted.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
STORE = ROOT / "tests" / "data" / "gpu" / "e2e_nested_h200.duckdb"
sys.path.insert(0, str(ROOT))

from bench.pool_rounds import main as pool_main  # noqa: E402
from bench.pool_rounds import pool  # noqa: E402


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("timing_overhead", ROOT / "bench" / "timing_overhead.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["timing_overhead"] = module
    spec.loader.exec_module(module)
    return module


def test_events_verdict_holds_gpu_time_to_two_percent_on_regions_of_a_millisecond_synthetic(bench: ModuleType) -> None:
    plain = [{"gemm": [4200.0] * 3, "chain": [1300.0] * 3}, {"gemm": [4220.0] * 3, "chain": [1300.0] * 3}]
    inside = {"gemm": [4190.0], "chain": [1290.0]}
    good = bench.events_verdict(plain, inside, {"gemm": {"gpu.time": [4150.0]}, "chain": {"gpu.time": [1280.0]}})
    assert good["ok"]
    assert good["gemm"]["events_no_tool_us"] == pytest.approx(4210.0)  # the mean of the passes before and after
    off = bench.events_verdict(plain, inside, {"gemm": {"gpu.time": [4150.0]}, "chain": {"gpu.time": [1270.0]}})
    assert not off["ok"]  # chain 2.3 % short
    short = bench.events_verdict([{"x": [900.0]}], {"x": [900.0]}, {"x": {"gpu.time": [900.0]}})
    assert not short["ok"] and not short["x"]["long_enough"]  # a region under 1 ms does not count as evidence


def test_attribution_verdict_reads_the_recorded_store(bench: ModuleType) -> None:
    rows = bench.attribution_rows(STORE)
    expect = {"outer": re.compile("cutlass|gemm"), "outer/inner": re.compile("elementwise")}
    res = bench.attribution_verdict(rows, expect)
    assert res["regions"]["outer"] == {**res["regions"]["outer"], "kernels": 6, "exact": 6, "name_ok": True}
    assert res["regions"]["outer/inner"]["exact"] == 12
    assert not res["ok"]  # the workload launches its random inputs outside every region: named, not hidden
    assert all("unattributed" in k for k in res["kernels_outside_regions"])
    inside_only = [r for r in rows if r[1] is not None]
    assert bench.attribution_verdict(inside_only, expect)["ok"]
    wrong = [(n, p, "temporal" if p == "outer" else c) for n, p, c in inside_only]
    assert not bench.attribution_verdict(wrong, expect)["ok"]


def test_instance_values_of_the_recorded_store(bench: ModuleType) -> None:
    got = bench.instance_gpu_values(STORE)
    assert set(got) == {"outer", "outer/inner"}
    assert all(len(v) == 4 and min(v) > 0 for sig in got.values() for v in sig.values())


def test_aggregate_takes_the_median_of_processes_and_keeps_ranges_synthetic(bench: ModuleType) -> None:
    def proc(ratios: list[float]) -> dict[str, object]:
        blocks = [[10.0]] * (len(ratios) + 1)
        work = {"ratios": ratios, "a_ms": blocks, "b_ms": [[12.0]] * len(ratios), "a_drift": 1.0, "extras": []}
        return {"tool": "argus", "workloads": {"loop": work}}

    (row,) = bench.aggregate([proc([1.1, 1.2, 1.3]), proc([1.5, 1.4]), proc([1.0])])
    assert row["ratio"] == pytest.approx(1.2)  # processes: 1.2, 1.45, 1.0
    assert (row["proc_min"], row["proc_max"]) == (pytest.approx(1.0), pytest.approx(1.45))
    assert (row["pair_min"], row["pair_max"], row["pairs"], row["processes"]) == (1.0, 1.5, 6, 3)


def test_schedule_runs_the_required_tools_first_then_the_others(bench: ModuleType) -> None:
    required = ("none", "argus", "cupti-kernels+callbacks", "proton")
    tools = [*required, "argus-python-boundaries", "cupti-kernels", "argus-markers"]
    order = bench.schedule(tools, 2, required)
    head = order[: 2 * len(required)]
    assert sorted(head) == sorted((t, i) for t in required for i in (0, 1))  # every required tool twice, first
    assert {i for _, i in head[: len(required)]} == {0}  # a first round of one process each, then the second
    assert head[: len(required)] != [(t, 0) for t, _ in head[len(required) :]]  # the second round is rotated
    assert order[2 * len(required) :] == [(t, i) for i in (0, 1) for t in tools[len(required) :]]
    assert bench.schedule(list(bench.TOOLS), 1)[: len(bench.REQUIRED)] == [(t, 0) for t in bench.REQUIRED]


ROUNDS = ROOT / "tests" / "data" / "gpu"


def test_pooling_one_recorded_round_reproduces_its_own_table() -> None:
    figures = json.loads((ROUNDS / "timing_round7" / "timing-overhead.json").read_text())
    pooled = {(r["workload"], r["tool"]): r for r in pool({"r7": figures})}
    assert len(pooled) == len(figures["rows"])
    for row in figures["rows"]:
        p = pooled[(row["workload"], row["tool"])]
        assert p["ratio"] == pytest.approx(row["ratio"])
        assert (p["processes"], p["proc_min"], p["proc_max"]) == pytest.approx(
            (row["processes"], row["proc_min"], row["proc_max"])
        )
        assert p["rounds"] == ["r7"]


def test_pooling_recorded_rounds_takes_every_process_of_each() -> None:
    rounds = {
        name: json.loads((ROUNDS / name / "timing-overhead.json").read_text())
        for name in ("timing_round5", "timing_round7")
    }
    rows = {(r["workload"], r["tool"]): r for r in pool(rounds, {"argus", "proton"})}
    assert {tool for _, tool in rows} == {"argus", "proton"}  # --tools keeps only what was asked
    per_round = {name: {(r["workload"], r["tool"]): r for r in figures["rows"]} for name, figures in rounds.items()}
    for key, row in rows.items():
        parts = [per_round[name][key] for name in rounds]
        assert row["processes"] == sum(p["processes"] for p in parts)
        assert row["proc_min"] == min(p["proc_min"] for p in parts)
        assert row["proc_max"] == max(p["proc_max"] for p in parts)
        assert row["rounds"] == ["timing_round5", "timing_round7"]


def test_pooling_refuses_a_round_given_twice(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(ROUNDS / "timing_round7" / "timing-overhead.json")
    with pytest.raises(SystemExit):
        pool_main([path, path])  # the same processes twice would weigh that round double
    err = capsys.readouterr().err
    assert "two rounds are named 'timing_round7'" in err and "from its own folder, once" in err


def test_a_paired_tool_runs_its_a_blocks_with_the_base_tool_attached_synthetic(
    bench: ModuleType, tmp_path: Path
) -> None:
    """``argus@cupti-kernels``: every A block of the process runs with the base tool attached, between B blocks of the
    tool itself, so each ratio compares the two in adjacent blocks (SYNTHETIC tools and workload, CPU clock)."""
    import argparse
    import time
    from typing import Any

    calls: list[tuple[str, str]] = []

    class Recording(bench.Tool):  # type: ignore[name-defined,misc]
        def attach(self) -> None:
            calls.append(("attach", self.name))

        def detach(self) -> dict[str, Any]:
            calls.append(("detach", self.name))
            return {}

    class Workload:
        def plain(self) -> None:
            sum(range(100))

        def marked(self, marker: Any) -> Any:
            return self.plain

        def unhook(self) -> None:
            return None

    res: dict[str, Any] = {}
    args = argparse.Namespace(reps=2, warm=0, pairs=2)
    tool, base = Recording("tool", tmp_path, "cpu"), Recording("base", tmp_path, "cpu")
    bench.abab(tool, Workload(), bench.Clock("cpu", events=False), args, time.time() + 60, res, lambda: None, base)
    attached = [name for what, name in calls if what == "attach"]
    assert attached == ["base", "tool", "base", "tool", "base"]
    assert calls.count(("detach", "base")) == 3  # each A block detaches its tool again
    assert len(res["ratios"]) == 2 and len(res["a_ms"]) == 3


def test_round_12s_paired_row_is_the_median_of_its_processes_block_ratios() -> None:
    """The recorded figure of the timing run over CUPTI's floor in one process (docs/benchmarks.md, round 12:
    decode 1.047x, loop 1.011x) follows from the per-process JSON that came back from the H200."""
    import statistics

    figures = json.loads((ROUNDS / "timing_round12" / "timing-overhead.json").read_text())
    rows = {(r["workload"], r["tool"]): r for r in figures["rows"]}
    procs = [json.loads(p.read_text()) for p in sorted((ROUNDS / "timing_round12" / "procs").glob("argus@*.json"))]
    assert len(procs) == 5
    for workload, shown in (("decode", 1.047), ("loop", 1.011)):
        per_process = [statistics.median(p["workloads"][workload]["ratios"]) for p in procs]
        row = rows[(workload, "argus@cupti-kernels")]
        assert row["ratio"] == pytest.approx(statistics.median(per_process))
        assert round(row["ratio"], 3) == shown


POOLED_PAIRED = {"decode": 1.065, "loop": 1.031}  # the median process of rounds 12, 13 and 14 (25 processes)


def test_round_13s_paired_row_and_both_rounds_pooled() -> None:
    """Round 13 (2026-12-02 23:20 UTC, 12 processes of the paired tool alone: ``ISSUE13_REQUIRED=argus@cupti-kernels
    ISSUE13_EXTRAS= ISSUE13_PROCS=12 scripts/gpu/timing_overhead.sh OUT 290``): decode 1.072x, loop 1.035x, from the
    per-process JSON; pooled with round 12's 5 and round 14's 8 processes, the median process of the 25 is what
    docs/benchmarks.md states (decode over the floor by more than the issue's 0.05, the loop within it)."""
    import statistics

    figures = json.loads((ROUNDS / "timing_round13" / "timing-overhead.json").read_text())
    rows = {(r["workload"], r["tool"]): r for r in figures["rows"]}
    pooled: dict[str, list[float]] = {"decode": [], "loop": []}
    for rnd, count in (("timing_round12", 5), ("timing_round13", 12), ("timing_round14", 8)):
        procs = [json.loads(p.read_text()) for p in sorted((ROUNDS / rnd / "procs").glob("argus@cupti-kernels-*.json"))]
        assert len(procs) == count
        for workload in pooled:
            pooled[workload] += [statistics.median(p["workloads"][workload]["ratios"]) for p in procs]
    for workload, shown in (("decode", 1.072), ("loop", 1.035)):
        assert round(rows[(workload, "argus@cupti-kernels")]["ratio"], 3) == shown
    assert round(statistics.median(pooled["decode"]), 3) == POOLED_PAIRED["decode"]
    assert round(statistics.median(pooled["loop"]), 3) == POOLED_PAIRED["loop"]
    assert POOLED_PAIRED["decode"] > 1.05 >= POOLED_PAIRED["loop"]


def test_round_14_splits_the_gap_over_the_floor_into_marking_and_the_tool() -> None:
    """Round 14 (2026-12-02 23:30 UTC, 8 processes a tool): the floor with the workload marked by no-op markers
    (``cupti-kernels+null-marks``, the decode step's forward hooks and the loop's ``with``) over the floor, and the
    timing run over that marked floor, beside the timing run over the floor, as docs/benchmarks.md states them."""
    figures = json.loads((ROUNDS / "timing_round14" / "timing-overhead.json").read_text())
    rows = {(r["workload"], r["tool"]): round(r["ratio"], 3) for r in figures["rows"]}
    assert rows[("decode", "argus@cupti-kernels")] == 1.061
    assert rows[("decode", "cupti-kernels+null-marks@cupti-kernels")] == 1.027  # marking alone
    assert rows[("decode", "argus@cupti-kernels+null-marks")] == 1.001  # what the tool adds to marking
    assert rows[("loop", "argus@cupti-kernels")] == 1.036
    assert rows[("loop", "cupti-kernels+null-marks@cupti-kernels")] == 1.016
    assert rows[("loop", "argus@cupti-kernels+null-marks")] == 1.013
    procs = sorted((ROUNDS / "timing_round14" / "procs").glob("*.json"))
    assert len(procs) == 24 and all(not json.loads(p.read_text())["errors"] for p in procs)


def test_round_15_the_decode_step_marked_by_mark_modules_is_within_005_of_the_floor() -> None:
    """Round 15 (2026-12-02 23:45 UTC, 8 processes a tool): the timing run over CUPTI's floor with the decode step's
    layers marked by ``argus_lab.mark_modules`` (the README's way, no forward hooks) beside the same run marked by
    forward hooks, as docs/benchmarks.md states them: within the issue's 0.05 with the first, not with the second."""
    import statistics

    figures = json.loads((ROUNDS / "timing_round15" / "timing-overhead.json").read_text())
    rows = {(r["workload"], r["tool"]): r for r in figures["rows"]}
    for tool, decode, loop in (("argus-modules@cupti-kernels", 1.022, 1.043), ("argus@cupti-kernels", 1.071, 1.048)):
        procs = [json.loads(p.read_text()) for p in sorted((ROUNDS / "timing_round15" / "procs").glob(f"{tool}-*"))]
        assert len(procs) == 8 and all(not p["errors"] for p in procs)
        per_process = [statistics.median(p["workloads"]["decode"]["ratios"]) for p in procs]
        assert round(statistics.median(per_process), 3) == round(rows[("decode", tool)]["ratio"], 3) == decode
        assert round(rows[("loop", tool)]["ratio"], 3) == loop
        extras = [e for p in procs for e in p["workloads"]["decode"]["extras"]]
        assert all(e["kernels"] == e["kernels_with_instance"] > 0 for e in extras)  # every kernel in its region
    assert (
        rows[("decode", "argus-modules@cupti-kernels")]["ratio"]
        < 1.05
        < rows[("decode", "argus@cupti-kernels")]["ratio"]
    )


def test_round_16_puts_the_readme_marking_proton_and_the_floor_in_one_round() -> None:
    """Round 16 (2026-12-03 04:38 UTC, 4 processes a tool, ``ISSUE13_REQUIRED=argus-modules,proton,
    argus-modules@cupti-kernels``, the default extras after them): the timing run with the decode step marked by
    ``mark_modules`` below Proton and torch.profiler on both workloads, and over CUPTI's floor by 1.020x (decode) and
    1.0497x (loop, at the issue's 0.05), every process and every kernel in its region, as docs/benchmarks.md states."""
    import statistics

    figures = json.loads((ROUNDS / "timing_round16" / "timing-overhead.json").read_text())
    rows = {(r["workload"], r["tool"]): r["ratio"] for r in figures["rows"]}
    shown = {
        ("decode", "argus-modules"): 1.171, ("decode", "proton"): 1.423, ("decode", "torch.profiler"): 1.500,
        ("decode", "argus-modules@cupti-kernels"): 1.020, ("loop", "argus-modules"): 1.256,
        ("loop", "proton"): 1.476, ("loop", "torch.profiler"): 1.725, ("loop", "argus-modules@cupti-kernels"): 1.050,
    }  # fmt: skip
    assert {k: round(rows[k], 3) for k in shown} == shown
    for workload in ("decode", "loop"):
        assert rows[(workload, "argus-modules")] < rows[(workload, "proton")] < rows[(workload, "torch.profiler")]
        assert rows[(workload, "argus-modules@cupti-kernels")] <= 1.05
    for tool in ("argus-modules", "argus-modules@cupti-kernels", "proton"):
        procs = [json.loads(p.read_text()) for p in sorted((ROUNDS / "timing_round16" / "procs").glob(f"{tool}-*"))]
        assert len(procs) == 4 and all(not p["errors"] for p in procs)
        for workload in ("decode", "loop"):
            per_process = [statistics.median(p["workloads"][workload]["ratios"]) for p in procs]
            assert statistics.median(per_process) == pytest.approx(rows[(workload, tool)])
            if tool.startswith("argus"):
                extras = [e for p in procs for e in p["workloads"][workload]["extras"]]
                assert extras and all(e["kernels"] == e["kernels_with_instance"] > 0 for e in extras)
