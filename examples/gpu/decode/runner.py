"""Launching the decode kernels: buffers, the phased and the persistent step, probe sizes, sm_90 compiles.

::

    w = model.pack(hf_model, TINYLLAMA, max_len)
    dec = Decoder(w, k_cache, v_cache, KernelConfig())
    logits = dec.step(token, pos)               # one launch (the persistent megakernel), clean variant
    logits = dec.phased_step(token, pos)        # one launch per phase (the interpreter runs this one)

:class:`DecodeStep` is the measurable workload: one host region ``decode_step`` around one step, asking
``argus_lab.device.probe`` for the probe of each launch (``None`` outside an instrumented run).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import triton

import argus_lab
import argus_lab.device
from examples.gpu.decode import kernels as K
from examples.gpu.decode.model import DecodeShape, PackedWeights

MAX_SPLITS = 32
"""The most slices of the cache positions per head (the attention scratch buffer is sized for it)."""


@dataclass(frozen=True)
class KernelConfig:
    """Tuning parameters of the persistent kernel (and the block sizes of the phased one).

    ``bn_*`` are the rows of one work item of each matrix-vector phase, ``bk`` the columns of one load step,
    ``bt`` the cache positions of one attention step; ``stages`` > 1 pipelines the loads of the matrix-vector
    loops (``cp.async``), ``unroll`` unrolls them; ``splits`` cuts each head's cache positions into that many
    slices, one work item each (flash-decoding; the output projection combines them); ``prefetch`` 1 or 2 asks L2
    for the output projection's (and gate/up) weights before the barrier after qkv; ``combine`` 1 lets the last
    slice of each head combine the slices (a counter per head) instead of the output projection; ``programs`` is the
    persistent grid (0: one per SM);
    ``launch`` is ``"step"`` (one launch per token) or ``"layer"`` (one per layer, the head in the last).
    """

    bn_qkv: int = 16
    bn_o: int = 16
    bn_gu: int = 16
    bn_down: int = 16
    bn_head: int = 64
    bk: int = 256
    bt: int = 64
    num_warps: int = 4
    stages: int = 1
    unroll: int = 1
    splits: int = 1
    prefetch: int = 0
    combine: int = 0
    programs: int = 0
    launch: str = "step"
    timeout_s: float = 2.0

    def __post_init__(self) -> None:
        if self.splits < 1 or self.splits > MAX_SPLITS or self.splits & (self.splits - 1):
            msg = f"splits must be a power of two from 1 to {MAX_SPLITS}, got {self.splits}"
            raise ValueError(msg)
        if self.launch not in ("step", "layer"):
            msg = f"launch must be 'step' or 'layer', got {self.launch!r}"
            raise ValueError(msg)

    def fitted(self, shape: DecodeShape) -> KernelConfig:
        """The same config with block sizes no larger than ``shape`` allows (``bk`` divides every input width)."""
        widths = (shape.hidden, shape.heads * shape.head_dim, shape.intermediate)
        bk = self.bk
        while any(w % bk for w in widths) and bk > shape.head_dim:
            bk //= 2
        if any(w % bk for w in widths) or bk % shape.head_dim:
            msg = f"no load width from {self.bk} down to head_dim {shape.head_dim} divides the widths {widths}"
            raise ValueError(msg)
        return replace(self, bk=bk)

    def as_dict(self) -> dict[str, Any]:
        """The fields, for JSON."""
        return asdict(self)


V2 = KernelConfig(splits=4, bn_qkv=8, stages=4)
"""The optimised megakernel found by the second H200 run's sweep (tests/data/gpu/decode/run2): each head's cache
positions in 4 slices, 8-row tiles for qkv, the weight loads pipelined 4 deep (1.27 ms/token against v1's 2.30)."""


OPTIMISED = replace(V2, combine=1)
"""The fastest configuration of the final H200 run (tests/data/gpu/decode/run3): v2 with each head's last attention
slice combining the slices (1.227 ms/token; the CUDA-graph step 2.506, torch.compile 2.015)."""


def events_per_program(layers: int, head: bool) -> int:
    """Marker events one program of the persistent kernel records for ``layers`` layers (and the head)."""
    return K.EVENTS_PER_LAYER * layers + (K.EVENTS_HEAD if head else 0)


def num_sms(device: Any = None) -> int:
    """Streaming multiprocessors of the current (or given) CUDA device."""
    import torch

    return int(torch.cuda.get_device_properties(device).multi_processor_count)


class Decoder:
    """Buffers of one decode stream and the launches of its steps."""

    def __init__(self, w: PackedWeights, k_cache: Any, v_cache: Any, cfg: KernelConfig | None = None) -> None:
        import torch

        s = w.shape
        self.w, self.shape = w, s
        self.cfg = (cfg or KernelConfig()).fitted(s)
        self.k_cache, self.v_cache = k_cache, v_cache
        dev = w.w_head.device
        f32 = torch.float32
        self.x = torch.zeros(s.hidden, device=dev, dtype=f32)
        self.qkv = torch.zeros(s.qkv_rows, device=dev, dtype=f32)
        if s.heads > K.MAX_HEADS:
            msg = f"{s.heads} query heads: the kernels count finished attention slices for at most {K.MAX_HEADS}"
            raise ValueError(msg)
        # slices' outputs, their running maxima and sums, then the combined vector (combine=1)
        self.att = torch.zeros(s.heads * MAX_SPLITS * (s.head_dim + 2) + s.heads * s.head_dim, device=dev, dtype=f32)
        self.act = torch.zeros(s.intermediate, device=dev, dtype=f32)
        self.logits = torch.zeros(s.vocab, device=dev, dtype=f32)
        self.tok = torch.zeros(1, device=dev, dtype=torch.int64)
        self.sync = torch.zeros(K.SYNC_WORDS, device=dev, dtype=torch.int32)
        self.sm_scale = 1.0 / math.sqrt(s.head_dim)
        self.programs = self.cfg.programs or (num_sms(dev) if dev.type == "cuda" else 4)
        self.compile_only = False  # True: launches only compile (Triton's warmup), for a pool filling the cache

    # -- shared argument lists
    def _tensors(self) -> list[Any]:
        w = self.w
        return [
            self.x, w.emb, self.tok, self.qkv, self.att, self.act, self.logits,
            w.w_qkv, w.w_o, w.w_gate, w.w_up, w.w_down, w.ln_attn, w.ln_mlp, w.ln_final, w.w_head,
            self.k_cache, self.v_cache, w.rope,
        ]  # fmt: skip

    def _dims(self) -> dict[str, int]:
        s = self.shape
        return {"H": s.hidden, "NQ": s.heads, "NKV": s.kv_heads, "D": s.head_dim, "FF": s.intermediate, "V": s.vocab}

    def set_token(self, token: Any) -> None:
        """The token to decode next: an int, a one-element device tensor (copied without a host sync), or ``None``
        (keep the one in the decoder's token buffer, e.g. an argmax written there on the device)."""
        if token is None:
            return
        if isinstance(token, int):
            self.tok.fill_(token)
        else:
            self.tok.copy_(token.reshape(1))

    # -- the phased driver
    def phased_step(self, token: Any, pos: int, *, programs: int | None = None, bn: int = 16) -> Any:
        """One step, one launch per phase (``programs`` each); returns the logits (fp32, the decoder's buffer)."""
        self.set_token(token)
        s = self.shape
        grid = (programs or self.programs,)
        phases = (K.PH_QKV, K.PH_ATTENTION, *((K.PH_COMBINE,) if self.cfg.combine else ()), K.PH_O_PROJ)
        for layer in range(s.layers):
            for phase in (*phases, K.PH_GATE_UP, K.PH_DOWN):
                self._phase(grid, phase, layer, pos, bn)
        self._phase(grid, K.PH_HEAD, s.layers - 1, pos, bn)
        return self.logits

    def _phase(self, grid: tuple[int], phase: int, layer: int, pos: int, bn: int) -> None:
        s, cfg = self.shape, self.cfg
        self._run(
            K.decode_phase, grid, *self._tensors(), pos, self.w.max_len, layer, s.eps, self.sm_scale,
            **self._dims(), PHASE=phase, BN=bn, BK=cfg.bk, BT=cfg.bt, SPLITS=cfg.splits,
            COMBINE=cfg.combine,
            num_warps=cfg.num_warps,
        )  # fmt: skip

    # -- the persistent driver
    def launches(self) -> list[tuple[int, int, bool]]:
        """``(layer_begin, layer_end, head)`` of each launch of one step."""
        n = self.shape.layers
        if self.cfg.launch == "step":
            return [(0, n, True)]
        return [(i, i + 1, i == n - 1) for i in range(n)]

    def step(self, token: Any, pos: int, *, probes: list[Any] | None = None) -> Any:
        """One step by the persistent kernel (``probes``: one per launch, or ``None``: the clean variant)."""
        self.set_token(token)
        for i, (b, e, head) in enumerate(self.launches()):
            self.launch(b, e, head, pos, probes[i] if probes else None)
        return self.logits

    def launch(self, layer_begin: int, layer_end: int, head: bool, pos: int, probe: Any = None) -> None:
        """One launch of the persistent kernel over layers ``[layer_begin, layer_end)`` (and the head)."""
        s, cfg = self.shape, self.cfg
        self._run(
            K.decode_megakernel, (self.programs,), *self._tensors(), self.sync, pos, self.w.max_len, layer_begin,
            layer_end, s.eps, self.sm_scale, int(cfg.timeout_s * 1e9), probe,
            **self._dims(), BN_QKV=cfg.bn_qkv, BN_O=cfg.bn_o, BN_GU=cfg.bn_gu, BN_DOWN=cfg.bn_down,
            BN_HEAD=cfg.bn_head, BK=cfg.bk, BT=cfg.bt, HEAD=head, STAGES=cfg.stages, UNROLL=cfg.unroll,
            SPLITS=cfg.splits, PREFETCH=cfg.prefetch, COMBINE=cfg.combine, num_warps=cfg.num_warps,
        )  # fmt: skip

    def _run(self, kernel: Any, grid: tuple[int], *args: Any, **kwargs: Any) -> None:
        if self.compile_only:
            kernel.warmup(*args, grid=grid, **kwargs)
        else:
            kernel[grid](*args, **kwargs)

    def error(self) -> int:
        """The error word: 1 when a grid barrier timed out since the last :meth:`clear_error` (syncs the device)."""
        return int(self.sync[K.SYNC_ERROR].item())

    def clear_error(self) -> None:
        """Zero the sync words (after a timed-out launch the barrier counter is not back at 0)."""
        self.sync.zero_()


def warm_job(shape: DecodeShape, cfg: KernelConfig, variants: tuple[str, ...]) -> tuple[str, float, str | None]:
    """Compile ``cfg``'s kernels into Triton's cache without launching (in a pool's process on the GPU machine, so
    that the measuring process finds them compiled): ``variants`` among ``"clean"``, ``"instrumented"``,
    ``"phased"``. The arguments are stand-ins with the real ones' types and alignment (the JIT specialises on
    those, and the scalar arguments that vary are not specialised), so the cache keys are those of the real launches.
    Returns (the config as JSON, seconds, the error or ``None``)."""
    import json
    import time

    import torch

    from examples.gpu.decode import model as M

    t0 = time.monotonic()
    key = json.dumps({**cfg.as_dict(), "variants": list(variants)}, sort_keys=True)
    try:
        dev = torch.device("cuda")
        f32, bf16 = torch.float32, torch.bfloat16

        def t(dtype: Any) -> Any:
            return torch.zeros(64, dtype=dtype, device=dev)

        w = M.PackedWeights(
            shape=shape, max_len=2048, emb=t(f32), w_qkv=t(bf16), w_o=t(bf16), w_gate=t(bf16), w_up=t(bf16),
            w_down=t(bf16), ln_attn=t(f32), ln_mlp=t(f32), ln_final=t(f32), w_head=t(bf16), rope=t(f32),
        )  # fmt: skip
        dec = Decoder(w, t(bf16), t(bf16), cfg)
        dec.compile_only = True
        for b, e, head in {(0, 1, h) for _, _, h in dec.launches()}:
            if "clean" in variants:
                dec.launch(b, e, head, 1000)
            if "instrumented" in variants:
                dec.launch(b, e, head, 1000, t(torch.int64))
        if "phased" in variants:
            dec.phased_step(0, 1000)
        return key, time.monotonic() - t0, None
    except Exception as exc:  # reported by the pool's caller; the measuring process compiles it itself then
        return key, time.monotonic() - t0, f"{type(exc).__name__}: {exc}"


class DecodeStep:
    """A measurable workload: host region ``decode_step`` around one persistent step; each launch asks the run for
    its probe (``None`` outside an instrumented run). Decodes the same token at the same position every call, so
    every repetition does the same work (the cache entry at ``pos`` is rewritten with the same values)."""

    def __init__(self, dec: Decoder, token: int, pos: int) -> None:
        self.dec, self.token, self.pos = dec, token, pos
        self.out: Any = None

    def __call__(self) -> Any:
        dec = self.dec
        with argus_lab.region("decode_step"):
            probes = []
            for b, e, head in dec.launches():
                probes.append(
                    argus_lab.device.probe(
                        K.decode_megakernel, programs=dec.programs, events=events_per_program(e - b, head),
                        regions=K.PHASES, device=dec.x.device,
                    )
                )  # fmt: skip
            self.out = dec.step(self.token, self.pos, probes=probes if any(p is not None for p in probes) else None)
        return self.out


def compile_sm90(shape: DecodeShape, cfg: KernelConfig, *, instrumented: bool, head: bool = True) -> Any:
    """Compile the persistent kernel for sm_90 without a GPU (``instrumented``: with a probe pointer)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    cfg = cfg.fitted(shape)
    fn = K.decode_megakernel
    ptr = {
        "x_ptr": "*fp32", "emb_ptr": "*fp32", "tok_ptr": "*i64", "qkv_ptr": "*fp32", "att_ptr": "*fp32",
        "act_ptr": "*fp32", "logits_ptr": "*fp32", "w_qkv": "*bf16", "w_o": "*bf16", "w_gate": "*bf16",
        "w_up": "*bf16", "w_down": "*bf16", "ln_attn": "*fp32", "ln_mlp": "*fp32", "ln_final": "*fp32",
        "w_head": "*bf16", "k_cache": "*bf16", "v_cache": "*bf16", "rope_ptr": "*fp32", "sync_ptr": "*i32",
    }  # fmt: skip
    sig: dict[str, str] = dict(ptr)
    sig |= {"pos": "i32", "max_len": "i32", "layer_begin": "i32", "layer_end": "i32"}
    sig |= {"eps": "fp32", "sm_scale": "fp32", "timeout_ns": "i64"}
    consts: dict[str, Any] = {
        "H": shape.hidden, "NQ": shape.heads, "NKV": shape.kv_heads, "D": shape.head_dim, "FF": shape.intermediate,
        "V": shape.vocab, "BN_QKV": cfg.bn_qkv, "BN_O": cfg.bn_o, "BN_GU": cfg.bn_gu, "BN_DOWN": cfg.bn_down,
        "BN_HEAD": cfg.bn_head, "BK": cfg.bk, "BT": cfg.bt, "HEAD": head, "STAGES": cfg.stages, "UNROLL": cfg.unroll,
        "SPLITS": cfg.splits, "PREFETCH": cfg.prefetch, "COMBINE": cfg.combine,
    }  # fmt: skip
    if instrumented:
        sig["probe"] = "*i64"
    else:
        sig["probe"] = "constexpr"
        consts["probe"] = None
    for name in consts:
        sig[name] = "constexpr"
    names = list(fn.arg_names)
    sig = {n: sig[n] for n in names}
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in ptr}
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": cfg.num_warps})
