"""Optimisation targets (``argus_lab.optimize.Target``) for the persistent GEMM and attention kernels.

A candidate is a Triton config plus launch settings of one kernel on one shape. Its variants are compiled for
sm_90 from a :class:`KernelSpec` (picklable, so a pool of CPU processes compiles them ahead, without a GPU, into
Triton's cache) and launched as Triton ``CompiledKernel`` objects directly: the clean variant (``probe=None``, the
markers compile to nothing) for the timing run, the instrumented one (the probe buffer
``argus_lab.device.probe`` hands out in the planned instrumented run) for the device phases. :func:`compile_job`
is what the pool runs: it compiles a spec and reads the compiler's facts of the cubin (``cuobjdump -res-usage``:
registers, local memory; Triton's metadata: shared memory, warps, stages).

Nothing here fakes a GPU: :meth:`GemmTarget.prepare` compiles on any machine and needs CUDA only to load and
launch; the inputs are made on first use.
"""

from __future__ import annotations

import importlib
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from argus_lab.optimize import Candidate, CandidateError, Model, Space, StaticFacts, Work

ARCH = 90
EVENT_CAP = 8192
"""Events one program records at most in an instrumented launch (a probe of 132 programs is then at most 17 MB).
Every configuration of the benchmark stays below it; a CTA that records more keeps its first events, the decoder
counts the dropped ones, and the evaluation says so (``Phases.sampled``)."""
SHARED_LIMIT = 232448
"""Bytes of shared memory one CTA may use on sm_90 (227 KiB)."""
ACC_REGISTERS = 128
"""The space leaves out tiles whose fp32 accumulator alone needs more than this many registers per thread."""

DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


@dataclass(frozen=True)
class KernelSpec:
    """What to compile: the kernel function, its signature and constants, and the compile options."""

    module: str
    function: str
    signature: tuple[tuple[str, str], ...]
    constexprs: tuple[tuple[str, Any], ...]
    divisible: tuple[str, ...]
    num_warps: int
    num_stages: int
    arch: int = ARCH

    @property
    def key(self) -> str:
        """A stable text key of the spec."""
        return json.dumps(
            [self.module, self.function, self.signature, self.constexprs, self.divisible, self.num_warps,
             self.num_stages, self.arch],
            default=str,
        )  # fmt: skip


def compile_spec(spec: KernelSpec) -> Any:
    """Compile ``spec`` for sm_``arch`` (no GPU needed); Triton's cache answers a spec compiled before."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = getattr(importlib.import_module(spec.module), spec.function)
    names = list(fn.arg_names)
    sig = dict(spec.signature)
    consts = dict(spec.constexprs)
    for n in consts:
        sig[n] = "constexpr"
    missing = [n for n in names if n not in sig]
    if missing:
        msg = f"spec of {spec.function} misses {missing}"
        raise ValueError(msg)
    sig = {n: sig[n] for n in names}
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in spec.divisible}
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    opts = {"num_warps": spec.num_warps, "num_stages": spec.num_stages}
    return triton.compile(src, target=GPUTarget("cuda", spec.arch, 32), options=opts)


def facts_of_kernel(spec: KernelSpec, kernel: Any) -> StaticFacts:
    """Registers and local memory from ``cuobjdump -res-usage`` of the cubin; shared memory, warps and stages from
    Triton's metadata (dynamic shared memory; the static part the binary declares is added)."""
    from argus_lab.backends.compiler.artifacts import resource_usage

    md = kernel.metadata
    usage = resource_usage(bytes(kernel.asm["cubin"])).get(str(md.name))
    shared = int(md.shared) + (usage.shared if usage is not None else 0)
    return StaticFacts(
        kernel=str(md.name),
        registers=usage.registers if usage is not None else None,
        local_bytes=usage.local if usage is not None else None,
        shared_bytes=shared,
        num_warps=int(md.num_warps),
        num_stages=int(md.num_stages),
    )


@dataclass(frozen=True)
class CompileResult:
    """What :func:`compile_job` gives back (picklable)."""

    key: str
    facts: StaticFacts | None
    error: str | None
    seconds: float


def compile_job(spec: KernelSpec) -> CompileResult:
    """Compile one spec (filling Triton's cache) and read its facts; a failure to compile is returned, not raised."""
    t0 = time.perf_counter()
    try:
        kernel = compile_spec(spec)
    except Exception as exc:  # the candidate is recorded as compile_failed with this text
        text = f"{type(exc).__name__}: {exc}".strip()
        return CompileResult(spec.key, None, _short(text), time.perf_counter() - t0)
    try:
        f = facts_of_kernel(spec, kernel)
    except Exception:  # facts are evidence, not a condition to run: unknown ones stay None
        md = kernel.metadata
        f = StaticFacts(str(md.name), None, None, int(md.shared), int(md.num_warps), int(md.num_stages))
    return CompileResult(spec.key, f, None, time.perf_counter() - t0)


def _short(text: str, limit: int = 600) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    out = " | ".join(lines[:3] + (["..."] if len(lines) > 6 else []) + lines[-3:] if len(lines) > 6 else lines)
    return out[:limit]


@dataclass
class Builds:
    """Compile results of this process: facts and failures by spec key (a compile pool's results fill it)."""

    facts: dict[str, StaticFacts] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def add(self, result: CompileResult) -> None:
        """Keep one pool result."""
        if result.error is not None:
            self.errors[result.key] = result.error
        elif result.facts is not None:
            self.facts[result.key] = result.facts

    def kernel(self, spec: KernelSpec) -> Any:
        """The compiled kernel (from Triton's cache when a pool compiled it); raises ``CandidateError('compile')``."""
        if spec.key in self.errors:
            raise CandidateError("compile", self.errors[spec.key])
        try:
            kernel = compile_spec(spec)
        except Exception as exc:
            self.errors[spec.key] = _short(f"{type(exc).__name__}: {exc}")
            raise CandidateError("compile", self.errors[spec.key]) from exc
        if spec.key not in self.facts:
            try:
                self.facts[spec.key] = facts_of_kernel(spec, kernel)
            except Exception:  # facts are evidence, not a condition to run
                pass
        return kernel


# -- launching -------------------------------------------------------------------------------------------------
class CudaEvents:
    """CUDA events around each launch (``argus_lab.optimize.Timer``)."""

    def __init__(self) -> None:
        self._pairs: list[tuple[Any, Any]] = []
        self._start: Any = None

    def start(self) -> None:
        import torch

        self._start = torch.cuda.Event(enable_timing=True)
        self._start.record()

    def stop(self) -> None:
        import torch

        end = torch.cuda.Event(enable_timing=True)
        end.record()
        self._pairs.append((self._start, end))

    def elapsed_ns(self) -> list[float]:
        import torch

        torch.cuda.synchronize()
        return [float(s.elapsed_time(e)) * 1e6 for s, e in self._pairs]


class LaunchedVariant:
    """A prepared candidate (``argus_lab.optimize.Prepared``): each launch asks ``argus_lab.device.probe`` for its
    probe and launches the clean variant without one (every run but the instrumented one) or the instrumented
    variant with it (the instrumented run of ``dev.*`` signals, which hands out the probe buffers)."""

    def __init__(
        self,
        builds: Builds,
        kernel: Any,
        clean: KernelSpec,
        instrumented: KernelSpec | None,
        args: list[Any],
        probe_index: int,
        grid: int,
        events: int,
        regions: Any,
        out: Any,
    ) -> None:
        self._builds = builds
        self.facts = builds.facts.get(clean.key)
        self.kernel_name = clean.function
        try:
            self._runner = kernel[(grid, 1, 1)]  # loads the module: resource limits are checked here
        except Exception as exc:
            raise CandidateError("launch", f"{type(exc).__name__}: {exc}") from exc
        self._spec_instr = instrumented
        self._instr_runner: Any = None  # loaded in the instrumented run only (the timing run's compiler facts are
        # then those of the clean kernel alone)
        self._args = args
        self._probe_index = probe_index
        self._grid = grid
        self._events = min(events, EVENT_CAP)
        self._regions = regions
        self._out = out

    def launch(self) -> Any:
        import argus_lab.device

        probe = None
        if self._spec_instr is not None:
            probe = argus_lab.device.probe(
                self.kernel_name, programs=self._grid, events=self._events, regions=self._regions,
                device=self._out.device,
            )  # fmt: skip
        if probe is None:
            self._runner(*self._args)
            return self._out
        if self._instr_runner is None:
            self._instr_runner = self._builds.kernel(self._spec_instr)[(self._grid, 1, 1)]
        args = list(self._args)
        args[self._probe_index] = probe
        self._instr_runner(*args)
        return self._out

    def timer(self) -> CudaEvents:
        return CudaEvents()

    def close(self) -> None:
        self._runner = None
        self._instr_runner = None
        self._args = []


def _torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, DTYPES[name])


def _div16(names_values: Mapping[str, int]) -> tuple[str, ...]:
    return tuple(n for n, v in names_values.items() if v % 16 == 0)


def _device_name() -> str | None:
    try:
        import torch

        return str(torch.cuda.get_device_name()) if torch.cuda.is_available() else None
    except Exception:
        return None


# -- the persistent GEMM ---------------------------------------------------------------------------------------
GEMM_DEFAULT: dict[str, Any] = {
    "block_m": 128, "block_n": 128, "block_k": 64, "group_m": 8, "num_warps": 8, "num_stages": 3, "ctas_per_sm": 1,
}  # fmt: skip
"""The configuration examples/gpu/persistent_gemm.py ships with (``GemmConfig()``), one program per SM."""
GEMM_AXES: dict[str, tuple[Any, ...]] = {
    "block_m": (64, 128, 256),
    "block_n": (64, 128, 256),
    "block_k": (32, 64, 128),
    "group_m": (1, 8, 16),
    "num_warps": (4, 8),
    "num_stages": (2, 3, 4, 5),
    "ctas_per_sm": (1, 2),
}
GEMM_ROLES = {
    "tile_m": "block_m", "tile_n": "block_n", "tile_k": "block_k", "group": "group_m", "warps": "num_warps",
    "stages": "num_stages", "ctas_per_sm": "ctas_per_sm",
}  # fmt: skip


class GemmTarget:
    """``C = A @ B`` (row-major, ``m x k`` times ``k x n``) by examples/gpu/persistent_gemm.py."""

    module = "examples.gpu.persistent_gemm"
    kernel = "persistent_gemm"
    phase_roles: ClassVar[dict[str, str]] = {"memory": "load", "math": "mma", "epilogue": "epilogue", "step": "load"}

    def __init__(
        self,
        m: int,
        n: int,
        k: int,
        dtype: str = "bf16",
        *,
        builds: Builds | None = None,
        sms: int = 132,
        seed: int = 0,
    ) -> None:
        if dtype not in DTYPES:
            msg = f"dtype {dtype!r}: use one of {', '.join(DTYPES)}"
            raise ValueError(msg)
        self.m, self.n, self.k, self.dtype = m, n, k, dtype
        self.sms = sms
        self.seed = seed
        self.builds = builds or Builds()
        self.name = f"gemm {dtype} {m}x{n}x{k}"
        self.region = f"gemm_{dtype}_{m}x{n}x{k}"
        self.device = _device_name() or "NVIDIA H200"
        self._inputs: tuple[Any, Any, Any] | None = None
        self._ref: Any = None

    # the static side
    def default(self) -> Candidate:
        return Candidate.of(GEMM_DEFAULT, "default")

    def _invalid(self, c: Candidate) -> str | None:
        p = c.as_dict()
        bm, bn, bk, w = int(p["block_m"]), int(p["block_n"]), int(p["block_k"]), int(p["num_warps"])
        if bm > max(self.m, 64) or bn > max(self.n, 64) or bk > max(self.k, 32):
            return f"a {bm}x{bn}x{bk} tile is larger than the {self.m}x{self.n}x{self.k} problem"
        if bm * bn / (32 * w) > ACC_REGISTERS:
            return f"the {bm}x{bn} fp32 accumulator needs {bm * bn // (32 * w)} registers per thread at {w} warps"
        smem = self._shared(p)
        if smem > SHARED_LIMIT:
            return f"estimated {smem} B of shared memory per CTA, over the {SHARED_LIMIT} B limit"
        return None

    def _shared(self, p: Mapping[str, Any]) -> int:
        return int(p["num_stages"]) * (int(p["block_m"]) + int(p["block_n"])) * int(p["block_k"]) * 2

    def space(self) -> Space:
        return Space.of(
            GEMM_AXES,
            GEMM_ROLES,
            self._invalid,
            note="tiles no larger than the problem; fp32 accumulator <= 128 registers per thread; estimated shared "
            "memory (stages x (block_m + block_n) x block_k x 2 B) <= 227 KiB",
        )

    def work(self) -> Work:
        return Work(
            2.0 * self.m * self.n * self.k, 2.0 * (self.m * self.k + self.k * self.n + self.m * self.n), self.dtype
        )

    def model(self, c: Candidate) -> Model:
        p = c.as_dict()
        tiles = math.ceil(self.m / int(p["block_m"])) * math.ceil(self.n / int(p["block_n"]))
        return Model(
            tiles=tiles,
            programs=min(int(p["ctas_per_sm"]) * self.sms, tiles),
            sms=self.sms,
            shared_bytes=self._shared(p),
            step_flops=2.0 * int(p["block_m"]) * int(p["block_n"]) * int(p["block_k"]),
        )

    def specs(self, c: Candidate) -> tuple[KernelSpec, KernelSpec]:
        """The clean and the instrumented variant of a candidate."""
        p = c.as_dict()
        elem = f"*{self.dtype}"
        ints = {"M": self.m, "N": self.n, "K": self.k, "stride_am": self.k, "stride_bk": self.n, "stride_cm": self.n}
        sig = [("a_ptr", elem), ("b_ptr", elem), ("c_ptr", elem), *((n, "i32") for n in ints)]
        consts: list[tuple[str, Any]] = [
            ("stride_ak", 1), ("stride_bn", 1), ("stride_cn", 1),
            ("BLOCK_M", int(p["block_m"])), ("BLOCK_N", int(p["block_n"])), ("BLOCK_K", int(p["block_k"])),
            ("GROUP_M", int(p["group_m"])), ("NUM_SMS", int(p["ctas_per_sm"]) * self.sms),
        ]  # fmt: skip
        div = ("a_ptr", "b_ptr", "c_ptr", *_div16(ints))
        w, s = int(p["num_warps"]), int(p["num_stages"])
        clean = KernelSpec(
            self.module, self.kernel, tuple(sig), (*consts, ("probe", None), ("MARKS", "none")), div, w, s
        )
        instr = KernelSpec(
            self.module, self.kernel, (*sig, ("probe", "*i64")), (*consts, ("MARKS", "kstep")), div, w, s
        )
        return clean, instr

    # the GPU side
    def _materialize(self) -> tuple[Any, Any, Any]:
        if self._inputs is None:
            import torch

            from examples.gpu.persistent_gemm import make_inputs

            a, b = make_inputs(self.m, self.n, self.k, seed=self.seed)
            a, b = a.to(_torch_dtype(self.dtype)), b.to(_torch_dtype(self.dtype))
            self._inputs = (a, b, torch.empty((self.m, self.n), device=a.device, dtype=a.dtype))
        return self._inputs

    def prepare(self, c: Candidate) -> LaunchedVariant:
        from examples.gpu.persistent_gemm import PHASES

        clean, instr = self.specs(c)
        kernel = self.builds.kernel(clean)  # a compile failure raises before any input is made
        a, b, out = self._materialize()
        out.fill_(float("nan"))  # a variant that writes nothing must not pass the check on the last one's output
        p = c.as_dict()
        model = self.model(c)
        k_steps = math.ceil(self.k / int(p["block_k"]))
        per_cta = math.ceil(model.tiles / model.programs) * (4 * k_steps + 2)
        args = [
            a, b, out, self.m, self.n, self.k, self.k, 1, self.n, 1, self.n, 1, None,
            int(p["block_m"]), int(p["block_n"]), int(p["block_k"]), int(p["group_m"]),
            int(p["ctas_per_sm"]) * self.sms, "none",
        ]  # fmt: skip
        return LaunchedVariant(self.builds, kernel, clean, instr, args, 12, model.programs, per_cta, PHASES, out)

    def check(self, output: Any) -> str | None:
        import torch

        a, b, _ = self._materialize()
        if self._ref is None:
            self._ref = torch.matmul(a, b).float()
        err = float((output.float() - self._ref).abs().max())
        scale = float(self._ref.abs().max())
        if not math.isfinite(err) or err > 2e-2 * scale:
            return f"max |C - A@B| = {err:.4g}, over 2% of max |A@B| = {scale:.4g} (torch.matmul reference)"
        return None

    def release(self) -> None:
        """Free the inputs and the reference."""
        self._inputs = None
        self._ref = None


# -- the persistent attention ----------------------------------------------------------------------------------
ATTN_DEFAULT: dict[str, Any] = {
    "block_m": 128, "block_n": 64, "num_warps": 8, "num_stages": 2, "heavy_first": False, "ctas_per_sm": 1,
}  # fmt: skip
"""``AttentionConfig()`` of examples/gpu/persistent_attention.py."""
ATTN_AXES: dict[str, tuple[Any, ...]] = {
    "block_m": (64, 128),
    "block_n": (32, 64, 128),
    "num_warps": (4, 8),
    "num_stages": (1, 2, 3, 4),
    "heavy_first": (False, True),
    "ctas_per_sm": (1, 2),
}
ATTN_ROLES = {
    "tile_m": "block_m", "tile_n": "block_n", "warps": "num_warps", "stages": "num_stages", "order": "heavy_first",
    "ctas_per_sm": "ctas_per_sm",
}  # fmt: skip


class AttentionTarget:
    """Flash-attention forward by examples/gpu/persistent_attention.py on ``(batch, heads, seq, head_dim)``."""

    module = "examples.gpu.persistent_attention"
    kernel = "persistent_attention"
    phase_roles: ClassVar[dict[str, str]] = {
        "math": "qk,pv",
        "softmax": "softmax",
        "epilogue": "epilogue",
        "step": "qk",
    }

    def __init__(
        self,
        batch: int,
        heads: int,
        seq: int,
        head_dim: int,
        *,
        causal: bool,
        dtype: str = "bf16",
        builds: Builds | None = None,
        sms: int = 132,
        seed: int = 0,
    ) -> None:
        if dtype not in DTYPES:
            msg = f"dtype {dtype!r}: use one of {', '.join(DTYPES)}"
            raise ValueError(msg)
        self.batch, self.heads, self.seq, self.head_dim = batch, heads, seq, head_dim
        self.causal, self.dtype, self.sms, self.seed = causal, dtype, sms, seed
        self.builds = builds or Builds()
        kind = "causal" if causal else "full"
        self.name = f"attn {dtype} b{batch} h{heads} n{seq} d{head_dim} {kind}"
        self.region = f"attn_{dtype}_b{batch}h{heads}n{seq}d{head_dim}_{kind}"
        self.device = _device_name() or "NVIDIA H200"
        self._inputs: tuple[Any, Any, Any, Any] | None = None
        self._ref: Any = None

    def default(self) -> Candidate:
        return Candidate.of(ATTN_DEFAULT, "default")

    def _shared(self, p: Mapping[str, Any]) -> int:
        stages = max(int(p["num_stages"]), 1)
        bm, bn, d = int(p["block_m"]), int(p["block_n"]), self.head_dim
        return stages * 2 * bn * d * 2 + bm * d * 2

    def _invalid(self, c: Candidate) -> str | None:
        p = c.as_dict()
        bm, bn, w = int(p["block_m"]), int(p["block_n"]), int(p["num_warps"])
        if self.seq % bm or self.seq % bn:
            return f"seq {self.seq} is not a multiple of block_m {bm} and block_n {bn}"
        regs = (bm * self.head_dim + bm * bn) / (32 * w)
        if regs > 1.5 * ACC_REGISTERS:
            return f"the accumulator and score tile need {regs:.0f} fp32 registers per thread at {w} warps"
        smem = self._shared(p)
        if smem > SHARED_LIMIT:
            return f"estimated {smem} B of shared memory per CTA, over the {SHARED_LIMIT} B limit"
        if not self.causal and p["heavy_first"]:
            return "without a causal mask every tile does the same work: the tile order is not a choice"
        return None

    def space(self) -> Space:
        return Space.of(
            ATTN_AXES,
            ATTN_ROLES,
            self._invalid,
            note="seq a multiple of both blocks; accumulator + scores <= 192 fp32 registers per thread; estimated "
            "shared memory (stages x 2 x block_n x head_dim x 2 B + the q tile) <= 227 KiB; heavy_first only with "
            "a causal mask",
        )

    def work(self) -> Work:
        from examples.gpu.persistent_attention import flops

        f = flops(self.batch, self.heads, self.seq, self.head_dim, self.causal)
        return Work(f, 4.0 * self.batch * self.heads * self.seq * self.head_dim * 2, self.dtype)

    def model(self, c: Candidate) -> Model:
        p = c.as_dict()
        tiles = self.batch * self.heads * math.ceil(self.seq / int(p["block_m"]))
        return Model(
            tiles=tiles,
            programs=min(int(p["ctas_per_sm"]) * self.sms, tiles),
            sms=self.sms,
            shared_bytes=self._shared(p),
            step_flops=4.0 * int(p["block_m"]) * int(p["block_n"]) * self.head_dim,
            note="causal tiles differ in work (late query blocks have more KV blocks)" if self.causal else "",
        )

    def specs(self, c: Candidate) -> tuple[KernelSpec, KernelSpec]:
        p = c.as_dict()
        elem = f"*{self.dtype}"
        ints = {"heads_total": self.batch * self.heads, "n_ctx": self.seq, "n_kv": self.seq}
        sig = [
            ("q_ptr", elem), ("k_ptr", elem), ("v_ptr", elem), ("o_ptr", elem), ("qk_scale", "fp32"),
            *((n, "i32") for n in ints),
        ]  # fmt: skip
        consts: list[tuple[str, Any]] = [
            ("HEAD_DIM", self.head_dim), ("BLOCK_M", int(p["block_m"])), ("BLOCK_N", int(p["block_n"])),
            ("CAUSAL", self.causal), ("HEAVY_FIRST", bool(p["heavy_first"])),
            ("NUM_PROGRAMS", int(p["ctas_per_sm"]) * self.sms),
        ]  # fmt: skip
        div = ("q_ptr", "k_ptr", "v_ptr", "o_ptr", *_div16(ints))
        w, s = int(p["num_warps"]), int(p["num_stages"])
        clean = KernelSpec(
            self.module, self.kernel, tuple(sig), (*consts, ("probe", None), ("MARKS", "none")), div, w, s
        )
        instr = KernelSpec(
            self.module, self.kernel, (*sig, ("probe", "*i64")), (*consts, ("MARKS", "block")), div, w, s
        )
        return clean, instr

    def _materialize(self) -> tuple[Any, Any, Any, Any]:
        if self._inputs is None:
            import torch

            from examples.gpu.persistent_attention import make_inputs

            q, k, v = make_inputs(
                self.batch, self.heads, self.seq, self.head_dim, dtype=_torch_dtype(self.dtype), seed=self.seed
            )
            self._inputs = (q, k, v, torch.empty_like(q))
        return self._inputs

    def prepare(self, c: Candidate) -> LaunchedVariant:
        from examples.gpu.persistent_attention import LOG2E, PHASES

        clean, instr = self.specs(c)
        kernel = self.builds.kernel(clean)
        q, k, v, out = self._materialize()
        out.fill_(float("nan"))  # a variant that writes nothing must not pass the check on the last one's output
        p = c.as_dict()
        model = self.model(c)
        blocks = math.ceil(self.seq / int(p["block_n"]))
        per_cta = math.ceil(model.tiles / model.programs) * (6 * blocks + 2)
        args = [
            q, k, v, out, None, LOG2E / math.sqrt(self.head_dim), self.batch * self.heads, self.seq, self.seq,
            self.head_dim, int(p["block_m"]), int(p["block_n"]), self.causal, bool(p["heavy_first"]),
            int(p["ctas_per_sm"]) * self.sms, "none",
        ]  # fmt: skip
        return LaunchedVariant(self.builds, kernel, clean, instr, args, 4, model.programs, per_cta, PHASES, out)

    def check(self, output: Any) -> str | None:
        from examples.gpu.persistent_attention import reference

        q, k, v, _ = self._materialize()
        if self._ref is None:
            self._ref = reference(q, k, v, self.causal).float()
        err = float((output.float() - self._ref).abs().max())
        if not math.isfinite(err) or err > 2e-2:
            return f"max |O - sdpa| = {err:.4g} > 0.02 (torch scaled_dot_product_attention reference)"
        return None

    def release(self) -> None:
        """Free the inputs and the reference."""
        self._inputs = None
        self._ref = None
