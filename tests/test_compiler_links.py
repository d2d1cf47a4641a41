"""Compiler facts for every Triton kernel that runs, each launch linked to the exact binary (issue 15).

The binaries are real: ``matmul_kernel`` compiled by Triton 3.6 for sm_90 in two configurations (as an autotuner
compiles them; tests/triton_sm90.py), into a real Triton cache folder; ``cuobjdump`` (Triton's bundled copy) reads
their registers, local memory, shared memory and SASS.  What a GPU would add is SYNTHETIC and labelled: the
launch records (registers/shared memory/threads as CUPTI reports them, taken from the compiled binaries) and the
stand-in for Inductor's ``StaticallyLaunchedCudaKernel`` (the attributes Inductor's object keeps after it loaded
the cubin and dropped it).
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest
from join_synth import Inst, Kern, SynthRun, write

from argus_lab import join
from argus_lab.backends.compiler import artifacts as art
from argus_lab.backends.compiler import collector as col
from argus_lab.backends.compiler import facts as cf
from argus_lab.report import Report
from argus_lab.store import Store

pytest.importorskip("triton")
if art.cuobjdump_path() is None:
    pytest.skip("no cuobjdump (Triton's bundled copy or the CUDA toolkit's)", allow_module_level=True)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("triton-cache")


@pytest.fixture(scope="module")
def compiled(cache: Path) -> list[Any]:
    from triton_sm90 import compile_configs

    mp = pytest.MonkeyPatch()
    mp.setenv("TRITON_CACHE_DIR", str(cache))
    try:
        return compile_configs(cache)
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def facts(compiled: list[Any]) -> dict[int, cf.KernelFacts]:
    """{BLOCK_M: facts} of the two configurations, as the collector reads them at the end of a run."""
    c = col.CompilerCollector()
    c.stop()
    out = {}
    for f in c.facts:
        if f.name == "matmul_kernel" and f.config is not None:
            out[int(f.config["BLOCK_M"])] = f
    return out


def test_every_configuration_gets_its_facts_and_sass_mix(facts: dict[int, cf.KernelFacts], compiled: list[Any]) -> None:
    assert set(facts) == {64, 128}
    for bm, f in facts.items():
        k = next(k for k in compiled if k.src.constants[(6,)] == bm)
        assert f.binary_hash == k.hash
        assert f.config == {"BLOCK_M": bm, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3}
        assert f.registers is not None and f.registers > 0  # from the cubin: no GPU loaded it here
        assert f.local_words == 0
        assert f.shared_bytes == k.metadata.shared and f.threads == 128
        assert f.sass_instructions and f.sass_mix and sum(f.sass_mix.values()) == f.sass_instructions
        assert f.sass_mix["tensor_core"] > 0  # tl.dot
        assert f.origin == "triton jit" and f.binary_path.endswith("matmul_kernel.cubin")
    assert facts[128].registers != facts[64].registers or facts[128].shared_bytes != facts[64].shared_bytes


def test_inductor_static_launcher_kernels_get_facts_from_the_cache(compiled: list[Any], cache: Path) -> None:
    """Inductor keeps name, hash, n_regs, n_spills, num_warps and shared, and drops the cubin after loading it."""

    class StaticallyLaunchedCudaKernel:  # SYNTHETIC stand-in: the attributes of Inductor's object after load_kernel
        def __init__(self, k: Any) -> None:
            self.name, self.hash = k.name, k.hash
            self.n_regs, self.n_spills = 96, 0  # what the driver said at load on the H200 (SYNTHETIC value)
            self.num_warps, self.shared = k.metadata.num_warps, k.metadata.shared
            self.cubin_path = self.cubin_raw = None

    k = compiled[1]
    obj = StaticallyLaunchedCudaKernel(k)
    f, text = col.facts_of_launcher(obj, [cache])
    assert (f.name, f.binary_hash, f.registers, f.threads, f.shared_bytes) == (
        "matmul_kernel",
        k.hash,
        96,
        128,
        k.metadata.shared,
    )
    assert f.num_stages == 3 and f.sass_instructions and text and "HGMMA" in text
    assert f.origin == "inductor static launcher"
    # found by the collector's one pass over live objects, whatever module defined the class
    _, launchers = col.kernel_objects()
    assert obj in launchers
    # a hash no cache holds: the facts say what is missing instead of inventing it
    obj.hash = "0" * 64
    g, _ = col.facts_of_launcher(obj, [cache])
    assert (
        g.registers == 96 and g.sass_instructions is None and "not found in the Triton/Inductor caches" in g.unavailable
    )


def test_a_kernel_whose_object_is_gone_is_read_from_the_load_hook_record(compiled: list[Any]) -> None:
    k = compiled[0]
    hook = col._LoadHook()
    hook(None, None, k.name, dict(k.metadata_group), k.hash)  # what Triton passes to kernel_load_end_hook
    binary = col._binary_of_group(k.name, k.hash, hook.loaded[(k.name, k.hash)])
    assert binary is not None and binary.cubin is not None
    f, _ = col.facts_of_binary(binary, "triton load hook")
    assert f.binary_hash == k.hash and f.registers and f.num_stages == 3 and f.sass_instructions


def test_cache_folder_naming_follows_triton(compiled: list[Any], cache: Path) -> None:
    k = compiled[0]
    assert (cache / art.base32(k.hash) / "matmul_kernel.cubin").is_file()
    found = art.find_binary("matmul_kernel", k.hash, [cache])
    assert found is not None and found.metadata["hash"] == k.hash
    usage = art.resource_usage(found.cubin)  # type: ignore[arg-type]
    assert set(usage) == {"matmul_kernel"}
    text = (
        " Function matmul_kernel:\n  REG:254 STACK:0 SHARED:1024 LOCAL:8 CONSTANT[0]:584 TEXTURE:0 SURFACE:0 SAMPLER:0"
    )
    assert art.parse_res_usage(text) == {"matmul_kernel": art.ResourceUsage(254, 0, 1024, 8)}


def _launch(f: cf.KernelFacts, corr: int, t: int, inst: int) -> Kern:
    """A launch record of binary ``f`` (SYNTHETIC: the values CUPTI reports for a Triton launch)."""
    assert f.registers is not None and f.shared_bytes is not None
    return Kern(
        corr,
        f.name,
        t,
        t + 5_000,
        inst,
        api=t - 100,
        registers=f.registers,
        static_smem=f.static_shared or 0,
        dynamic_smem=f.shared_bytes,
        block=(f.threads or 128, 1, 1),
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, facts: dict[int, cf.KernelFacts]) -> Store:
    """An autotuned matmul: instance 0 benchmarks both configurations, instances 1-3 run the chosen one (128)."""
    st = Store(tmp_path_factory.mktemp("links") / "l.duckdb")
    for run_id, scope in (("t-all", ""), ("t-skip", "matmul; instances=1:")):
        ins, ks = [], []
        for i in range(4):
            b = i * 1_000_000
            ins.append(Inst(i + 1, "matmul", b, b + 500_000, rep=i, index=i))
            chosen = [facts[64], facts[128], facts[64], facts[128], facts[128]] if i == 0 else [facts[128]]
            ks += [_launch(f, 100 * (i + 1) + j, b + 1_000 + j * 10_000, i + 1) for j, f in enumerate(chosen)]
        run = SynthRun(run_id, backends=("cupti", "compiler"), instances=ins, kernels=ks, repetitions=4)
        write(st, [run], request_id=f"q-{run_id}")
        st.write({"kernel_facts": cf.fact_rows(list(facts.values()), run_id)})
        if scope:
            st.execute(
                "UPDATE requests SET spec = ? WHERE request_id = ?", [json.dumps({"scope": scope}), f"q-{run_id}"]
            )
        join.attribute_request(st, [run_id])
    return st


def test_each_launch_is_linked_to_the_binary_that_ran(store: Store, facts: dict[int, cf.KernelFacts]) -> None:
    rows = store.rows(
        "SELECT evidence_id, instance_id, class FROM attributions WHERE run_id = 't-all' AND evidence = 'compiler' "
        "ORDER BY 1, 2"
    )
    k64, k128 = facts[64].key, facts[128].key
    # before issue 15 both binaries were "ran in matmul" by name alone, with no instance
    assert rows == sorted(
        [(k64, 1, "exact"), (k128, 1, "exact"), (k128, 2, "exact"), (k128, 3, "exact"), (k128, 4, "exact")]
    )


def test_the_report_says_which_configuration_ran_in_the_measured_instances(store: Store) -> None:
    rows = {r.config["BLOCK_M"]: r for r in Report(store, ["t-all"]).compiler if r.config}
    assert rows[128].ran_in == "matmul #0-3" and rows[128].measured is True
    assert rows[64].ran_in == "matmul #0" and rows[64].measured is True
    skipped = {r.config["BLOCK_M"]: r for r in Report(store, ["t-skip"]).compiler if r.config}
    # `instances=1:`: the autotuner's benchmark instance is outside the measured scope
    assert skipped[128].ran_in == "matmul #1-3 +1 other" and skipped[128].measured is True
    assert skipped[64].ran_in == "matmul (no measured instance) +1 other" and skipped[64].measured is False
    text = Report(store, ["t-skip"]).compiler_table()
    assert "BLOCK_M=128 BLOCK_N=64 BLOCK_K=32 w4 s3" in text and "local mem words" in text
    assert "tensor" in text  # the SASS mix


def test_launch_record_rows_only_for_kernels_without_compiler_facts(store: Store) -> None:
    sources = {r.source for r in Report(store, ["t-all"]).compiler}
    assert sources == {"triton"}  # no duplicate "cupti launch record" row for the Triton kernel


def test_no_leak_of_compiled_objects() -> None:
    gc.collect()
