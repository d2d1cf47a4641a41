"""How one candidate of the recorded table is compiled and launched: the same Triton JIT call for the compile pool
(``warmup`` with dtypes in place of tensors, no GPU needed) and for the GPU process (tensors), so the GPU process
finds every kernel in Triton's cache; Triton's autotuner (baseline (a)) wraps the very same JIT function.

* :func:`call` builds the JIT call of a candidate: the kernel function, its positional arguments, its constexprs
  and compile options, and the grid.
* :func:`compile_unit` is what a pool process runs: ``fn.warmup`` with a stand-in driver that answers sm_90
  (:class:`Sm90Driver`), then the compiler's facts of the cubin.
* :func:`events_per_slot` and :func:`probe_buffer` size and make the instrumented launch's probe buffer;
  :func:`phases_job` decodes one (in the pool) into ``argus_lab.optimize.Phases``.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

from bench.recorded_configs import PEAKS, SMS, Config

EVENT_CAP = 2048
"""Events one program records at most in an instrumented launch; more are dropped and the phases say ``sampled``
(shares then cover the first events).  132 x 2 programs x 2048 events is at most 8.7 MB of probe buffer."""
LOG2E = 1.4426950408889634
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn"}


@dataclass(frozen=True)
class Call:
    """One JIT launch: ``fn[grid](*args, **kwargs)``; ``probe_index`` is where the probe goes in ``args``."""

    module: str
    function: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    grid: int
    probe_index: int


def split(cfg: Config, p: dict[str, Any]) -> int:
    """Slices of each output tile's inner loop (``split_k`` of a GEMM, ``split_kv`` of attention; 1 when the
    candidate has none, as in recordings made before the split variants)."""
    return int(p.get("split_k" if cfg.kind == "gemm" else "split_kv", 1))


def tail_split(cfg: Config, p: dict[str, Any]) -> int:
    """Slices of each tile of the last, partial wave (``tail_split`` of a GEMM: the full waves' tiles stay whole;
    1 when the candidate has none)."""
    return int(p.get("tail_split", 1)) if cfg.kind == "gemm" else 1


def output_tiles(cfg: Config, p: dict[str, Any]) -> int:
    """Output tiles of the candidate's tile shape."""
    if cfg.kind == "gemm":
        return math.ceil(cfg.m / p["block_m"]) * math.ceil(cfg.n / p["block_n"])
    return cfg.batch * cfg.heads * math.ceil(cfg.seq_q / p["block_m"])


def tiles(cfg: Config, p: dict[str, Any]) -> int:
    """Work units of the persistent loop: output tiles times the slices of each (split-K / split-KV).

    A tail split counts its work in slices too (every tile as ``tail_split`` slices): its full waves' whole tiles
    are ``tail_split`` slices each in one unit, so the most slices one program runs, and with it the balance of
    its waves, is what this count gives, and so is the grid (:func:`programs`)."""
    return output_tiles(cfg, p) * split(cfg, p) * tail_split(cfg, p)


def programs(cfg: Config, p: dict[str, Any], sms: int = SMS) -> int:
    """The persistent grid: ``ctas_per_sm`` programs per SM, never more than there are tiles."""
    return min(int(p["ctas_per_sm"]) * sms, tiles(cfg, p))


def steps_per_tile(cfg: Config, p: dict[str, Any]) -> int:
    """Inner-loop steps of the longest tile (k-steps of a GEMM tile, KV blocks of an attention tile; a tail split's
    full-wave tiles are whole)."""
    if cfg.kind == "gemm":
        return math.ceil(math.ceil(cfg.k / p["block_k"]) / split(cfg, p))
    return math.ceil(math.ceil(cfg.seq_kv / p["block_n"]) / split(cfg, p))


def step_flops(cfg: Config, p: dict[str, Any]) -> float:
    """FLOPs of one inner-loop step of one tile."""
    if cfg.kind == "gemm":
        return 2.0 * p["block_m"] * p["block_n"] * p["block_k"]
    return 4.0 * p["block_m"] * p["block_n"] * cfg.head_dim


def ideal_step_ns(cfg: Config, p: dict[str, Any]) -> float:
    """One step at one SM's share of the H200's tensor-core peak."""
    return step_flops(cfg, p) / (PEAKS[cfg.dtype] / SMS) * 1e9


def events_per_slot(cfg: Config, p: dict[str, Any], sms: int = SMS) -> int:
    """The most marker events one program records, capped at :data:`EVENT_CAP`."""
    per_prog = math.ceil(tiles(cfg, p) / programs(cfg, p, sms))
    per_tile = (4 * steps_per_tile(cfg, p) + 2) if cfg.kind == "gemm" else (6 * steps_per_tile(cfg, p) + 2)
    return min(per_prog * per_tile + 2, EVENT_CAP)


def call(cfg: Config, p: dict[str, Any], tensors: dict[str, Any], *, instrumented: bool, sms: int = SMS) -> Call:
    """The JIT call of candidate ``p`` on ``cfg``; ``tensors`` holds tensors (or dtypes, for ``warmup``) by name:
    GEMM ``a, b, c, probe``; attention ``q, k, v, o, probe`` (``probe`` only when ``instrumented``); a split
    candidate also its scratch (:func:`scratch_shapes`)."""
    probe = tensors.get("probe") if instrumented else None
    grid = programs(cfg, p, sms)
    opts = (("num_warps", int(p["num_warps"])), ("num_stages", int(p["num_stages"])))
    parts = split(cfg, p)
    if cfg.kind == "gemm":
        tail = tail_split(cfg, p) > 1
        parts = max(parts, tail_split(cfg, p))
        m, n, k = cfg.m, cfg.n, cfg.k
        # fp8: B is K-major (its transpose is contiguous), as torch._scaled_mm takes it
        sbk, sbn = (1, k) if cfg.dtype == "fp8" else (n, 1)
        if p.get("tma"):
            # Triton's Hopper warp specialisation (4 warps a group: one producer group, two consumer groups)
            # partitions neither a flattened tile loop, nor the split epilogue, nor markers inside the k-loop: a
            # warp-specialised candidate's instrumented launch keeps the epilogue and program markers only
            ws = bool(p.get("warp_spec"))
            args = (tensors["a"], tensors["b"], tensors["c"], m, n, k, probe)
            kw = (
                ("BLOCK_M", int(p["block_m"])), ("BLOCK_N", int(p["block_n"])), ("BLOCK_K", int(p["block_k"])),
                ("GROUP_M", int(p["group_m"])), ("NUM_SMS", int(p["ctas_per_sm"]) * sms),
                ("B_KMAJOR", cfg.dtype == "fp8"), ("EPI_SUBTILE", not ws), ("FLATTEN", not ws),
                ("MARKS", "kstep" if instrumented and not ws else "none"), *((("WARP_SPEC", True),) if ws else ()),
                *opts,
            )  # fmt: skip
            return Call("examples.gpu.tma_gemm", "tma_gemm", args, kw, grid, 6)
        if parts > 1:  # split-K, or with ``tail`` only the last wave's tiles split
            args = (tensors["a"], tensors["b"], tensors["c"], tensors["ws"], tensors["locks"], m, n, k, k, 1, sbk,
                    sbn, n, 1, probe)  # fmt: skip
            kw = (
                ("BLOCK_M", int(p["block_m"])), ("BLOCK_N", int(p["block_n"])), ("BLOCK_K", int(p["block_k"])),
                ("GROUP_M", int(p["group_m"])), ("SPLIT_K", parts), ("NUM_SMS", int(p["ctas_per_sm"]) * sms),
                ("MARKS", "kstep" if instrumented else "none"), *((("TAIL", True),) if tail else ()), *opts,
            )  # fmt: skip
            return Call("examples.gpu.split_gemm", "split_gemm", args, kw, grid, 14)
        args = (tensors["a"], tensors["b"], tensors["c"], m, n, k, k, 1, sbk, sbn, n, 1, probe)
        kw = (
            ("BLOCK_M", int(p["block_m"])), ("BLOCK_N", int(p["block_n"])), ("BLOCK_K", int(p["block_k"])),
            ("GROUP_M", int(p["group_m"])), ("NUM_SMS", int(p["ctas_per_sm"]) * sms),
            ("MARKS", "kstep" if instrumented else "none"), *opts,
        )  # fmt: skip
        return Call("examples.gpu.persistent_gemm", "persistent_gemm", args, kw, grid, 12)
    scale = LOG2E / math.sqrt(cfg.head_dim)
    if parts > 1:
        args = (tensors["q"], tensors["k"], tensors["v"], tensors["o"], tensors["ws_o"], tensors["ws_ml"],
                tensors["locks"], probe, scale, cfg.batch * cfg.heads, cfg.seq_q, cfg.seq_kv)  # fmt: skip
        kw = (
            ("HEAD_DIM", cfg.head_dim), ("BLOCK_M", int(p["block_m"])), ("BLOCK_N", int(p["block_n"])),
            ("SPLIT_KV", parts), ("NUM_PROGRAMS", int(p["ctas_per_sm"]) * sms),
            ("MARKS", "block" if instrumented else "none"), *opts,
        )  # fmt: skip
        return Call("examples.gpu.split_attention", "split_attention", args, kw, grid, 7)
    args = (tensors["q"], tensors["k"], tensors["v"], tensors["o"], probe, scale, cfg.batch * cfg.heads,
            cfg.seq_q, cfg.seq_kv)  # fmt: skip
    kw = (
        ("HEAD_DIM", cfg.head_dim), ("BLOCK_M", int(p["block_m"])), ("BLOCK_N", int(p["block_n"])),
        ("CAUSAL", cfg.causal), ("HEAVY_FIRST", bool(p["heavy_first"])),
        ("NUM_PROGRAMS", int(p["ctas_per_sm"]) * sms), ("MARKS", "block" if instrumented else "none"), *opts,
    )  # fmt: skip
    return Call("examples.gpu.persistent_attention", "persistent_attention", args, kw, grid, 4)


def function_of(module: str, function: str) -> Any:
    """A ``@triton.jit`` function by module and name."""
    import importlib

    return getattr(importlib.import_module(module), function)


def kernel_fn(c: Call) -> Any:
    """The ``@triton.jit`` function of a call."""
    return function_of(c.module, c.function)


def scratch_shapes(cfg: Config, p: dict[str, Any], sms: int = SMS) -> dict[str, tuple[int, str]]:
    """The scratch tensors a split candidate's launch needs (name -> elements, torch dtype name); none otherwise
    (a tail split's depend on the grid stride, ``ctas_per_sm x sms``)."""
    if split(cfg, p) == 1 and tail_split(cfg, p) == 1:
        return {}
    if cfg.kind == "gemm":
        from examples.gpu.split_gemm import scratch_shapes as gemm_scratch

        bm, bn, stride = int(p["block_m"]), int(p["block_n"]), int(p["ctas_per_sm"]) * sms
        if tail_split(cfg, p) > 1:
            return gemm_scratch(cfg.m, cfg.n, bm, bn, tail_split(cfg, p), tail=True, num_programs=stride)
        return gemm_scratch(cfg.m, cfg.n, bm, bn, split(cfg, p))
    from examples.gpu.split_attention import scratch_shapes as attn_scratch

    heads = cfg.batch * cfg.heads
    return attn_scratch(heads, cfg.seq_q, cfg.head_dim, int(p["block_m"]), split(cfg, p))


def scratch(cfg: Config, p: dict[str, Any], device: Any, sms: int = SMS) -> dict[str, Any]:
    """Zeroed scratch tensors of a split candidate (the kernels leave their counters zero after each launch)."""
    import torch

    return {n: torch.zeros(size, device=device, dtype=getattr(torch, dt)) for n, (size, dt) in
            scratch_shapes(cfg, p, sms).items()}  # fmt: skip


def dtype_stand_ins(cfg: Config) -> dict[str, Any]:
    """Torch dtypes in place of the tensors (``JITFunction.warmup`` specialises on them as on aligned tensors)."""
    import torch

    dt = getattr(torch, TORCH_DTYPES[cfg.dtype])
    if cfg.kind == "gemm":
        return {"a": dt, "b": dt, "c": torch.bfloat16 if cfg.dtype == "fp8" else dt, "probe": torch.int64,
                "ws": torch.float32, "locks": torch.int32}  # fmt: skip
    return {"q": dt, "k": dt, "v": dt, "o": dt, "probe": torch.int64, "ws_o": torch.float32,
            "ws_ml": torch.float32, "locks": torch.int32}  # fmt: skip


def unit_key(cfg: Config, p: dict[str, Any], instrumented: bool) -> str:
    """What decides the compiled kernel: the family, the candidate, the variant and how Triton specialises the
    integer arguments (divisible by 16, equal to 1); configurations that agree on it share one compile."""
    from bench.recorded_spaces import key_of

    ints = [a for a in call(cfg, p, dtype_stand_ins_names(cfg), instrumented=instrumented).args if type(a) is int]
    spec = "".join("1" if v == 1 else "D" if v % 16 == 0 else "N" for v in ints)
    return f"{cfg.family}|{key_of(p)}|{'instr' if instrumented else 'clean'}|{spec}"


def dtype_stand_ins_names(cfg: Config) -> dict[str, Any]:
    """Placeholder names for the tensors (for keys; no torch needed)."""
    names = ("a", "b", "c", "ws", "locks") if cfg.kind == "gemm" else ("q", "k", "v", "o", "ws_o", "ws_ml", "locks")
    return {n: n for n in (*names, "probe")}


KERNELS = (("examples.gpu.persistent_gemm", "persistent_gemm"), ("examples.gpu.persistent_attention",
           "persistent_attention"), ("examples.gpu.split_gemm", "split_gemm"),
           ("examples.gpu.split_attention", "split_attention"), ("examples.gpu.tma_gemm", "tma_gemm"))  # fmt: skip
"""The JIT functions of the table, in the order :func:`pin_cache_keys` hashes them."""


def pin_cache_keys() -> tuple[str, ...]:
    """Hash the table's JIT functions in one fixed order, first thing in every process.

    Triton 3.6 computes a function's ``cache_key`` once per process from its source and its dependencies', and the
    two kernels share dependencies (the device-region markers): which kernel is hashed first changes both keys.
    A compile process that happened to compile an attention candidate first would fill Triton's cache under keys
    the GPU process (which starts with a GEMM) never looks up, and the GPU process would compile again.
    """
    return tuple(function_of(m, f).cache_key for m, f in KERNELS)


class Sm90Driver:
    """Stands in for Triton's active driver in a compile process: the sm_90 target, device 0, stream 0; nothing
    is launched (``warmup`` only compiles), so no GPU is needed."""

    def __init__(self) -> None:
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", 90, 32)

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: Any = None) -> int:
        return 0

    def get_current_target(self) -> Any:
        return self.target

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def get_device_interface(self) -> Any:
        import torch

        return torch.cuda


def use_sm90_driver() -> None:
    """Make :class:`Sm90Driver` Triton's active driver in this process (compile processes only)."""
    from triton.runtime import driver

    driver.set_active(Sm90Driver())


@dataclass(frozen=True)
class UnitResult:
    """What a compile process gives back for one unit (picklable)."""

    unit: str
    seconds: float
    error: str | None
    kernel: str | None = None
    registers: int | None = None
    local_bytes: int | None = None
    shared_bytes: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None


def compile_unit(cfg: Config, p: dict[str, Any], instrumented: bool) -> UnitResult:
    """``warmup`` the candidate's JIT call (filling Triton's cache) and read the cubin's resource usage."""
    unit = unit_key(cfg, p, instrumented)
    t0 = time.perf_counter()
    try:
        c = call(cfg, p, dtype_stand_ins(cfg), instrumented=instrumented)
        kernel = kernel_fn(c).warmup(*c.args, grid=(c.grid,), **dict(c.kwargs))
    except Exception as exc:  # recorded: the candidate is compile_failed with this text
        text = " ".join(f"{type(exc).__name__}: {exc}".split())
        return UnitResult(unit, time.perf_counter() - t0, text[:500])
    md = kernel.metadata
    regs = local = None
    shared = int(md.shared)
    try:
        from argus_lab.backends.compiler.artifacts import resource_usage

        usage = resource_usage(bytes(kernel.asm["cubin"])).get(str(md.name))
        if usage is not None:
            regs, local, shared = usage.registers, usage.local, shared + usage.shared
    except Exception:  # facts are evidence, not a condition to run: unknown ones stay None
        pass
    return UnitResult(
        unit, time.perf_counter() - t0, None, str(md.name), regs, local, shared, int(md.num_warps), int(md.num_stages)
    )


def probe_buffer(cfg: Config, p: dict[str, Any], device: Any, sms: int = SMS) -> Any:
    """A zeroed probe buffer with its launch header, one slot per program."""
    import torch

    from argus_lab.device.layout import buffer_words, launch_header

    slots, cap = programs(cfg, p, sms), events_per_slot(cfg, p, sms)
    buf = torch.zeros(buffer_words(slots, cap), dtype=torch.int64, device=device)
    buf[:8] = torch.tensor(launch_header(slots, cap), dtype=torch.int64)
    return buf


STEP_REGION = {"gemm": "load", "attn": "qk"}
"""The region each inner-loop step starts with (its period is the step time)."""


def phases_job(cfg: Config, p: dict[str, Any], buf: Any) -> dict[str, Any]:
    """Decode one instrumented launch (a host copy of the probe buffer) into ``argus_lab.optimize.Phases`` (JSON)."""
    import argus_lab
    from argus_lab.backends.device.decode import decode

    if cfg.kind == "gemm":
        from examples.gpu.persistent_gemm import PHASES
    else:
        from examples.gpu.persistent_attention import PHASES
    launch = decode(buf, PHASES, strict=False)
    ph = argus_lab.optimize.phases_of(
        launch, step_region=STEP_REGION[cfg.kind], ideal_step_ns=ideal_step_ns(cfg, p), source="probe buffer"
    )
    return asdict(ph)


__all__ = [
    "EVENT_CAP",
    "KERNELS",
    "STEP_REGION",
    "Call",
    "Sm90Driver",
    "UnitResult",
    "call",
    "compile_unit",
    "dtype_stand_ins",
    "events_per_slot",
    "function_of",
    "ideal_step_ns",
    "kernel_fn",
    "output_tiles",
    "phases_job",
    "pin_cache_keys",
    "probe_buffer",
    "programs",
    "scratch",
    "scratch_shapes",
    "split",
    "step_flops",
    "steps_per_tile",
    "tail_split",
    "tiles",
    "unit_key",
    "use_sm90_driver",
]
