"""A persistent Triton GEMM with device regions: one launch, one program per SM, each looping over output tiles.

Phases marked inside the kernel (``argus_lab.device.markers``):

* ``marks="kstep"``: ``load`` (the two tile loads of one k-step), ``mma`` (the ``tl.dot`` of that k-step), and
  ``epilogue`` (conversion and store of one output tile);
* ``marks="tile"``: ``mainloop`` (the whole k-loop of one tile) and ``epilogue``: four events per tile, so the
  probe perturbs the kernel far less.

``launch(a, b, cfg)`` runs the clean variant (``probe=None``: the markers compile to nothing);
``launch(a, b, cfg, probe=tensor)`` runs the instrumented one.  Measured through argus_lab, the workload asks the
run for the probe instead (:class:`GemmStep`: ``argus_lab.device.probe(...)`` is ``None`` in the clean runs and a
fresh buffer in the instrumented run that ``dev.*`` signals get)::

    step = GemmStep(3072, 3072, 1024)
    report = argus_lab.measure(step, "gpu.time,dev.*", repeat=3, warmup=1) Block sizes, ``GROUP_M``, ``num_warps`` and
``num_stages`` are parameters (:class:`GemmConfig`) so that an optimisation loop can vary them. ``unmarked``
is the same kernel without any marker: the reference the clean variant's SASS must equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import triton
import triton.language as tl

import argus_lab
import argus_lab.device
from argus_lab.device import markers as dm

PHASES = argus_lab.device.regions("load", "mma", "mainloop", "epilogue", module="examples.gpu.persistent_gemm")


@dataclass(frozen=True)
class GemmConfig:
    """The kernel's tuning parameters and where its markers go (``"kstep"``, ``"tile"`` or ``"none"``)."""

    block_m: int = 128
    block_n: int = 128
    block_k: int = 64
    group_m: int = 8
    num_warps: int = 8
    num_stages: int = 3
    marks: str = "kstep"

    def __post_init__(self) -> None:
        if self.marks not in ("kstep", "tile", "none"):
            msg = f"marks must be 'kstep', 'tile' or 'none', got {self.marks!r}"
            raise ValueError(msg)


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    in_group = GROUP_M * num_pid_n
    first_m = (tile_id // in_group) * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    return first_m + (tile_id % group_m), (tile_id % in_group) // group_m


@triton.jit
def k_steps(
    a_ptrs, b_ptrs, offs_k, k_lo, k_hi, K, stride_ak, stride_bk, acc, probe, c,
    BLOCK_K: tl.constexpr, MARKS: tl.constexpr,
):  # fmt: skip
    """The k-loop of one tile over k-steps ``k_lo .. k_hi`` from the tile's first A and B pointers (at step
    ``k_lo``), added to ``acc``; with ``MARKS="kstep"`` each step's ``load`` and ``mma`` regions.  Returns ``acc``
    and the marker state.  Shared by this kernel and examples/gpu/split_gemm.py; inlined, it compiles to the same
    SASS as the loop written in place (compared for sm_90 with ``nvdisasm``)."""
    for ki in range(k_lo, k_hi):
        if MARKS == "kstep":
            c = dm.enter(probe, c, "load")
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - ki * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - ki * BLOCK_K, other=0.0)
        if MARKS == "kstep":
            c = dm.exit(probe, c, "load")
            c = dm.enter(probe, c, "mma")
        acc = tl.dot(a, b, acc)
        if MARKS == "kstep":
            c = dm.exit(probe, c, "mma")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc, c


@triton.jit
def persistent_gemm(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    probe,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_SMS: tl.constexpr, MARKS: tl.constexpr,
):  # fmt: skip
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    c = dm.begin(probe)
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=False):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if MARKS == "tile":
            c = dm.enter(probe, c, "mainloop")
        acc, c = k_steps(a_ptrs, b_ptrs, offs_k, 0, k_tiles, K, stride_ak, stride_bk, acc, probe, c, BLOCK_K, MARKS)
        if MARKS == "tile":
            c = dm.exit(probe, c, "mainloop")
        c = dm.enter(probe, c, "epilogue")
        offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))
        c = dm.exit(probe, c, "epilogue")
    dm.end(probe, c)


@triton.jit
def unmarked(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_SMS: tl.constexpr,
):  # fmt: skip
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=False):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - ki * BLOCK_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - ki * BLOCK_K, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def num_tiles(m: int, n: int, cfg: GemmConfig) -> int:
    """Output tiles of an ``m x n`` result."""
    return triton.cdiv(m, cfg.block_m) * triton.cdiv(n, cfg.block_n)


def grid_size(m: int, n: int, cfg: GemmConfig, num_sms: int) -> int:
    """Programs of the persistent launch: one per SM, never more than there are tiles."""
    return min(num_sms, num_tiles(m, n, cfg))


def events_per_cta(m: int, n: int, k: int, cfg: GemmConfig, num_sms: int) -> int:
    """The most marker events one program records (the probe's ``events_per_slot``)."""
    tiles = triton.cdiv(num_tiles(m, n, cfg), grid_size(m, n, cfg, num_sms))
    per_tile = {"kstep": 4 * triton.cdiv(k, cfg.block_k) + 2, "tile": 4, "none": 2}[cfg.marks]
    return tiles * per_tile


def make_inputs(m: int, n: int, k: int, *, seed: int = 0, device: str = "cuda") -> tuple[Any, Any]:
    """bf16 ``a`` (m x k) and ``b`` (k x n), reproducible from ``seed``."""
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn((m, k), generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)
    b = torch.randn((k, n), generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)
    return a, b


def num_sms_of(device: Any = None) -> int:
    """Streaming multiprocessors of the current (or given) CUDA device."""
    import torch

    return int(torch.cuda.get_device_properties(device).multi_processor_count)


def launch(a: Any, b: Any, cfg: GemmConfig, *, probe: Any = None, num_sms: int | None = None, out: Any = None) -> Any:
    """``a @ b`` by the persistent kernel; ``probe=None`` runs the clean variant. Returns the output tensor."""
    import torch

    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        msg = f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}"
        raise ValueError(msg)
    sms = num_sms or num_sms_of(a.device)
    c = out if out is not None else torch.empty((m, n), device=a.device, dtype=a.dtype)
    grid = (grid_size(m, n, cfg, sms),)
    persistent_gemm[grid](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1), probe,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m, NUM_SMS=sms,
        MARKS=cfg.marks, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return c


def launch_unmarked(a: Any, b: Any, cfg: GemmConfig, *, num_sms: int | None = None, out: Any = None) -> Any:
    """``a @ b`` by the marker-free copy of the kernel (the SASS reference of the clean variant)."""
    import torch

    m, k = a.shape
    n = b.shape[1]
    sms = num_sms or num_sms_of(a.device)
    c = out if out is not None else torch.empty((m, n), device=a.device, dtype=a.dtype)
    unmarked[(grid_size(m, n, cfg, sms),)](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m, NUM_SMS=sms,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return c


def compile_sm90(cfg: GemmConfig, variant: str, *, num_sms: int = 132) -> Any:
    """Compile one variant for sm_90 without a GPU: ``"clean"``, ``"instrumented"`` or ``"unmarked"``.

    Returns Triton's CompiledKernel (``.asm["cubin"]``, ``["ptx"]``, ``["ttgir"]``).
    """
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    # As the JIT specialises contiguous bf16 inputs whose sizes are multiples of 16: unit strides become the
    # constant 1, pointers and the other integers are known divisible by 16 (this decides vectorised loads).
    sig: dict[str, str] = {p: "*bf16" for p in ("a_ptr", "b_ptr", "c_ptr")}
    sig |= {p: "i32" for p in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")}
    consts: dict[str, Any] = {
        "stride_ak": 1, "stride_bn": 1, "stride_cn": 1,
        "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "GROUP_M": cfg.group_m,
        "NUM_SMS": num_sms,
    }  # fmt: skip
    if variant == "unmarked":
        fn = unmarked
    else:
        fn = persistent_gemm
        consts["MARKS"] = cfg.marks
        if variant == "clean":
            sig["probe"] = "constexpr"
            consts["probe"] = None
        else:
            sig["probe"] = "*i64"
    for name in consts:
        sig[name] = "constexpr"
    names = list(fn.arg_names)
    sig = {n: sig[n] for n in names}
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n, ty in sig.items() if ty in ("*bf16", "i32")}
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    opts = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)


class GemmStep:
    """A measurable workload: one host region ``gemm_step`` around one launch of the persistent GEMM.

    Each call asks the run for the launch's probe (``argus_lab.device.probe``): ``None`` outside an instrumented
    run (the clean variant: gpu.time, ncu), a fresh buffer inside one (dev.*), so one workload serves every run of a
    plan.  Inputs are made once, on the current CUDA device.
    """

    def __init__(self, m: int, n: int, k: int, cfg: GemmConfig | None = None, *, seed: int = 0) -> None:
        self.cfg = cfg or GemmConfig()
        self.a, self.b = make_inputs(m, n, k, seed=seed)
        self.sms = num_sms_of(self.a.device)
        self.grid = grid_size(m, n, self.cfg, self.sms)
        self.events = events_per_cta(m, n, k, self.cfg, self.sms)
        self.out: Any = None

    def __call__(self) -> Any:
        with argus_lab.region("gemm_step"):
            probe = argus_lab.device.probe(
                persistent_gemm, programs=self.grid, events=self.events, regions=PHASES, device=self.a.device
            )
            self.out = launch(self.a, self.b, self.cfg, probe=probe, num_sms=self.sms, out=self.out)
        return self.out
