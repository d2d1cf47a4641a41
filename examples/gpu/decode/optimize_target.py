"""The decode megakernel as an ``argus_lab.optimize`` target: one decode step of TinyLlama, its parameters searched.

A candidate is a :class:`~examples.gpu.decode.runner.KernelConfig` (attention slices, pipelining or unrolling of the
weight loads, warps, load width, programs per SM). Each launch asks ``argus_lab.device.probe`` for its probe, so the
timing run launches the clean variant and the instrumented run the marked one; the first output is checked against
the phased driver's logits with the same candidate (the same arithmetic, one launch per phase) and against the fp32
model within twice transformers' own bf16 error. (The third H200 run checked every candidate against v1's phased
driver: each candidate with attention slices or another load width differed by its summation order and was refused
as a wrong result.)

How the decode phases play the roles the evidence-guided rules know (``argus_lab.optimize.RULES``):

==========  ====================================================  ==================================================
role        device regions                                        what a rule then moves
==========  ====================================================  ==================================================
memory      qkv, o_proj, gate_up, down, lm_head (weight streams)  ``stages`` up (pipelined loads), ``bk`` up
math        norm_attn, norm_mlp, norm_final                       (the other side of the memory share)
softmax     attention, wait_attention                             ``splits`` up (the ``tile_n`` role: more, shorter
                                                                  attention items), ``num_warps`` up
epilogue    the other four barrier waits                          a second program per SM (``ctas_per_sm``)
==========  ====================================================  ==================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

import argus_lab
from examples.gpu.decode.model import DecodeShape, PackedWeights
from examples.gpu.decode.runner import Decoder, KernelConfig, events_per_program

AXES: dict[str, tuple[Any, ...]] = {
    "splits": (1, 4, 8),
    "stages": (1, 3),
    "unroll": (1, 4),
    "num_warps": (4, 8),
    "bk": (256, 512),
    "ctas_per_sm": (1, 2),
}
ROLES = {"tile_n": "splits", "stages": "stages", "tile_k": "bk", "warps": "num_warps", "ctas_per_sm": "ctas_per_sm"}
DEFAULT: dict[str, Any] = {"splits": 1, "stages": 1, "unroll": 1, "num_warps": 4, "bk": 256, "ctas_per_sm": 1}
"""The megakernel's first version (``KernelConfig()``).

The wait after the attention counts as attention: most programs have no attention item and wait there for the
ones that do (v1: a median program's attention is 1 us and its wait 846 us), so the per-program median of the
attention region alone would hide the phase's critical path from the rules."""
PHASE_ROLES = {
    "memory": "qkv,o_proj,gate_up,down,lm_head",
    "math": "norm_attn,norm_mlp,norm_final",
    "softmax": "attention,wait_attention",
    "epilogue": "wait_qkv,wait_o_proj,wait_gate_up,wait_down",
}


def config_of(params: Mapping[str, Any], sms: int) -> KernelConfig:
    """The kernel config of a candidate's parameters."""
    p = dict(params)
    per_sm = int(p.pop("ctas_per_sm", 1))
    return replace(KernelConfig(), **p, programs=per_sm * sms if per_sm != 1 else 0)


def space_configs(sms: int) -> list[KernelConfig]:
    """Every valid candidate's config (for a pool that compiles them ahead)."""
    import itertools

    names = list(AXES)
    out = []
    for values in itertools.product(*AXES.values()):
        p = dict(zip(names, values, strict=True))
        if _invalid_params(p) is None:
            out.append(config_of(p, sms))
    return out


def _invalid_params(p: Mapping[str, Any]) -> str | None:
    if int(p["stages"]) > 1 and int(p["unroll"]) > 1:
        return "pipelined loads (stages > 1) and an unrolled loop together: one way to keep loads in flight at a time"
    return None


class DecodeTarget:
    """One greedy decode step of the TinyLlama-shaped model at position ``pos`` (batch 1), by the megakernel."""

    module = "examples.gpu.decode.kernels"
    kernel = "decode_megakernel"
    phase_roles: ClassVar[dict[str, str]] = PHASE_ROLES

    def __init__(
        self,
        w: PackedWeights,
        k_cache: Any,
        v_cache: Any,
        token: int,
        pos: int,
        reference_fp32: Any,
        ref_error: float,
        *,
        sms: int = 132,
    ) -> None:
        self.w, self.k_cache, self.v_cache = w, k_cache, v_cache
        self.token, self.pos, self.sms = token, pos, sms
        self.reference_fp32, self.ref_error = reference_fp32, ref_error
        self._phased: Any = None  # the phased driver's logits with the candidate being measured
        s: DecodeShape = w.shape
        self.name = f"decode tinyllama-shape L{s.layers} pos{pos}"
        self.region = "decode_step"
        try:
            import torch

            self.device = str(torch.cuda.get_device_name()) if torch.cuda.is_available() else "NVIDIA H200"
        except Exception:
            self.device = "NVIDIA H200"

    def default(self) -> Any:
        return argus_lab.optimize.Candidate.of(DEFAULT, "default")

    def space(self) -> Any:
        def invalid(c: Any) -> str | None:
            return _invalid_params(c.as_dict())

        return argus_lab.optimize.Space.of(
            AXES, ROLES, invalid, note="pipelined loads and an unrolled k-loop are not combined"
        )

    def work(self) -> Any:
        s = self.w.shape
        weights = s.weight_bytes()
        kv = 2 * s.layers * s.kv_heads * self.pos * s.head_dim * 2
        # two FLOPs per bf16 weight (a multiply-add per parameter): as many FLOPs as weight bytes
        return argus_lab.optimize.Work(flops=float(weights), bytes=float(weights + kv), dtype="bf16")

    def model(self, c: Any) -> Any:
        p = c.as_dict()
        s = self.w.shape
        programs = int(p["ctas_per_sm"]) * self.sms
        return argus_lab.optimize.Model(
            tiles=s.heads * int(p["splits"]),
            programs=programs,
            sms=self.sms,
            shared_bytes=None,
            step_flops=None,
            note="tiles: attention work items of one layer (heads x slices); the weight phases have 128-352 row tiles",
        )

    def prepare(self, c: Any) -> Any:
        cfg = config_of(c.as_dict(), self.sms)
        dec = Decoder(self.w, self.k_cache.clone(), self.v_cache.clone(), cfg)
        # the reference of this candidate's arithmetic (attention slices and load widths change the summation order)
        self._phased = dec.phased_step(self.token, self.pos, programs=dec.programs).clone()
        return _Prepared(dec, self.token, self.pos)

    def check(self, output: Any) -> str | None:
        """The logits must equal the phased driver's with the same config (same arithmetic) and be as close to the
        fp32 model's as transformers' own bf16 step is (within twice its distance), with the same top-1 token."""
        import math

        same = float((output.float() - self._phased.float()).abs().max())
        scale = float(self._phased.abs().max())
        if not math.isfinite(same) or same > 1e-3 * max(scale, 1e-6):
            return f"max |logits - the phased driver's with this config| = {same:.4g} > 1e-3 x {scale:.4g}"
        err = float((output.float() - self.reference_fp32.float()).abs().max())
        if err > max(2 * self.ref_error, 1e-3):
            return f"max |logits - the fp32 model's| = {err:.4g} > twice transformers' bf16 error {self.ref_error:.4g}"
        if int(output.argmax()) != int(self.reference_fp32.argmax()):
            return "the top-1 token differs from the fp32 model's"
        return None


class _Prepared:
    def __init__(self, dec: Decoder, token: int, pos: int) -> None:
        self.dec, self.token, self.pos = dec, token, pos
        self.facts = None

    def launch(self) -> Any:
        import argus_lab.device
        from examples.gpu.decode import kernels as K

        dec = self.dec
        probes = [
            argus_lab.device.probe(
                K.decode_megakernel, programs=dec.programs, events=events_per_program(e - b, h), regions=K.PHASES,
                device=dec.x.device,
            )
            for b, e, h in dec.launches()
        ]  # fmt: skip
        return dec.step(self.token, self.pos, probes=probes if any(p is not None for p in probes) else None)

    def timer(self) -> Any:
        from examples.gpu.optimize_targets import CudaEvents

        return CudaEvents()

    def close(self) -> None:
        self.dec = None  # type: ignore[assignment]
