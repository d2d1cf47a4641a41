"""The benchmark's targets without a GPU: spaces and models, sm_90 compiles, and the attention kernel's numbers.

Triton compiles for sm_90 without a GPU (its wheel carries ptxas and cuobjdump), and its interpreter
(``TRITON_INTERPRET=1``, NumPy) runs the attention kernel on the CPU in fp16/fp32; both are skipped where triton or
torch are missing.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")

from argus_lab import optimize as opt  # noqa: E402
from argus_lab.backends.compiler.artifacts import parse_res_usage  # noqa: E402
from examples.gpu.optimize_targets import (  # noqa: E402
    AttentionTarget,
    GemmTarget,
    KernelSpec,
    compile_job,
    compile_spec,
)

ROOT = Path(__file__).resolve().parent.parent

# cuobjdump -res-usage of persistent_gemm's clean sm_90 cubin (GemmConfig(marks="tile"), compiled by triton 3.6.0)
RES_USAGE = """
Resource usage:
 Common:
  GLOBAL:0
 Function persistent_gemm:
  REG:158 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:592 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


def test_res_usage_parse() -> None:
    u = parse_res_usage(RES_USAGE)["persistent_gemm"]
    assert (u.registers, u.local, u.stack, u.shared) == (158, 0, 0, 1024)
    assert parse_res_usage("no functions") == {}


def test_gemm_space_and_model() -> None:
    t = GemmTarget(3072, 3072, 8192)
    space = t.space()
    assert space.invalid_reason(t.default()) is None
    assert t.model(t.default()).tiles == 576 and t.model(t.default()).programs == 132
    assert t.model(t.default()).wave_efficiency == pytest.approx(576 / 660)
    huge = t.default().with_params(block_m=256, block_n=256)
    assert "registers per thread" in (space.invalid_reason(huge) or "")
    deep = t.default().with_params(block_m=256, block_n=128, block_k=128, num_stages=5)
    assert "shared memory" in (space.invalid_reason(deep) or "")
    small = GemmTarget(128, 128, 4096)
    tall = small.default().with_params(block_m=256, block_n=64)
    assert "larger than the 128x128x4096 problem" in (small.space().invalid_reason(tall) or "")
    w = t.work()
    assert w.flops == 2.0 * 3072 * 3072 * 8192 and w.dtype == "bf16"
    clean, instr = t.specs(t.default())
    assert dict(clean.constexprs)["probe"] is None and dict(clean.constexprs)["MARKS"] == "none"
    assert dict(instr.signature)["probe"] == "*i64" and dict(instr.constexprs)["MARKS"] == "kstep"
    assert clean.key != instr.key
    # the same candidate on another shape of the same divisibility compiles to the same kernel
    assert GemmTarget(4096, 4096, 4096).specs(t.default())[0].key == clean.key


def test_attention_space_and_model() -> None:
    causal = AttentionTarget(4, 16, 2048, 128, causal=True)
    full = AttentionTarget(2, 16, 4096, 64, causal=False)
    assert causal.space().invalid_reason(causal.default()) is None
    flip = causal.default().with_params(heavy_first=True)
    assert causal.space().invalid_reason(flip) is None
    assert "not a choice" in (full.space().invalid_reason(full.default().with_params(heavy_first=True)) or "")
    m = causal.model(causal.default())
    assert m.tiles == 4 * 16 * 16 and m.step_flops == 4.0 * 128 * 64 * 128
    assert causal.work().flops == pytest.approx(4.0 * 4 * 16 * 2048**2 * 128 / 2)
    odd = AttentionTarget(1, 1, 192, 64, causal=True)
    assert "multiple" in (odd.space().invalid_reason(odd.default()) or "")


def _sass(kernel: object, tmp_path: Path, name: str) -> list[str]:
    cubin = tmp_path / f"{name}.cubin"
    cubin.write_bytes(kernel.asm["cubin"])  # type: ignore[attr-defined]
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    out = subprocess.run([str(tool), "-sass", str(cubin)], capture_output=True, text=True, timeout=120, check=True)
    return [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+([^;]*);", out.stdout)]


def test_attention_compiles_for_sm90_and_its_markers_vanish_in_the_clean_variant(tmp_path: Path) -> None:
    t = AttentionTarget(4, 16, 2048, 64, causal=True)
    clean, instr = t.specs(t.default())
    res = compile_job(clean)
    assert res.error is None and res.facts is not None
    assert res.facts.registers and res.facts.registers <= 255 and res.facts.local_bytes == 0
    model_shared = t.model(t.default()).shared_bytes
    assert model_shared is not None and res.facts.shared_bytes is not None
    assert abs(res.facts.shared_bytes - model_shared) <= 2048  # the estimate the space prunes with holds
    # markers with probe=None compile to nothing: the same SASS as MARKS="none"
    consts = dict(clean.constexprs) | {"MARKS": "block"}
    marked = KernelSpec(clean.module, clean.function, clean.signature, tuple(consts.items()), clean.divisible,
                        clean.num_warps, clean.num_stages)  # fmt: skip
    a, b = _sass(compile_spec(clean), tmp_path, "a"), _sass(compile_spec(marked), tmp_path, "b")
    assert a == b and not any("GLOBALTIMER" in i for i in a)
    inst = _sass(compile_spec(instr), tmp_path, "i")
    assert sum("SR_GLOBALTIMER" in i for i in inst) >= 6


def test_a_candidate_that_cannot_compile_is_a_result_not_an_exception() -> None:
    t = GemmTarget(4096, 4096, 4096)
    clean, _ = t.specs(t.default())
    broken = KernelSpec(clean.module, "no_such_kernel", clean.signature, clean.constexprs, (), 8, 3)
    res = compile_job(broken)
    assert res.facts is None and res.error and "no_such_kernel" in res.error
    builds = t.builds
    builds.add(res)
    with pytest.raises(opt.CandidateError, match="no_such_kernel"):
        builds.kernel(broken)


INTERPRET = """
import sys, math
import torch, torch.nn.functional as F
import triton.runtime.interpreter as interp

# Triton 3.6's interpreter turns a program id (a 1-element NumPy array) into a loop bound with int(), which NumPy 2
# refuses for arrays of one dimension; the kernel itself is unchanged.
_patch = interp._patch_lang_tensor
def _patched(tensor, scope):
    _patch(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))
interp._patch_lang_tensor = _patched

from examples.gpu import persistent_attention as pa
torch.manual_seed(0)
worst = 0.0
for dt in (torch.float32, torch.float16):
    for causal in (False, True):
        for bm, bn, heavy, cps in ((32, 16, False, 1), (16, 32, True, 2)):
            q, k, v = (torch.randn(1, 3, 64, 32).to(dt) for _ in range(3))
            cfg = pa.AttentionConfig(block_m=bm, block_n=bn, heavy_first=heavy, ctas_per_sm=cps)
            o = pa.launch(q, k, v, cfg, causal=causal, num_sms=2)
            ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
            err = (o.float() - ref).abs().max().item()
            tol = 1e-5 if dt == torch.float32 else 2e-3
            assert err < tol, (dt, causal, bm, bn, heavy, cps, err)
            worst = max(worst, err)
print("ok", worst)
"""


def test_attention_kernel_matches_sdpa_in_the_interpreter() -> None:
    """fp32 and fp16, causal or not, block_n below and above block_m, both tile orders, 1 and 2 CTAs per SM."""
    pytest.importorskip("torch")
    env = {"TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", INTERPRET], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok")
    assert math.isfinite(float(out.stdout.split()[1]))
