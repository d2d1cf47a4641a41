"""Numbers that mean what they say, on the stores recorded on the H200 (tests/data) and on SYNTHETIC edge cases.

Each test guards one rule of the signal catalog's aggregation (``plan.catalog.aggregation``) or of the tables built on
it: counters combine by their rollup (a percentage is a duration-weighted mean, never a sum), launch attributes are
per-kernel facts shown as a range, counters reach their kernels, warm-up stays apart and counts agree, a region's
statistics are its main kernel-sequence group's, units and sentinels print as what they are, a scope or a counter name
that matches nothing stops with the closest names, and the timeline draws each kernel where the region table counts
it.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from join_synth import Inst, Kern, SynthRun, write

import argus_lab
from argus_lab import join
from argus_lab.app.measure import plan
from argus_lab.errors import ScopeError, UnknownSignalError
from argus_lab.plan.catalog import aggregation
from argus_lab.report import Report, evidence
from argus_lab.report.timeline_rows import timeline_columns
from argus_lab.store import Store
from argus_lab.views.timeline import timeline_data

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]


def copied(tmp_path: Path, rel: str) -> Store:
    """A recorded store copied (gunzipped) into ``tmp_path`` and joined again with today's rules."""
    src = DATA / rel
    dest = tmp_path / src.name.removesuffix(".gz")
    if src.suffix == ".gz":
        with gzip.open(src) as f, dest.open("wb") as out:
            shutil.copyfileobj(f, out)
    else:
        shutil.copy(src, dest)
    st = Store(dest)
    for (request,) in st.rows("SELECT DISTINCT request_id FROM runs"):
        join.attribute_request(st, [r[0] for r in st.rows("SELECT run_id FROM runs WHERE request_id = ?", [request])])
    return st


@pytest.fixture(scope="module")
def e2e(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """`argus-lab run examples/gpu/nested_torch.py` with 18 signals on the H200: timing + two ncu replay runs."""
    return copied(tmp_path_factory.mktemp("e2e"), "gpu/e2e_nested_h200.duckdb")


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """The decode step of notebooks/gpu_walkthrough.ipynb: a timing run and an ncu run, two separate requests."""
    return copied(tmp_path_factory.mktemp("gw"), "notebooks/gpu_walkthrough_h200.duckdb")


# -- 1. one aggregation rule per signal ---------------------------------------------------------------------------
def test_the_catalog_declares_how_each_signal_combines() -> None:
    assert aggregation("gpu.time") == aggregation("hw:dram__bytes_read.sum") == "sum"
    assert aggregation("hw:sm__throughput.avg.pct_of_peak_sustained_elapsed") == "mean"
    assert aggregation("hw:dram__bytes.sum.per_second") == "mean"  # a rate of a sum is still a rate
    assert aggregation("hw:gpc__cycles_elapsed.max") == "max" and aggregation("hw:x__y.min") == "min"
    assert aggregation("hw:launch__registers_per_thread") == aggregation("compile.registers") == "fact"
    assert aggregation("sys.power") == "mean" and aggregation("gpu.span") == "span"


def _per_kernel(st: Store, signal: str) -> dict[int, list[tuple[float, float]]]:
    """Timing instance -> [(ncu value, the timing run's duration of the kernel at the same ordinal)]."""
    rows = st.rows(
        """
        WITH t AS (
            SELECT k.instance_id, k.end_ns - k.start_ns AS dur,
                   row_number() OVER (PARTITION BY k.instance_id ORDER BY k.correlation_id, k.start_ns) - 1 AS ordinal
            FROM kernels k JOIN region_instances i ON i.run_id = k.run_id AND i.instance_id = k.instance_id
        )
        SELECT a.instance_id, m.value, t.dur
        FROM attributions a JOIN ncu_kernels n ON n.run_id = a.run_id AND n.kernel_key = a.evidence_id
        JOIN metrics m ON m.run_id = n.run_id AND m.kernel_key = n.kernel_key AND m.signal = ?
        JOIN t ON t.instance_id = a.instance_id AND t.ordinal = n.ordinal
        WHERE a.evidence = 'ncu_kernel' AND a.class = 'ordinal'
        """,
        [signal],
    )
    out: dict[int, list[tuple[float, float]]] = {}
    for iid, value, dur in rows:
        out.setdefault(int(iid), []).append((float(value), float(dur)))
    return out


def _values(st: Store, signal: str) -> dict[int, tuple[float, float | None]]:
    rows = st.rows("SELECT instance_id, inclusive, exclusive FROM instance_values WHERE signal = ?", [signal])
    return {int(i): (float(v), None if x is None else float(x)) for i, v, x in rows}


def test_a_percentage_is_the_duration_weighted_mean_of_its_kernels_never_a_sum(e2e: Store) -> None:
    signal = "hw:sm__throughput.avg.pct_of_peak_sustained_elapsed"
    leaf = _per_kernel(e2e, signal)
    values = _values(e2e, signal)
    inner = e2e.rows("SELECT instance_id FROM region_instances WHERE path = 'outer/inner'")
    assert inner
    for (iid,) in inner:  # a leaf: its own kernels
        parts = leaf[int(iid)]
        expect = sum(v * d for v, d in parts) / sum(d for _, d in parts)
        assert values[int(iid)][0] == pytest.approx(expect)
    assert all(0 <= v <= 100 for v, _ in values.values())  # a percentage stays a percentage
    assert max(v for v, _ in values.values()) < sum(v for v, _ in values.values())  # and is not the sum


def test_a_launch_attribute_is_a_per_kernel_fact_shown_as_a_range(e2e: Store) -> None:
    report = Report(e2e, [r[0] for r in e2e.rows("SELECT run_id FROM runs")])
    regs = {c.path: c for c in report.counters if c.signal == "hw:launch__registers_per_thread"}
    inner = regs["outer/inner"]
    assert inner.agg == "fact" and inner.kernel_range is not None
    inner_ids = {int(i) for (i,) in e2e.rows("SELECT instance_id FROM region_instances WHERE path = 'outer/inner'")}
    per_kernel = [
        v for iid, parts in _per_kernel(e2e, "hw:launch__registers_per_thread").items() if iid in inner_ids
        for v, _ in parts
    ]  # fmt: skip
    assert inner.kernel_range == (min(per_kernel), max(per_kernel)) == (28.0, 32.0)
    assert inner.median == 32.0  # an instance's value is its largest kernel's, never a mean or a sum of kernels
    text = report.counter_table()
    assert "28..32 register/thread per kernel" in text and "largest per kernel" in text


def test_a_sum_adds_and_exclusive_never_exceeds_inclusive_in_every_recorded_store(
    e2e: Store, walkthrough: Store, tmp_path: Path
) -> None:
    stores = [e2e, walkthrough, copied(tmp_path, "gpu/e2e_probes_h200.duckdb.gz")]
    for st in stores:
        rows = st.rows("SELECT signal, inclusive, exclusive FROM instance_values WHERE exclusive IS NOT NULL")
        additive = [(s, i, x) for s, i, x in rows if aggregation(s) == "sum"]
        assert additive
        assert all(x <= i * (1 + 1e-9) + 1e-9 for _, i, x in additive), st.path
        pct = [i for s, i, _ in rows if s.startswith("hw:") and "pct" in s]
        assert all(v <= 100.0 + 1e-9 for v in pct), st.path
    dram = _values(e2e, "hw:dram__bytes_read.sum")
    leaf = _per_kernel(e2e, "hw:dram__bytes_read.sum")
    for iid, parts in leaf.items():
        if iid in dram and dram[iid][1] is not None:
            assert dram[iid][1] == pytest.approx(sum(v for v, _ in parts))  # exclusive: its own kernels added


def test_the_attribution_table_combines_a_percentage_by_its_mean(e2e: Store) -> None:
    ids = [r[0] for r in e2e.rows("SELECT run_id FROM runs")]
    rows = evidence.attribution_summary(e2e, ids, 1000).dicts()
    pct = [r for r in rows if r["signal"] == "hw:sm__throughput.avg.pct_of_peak_sustained_elapsed"]
    assert pct and all(r["agg"] == "mean" and r["total"] <= 100 for r in pct)
    times = [r for r in rows if r["signal"] == "gpu.time" and r["path"] == "outer"]
    assert times and times[0]["agg"] == "sum"


# -- 2. counters on their kernels; per-kernel tables for people -------------------------------------------------------
def test_counters_reach_their_kernels_in_every_recorded_store_with_ncu_kernels(e2e: Store, walkthrough: Store) -> None:
    for st in (e2e, walkthrough):
        report = Report(st, [r[0] for r in st.rows("SELECT run_id FROM runs")])
        profiled = {p for (p,) in st.rows("SELECT DISTINCT path FROM ncu_kernels")}
        rows = [k for k in report.kernels if k.path in profiled and k.ordinal is not None]
        assert rows, st.path
        assert all(k.counters for k in rows), [(k.path, k.ordinal) for k in rows if not k.counters]
    e2e_report = Report(e2e, [r[0] for r in e2e.rows("SELECT run_id FROM runs")])
    inner = [k for k in e2e_report.kernels if k.path == "outer/inner"]
    assert {len(k.counters) for k in inner} == {11}  # both ncu runs' counters, on the right ordinal


def test_per_kernel_values_are_named_numbered_and_sorted_for_people(e2e: Store) -> None:
    ids = [r[0] for r in e2e.rows("SELECT run_id FROM runs")]
    table = evidence.counters(e2e, ids, 10_000)
    rows = table.dicts()
    assert {"display_name", "ordinal", "instance_index"} <= set(table.columns)
    hw = [r for r in rows if r["signal"] == "hw:dram__bytes_read.sum" and r["path"] == "outer/inner"]
    assert all(not r["display_name"].startswith("_Z") and "ncu/" not in r["display_name"] for r in hw)
    keys = [(r["instance_index"], r["ordinal"]) for r in hw]
    assert keys == sorted(keys) and all(isinstance(o, int) for _, o in keys)


# -- 3. warm-up apart, counts agree -----------------------------------------------------------------------------------
def test_kernel_counts_agree_and_warm_up_is_counted_apart(e2e: Store) -> None:
    ids = [r[0] for r in e2e.rows("SELECT run_id FROM runs")]
    (timing,) = [r[0] for r in e2e.rows("SELECT run_id FROM runs WHERE list_contains(backends, 'cupti')")]
    report = Report(e2e, ids)
    groups = evidence.kernel_groups(e2e, ids, 1000).dicts()
    count = "SELECT count(*) FROM region_instances WHERE run_id = ? AND path = ? AND warmup = ?"
    for path in ("outer", "outer/inner"):
        by_ordinal = sum(k.launches for k in report.kernels if k.path == path)
        by_region = sum(int(g["count"]) for g in groups if g["path"] == path)
        warm = sum(int(g["warmup"]) for g in groups if g["path"] == path)
        measured = e2e.rows(count, [timing, path, False])[0][0]
        warm_instances = e2e.rows(count, [timing, path, True])[0][0]
        assert by_ordinal == by_region, path
        per_instance = {"outer": 1, "outer/inner": 2}[path]  # own kernels: a GEMM in outer; relu + add in inner
        assert by_region == per_instance * measured and warm == per_instance * warm_instances, path


def test_show_all_reports_each_request_apart_unless_pooled(tmp_path: Path) -> None:
    store = tmp_path / "two.duckdb"
    for script in ("examples/nested.py", "examples/nested.py"):
        subprocess.run(
            [sys.executable, "-m", "argus_lab.faces.cli", "run", script, "--signals", "host.wall", "--repeat", "2",
             "--store", str(store)],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "argus_lab.faces.cli", "show", "--all", "--store", str(store)],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    assert out.count("== request q-") == 2
    pooled = subprocess.run(
        [sys.executable, "-m", "argus_lab.faces.cli", "show", "--all", "--pool", "--store", str(store)],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    assert "every run of the store pooled" in pooled and "== request" not in pooled


# -- 5. a region's statistics are its main group's (SYNTHETIC) --------------------------------------------------------
def test_a_heterogeneous_first_instance_is_shown_beside_the_main_group_not_mixed_in(tmp_path: Path) -> None:
    """SYNTHETIC: instance 0 of ``matmul`` autotunes (30 kernels, 3 ms); instances 1-3 run one 10 us kernel."""
    kernels = [Kern(100 + k, f"bench{k}", 10 + 100 * k, 100 * (k + 1), 1) for k in range(30)]
    kernels += [Kern(200 + j, "matmul_kernel", 5_000 + 1_000 * j, 5_010 + 1_000 * j, 2 + j) for j in range(3)]
    run = SynthRun(
        "het",
        instances=[
            Inst(1, "matmul", 0, 3_000, index=0),
            *(Inst(2 + j, "matmul", 4_900 + 1_000 * j, 5_100 + 1_000 * j, index=1 + j) for j in range(3)),
        ],
        kernels=kernels,
    )
    st = Store(tmp_path / "het.duckdb")
    write(st, [run])
    join.attribute_request(st, ["het"])
    report = Report(st, ["het"])
    rows = {r.signal: r for r in report.regions if r.path == "matmul"}
    assert (rows["gpu.kernels"].instances, rows["gpu.kernels"].median) == (3, 1.0)  # the main group's
    assert rows["gpu.time"].spread == pytest.approx(0.0)  # the 3 ms first call does not blow up the spread
    assert any("instance 0" in h and "30 kernels" in h for h in report.heterogeneity())
    assert [k.main_group for k in report.kernels if k.name == "matmul_kernel"] == [True]
    assert "another kernel-sequence group, collapsed" in report.kernel_table()


# -- 6. units and sentinels -------------------------------------------------------------------------------------------
def test_unmeasured_cpu_time_is_no_value_and_sources_read_relative(tmp_path: Path) -> None:
    def step() -> None:
        with argus_lab.region("step"):
            pass

    st = Store(tmp_path / "h.duckdb")
    argus_lab.measure(step, "host.wall", repeat=2, warmup=0, store=st)  # host.cpu not asked: cpu_ns = -1
    ids = [r[0] for r in st.rows("SELECT run_id FROM runs")]
    assert st.rows("SELECT DISTINCT cpu_ns FROM region_instances") == [(-1,)]
    assert {r["cpu_ns"] for r in evidence.instances(st, ids, 100).dicts()} == {None}
    assert evidence.source_display("<ipython-input-3-0a1b2c3d4e5f>", "") == "IPython input [3]"
    assert evidence.source_display("/home/u/proj/train.py", "/home/u/proj") == "train.py"
    assert evidence.source_display("cell [3] of quickstart.ipynb", "/x") == "cell [3] of quickstart.ipynb"


# -- 7. what matches nothing stops, with the closest names ------------------------------------------------------------
def test_a_scope_that_matches_no_region_fails_with_the_regions_seen(tmp_path: Path) -> None:
    def step() -> None:
        with argus_lab.region("decode"):
            pass

    with pytest.raises(ScopeError, match=r"matched none of the 1 region path.*\(decode\); did you mean 'decode/\*\*'"):
        argus_lab.measure(step, "host.wall", repeat=1, warmup=0, scope="decod/**", store=str(tmp_path / "s.duckdb"))
    st = Store(tmp_path / "s.duckdb")
    assert st.rows("SELECT count(*) FROM region_instances")[0][0] == 1  # what was measured stays stored


def test_a_counter_typo_stops_at_planning_with_the_closest_names() -> None:
    with pytest.raises(UnknownSignalError, match=r"hw:dram__bytes_reed.sum.*did you mean 'hw:dram__bytes_read.sum'"):
        plan("hw:dram__bytes_reed.sum,gpu.time")
    assert plan("hw:dram__bytes_reed.sum", allow_unknown_counters=True).runs  # asked for: planned anyway
    assert plan("hw:smsp__warps_issue_stalled_barrier_per_warp_active.pct,hw:launch__grid_size").runs


def test_an_ncu_only_report_says_what_it_holds(walkthrough: Store) -> None:
    report = Report(walkthrough)  # the latest request: the ncu run alone
    assert "hardware counters only" in report.region_table()
    assert "before the workload failed" not in report.text()


# -- 8. the timeline draws a kernel where the region table counts it --------------------------------------------------
def test_the_timeline_places_temporal_kernels_in_their_region_with_their_class(tmp_path: Path) -> None:
    from argus_lab import import_trace

    st = Store(tmp_path / "k.duckdb")
    res = import_trace(DATA / "traces" / "kineto_gpt2.json.gz", st)
    inst, kern = timeline_columns(st, res.run_id)
    tl = timeline_data(res.run_id, inst, kern)
    dev = tl["device"]
    classes = dev["class"]
    temporal = [i for i, c in enumerate(classes) if c == "temporal"]
    assert temporal and all(dev["region"][i] >= 0 for i in temporal)  # in a region, not "outside every region"
    assert {tl["regions"][dev["region"][i]] for i in temporal} <= {
        r.path for r in Report(st, [res.run_id]).regions if r.signal == "gpu.kernels"
    }


# -- 4. the implicit region on the H200 -------------------------------------------------------------------------------
def test_the_implicit_region_recorded_on_the_h200_holds_its_warm_up_and_three_launches_an_ordinal(
    tmp_path: Path,
) -> None:
    """``argus_lab.measure(ten_kernels, "gpu.time,gpu.kernels", repeat=3, warmup=1)`` of a function with no region,
    recorded on the H200 by tests/gpu/test_implicit_region_gpu.py (tests/data/gpu/implicit_region.duckdb.gz): one
    instance per repetition with its own id, the warm-up's 10 kernels ``temporal`` in the warm-up instance, the 30
    measured ones ``exact``, and the per-ordinal table ordinals 0-9 with 3 launches each.  Before the fix the warm-up
    was stored as repetition 3 with the id of another instance (ordinals 0-19 read 2, then 1)."""
    st = copied(tmp_path, "gpu/implicit_region.duckdb.gz")
    inst = st.rows("SELECT instance_id, repetition, warmup FROM region_instances ORDER BY start_ns")
    assert [(r, w) for _, r, w in inst] == [(0, True), (1, False), (2, False), (3, False)]
    assert len({i for i, _, _ in inst}) == 4
    rows = st.rows(
        "SELECT coalesce(i.warmup, false), a.class, count(*) FROM attributions a "
        "LEFT JOIN region_instances i ON i.run_id = a.target_run_id AND i.instance_id = a.instance_id "
        "WHERE a.evidence = 'kernel' GROUP BY ALL ORDER BY ALL"
    )
    assert rows == [(False, "exact", 30), (True, "temporal", 10)]
    report = Report(st)
    assert sorted((k.ordinal, k.launches) for k in report.kernels) == [(o, 3) for o in range(10)]
    assert not [c for c in report.coverage() if "unattributed" in c]


# -- 4. the implicit region covers its warm-up repetition (SYNTHETIC) ------------------------------------------------
def test_the_implicit_regions_warm_up_kernels_are_in_it_and_its_ordinals_are_right(tmp_path: Path) -> None:
    """SYNTHETIC, shaped like ``%%argus`` on a cell without regions (driver.py's implicit region): the warm-up
    repetition is recorded after the fact (``record_span``), so its 10 kernels carry no instance id but were launched
    on its thread while it was open; the 3 measured repetitions run inside the region and carry its id."""
    instances = [Inst(1, "cell_1", 0, 10_000, rep=0, index=0, warmup=True)]
    kernels = [Kern(10 + k, f"k{k}", 100 + 900 * k, 500 + 900 * k, None, thread=1, api=50 + 900 * k) for k in range(10)]
    for rep in range(1, 4):
        b = rep * 20_000
        instances.append(Inst(1 + rep, "cell_1", b, b + 10_000, rep=rep, index=rep))
        kernels += [
            Kern(100 * rep + k, f"k{k}", b + 100 + 900 * k, b + 500 + 900 * k, 1 + rep, api=b + 50 + 900 * k)
            for k in range(10)
        ]
    run = SynthRun("impl", instances=instances, kernels=kernels, repetitions=3, warmup=1,
                   threads=[(1, "python3", "", 0)])  # fmt: skip
    st = Store(tmp_path / "impl.duckdb")
    write(st, [run])
    join.attribute_request(st, ["impl"])
    warm = st.rows(
        "SELECT a.class, a.instance_id, count(*) FROM attributions a JOIN kernels k ON k.kernel_key = a.evidence_id "
        "WHERE a.evidence = 'kernel' AND k.instance_id IS NULL GROUP BY ALL"
    )
    assert warm == [("temporal", 1, 10)]  # in the warm-up instance, on its own thread; not unattributed
    report = Report(st, ["impl"])
    ordinals = sorted((k.ordinal, k.launches) for k in report.kernels)
    assert ordinals == [(o, 3) for o in range(10)]  # one row per ordinal, the 3 measured instances, warm-up apart
    assert not [c for c in report.coverage() if "unattributed" in c]
