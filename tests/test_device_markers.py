"""The device markers compile to nothing in the clean variant, and to timer reads in the instrumented one.

Triton compiles for sm_90 without a GPU (its wheel carries ptxas and cuobjdump), so this runs in CI wherever
triton is installed; it is skipped otherwise.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")

import triton.language as tl  # noqa: E402

from argus_lab.device import markers as dm  # noqa: E402
from examples.gpu import persistent_gemm as pg  # noqa: E402


@triton.jit
def _bad_name(probe, X: tl.constexpr):
    c = dm.begin(probe)
    c = dm.enter(probe, c, "a/b")
    c = dm.exit(probe, c, "a/b")
    dm.end(probe, c)


def _sass(kernel: object, tmp_path: Path) -> list[str]:
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(kernel.asm["cubin"])  # type: ignore[attr-defined]
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    out = subprocess.run([str(tool), "-sass", str(cubin)], capture_output=True, text=True, timeout=120, check=True)
    return [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+([^;]*);", out.stdout)]


@pytest.mark.parametrize("marks", ["kstep", "tile"])
def test_clean_variant_sass_equals_the_kernel_without_markers(marks: str, tmp_path: Path) -> None:
    cfg = pg.GemmConfig(marks=marks)
    clean = _sass(pg.compile_sm90(cfg, "clean"), tmp_path)
    plain = _sass(pg.compile_sm90(cfg, "unmarked"), tmp_path)
    assert clean == plain
    assert not any("GLOBALTIMER" in i or "CLOCK" in i for i in clean)


def test_instrumented_variant_reads_the_timers_and_keeps_the_pipeline(tmp_path: Path) -> None:
    """kstep marks: begin, end and three regions (six markers) read %globaltimer and %clock64 once each;
    the k-loop keeps its cp.async pipeline (same LDGSTS count and shared memory as the unmarked kernel)."""
    cfg = pg.GemmConfig(marks="kstep")
    ik, pk = pg.compile_sm90(cfg, "instrumented"), pg.compile_sm90(cfg, "unmarked")
    inst, plain = _sass(ik, tmp_path), _sass(pk, tmp_path)
    assert sum("SR_GLOBALTIMER" in i for i in inst) == 8
    assert sum("SR_CLOCK" in i for i in inst) == 8
    assert sum("LDGSTS" in i for i in inst) == sum("LDGSTS" in i for i in plain) > 0
    assert ik.metadata.shared == pk.metadata.shared


def test_example_kernel_markers_match_its_declaration() -> None:
    pg.PHASES.check_kernel(pg.persistent_gemm)


def test_a_bad_region_name_fails_the_compile_with_the_fix() -> None:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = ASTSource(fn=_bad_name, signature={"probe": "*i64", "X": "constexpr"}, constexprs={"X": 1})
    with pytest.raises(Exception) as err:
        triton.compile(src, target=GPUTarget("cuda", 90, 32))
    chain, e = [], err.value
    while e is not None:
        chain.append(str(e))
        e = e.__cause__ or e.__context__
    assert any("nest regions instead" in m for m in chain), chain
