"""The phased decode kernels (examples/gpu/decode) under the Triton CPU interpreter against ``transformers``.

A 2-layer Llama (hidden 128, 4 query / 2 KV heads, GQA) prefills a 20-token prompt with ``transformers``; the phased
driver (one launch per phase, every phase function of the megakernel) decodes the next token from the copied cache,
with each head's cache positions in one slice and in four (flash-decoding: two of them empty at this length), the
slices combined by the output projection's loads or by a launch of their own (the persistent kernel's last slice).
Its logits must be within bf16 rounding of ``transformers``' (bf16 and fp32 models) with the same top-1 token, and the
k and v it appended at the new position must equal what ``transformers`` caches there. Runs in a child process:
``TRITON_INTERPRET=1`` must be set before Triton builds the kernels, and must not leak into other tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("splits", "combine"), [(1, 0), (4, 0), (4, 1)])
def test_the_phased_kernels_decode_a_token_as_transformers_does(splits: int, combine: int) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    p = subprocess.run(
        [sys.executable, "-m", "examples.gpu.decode.check_phased", "--device", "cpu", "--splits", str(splits),
         "--combine", str(combine)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["interpreter"]
    # as close to the fp32 model as transformers' own bf16 step is (within twice its distance), same top-1
    bf16_error = r["transformers_bf16_vs_fp32"]["max_abs_diff"]
    assert r["vs_transformers_fp32"]["max_abs_diff"] <= 2 * bf16_error, r
    assert r["vs_transformers_bf16"]["max_abs_diff"] <= 2 * bf16_error, r
    assert r["vs_transformers_fp32"]["top1_agree"] and r["vs_transformers_bf16"]["top1_agree"], r
    # the appended k and v: a couple of bf16 rounding steps of the largest cache entry
    assert r["cache_append_max_abs_diff"] <= 2.0**-6 * r["cache_scale"], r
