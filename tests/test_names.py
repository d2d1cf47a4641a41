"""Kernel names for people (argus_lab/report/names.py): a maintained demangler, then shortened for tables.

The mangled names are real ones from the H200 recordings in tests/data (CUPTI and ncu report them mangled).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from argus_lab.report import names

DATA = Path(__file__).parent / "data" / "gpu"
FILL = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIiEESt5arrayIPcLm1EEEEviT0_T1_"


def test_demangled_as_the_cxx_runtime_does() -> None:
    assert names.demangler() in ("cxxfilt", "c++filt")
    assert names.demangle(FILL) == (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >"
        "(int, at::native::FillFunctor<int>, std::array<char*, 1ul>)"
    )
    # names that are not mangled (Triton, cuBLAS's extern "C" kernels) stay as they are
    assert names.demangle("matmul_kernel") == "matmul_kernel"
    assert names.demangle("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32") == (
        "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32"
    )


def test_display_names_drop_return_type_and_parameters_and_fold_long_templates() -> None:
    assert names.display_name(FILL, width=120) == (
        "at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >"
    )
    assert names.display_name(FILL) == (  # 99 characters: nested template arguments folded first
        "at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<…>, std::array<…> >"
    )
    short = names.display_name(FILL, width=60)
    assert short == "at::native::vectorized_elementwise_kernel<…>"
    assert names.display_name("triton_poi_fused_add_0") == "triton_poi_fused_add_0"
    clamp = (  # recorded on the H200 (tests/data/gpu/cases/nested): a lambda inside an anonymous namespace
        "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_49_GLOBAL__N__d2ba64fb_16_TensorCompare_cu_71e06f4e19"
        "launch_clamp_scalarERNS_18TensorIteratorBaseEN3c106ScalarES6_NS0_6detail11ClampLimitsEENKUlvE_clEvENKUlvE5_"
        "clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_"
    )
    assert "(anonymous namespace)::launch_clamp_scalar" in names.demangle(clamp)
    assert names.display_name(clamp) == "at::native::vectorized_elementwise_kernel<…>"
    # a space inside parentheses is not the end of a return type
    assert names._strip_signature("void at::native::(anonymous namespace)::k<float>(int)") == (
        "at::native::(anonymous namespace)::k<float>"
    )


def test_every_recorded_kernel_name_gets_a_readable_form() -> None:
    recorded = set(pq.read_table(DATA / "cases" / "nested" / "cupti" / "kernel.parquet").column("name").to_pylist())
    mangled = [n for n in recorded if n.startswith("_Z")]
    assert mangled, "the recorded nested case has C++ kernels"
    out = names.demangle_all(recorded)
    assert set(out) == recorded
    for n in mangled:
        assert not out[n].startswith("_Z") and not names.display_name(n).startswith("_Z")


def test_without_cxxfilt_the_cplusfilt_program_demangles(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    if shutil.which("c++filt") is None:
        pytest.skip("no c++filt program on this machine")
    monkeypatch.setattr(names, "_cxxfilt", lambda: None)
    names.demangle.cache_clear()
    try:
        assert names.demangler() == "c++filt"
        assert names.demangle_all([FILL, "matmul_kernel"])[FILL].startswith("void at::native::vectorized")
    finally:
        names.demangle.cache_clear()


def test_the_perfetto_export_names_kernels_as_kineto_does(tmp_path: Path) -> None:
    """Chrome/Perfetto traces (like torch.profiler's) show demangled names; the recorded one stays in the args and
    the Kineto importer takes it back (so an export re-imports to the same kernels)."""
    import json

    from test_join_recorded import load_case

    from argus_lab import join
    from argus_lab.store import Store
    from argus_lab.views.perfetto import GPU_PID, write_trace

    st = Store(tmp_path / "n.duckdb")
    load_case(st, DATA / "cases" / "nested", "nested")
    join.attribute_request(st, ["nested"])
    write_trace(st, "nested", tmp_path / "t.json")
    gpu = [
        e
        for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"]
        if e["ph"] == "X" and e["pid"] >= GPU_PID
    ]
    mangled = [e for e in gpu if "mangled" in e["args"]]
    assert mangled and all(e["name"] == names.demangle(e["args"]["mangled"]) for e in mangled)
    assert not any(e["name"].startswith("_Z") for e in gpu)
