"""Check the phased decode kernels against ``transformers`` on a tiny Llama; prints one JSON line.

    TRITON_INTERPRET=1 PYTHONPATH=. python -m examples.gpu.decode.check_phased          # CPU: the Triton interpreter
    PYTHONPATH=. python -m examples.gpu.decode.check_phased --device cuda                # the same on a GPU

Prefills a random prompt with ``transformers`` (bf16 weights), copies its cache, decodes the next token with the
phased driver (one launch per phase) and compares the logits with ``transformers``' next-step logits (bf16 model)
and with an fp32 copy of the model; then decodes a second step and checks the first step's cache append.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


def fix_interpreter_index() -> None:
    """Let Triton 3.6's interpreter use scalar tensors as ``range`` bounds with numpy >= 2.3.

    The interpreter holds every scalar as a one-element array and converts it with ``int(array)``, which numpy 2.3
    and later refuse for arrays with a dimension ("only 0-dimensional arrays can be converted to Python scalars"),
    so a loop like ``for tile in range(pid, n_tiles, nprog)`` fails. This re-registers ``__index__`` to take the one
    element. No effect without ``TRITON_INTERPRET=1``.
    """
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "_decode_fixed", False):
        return

    def patched(tensor: Any, scope: Any) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patched._decode_fixed = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patched


def run(
    device: str,
    prompt_len: int,
    max_len: int,
    programs: int,
    seed: int,
    init_std: float,
    splits: int = 1,
    combine: int = 0,
) -> dict[str, Any]:
    """The comparison as a dict (see the module doc)."""
    import torch

    from examples.gpu.decode import model as M
    from examples.gpu.decode.runner import Decoder, KernelConfig

    fix_interpreter_index()
    shape = M.TINY
    hf = M.make_model(shape, max_len=max_len, seed=seed, device=device, init_std=init_std)
    w = M.pack(hf, shape, max_len)
    pre = M.prefill(hf, shape, max_len, prompt_len)
    dec = Decoder(
        w, pre.k_cache.clone(), pre.v_cache.clone(), KernelConfig(bk=64, bt=16, splits=splits, combine=combine)
    )
    logits = dec.phased_step(pre.token, pre.pos, programs=programs).clone()
    out: dict[str, Any] = {
        "interpreter": os.environ.get("TRITON_INTERPRET") == "1",
        "device": device,
        "shape": shape.__dict__,
        "prompt_len": prompt_len,
        "init_std": init_std,
        "splits": splits,
        "combine": combine,
        "vs_transformers_bf16": M.compare(logits, pre.ref_logits),
        "vs_transformers_fp32": M.compare(logits, pre.ref_logits_fp32),
        "transformers_bf16_vs_fp32": M.compare(pre.ref_logits, pre.ref_logits_fp32),
    }
    # the step appended the new token's k and v at pos: they must equal transformers' cache after that step
    with torch.no_grad():
        g = torch.Generator(device="cpu").manual_seed(1)
        prompt = torch.randint(0, shape.vocab, (1, prompt_len), generator=g).to(device)
        full = torch.cat([prompt, torch.tensor([[pre.token]], device=device)], dim=1)
        o = hf(input_ids=full, use_cache=True)
        diffs = []
        for i in range(shape.layers):
            k, v = M.layer_kv(o.past_key_values, i)
            diffs.append(float((dec.k_cache[i, :, pre.pos].float() - k[0, :, pre.pos].float()).abs().max()))
            diffs.append(float((dec.v_cache[i, :, pre.pos].float() - v[0, :, pre.pos].float()).abs().max()))
        out["cache_append_max_abs_diff"] = max(diffs)
        out["cache_scale"] = float(k.float().abs().max())
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--prompt-len", type=int, default=20)
    p.add_argument("--max-len", type=int, default=32)
    p.add_argument("--programs", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--splits", type=int, default=1, help="slices of each head's cache positions")
    p.add_argument("--combine", type=int, default=0, help="1: a launch combines the slices before the projection")
    p.add_argument("--init-std", type=float, default=0.15, help="weights' std (0.02 makes attention near uniform)")
    a = p.parse_args(argv)
    print(json.dumps(run(a.device, a.prompt_len, a.max_len, a.programs, a.seed, a.init_std, a.splits, a.combine)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
