"""Compiler facts without a GPU: SASS text and Triton metadata recorded on the H200 (tests/data/gpu/sass)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from argus_lab.backends.compiler import facts as cf
from argus_lab.backends.cupti import decode as dec

DATA = Path(__file__).parent / "data" / "gpu"
SASS = DATA / "sass"


def test_both_sass_formats_give_the_same_instruction_mix() -> None:
    triton = cf.parse_sass((SASS / "scaled_add_kernel.triton.sass").read_text())
    cuobjdump = cf.parse_sass((SASS / "scaled_add_kernel.cuobjdump.sass").read_text())
    assert [f.name for f in triton] == ["scaled_add_kernel"]
    assert [f.name for f in cuobjdump] == ["scaled_add_kernel"]
    assert triton[0].opcodes == cuobjdump[0].opcodes
    mix = triton[0].categories
    # x * alpha + exp(y) on float4 vectors: two vector loads per input half, two stores, MUFU.EX2 for exp
    assert triton[0].opcodes["LDG"] == 4
    assert triton[0].opcodes["STG"] == 2
    assert triton[0].opcodes["MUFU"] == 8
    assert mix["global_memory"] == 6
    assert sum(mix.values()) == triton[0].instructions


def test_predicated_and_modified_instructions_count_by_base_opcode() -> None:
    text = "\n".join(
        [
            "Function : k",
            "        /*0000*/              @!P0 LDG.E.128 R4, desc[UR4][R2.64] ;  /* 0x0 */",
            "        /*0010*/               @P1 BRA 0x40 ;",
            "        /*0020*/                   HMMA.16816.F32 R0, R4, R8, R0 ;",
            "                                                          /* 0x000fe20000000a00 */",
            "        /*0030*/                   EXIT ;",
        ]
    )  # SYNTHETIC lines in cuobjdump's layout
    (f,) = cf.parse_sass(text)
    assert f.opcodes == {"BRA": 1, "EXIT": 1, "HMMA": 1, "LDG": 1}
    assert f.categories == {"global_memory": 1, "control": 2, "tensor_core": 1}
    assert cf.parse_sass("no functions here") == []


def test_triton_facts_from_recorded_metadata() -> None:
    meta = json.loads((SASS / "scaled_add_kernel.meta.json").read_text())
    facts = cf.triton_facts(
        "scaled_add_kernel",
        meta["metadata"],
        meta["n_regs"],
        meta["n_spills"],
        (SASS / "scaled_add_kernel.cuobjdump.sass").read_text(),
    )
    assert facts.registers == 27
    assert facts.local_words == 0
    assert facts.shared_bytes == 0
    assert facts.num_warps == 4
    assert facts.num_stages == 3
    assert facts.binary_hash == meta["metadata"]["hash"]
    assert facts.sass_instructions == 96
    assert facts.unavailable == ""
    assert facts.key == f"bin:scaled_add_kernel:{facts.binary_hash}"
    no_sass = cf.triton_facts("scaled_add_kernel", meta["metadata"], 27, 0, None)
    assert no_sass.sass_mix is None
    assert "not available" in no_sass.unavailable


def test_triton_facts_join_the_launched_kernel_by_name() -> None:
    raw = dec.load_raw(DATA / "cases" / "triton" / "cupti")
    kernels = dec.kernel_table(raw, "r")
    assert set(kernels["name"].tolist()) == {"scaled_add_kernel"}
    # the registers CUPTI saw at launch are the compiler's
    assert set(kernels["registers"].tolist()) == {27}


def test_activity_facts_state_what_is_not_available() -> None:
    raw = dec.load_raw(DATA / "cases" / "nested" / "cupti")
    cols = dec.store_kernels(dec.kernel_table(raw, "r"))
    facts = cf.activity_facts(cols)
    by_name = {f.name: f for f in facts}
    assert len(facts) == 3
    sgemm = next(f for n, f in by_name.items() if "sgemm" in n)
    assert sgemm.registers == 202
    assert sgemm.source == "activity"
    assert sgemm.num_warps is None
    assert "binary not available" in sgemm.unavailable
    assert "49152 B" in sgemm.unavailable  # dynamic shared memory of the launch
    assert cf.activity_facts(cols, known=by_name) == []


def test_fact_and_metric_rows(tmp_path: Path) -> None:
    from argus_lab.store import Store

    meta = json.loads((SASS / "scaled_add_kernel.meta.json").read_text())
    facts = [
        cf.triton_facts(
            "scaled_add_kernel", meta["metadata"], 27, 0, (SASS / "scaled_add_kernel.triton.sass").read_text()
        )
    ]
    m = cf.metric_rows(facts, "r", "r:compiler")
    assert dict(zip(m["signal"], m["value"], strict=True)) == {
        "compile.registers": 27.0,
        "compile.spills": 0.0,
        "compile.shared": 0.0,
        "compile.num_warps": 4.0,
        "compile.num_stages": 3.0,
        "compile.sass_instructions": 96.0,
    }
    store = Store(tmp_path / "s.duckdb")
    store.write({"kernel_facts": cf.fact_rows(facts, "r"), "metrics": m})
    row = store.rows("SELECT registers, sass_mix->>'global_memory' FROM kernel_facts")
    assert row == [(27, "6")]
    inst = pq.read_table(DATA / "cases" / "triton" / "instances.parquet").to_pydict()
    assert set(inst["path"]) == {"triton_add"}
