"""The join and the Report on evidence recorded on the H200 (tests/data/gpu, see tests/data/README.md).

Each case of ``examples/gpu/`` was recorded under the CUPTI and NVML collectors; here its raw CUPTI records are
decoded again (``backends.cupti.decode``), stored with its region instances and NVML samples, and joined.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from recorded_cases import CASES, DATA, load_case

from argus_lab import join
from argus_lab.report import Report
from argus_lab.store import Store

JOIN_CASES = DATA / "join"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    st = Store(tmp_path_factory.mktemp("recorded") / "rec.duckdb")
    for case in ("nested", "two_streams", "graph", "backward", "edge"):
        load_case(st, CASES / case, case)
    join.attribute_request(st, ["nested", "two_streams", "graph", "backward", "edge"])
    return st


def kernel_attr(store: Store, run: str) -> list[tuple[Any, ...]]:
    """(name, stream, class, weight, path, reason) of every kernel record of a run."""
    return store.rows(
        "SELECT k.name, k.stream_id, a.class, a.weight, i.path, a.reason, k.end_ns - i.end_ns "
        "FROM attributions a JOIN kernels k ON k.run_id = a.run_id AND k.kernel_key = a.evidence_id "
        "LEFT JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id "
        "WHERE a.run_id = ? AND a.evidence = 'kernel' ORDER BY k.start_ns",
        [run],
    )


def values(store: Store, run: str, path: str, signal: str) -> list[tuple[float, float | None]]:
    return store.rows(
        "SELECT v.inclusive, v.exclusive FROM instance_values v JOIN region_instances i USING (run_id, instance_id) "
        "WHERE v.run_id = ? AND i.path = ? AND v.signal = ? ORDER BY i.start_ns",
        [run, path, signal],
    )


def test_two_streams_overlapping_in_one_region(store: Store) -> None:
    rows = kernel_attr(store, "two_streams")
    assert {r[1] for r in rows} == {13, 17} and {r[2] for r in rows} == {"exact"}
    time_ = values(store, "two_streams", "two_streams", "gpu.time")
    span = values(store, "two_streams", "two_streams", "gpu.span")
    s1 = values(store, "two_streams", "two_streams/s1", "gpu.time")
    s2 = values(store, "two_streams", "two_streams/s2", "gpu.time")
    for (t, _), (sp, ex), (a, _), (b, _) in zip(time_, span, s1, s2, strict=True):
        assert t == a + b  # kernel time of both streams adds up in the parent (inclusive)
        assert sp < t  # the streams overlapped: the span is shorter than the summed kernel time
        assert ex is None


def test_kernel_running_after_its_region_exited(store: Store) -> None:
    tail = [r for r in kernel_attr(store, "edge") if r[4] == "tail"]
    assert tail and all(r[2] == "exact" for r in tail)
    late = [r for r in tail if r[6] > 0]
    assert late, "the 4096^2 matmul should still run after `tail` exits on the host"
    assert all("past the region's host exit" in r[5] for r in late)


def test_region_that_ran_no_kernel(store: Store) -> None:
    assert values(store, "edge", "host_only", "gpu.kernels") == [(0.0, 0.0)] * 3
    assert values(store, "edge", "host_only", "gpu.span") == []


def test_kernels_outside_every_region(store: Store) -> None:
    outside = [r for r in kernel_attr(store, "edge") if r[2] == "unattributed"]
    assert len(outside) == 3  # torch.cos before the first region, once per repetition
    assert all(r[4] is None and "outside every region" in r[5] for r in outside)


def test_autograd_backward_thread_is_temporal(store: Store) -> None:
    rows = kernel_attr(store, "backward")
    other = [r for r in rows if r[2] != "exact"]
    assert len(other) == 3 * 14  # the backward kernels: launched by autograd's thread, no external correlation id
    assert {r[2] for r in other} == {"temporal"}
    assert {r[4] for r in other} == {"train_step/backward"}  # the one region open while they were launched
    assert all("only region open" in r[5] for r in other)
    # the region's value now includes them, and says how: 1 kernel launched on the main thread (exact), 14 by
    # autograd's thread (temporal)
    row = store.rows(
        "SELECT avg(w_exact), avg(w_temporal) FROM instance_values v JOIN region_instances i USING (run_id, "
        "instance_id) WHERE v.run_id = 'backward' AND i.path = 'train_step/backward' AND v.signal = 'gpu.kernels'"
    )[0]
    assert row == (1.0, 14.0)


def test_cuda_graph_replays(store: Store) -> None:
    rows = kernel_attr(store, "graph")
    assert len(rows) == 18 and {r[2] for r in rows} == {"exact"} and {r[4] for r in rows} == {"graph"}
    assert all("CUDA graph" in r[5] for r in rows)
    assert values(store, "graph", "graph", "gpu.kernels") == [(6.0, 6.0)] * 3


def test_nested_inclusive_exclusive(store: Store) -> None:
    outer = values(store, "nested", "outer", "gpu.time")
    inner = values(store, "nested", "outer/inner", "gpu.time")
    assert len(outer) == len(inner) == 4
    for (inc, exc), (i_inc, _) in zip(outer, inner, strict=True):
        assert inc == exc + i_inc and exc > 0
    wall = values(store, "nested", "outer", "host.wall")
    assert wall == []  # the recording stored no host metrics: nothing is made up


def test_nvml_samples_split_over_instances(store: Store) -> None:
    sums = store.rows(
        "SELECT evidence_id, sum(weight) FROM attributions WHERE run_id = 'nested' AND evidence = 'sample' GROUP BY 1"
    )
    assert sums and all(abs(s - 1.0) < 1e-9 for _, s in sums)
    # the first `outer` (76 ms, compiling) spans the samples: a time-weighted mean between the samples' extremes;
    # the three later instances start after the sampler's last window: no value rather than an extrapolated one
    power = values(store, "nested", "outer", "sys.power")
    sql = "SELECT min(value), max(value) FROM samples WHERE run_id = 'nested' AND signal = 'sys.power'"
    lo, hi = store.rows(sql)[0]
    assert len(power) == 1 and lo - 1e-6 <= power[0][0] <= hi + 1e-6


def test_report_on_recorded_evidence(store: Store) -> None:
    rep = Report(store, ["edge"])
    rows = {(r.path, r.signal): r for r in rep.regions}
    assert rows[("tail", "gpu.time")].attribution == "exact"
    assert rows[("tail", "gpu.time")].median > 100_000  # the 4096^2 fp32 matmul: > 100 us
    assert rows[("copies", "gpu.memcpy_bytes")].median > 0
    assert rows[("host_only", "gpu.kernels")].median == 0
    kernel = {a.evidence: a for a in rep.attribution}["kernel"]
    assert kernel.shares == pytest.approx({"exact": 6 / 9, "unattributed": 3 / 9})  # torch.cos outside, per rep
    trace = rep.trace("tail", "gpu.time")
    assert trace and all(t["timestamps"].startswith("measured") for t in trace)
    import jsonschema

    schema = json.loads((Path(__file__).parent.parent / "docs" / "report-json.schema.json").read_text())
    jsonschema.validate(json.loads(rep.to_json()), schema)


@functools.cache
def ncu_kernels() -> tuple[Any, ...]:
    """The kernels of the recorded ncu report as ``ncu_parse.read_report`` read them on the H200
    (``triton_nested.expected.json``; reading the report here would need ncu_report imported before duckdb,
    which crashes otherwise)."""
    from argus_lab.backends.ncu.parse import NcuKernel

    doc = json.loads((DATA / "gpu" / "ncu" / "triton_nested.expected.json").read_text())
    return tuple(NcuKernel(**{**k, "metrics": {m: tuple(v) for m, v in k["metrics"].items()}}) for k in doc)


def load_ncu(store: Store, run_id: str, plan_index: int) -> None:
    """The recorded Nsight Compute report of triton_nested.py as run ``run_id``."""
    from argus_lab.backends.ncu import parse as ncu_parse

    ks = ncu_kernels()
    settings = {"replay_mode": "kernel", "clock_control": "base", "cache_control": "all"}
    store.write(
        {
            "runs": {"run_id": [run_id], "plan_index": [plan_index], "backends": [["ncu"]], "status": ["ok"]},
            "ncu_kernels": ncu_parse.kernel_rows(ks, run_id),
            "metrics": ncu_parse.metric_rows(ks, run_id, f"{run_id}:ncu"),
            "provenance": {
                "provenance_id": [f"{run_id}:ncu"],
                "run_id": [run_id],
                "backend": ["ncu"],
                "backend_version": ["ncu 2025.3.1"],
                "settings": [json.dumps(settings)],
                "clocks": [json.dumps({"clock_control": "base"})],
                "timestamps": ["none (counter replay)"],
            },
        }
    )


@pytest.fixture(scope="module")
def joined(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """tests/data/join: the triton_nested timing run and its variant, each with the real ncu report; `shared`."""
    st = Store(tmp_path_factory.mktemp("joincases") / "j.duckdb")
    load_case(st, JOIN_CASES / "tn-timing", "tn-timing", 0)
    load_case(st, JOIN_CASES / "tn-variant", "tn-variant", 0)
    load_case(st, JOIN_CASES / "shared", "shared", 0)
    load_ncu(st, "ncu-a", 1)
    load_ncu(st, "ncu-b", 1)
    join.attribute_request(st, ["tn-timing", "ncu-a"])
    join.attribute_request(st, ["tn-variant", "ncu-b"])
    join.attribute_request(st, ["shared"])
    return st


def test_one_kernel_serving_two_regions_is_ambiguous(joined: Store) -> None:
    rows = [r for r in kernel_attr(joined, "shared") if r[2] != "exact"]
    assert [(r[2], r[3], r[4]) for r in sorted(rows, key=lambda r: r[4])] == [
        ("ambiguous", 0.5, "decode"),
        ("ambiguous", 0.5, "prefetch"),
    ]
    assert "neg_kernel" in rows[0][0] and all("2 region instances were open" in r[5] for r in rows)
    exact = [r for r in kernel_attr(joined, "shared") if r[2] == "exact"]
    assert len(exact) == 1 and exact[0][4] == "decode"  # the sgemm launched on decode's own thread


def test_ncu_report_joins_timing_run_by_ordinal(joined: Store) -> None:
    rows = joined.rows(
        "SELECT a.class, i.path, n.name FROM attributions a JOIN ncu_kernels n ON n.run_id = a.run_id "
        "AND n.kernel_key = a.evidence_id JOIN region_instances i ON i.run_id = a.target_run_id "
        "AND i.instance_id = a.instance_id WHERE a.run_id = 'ncu-a' ORDER BY i.start_ns, n.ordinal"
    )
    assert (
        rows
        == [
            ("ordinal", "outer", "scale_kernel"),
            ("ordinal", "outer/inner", "exp_add_kernel"),
            ("ordinal", "outer/inner", "scale_kernel"),
        ]
        * 2
    )
    dram = values(joined, "tn-timing", "outer", "hw:dram__bytes_read.sum")
    per_kernel = joined.rows(
        "SELECT value FROM metrics WHERE run_id = 'ncu-a' AND signal = 'hw:dram__bytes_read.sum' ORDER BY kernel_key"
    )
    assert len(dram) == 2 and dram[0][0] > 3 * 4e6  # three kernels reading >= 4 MB each, under cache flush
    assert sum(v for (v,) in per_kernel) == pytest.approx(sum(inc for inc, _ in dram))
    rep = Report(joined, ["tn-timing", "ncu-a"])
    k = {(r.path, r.ordinal, r.name): r for r in rep.kernels}
    assert "hw:dram__bytes_read.sum" in k[("outer/inner", 0, "exp_add_kernel")].counters
    counter = {(c.path, c.signal): c for c in rep.counters}[("outer", "hw:dram__bytes_read.sum")]
    assert counter.shares == {"ordinal": 1.0} and "clock_control=base" in counter.settings


def test_ncu_report_mismatches_a_run_with_another_kernel_order(joined: Store) -> None:
    rows = joined.rows(
        "SELECT a.class, a.reason FROM attributions a WHERE a.run_id = 'ncu-b' AND a.evidence = 'ncu_kernel'"
    )
    classes = sorted(r[0] for r in rows)
    assert classes == ["mismatch", "mismatch", "ordinal", "ordinal", "ordinal", "ordinal"]
    reason = next(r[1] for r in rows if r[0] == "mismatch")
    assert "differ at ordinal 0" in reason and "exp_add_kernel" in reason and "scale_kernel" in reason
    dram = values(joined, "tn-variant", "outer/inner", "hw:dram__bytes_read.sum")
    assert dram[0][0] is not None and dram[1] == (None, None)  # kept and flagged, no value forced on it
    rep = Report(joined, ["tn-variant", "ncu-b"])
    assert any("mismatch" in c and "exp_add_kernel" in c for c in rep.coverage())


def test_compiler_facts_of_the_recorded_triton_kernel(tmp_path: Path) -> None:
    from argus_lab.backends.compiler import facts as cf

    sass = DATA / "gpu" / "sass"
    meta = json.loads((sass / "scaled_add_kernel.meta.json").read_text())
    facts = cf.triton_facts(
        "scaled_add_kernel", meta["metadata"], meta["n_regs"], meta["n_spills"],
        (sass / "scaled_add_kernel.triton.sass").read_text(),
    )  # fmt: skip
    st = Store(tmp_path / "c.duckdb")
    load_case(st, CASES / "triton", "triton")
    st.write({"kernel_facts": cf.fact_rows([facts], "triton")})
    summary = join.attribute_request(st, ["triton"])
    assert summary.counts["compiler"] == {"exact": 1}  # the binary ran in the recorded run's instances
    # each recorded launch is linked to the binary by its own facts: 27 registers (the compiler's n_regs and the
    # driver's launch record agree), 0 B dynamic shared memory, 4 warps = 128 threads per block
    linked = st.rows(
        "SELECT count(DISTINCT instance_id), any_value(reason) FROM attributions WHERE run_id = 'triton' "
        "AND evidence = 'compiler' AND class = 'exact'"
    )
    instances = st.rows("SELECT count(*) FROM region_instances WHERE run_id = 'triton'")[0][0]
    assert linked[0][0] == instances and "27 registers/thread, 0 B dynamic shared memory, 128 threads" in linked[0][1]
    rep = Report(st, ["triton"])
    rows = {r.source: r for r in rep.compiler if r.name == "scaled_add_kernel"}
    assert set(rows) == {"triton"}  # the launch record adds no second row for a kernel with compiler facts
    assert rows["triton"].registers == 27
    assert rows["triton"].spill_words == 0 and rows["triton"].paths == "triton_add"
    assert rows["triton"].ran_in.startswith("triton_add #0-") and rows["triton"].measured is True
    assert rows["triton"].sass_instructions and rows["triton"].num_warps
    assert "scaled_add_kernel" in rep.compiler_table()
