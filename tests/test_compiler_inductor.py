"""Compiler facts of torch.compile's kernels, and a collector that no odd live object can stop (issue 15).

On the H200 the torch.compile'd MLP's run failed at the end with "compiler failed to stop: weakly-referenced object
no longer exists": the collector's pass over the garbage collector's objects asked a dead weak proxy (torch keeps
many) for its class, so Inductor's kernel ``triton_per_fused_gelu_native_layer_norm_0`` got no facts and the report
called it "not a Triton kernel".

The kernels here are real: Triton 3.6 compiles them for sm_90 (tests/triton_sm90.py) into a Triton cache laid out as
Inductor's (``<TORCHINDUCTOR_CACHE_DIR>/triton/0/<base32 hash>/``).  Inductor's launcher is torch's own
``StaticallyLaunchedCudaKernel`` built from the compiled kernel as Inductor builds it (``_cubin_path`` set first);
what its ``load_kernel`` does on a GPU (the driver loads the cubin and reports registers and local memory, then the
object drops the cubin path and bytes) is applied by hand with the numbers ``cuobjdump`` reads from the same cubin.
The H200 runs torch 2.11, whose class (torch/_inductor/runtime/static_cuda_launcher.py) holds the same attributes
without the base class of later versions: :class:`StaticallyLaunchedCudaKernel` below is a SYNTHETIC stand-in with
exactly that attribute set.  Dead weak proxies and an object whose attributes raise are real Python objects.
"""

from __future__ import annotations

import gc
import importlib
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from join_synth import Inst, Kern, SynthRun, write

from argus_lab import join
from argus_lab.backends.compiler import artifacts as art
from argus_lab.backends.compiler import collector as col
from argus_lab.report import Report
from argus_lab.run.driver import drive
from argus_lab.run.workload import Workload
from argus_lab.store import Store

pytest.importorskip("triton")
if art.cuobjdump_path() is None:
    pytest.skip("no cuobjdump (Triton's bundled copy or the CUDA toolkit's)", allow_module_level=True)

NAME = "triton_per_fused_gelu_native_layer_norm_0"


@pytest.fixture(scope="module")
def inductor_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("torchinductor_test")


@pytest.fixture
def inductor_env(inductor_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """At the end of the run: Inductor's cache folder set, no TRITON_CACHE_DIR (Inductor sets that only while it
    compiles), so the collector finds the binary through Inductor's folder alone."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor_cache))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    return inductor_cache


def _compile(cache: Path) -> Any:
    from triton_sm90 import compile_inductor_like

    mp = pytest.MonkeyPatch()
    mp.setenv("TRITON_CACHE_DIR", str(cache / "triton" / "0"))
    try:
        return compile_inductor_like()
    finally:
        mp.undo()


class StaticallyLaunchedCudaKernel:
    """SYNTHETIC stand-in for torch 2.11's ``StaticallyLaunchedCudaKernel`` after ``load_kernel``: the attributes
    its ``__init__`` sets from the CompiledKernel, with ``function``, ``n_regs``, ``n_spills`` from the driver and
    ``cubin_path``/``cubin_raw`` cleared (torch/_inductor/runtime/static_cuda_launcher.py, torch 2.11)."""

    def __init__(self, kernel: Any, n_regs: int, n_spills: int) -> None:
        self.name = kernel.src.fn.__name__
        self.cubin_raw: bytes | None = kernel.asm["cubin"]
        self.is_rocm = False
        self.cubin_path: str | None = kernel._cubin_path
        self.arg_names = kernel.src.fn.arg_names
        self.declared_constexprs = [4, 5]
        self.hash = kernel.hash
        self.num_warps = kernel.metadata.num_warps
        self.shared = kernel.metadata.shared
        self.has_global_scratch = hasattr(kernel.metadata, "global_scratch_size")
        self.has_profile_scratch = hasattr(kernel.metadata, "profile_scratch_size")
        self.arg_tys = "OOii"
        self.full_constexprs = [4, 5]
        self.function: int | None = 0x7F00_0000_1000  # load_kernel: the CUfunction handle
        self.n_regs, self.n_spills = n_regs, n_spills
        self.cubin_path = None
        self.cubin_raw = None


def _torch_launcher(kernel: Any, n_regs: int, n_spills: int) -> Any:
    """torch's own class (this machine's torch), built as Inductor builds it, then what ``load_kernel`` leaves."""
    for mod_name in ("torch._inductor.runtime.static_triton_launcher", "torch._inductor.runtime.static_cuda_launcher"):
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        cls = getattr(mod, "StaticallyLaunchedCudaKernel", None)
        if cls is not None:
            break
    else:
        pytest.skip("this torch has no StaticallyLaunchedCudaKernel")
    obj = cls(kernel)
    obj.function, obj.n_regs, obj.n_spills = 0x7F00_0000_1000, n_regs, n_spills  # what the driver returned
    if hasattr(obj, "module"):
        obj.module = 0x7F00_0000_0000
    obj.cubin_path = None
    obj.cubin_raw = None
    return obj


@pytest.fixture(params=["torch", "torch 2.11"])
def launcher(request: pytest.FixtureRequest, inductor_cache: Path) -> Iterator[tuple[Any, str, int]]:
    """An Inductor launcher whose CompiledKernel is gone (Inductor keeps only the launcher), its hash and registers."""
    kernel = _compile(inductor_cache)
    kernel._cubin_path = kernel.metadata_group[f"{NAME}.cubin"]
    usage = art.resource_usage(Path(kernel._cubin_path))[NAME]  # what the driver reports at load
    make = _torch_launcher if request.param == "torch" else StaticallyLaunchedCudaKernel
    obj = make(kernel, usage.registers, usage.local // 4)
    hex_hash = kernel.hash
    del kernel
    gc.collect()
    yield obj, hex_hash, usage.registers
    del obj
    gc.collect()


def test_inductor_launchers_are_found_after_their_compiled_kernel_is_gone(
    launcher: tuple[Any, str, int], inductor_env: Path
) -> None:
    obj, hex_hash, regs = launcher
    assert obj.cubin_path is None and obj.cubin_raw is None  # nothing to read the binary from but the cache
    c = col.CompilerCollector()
    c.stop()
    (f,) = [f for f in c.facts if f.name == NAME]
    assert f.origin == "inductor static launcher" and f.binary_hash == hex_hash
    assert f.registers == regs and f.local_words == 0
    assert (f.num_warps, f.num_stages, f.threads) == (2, 1, 64)
    assert f.shared_bytes == obj.shared  # Triton's `shared` is what the launcher passes as dynamic shared memory
    assert f.sass_instructions and f.sass_mix and sum(f.sass_mix.values()) == f.sass_instructions
    assert f.binary_path.startswith(str(inductor_env / "triton" / "0"))
    assert f.unavailable == ""


class StaticallyLaunchedBrokenKernel:
    """SYNTHETIC: a launcher-named object whose attributes raise (the collector must skip it, not fail)."""

    @property
    def hash(self) -> str:
        msg = "not loaded"
        raise RuntimeError(msg)


def _dead_proxies() -> list[Any]:
    """A dead weak proxy and a dead callable proxy: every attribute access raises ReferenceError."""

    class Thing:
        pass

    def fn() -> None:
        return None

    thing = Thing()
    out = [weakref.proxy(thing), weakref.proxy(fn)]
    del thing, fn
    gc.collect()
    with pytest.raises(ReferenceError):
        isinstance(out[0], Thing)  # what the collector did on the H200
    return out


def test_dead_weak_proxies_and_raising_objects_never_stop_the_collector(
    launcher: tuple[Any, str, int], inductor_env: Path
) -> None:
    keep = [*_dead_proxies(), StaticallyLaunchedBrokenKernel()]
    c = col.CompilerCollector()
    c.stop()  # raised ReferenceError before
    assert [f.name for f in c.facts if f.name == NAME] == [NAME]  # the kernels still get their facts
    assert c.skipped_objects == 1 and "RuntimeError: not loaded" in c.problems[0]
    prov = c.evidence({})["provenance"]["settings"][0]
    assert prov["skipped"]["objects"] == 1 and prov["skipped"]["examples"]
    del keep


def test_a_run_whose_process_holds_dead_proxies_ends_ok(tmp_path: Path, inductor_env: Path) -> None:
    held: list[Any] = []

    def step() -> None:
        held.extend(_dead_proxies())

    out = drive("r-c", Workload.of_callable(step), [col.make()], ["compile.registers"], {}, 1, 0, tmp_path)
    assert out.status == "ok", out.cause  # the H200 run: "compiler failed to stop: weakly-referenced object ..."


def test_a_triton_kernel_without_facts_is_not_called_a_library_kernel(tmp_path: Path) -> None:
    """SYNTHETIC launch records: a run whose compiler backend found no binary for Inductor's kernel."""
    st = Store(tmp_path / "s.duckdb")
    run = SynthRun(
        "r-1",
        backends=("cupti", "compiler"),
        instances=[Inst(1, "mlp", 0, 100_000)],
        kernels=[
            Kern(1, NAME, 1_000, 3_000, 1, registers=31, dynamic_smem=32),
            Kern(2, "nvjet_sm90_hsh_64x8_64x16_1x2_h_bz_bias_TNT", 4_000, 9_000, 1, registers=168),
        ],
    )
    write(st, [run])
    join.attribute_request(st, ["r-1"])
    rows = {r.name: r for r in Report(st, ["r-1"]).compiler}
    assert "not a Triton kernel" not in rows[NAME].unavailable
    assert "a Triton kernel (Inductor names its kernels triton_*)" in rows[NAME].unavailable
    assert "dynamic shared memory at launch: 32 B" in rows[NAME].unavailable
    assert "not a Triton kernel" in rows["nvjet_sm90_hsh_64x8_64x16_1x2_h_bz_bias_TNT"].unavailable
