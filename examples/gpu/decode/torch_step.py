"""The same decode step in plain PyTorch (bf16, a static KV cache, no host synchronisation): CUDA-graph-capturable.

A baseline beside ``transformers``' own step: the same packed weights and cache as the Triton kernels, attention
over the whole static cache with a mask of the positions ``<= pos`` (as ``transformers``' static cache does).
"""

from __future__ import annotations

from typing import Any

from examples.gpu.decode.model import PackedWeights


class TorchStep:
    """``step(tok, pos_t)`` -> logits ``(vocab,)``; ``tok`` and ``pos_t`` are one-element int64 device tensors."""

    def __init__(self, w: PackedWeights, k_cache: Any, v_cache: Any) -> None:
        import torch

        self.w, self.kc, self.vc = w, k_cache, v_cache
        self.emb = w.emb.to(torch.bfloat16)
        self.ln_attn = w.ln_attn.to(torch.bfloat16)
        self.ln_mlp = w.ln_mlp.to(torch.bfloat16)
        self.ln_final = w.ln_final.to(torch.bfloat16)
        self.positions = torch.arange(w.max_len, device=w.emb.device)

    def _norm(self, x: Any, weight: Any) -> Any:
        import torch

        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.w.shape.eps)
        return weight * xf.to(x.dtype)

    def __call__(self, tok: Any, pos_t: Any) -> Any:
        import torch
        import torch.nn.functional as F

        w, s = self.w, self.w.shape
        nq, nkv, d, half = s.heads, s.kv_heads, s.head_dim, s.head_dim // 2
        rope = w.rope.index_select(0, pos_t)  # (1, d): cos | sin
        cos = torch.cat([rope[:, :half], rope[:, :half]], -1).to(torch.bfloat16)
        sin = torch.cat([rope[:, half:], rope[:, half:]], -1).to(torch.bfloat16)
        mask = (self.positions <= pos_t).view(1, 1, 1, -1)
        x = self.emb.index_select(0, tok)  # (1, hidden)
        for layer in range(s.layers):
            h = self._norm(x, self.ln_attn[layer])
            qkv = F.linear(h, w.w_qkv[layer])
            q = qkv[:, : nq * d].view(nq, 1, d)
            k = qkv[:, nq * d : (nq + nkv) * d].view(nkv, 1, d)
            v = qkv[:, (nq + nkv) * d :].view(nkv, 1, d)
            q = q * cos + torch.cat([-q[..., half:], q[..., :half]], -1) * sin
            k = k * cos + torch.cat([-k[..., half:], k[..., :half]], -1) * sin
            self.kc[layer].index_copy_(1, pos_t, k)
            self.vc[layer].index_copy_(1, pos_t, v)
            o = F.scaled_dot_product_attention(
                q[None], self.kc[layer][None], self.vc[layer][None], attn_mask=mask, enable_gqa=True
            )
            x = x + F.linear(o.reshape(1, nq * d), w.w_o[layer])
            h = self._norm(x, self.ln_mlp[layer])
            x = x + F.linear(F.silu(F.linear(h, w.w_gate[layer])) * F.linear(h, w.w_up[layer]), w.w_down[layer])
        return F.linear(self._norm(x, self.ln_final), w.w_head)[0].float()
