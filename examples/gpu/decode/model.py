"""The model side of the decode kernels: shapes, a seeded ``transformers`` Llama, weights packed for the kernels,
the KV cache filled by a ``transformers`` prefill, and the reference logits of the next step.

Nothing here needs a GPU: the tiny shape runs on the CPU (the Triton interpreter test), the TinyLlama shape on the
H200.  Works with ``transformers`` 4.4x-5.x (the cache's layout is read through :func:`layer_kv`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DecodeShape:
    """A Llama-shaped decoder (batch 1)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    eps: float = 1e-5
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        if self.heads * self.head_dim != self.hidden:
            msg = f"heads x head_dim must be hidden: {self.heads} x {self.head_dim} != {self.hidden}"
            raise ValueError(msg)
        if self.heads % self.kv_heads:
            msg = f"query heads ({self.heads}) must be a multiple of KV heads ({self.kv_heads})"
            raise ValueError(msg)

    @property
    def qkv_rows(self) -> int:
        """Rows of the fused q/k/v projection."""
        return (self.heads + 2 * self.kv_heads) * self.head_dim

    def weight_bytes(self, *, with_head: bool = True, elem: int = 2) -> int:
        """Bytes of the weights one decode step reads (matrices and norms; the embedding row is negligible)."""
        per_layer = self.qkv_rows * self.hidden + self.hidden * self.hidden + 3 * self.intermediate * self.hidden
        total = self.layers * (per_layer + 2 * self.hidden) + self.hidden
        if with_head:
            total += self.vocab * self.hidden
        return total * elem


TINYLLAMA = DecodeShape(layers=22, hidden=2048, heads=32, kv_heads=4, head_dim=64, intermediate=5632, vocab=32000)
"""TinyLlama-1.1B's shape."""
TINY = DecodeShape(layers=2, hidden=128, heads=4, kv_heads=2, head_dim=32, intermediate=256, vocab=512)
"""A shape small enough for the Triton CPU interpreter."""


def llama_config(shape: DecodeShape, max_len: int, init_std: float = 0.02) -> Any:
    """The ``transformers.LlamaConfig`` of ``shape`` (weights drawn with standard deviation ``init_std``)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=shape.vocab,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        max_position_embeddings=max(max_len, 2048),
        rms_norm_eps=shape.eps,
        rope_theta=shape.rope_theta,
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
        initializer_range=init_std,
    )


def make_model(
    shape: DecodeShape, *, max_len: int, seed: int = 0, dtype: Any = None, device: str = "cpu", init_std: float = 0.02
) -> Any:
    """A ``LlamaForCausalLM`` of ``shape`` with random weights from ``seed`` (made on ``device``), in ``dtype``.

    ``init_std`` is the config's ``initializer_range``; ``transformers``' default 0.02 gives near-uniform attention
    (scores of about 1e-3), so a test that must see the attention (RoPE, the cache) uses larger weights."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = LlamaForCausalLM(llama_config(shape, max_len, init_std))
    return model.to(dtype or torch.bfloat16).eval()


def layer_kv(cache: Any, layer: int) -> tuple[Any, Any]:
    """Keys and values ``(batch, kv_heads, tokens, head_dim)`` of one layer of a ``transformers`` cache."""
    layers = getattr(cache, "layers", None)
    if layers is not None and hasattr(layers[layer], "keys"):
        return layers[layer].keys, layers[layer].values
    if hasattr(cache, "key_cache"):
        return cache.key_cache[layer], cache.value_cache[layer]
    k, v = cache[layer][:2]
    return k, v


@dataclass(frozen=True)
class PackedWeights:
    """The model's weights in the kernels' layout (bf16 matrices row-major ``out x in``, stacked over layers; fp32
    norms; an fp32 copy of the embedding table; the RoPE table ``max_len x head_dim``: cos, then sin, of the
    ``head_dim / 2`` frequencies)."""

    shape: DecodeShape
    max_len: int
    emb: Any
    w_qkv: Any
    w_o: Any
    w_gate: Any
    w_up: Any
    w_down: Any
    ln_attn: Any
    ln_mlp: Any
    ln_final: Any
    w_head: Any
    rope: Any


def pack(model: Any, shape: DecodeShape, max_len: int, *, weight_dtype: Any = None) -> PackedWeights:
    """Pack ``model``'s weights for the kernels (on the model's device)."""
    import torch

    wd = weight_dtype or torch.bfloat16
    layers = model.model.layers
    dev = model.lm_head.weight.device

    def stack(get: Any) -> Any:
        return torch.stack([get(layer).detach() for layer in layers]).to(wd).contiguous()

    att = [layer.self_attn for layer in layers]
    w_qkv = torch.stack([torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight], 0).detach() for a in att]).to(
        wd
    )
    positions = torch.arange(max_len, device=dev)[None]
    probe = torch.zeros(1, device=dev, dtype=torch.float32)
    cos, sin = model.model.rotary_emb(probe, positions)
    half = shape.head_dim // 2
    rope = torch.cat([cos[0, :, :half], sin[0, :, :half]], dim=1).float().contiguous()
    return PackedWeights(
        shape=shape,
        max_len=max_len,
        emb=model.model.embed_tokens.weight.detach().float().contiguous(),
        w_qkv=w_qkv.contiguous(),
        w_o=stack(lambda m: m.self_attn.o_proj.weight),
        w_gate=stack(lambda m: m.mlp.gate_proj.weight),
        w_up=stack(lambda m: m.mlp.up_proj.weight),
        w_down=stack(lambda m: m.mlp.down_proj.weight),
        ln_attn=torch.stack([m.input_layernorm.weight.detach() for m in layers]).float().contiguous(),
        ln_mlp=torch.stack([m.post_attention_layernorm.weight.detach() for m in layers]).float().contiguous(),
        ln_final=model.model.norm.weight.detach().float().contiguous(),
        w_head=model.lm_head.weight.detach().to(wd).contiguous(),
        rope=rope,
    )


@dataclass(frozen=True)
class Prefilled:
    """A prompt run through ``transformers``: its cache in the kernels' layout, the next token and its position,
    and the reference logits of decoding that token (``transformers``, and the same weights in fp32)."""

    k_cache: Any
    v_cache: Any
    token: int
    pos: int
    ref_logits: Any
    ref_logits_fp32: Any


def prefill(
    model: Any, shape: DecodeShape, max_len: int, prompt_len: int, *, seed: int = 1, fp32_reference: bool = True
) -> Prefilled:
    """Prefill a random prompt of ``prompt_len`` tokens with ``transformers``, copy its cache into the kernels'
    ``layers x kv_heads x max_len x head_dim`` bf16 cache, and compute the reference logits of the next step
    (the prompt's greedy next token at position ``prompt_len``), also from an fp32 copy of the model if asked."""
    import copy

    import torch

    dev = model.lm_head.weight.device
    g = torch.Generator(device="cpu").manual_seed(seed)
    prompt = torch.randint(0, shape.vocab, (1, prompt_len), generator=g).to(dev)
    kc = torch.zeros(shape.layers, shape.kv_heads, max_len, shape.head_dim, dtype=torch.bfloat16, device=dev)
    vc = torch.zeros_like(kc)
    with torch.no_grad():
        out = model(input_ids=prompt, use_cache=True)
        token = int(out.logits[0, -1].argmax())
        for i in range(shape.layers):
            k, v = layer_kv(out.past_key_values, i)
            kc[i, :, :prompt_len] = k[0, :, :prompt_len].to(torch.bfloat16)
            vc[i, :, :prompt_len] = v[0, :, :prompt_len].to(torch.bfloat16)
        nxt = torch.tensor([[token]], device=dev)
        ref = model(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True).logits[0, -1].float()
        ref32 = None
        if fp32_reference:
            m32 = copy.deepcopy(model).float()
            o32 = m32(input_ids=prompt, use_cache=True)
            ref32 = m32(input_ids=nxt, past_key_values=o32.past_key_values, use_cache=True).logits[0, -1].float()
            del m32, o32
    return Prefilled(kc, vc, token, prompt_len, ref, ref32)


def compare(logits: Any, ref: Any) -> dict[str, float | bool]:
    """Max abs difference, the reference's scale (max abs), and whether the top-1 tokens agree."""
    d = (logits.float() - ref.float()).abs()
    return {
        "max_abs_diff": float(d.max()),
        "mean_abs_diff": float(d.mean()),
        "ref_max_abs": float(ref.float().abs().max()),
        "top1_agree": bool(int(logits.argmax()) == int(ref.argmax())),
        "top5_overlap": len(set(logits.topk(5).indices.tolist()) & set(ref.topk(5).indices.tolist())) / 5.0,
    }
