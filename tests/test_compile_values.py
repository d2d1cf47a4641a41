"""``compile.*`` per region instance: the join turns the static facts of the kernel functions an instance ran into
``instance_values``, for the requests that asked for them.

On the H200 (issue 20) `argus-lab run ... --signals ...,compile.registers` stored the cuBLAS and PyTorch kernels'
registers in their CUPTI launch records, yet the join gave ``compile.registers`` no value ("MISSING values:
compile.registers"): since the issue-14 layout nothing turned per-kernel facts into per-instance values.  These tests
join that recorded store again (tests/data/gpu/wheel/e2e_wheel_h200.duckdb) and a recorded Triton run with the
compiler backend's facts (tests/data/gpu/cases/triton, tests/data/gpu/sass).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from recorded_cases import CASES, DATA, load_case

import argus_lab
from argus_lab import join
from argus_lab.backends.compiler import facts as cf
from argus_lab.join import attribution_sql as q
from argus_lab.plan.catalog import CATALOG
from argus_lab.store import Store

WHEEL_E2E = DATA / "gpu" / "wheel" / "e2e_wheel_h200.duckdb"
COMPILE = tuple(s.name for s in CATALOG.values() if s.name.startswith("compile."))


@pytest.fixture(scope="module")
def wheel_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    local = tmp_path_factory.mktemp("wheel") / WHEEL_E2E.name
    shutil.copy(WHEEL_E2E, local)
    local.chmod(0o644)
    st = Store(local)
    runs = [r[0] for r in st.rows("SELECT run_id FROM runs ORDER BY plan_index")]
    join.attribute_request(st, runs)  # the join of today over the evidence recorded on the H200
    return st


def _compile_values(st: Store, signal: str) -> dict[int, tuple[float, float | None, str, int]]:
    rows = st.rows(
        "SELECT instance_id, inclusive, exclusive, backend, evidence FROM instance_values WHERE signal = ?", [signal]
    )
    return {int(r[0]): (float(r[1]), None if r[2] is None else float(r[2]), str(r[3]), int(r[4])) for r in rows}


def test_the_recorded_request_asked_for_compile_registers(wheel_store: Store) -> None:
    asked = wheel_store.rows("SELECT run_id, backends, signals FROM runs ORDER BY plan_index")
    assert asked[0][1] == ["host", "cupti", "nvml", "compiler"]
    assert "compile.registers" in asked[0][2]
    assert wheel_store.rows("SELECT count(*) FROM kernel_facts") == [(0,)]  # no Triton kernel: records only


def test_compile_registers_is_the_largest_of_the_kernels_each_instance_ran(wheel_store: Store) -> None:
    got = _compile_values(wheel_store, "compile.registers")
    # computed here from the raw launch records, without the join: each instance's own kernels and its subtree's
    inst = wheel_store.rows(
        "SELECT instance_id, coalesce(parent_instance_id, 0) FROM region_instances WHERE run_id = "
        "(SELECT run_id FROM runs WHERE plan_index = 0)"
    )
    parent = {int(i): int(p) for i, p in inst}
    own: dict[int, list[int]] = {}
    for iid, regs in wheel_store.rows("SELECT instance_id, registers FROM kernels WHERE kind = 'kernel'"):
        if iid is not None and int(iid) in parent:
            own.setdefault(int(iid), []).append(int(regs))
    subtree: dict[int, list[int]] = {}
    for iid, regs in own.items():
        node = iid
        while node:
            subtree.setdefault(node, []).extend(regs)
            node = parent[node]
    assert subtree and set(got) == set(subtree)
    for iid, regs in subtree.items():
        inclusive, exclusive, backend, evidence = got[iid]
        assert inclusive == max(regs)
        assert exclusive == (max(own[iid]) if iid in own else None)
        assert evidence == len(regs)  # one launch, one piece of evidence
        assert backend == "compiler"
    # the SGEMM of `outer` (202 registers per thread), the elementwise kernels of `outer/inner` (32 and 28)
    assert sorted({v[0] for v in got.values()}) == [32.0, 202.0]


def test_the_report_shows_compile_registers_per_region_without_summing_it(wheel_store: Store) -> None:
    rep = argus_lab.Report(wheel_store, None)
    rows = {r.path: r for r in rep.regions if r.signal == "compile.registers"}
    assert set(rows) == {"outer", "outer/inner"}
    assert rows["outer"].median == 202 and rows["outer/inner"].median == 32
    assert rows["outer"].rep_median == 202  # a repetition holds two `outer` instances: 202 each, not 404
    assert rows["outer"].backend == "compiler" and rows["outer"].shares == {"exact": 1.0}
    assert rows["outer"].provenance == (f"{rows['outer'].runs}:compiler",)
    assert "compile.registers" in rep.text()


def test_a_request_without_compile_signals_gets_no_compile_values(tmp_path: Path) -> None:
    st = Store(tmp_path / "n.duckdb")
    load_case(st, CASES / "nested", "nested")  # runs row without signals: nobody asked for compile.*
    join.attribute_request(st, ["nested"])
    assert st.rows("SELECT count(*) FROM instance_values WHERE signal LIKE 'compile.%'") == [(0,)]
    assert st.rows("SELECT count(*) FROM instance_values WHERE signal = 'gpu.time'")[0][0] > 0


def _triton_facts() -> tuple[cf.KernelFacts, dict[str, Any]]:
    sass = DATA / "gpu" / "sass"
    meta = json.loads((sass / "scaled_add_kernel.meta.json").read_text())
    facts = cf.triton_facts(
        "scaled_add_kernel", meta["metadata"], meta["n_regs"], meta["n_spills"],
        (sass / "scaled_add_kernel.triton.sass").read_text(),
    )  # fmt: skip
    return facts, meta


def test_triton_kernels_give_every_compile_signal_from_the_compiler_facts(tmp_path: Path) -> None:
    facts, meta = _triton_facts()
    st = Store(tmp_path / "t.duckdb")
    load_case(st, CASES / "triton", "triton")
    st.write({"kernel_facts": cf.fact_rows([facts], "triton")})
    with st.connect(write=True) as con:  # the request asked for every compile.* signal
        con.execute("UPDATE runs SET signals = ?, backends = ['cupti', 'compiler'] WHERE run_id = 'triton'", [COMPILE])
    join.attribute_request(st, ["triton"])
    want = {
        "compile.registers": meta["n_regs"],
        "compile.spills": meta["n_spills"],
        "compile.shared": meta["metadata"]["shared"],
        "compile.num_warps": meta["metadata"]["num_warps"],
        "compile.num_stages": meta["metadata"]["num_stages"],
        "compile.sass_instructions": facts.sass_instructions,
    }
    assert set(want) == set(COMPILE)
    launches = st.rows("SELECT count(*) FROM kernels WHERE name = 'scaled_add_kernel' AND instance_id IS NOT NULL")
    for signal, value in want.items():
        got = _compile_values(st, signal)
        assert got, signal
        assert {v[0] for v in got.values()} == {float(value)}, signal
        assert sum(v[3] for v in got.values()) >= launches[0][0]
    assert want["compile.sass_instructions"] and want["compile.num_warps"]


def test_the_join_knows_every_compile_signal_of_the_catalog_with_its_unit() -> None:
    by_signal = {sig: (col, unit) for sig, col, unit in q.COMPILE_FACTS}
    assert set(by_signal) == set(COMPILE)
    for name in COMPILE:
        assert by_signal[name][1] == CATALOG[name].unit
        assert by_signal[name][0] in {f.name for f in cf.KernelFacts.__dataclass_fields__.values()}
    assert set(COMPILE) <= set(join.NON_ADDITIVE)


def test_the_gpu_scripts_check_finds_every_requested_signal(wheel_store: Store, tmp_path: Path) -> None:
    # the check of scripts/gpu/wheel_check.sh that said "MISSING values: compile.registers" on the H200
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    signals = "host.wall gpu.time hw:dram__bytes_read.sum hw:sm__throughput.avg.pct_of_peak_sustained_elapsed"
    proc = subprocess.run(
        [sys.executable, str(root / "scripts" / "gpu" / "wheel_check.py"), "check", str(wheel_store.path),
         str(tmp_path / "e2e.json"), *signals.split(), "compile.registers", "sys.sm_clock"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "every requested signal has values" in proc.stdout
    assert json.loads((tmp_path / "e2e.json").read_text())["values"]["compile.registers"]["instances"] == 12
