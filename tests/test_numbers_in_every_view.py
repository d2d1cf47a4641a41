"""The numbers of the recorded stores as the text report and the HTML bundle give them, as shipped (not joined
again): warm-up instances counted apart in the region and kernel tables, the kernels of the main kernel-sequence group
apart from the other groups', commands relative to the project.  tests/test_browser_shipped_stores.py opens the same
stores in chromium."""

from __future__ import annotations

from pathlib import Path

from recorded_cases import shipped

from argus_lab.report import Report, evidence
from argus_lab.views.bundle import EXPORT, build

DATA = Path(__file__).parent / "data"


def _shipped(tmp_path: Path, rel: str) -> Report:
    st = shipped(tmp_path, rel)
    return Report(st, [r[0] for r in st.rows("SELECT run_id FROM runs ORDER BY started_ns")])


def test_the_text_region_table_counts_warm_up_instances_apart(tmp_path: Path) -> None:
    report = _shipped(tmp_path, "notebooks/gpu_walkthrough_h200.duckdb")
    table = report.region_table()
    header = table.splitlines()[0].split()
    assert header[:5] == ["region", "signal", "instances", "warm-up", "(apart)"]
    decode = next(ln for ln in table.splitlines() if ln.startswith("decode ") and " gpu.time " in ln).split()
    assert decode[2:4] == ["10", "3"]  # 10 measured instances of the timing run, its 3 warm-up ones apart
    assert (
        "(warm-up: 42 instance(s) of 5 region path(s) ran before the measured repetitions, kept apart: warm-up is"
        in (table)
    )


def test_the_text_kernel_table_says_warm_up_launches_are_not_in_it(tmp_path: Path) -> None:
    report = _shipped(tmp_path, "notebooks/gpu_walkthrough_h200.duckdb")
    assert "kept apart: their kernel launches are not in this table" in report.kernel_table()
    assert sum(k.launches for k in report.kernels if k.path == "decode/layer/attn") == 7 * 40  # measured only


def test_the_bundle_carries_each_regions_warm_up_and_relative_commands(tmp_path: Path) -> None:
    bundle = build(_shipped(tmp_path, "gpu/e2e_nested_h200.duckdb"))
    warm = {r["path"]: r["warmup_instances"] for r in bundle["regions"]}
    # --repeat 2 --warmup 1, outer twice a repetition: 4 measured instances, the warm-up repetition's 2 apart
    assert warm["outer"] == 2 and bundle["summary"]["warmup"]["outer"] == 2
    assert {r["instances"] for r in bundle["regions"] if r["path"] == "outer"} == {4}
    commands = [r["command"] for r in bundle["runs"]]
    assert commands[0] == "in-process: python examples/gpu/nested_torch.py"
    assert not any("/work/main/" in c for c in commands)
    assert evidence.relative_paths("python /work/main/x.py /work/mainly/y.py", "/work/main") == (
        "python x.py /work/mainly/y.py"
    )


def test_kernels_by_region_keep_the_other_kernel_sequence_groups_apart(tmp_path: Path) -> None:
    report = _shipped(tmp_path, "gpu/issue15/autotune.duckdb")
    rows = evidence.kernel_groups(report.store, list(report.run_ids), 100).dicts()
    main = [r for r in rows if r["main_group"]]
    assert [(r["path"], r["name"], r["count"]) for r in main] == [("matmul", "matmul_kernel", 6)]  # 2 runs x 3
    assert sum(r["count"] for r in rows if not r["main_group"]) > 1000  # instance 0, which autotuned


def test_a_kernel_of_another_kernel_sequence_does_not_take_the_main_groups_counters(tmp_path: Path) -> None:
    """ncu replayed the autotuned matmul's instances 1-3 (``--scope 'matmul; instances=1:'``): their kernel at
    ordinal 0 has the counters; instance 0 (which autotuned, another kernel sequence) also starts with matmul_kernel
    at ordinal 0, but ncu never measured it: no counters there (it used to show the main group's)."""
    report = _shipped(tmp_path, "gpu/issue15/autotune.duckdb")
    first = [k for k in report.kernels if k.ordinal == 0 and k.name == "matmul_kernel"]
    assert {k.main_group for k in first} == {True, False}
    assert all(k.counters for k in first if k.main_group)
    assert not [k.counters for k in first if not k.main_group and k.counters]


def test_every_kernel_table_of_the_bundle_counts_the_scoped_launches_of_report_kernels(tmp_path: Path) -> None:
    """The autotuned matmul's second timing run was scoped to ``matmul; instances=1:``: its instance 0 (the
    autotuner's 1,493 benchmark launches) is out of scope.  ``Report.kernels`` leaves it out; the bundle's "kernels
    by region" table counted it (2,767 launches in the collapsed other group beside 1,274 by ordinal).  Now every
    kernel table reads the same scoped records: per (path, name, group) the launches agree."""
    report = _shipped(tmp_path, "gpu/issue15/autotune.duckdb")
    assert "matmul; instances=1:" in report.scopes.values()
    want: dict[tuple[str, str, bool], int] = {}
    for k in report.kernels:
        key = (k.path, k.name, k.main_group)
        want[key] = want.get(key, 0) + k.launches
    bundle = build(report, EXPORT)  # an export embeds every row of these tables (a notebook output the first 300)
    tables = bundle["tables"]
    groups = [dict(zip(tables["kernel_groups"]["columns"], r, strict=True)) for r in tables["kernel_groups"]["rows"]]
    got = {(r["path"], r["name"], r["main_group"]): r["count"] for r in groups if r["kind"] == "kernel"}
    assert got == want
    assert sum(n for (_, _, main), n in got.items() if not main) == 1274
    joined: dict[tuple[str, str, bool], int] = {}
    for r in bundle["joined"]["kernels"]:
        key = (r["path"], r["name"], r["main_group"])
        joined[key] = joined.get(key, 0) + r["launches"]
    assert joined == want
    records = tables["kernels"]  # the kernel records: the same ones, warm-up (none here) marked
    assert records["total"] == bundle["summary"]["kernels"] == sum(want.values())
