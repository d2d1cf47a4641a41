"""GPU test of the TinyLlama decode megakernel (examples/gpu/decode): its logits against ``transformers``.

A seeded TinyLlama-1.1B-shaped ``LlamaForCausalLM`` (random weights, bf16) prefills a 1,024-token prompt; the
persistent megakernel decodes the next token from the copied cache: v1 with one launch per step, with one per layer,
and with each head's cache positions in four slices; the optimised v2 (slices, 8-row qkv tiles, loads pipelined 4
deep); and v2 with each head's last slice combining the slices (per-head counters) and L2 prefetches. Its logits
must be as close to the fp32 model's as ``transformers``' own bf16 step is (within twice that distance), equal the
phased driver's with the same configuration (same arithmetic, another synchronisation), and no grid barrier may
time out.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.gpu

PROMPT = 1024


@pytest.fixture(scope="module")
def tinyllama() -> tuple[Any, Any]:
    pytest.importorskip("transformers")
    from examples.gpu.decode import model as M

    max_len = PROMPT + 16
    hf = M.make_model(M.TINYLLAMA, max_len=max_len, seed=0, device="cuda")
    w = M.pack(hf, M.TINYLLAMA, max_len)
    pre = M.prefill(hf, M.TINYLLAMA, max_len, PROMPT, fp32_reference=True)
    del hf
    return w, pre


@pytest.mark.parametrize("variant", ["v1", "v1 per layer", "v1 split", "v2", "v2 combine prefetch"])
def test_the_megakernel_decodes_a_token_as_transformers_does(tinyllama: tuple[Any, Any], variant: str) -> None:
    from dataclasses import replace

    from examples.gpu.decode import model as M
    from examples.gpu.decode.runner import V2, Decoder, KernelConfig

    w, pre = tinyllama
    cfg = {"v1": KernelConfig(), "v1 per layer": KernelConfig(launch="layer"), "v1 split": KernelConfig(splits=4),
           "v2": V2, "v2 combine prefetch": replace(V2, combine=1, prefetch=2)}[variant]  # fmt: skip
    dec = Decoder(w, pre.k_cache.clone(), pre.v_cache.clone(), cfg)
    logits = dec.step(pre.token, pre.pos).clone()
    assert dec.error() == 0, "a grid barrier timed out: were all programs resident?"
    again = dec.step(pre.token, pre.pos).clone()  # the counter was reset by the last program of the first launch
    assert dec.error() == 0
    hf_bf16 = M.compare(pre.ref_logits, pre.ref_logits_fp32)
    ours = M.compare(logits, pre.ref_logits_fp32)
    ours_bf16 = M.compare(logits, pre.ref_logits)
    print(f"{variant}: vs fp32 {ours}; vs transformers bf16 {ours_bf16}; transformers bf16 vs fp32 {hf_bf16}")
    assert ours["max_abs_diff"] <= max(2 * hf_bf16["max_abs_diff"], 1e-3), (ours, hf_bf16)
    assert ours["top1_agree"] or ours_bf16["top1_agree"], (ours, ours_bf16)
    assert float((again - logits).abs().max()) == 0.0
    phased = Decoder(w, pre.k_cache.clone(), pre.v_cache.clone(), cfg).phased_step(pre.token, pre.pos)
    assert float((phased - logits).abs().max()) <= 1e-4 * max(float(logits.abs().max()), 1.0)
