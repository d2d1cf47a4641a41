"""GPU test of the kernel variants the recorded table adds beyond the tutorial lists: split-K GEMM, split-KV
attention (both reduce in the same launch: the last slice to arrive sums the partials), the tail split (split-K on
the last wave's tiles only) and the TMA GEMM.

The split kernels rely on an ordering protocol between CTAs (a CTA barrier, an acquire-release atomic at GPU
scope, loads that bypass L1), and a race shows only on some launches: each kernel runs 50 times back to back on
one scratch and every output must match torch, and the per-tile counters must be zero after the last launch.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

LAUNCHES = 50


def _close(out: object, ref: object, rel: float) -> None:
    import torch

    assert isinstance(out, torch.Tensor) and isinstance(ref, torch.Tensor)
    err = float((out.float() - ref).abs().max())
    assert err <= rel * float(ref.abs().max()), err


@pytest.mark.parametrize(("m", "n", "k", "split_k"), [(512, 512, 16384, 8), (64, 8192, 4096, 2), (1000, 136, 4000, 4)])
def test_split_k_gemm_matches_torch_on_every_launch(m: int, n: int, k: int, split_k: int) -> None:
    import torch

    from examples.gpu import split_gemm as S

    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((m, k), generator=g, device="cuda").to(torch.bfloat16)
    b = torch.randn((k, n), generator=g, device="cuda").to(torch.bfloat16)
    ref = a.float() @ b.float()
    shapes = S.scratch_shapes(m, n, 128, 128, split_k)
    scratch = {nm: torch.zeros(size, device="cuda", dtype=getattr(torch, dt)) for nm, (size, dt) in shapes.items()}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    outs = []
    for _ in range(LAUNCHES):
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        outs.append(S.launch(a, b, block_m=128, block_n=128, block_k=64, split_k=split_k, num_warps=8,
                             num_programs=sms, out=c, scratch=scratch))  # fmt: skip
    torch.cuda.synchronize()
    for c in outs:
        _close(c, ref, 2e-2)
    assert int(scratch["locks"].abs().sum()) == 0


@pytest.mark.parametrize(
    ("b", "h", "nq", "nkv", "d", "split_kv"), [(4, 32, 64, 16384, 128, 4), (32, 8, 16, 8192, 64, 8)]
)
def test_split_kv_attention_matches_sdpa_on_every_launch(
    b: int, h: int, nq: int, nkv: int, d: int, split_kv: int
) -> None:
    import torch
    import torch.nn.functional as F

    from examples.gpu import split_attention as S

    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn((b, h, n, d), generator=g, device="cuda").to(torch.float16) for n in (nq, nkv, nkv))
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    shapes = S.scratch_shapes(b * h, nq, d, 64, split_kv)
    scratch = {nm: torch.zeros(size, device="cuda", dtype=getattr(torch, dt)) for nm, (size, dt) in shapes.items()}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    outs = [S.launch(q, k, v, block_m=64, block_n=64, split_kv=split_kv, num_warps=4, num_stages=3,
                     num_programs=sms, scratch=scratch) for _ in range(LAUNCHES)]  # fmt: skip
    torch.cuda.synchronize()
    for o in outs:
        assert float((o.float() - ref).abs().max()) < 2e-2
    assert int(scratch["locks"].abs().sum()) == 0


@pytest.mark.parametrize(("fp8", "warp_spec"), [(False, False), (True, False), (False, True), (True, True)])
def test_tma_gemm_matches_torch(fp8: bool, warp_spec: bool) -> None:
    """The TMA GEMM, and its warp-specialised form (one producer and two consumer warp groups of 4 warps), against
    torch on partial tiles."""
    import torch

    from examples.gpu import tma_gemm as T

    T.set_scratch_allocator("cuda")
    m, n, k = 1000, 2064, 4096  # partial tiles in M and N: the descriptors clip them
    g = torch.Generator(device="cuda").manual_seed(0)
    dt = torch.float8_e4m3fn if fp8 else torch.bfloat16
    a = torch.randn((m, k), generator=g, device="cuda").to(dt)
    bt = torch.randn((n, k), generator=g, device="cuda").to(dt)  # stored n x k
    b = bt if fp8 else bt.t().contiguous()
    ref = a.float() @ bt.float().t()
    c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
    out = T.launch(a, b, block_m=128, block_n=256, block_k=128 if fp8 else 64, b_kmajor=fp8,
                   num_warps=4 if warp_spec else 8, warp_spec=warp_spec,
                   num_programs=torch.cuda.get_device_properties(0).multi_processor_count, out=c)  # fmt: skip
    torch.cuda.synchronize()
    _close(out, ref, 2e-2)


TAIL_CASES = [
    (2, 128, 128, 64, 2),  # 2048^3: 256 tiles, one whole wave and 124 tiles in 2 slices
    (5, 128, 128, 64, 2),  # 3072 x 3072 x 8192: 576 tiles, 4 whole waves and 48 tiles in 2 slices
    (5, 128, 256, 64, 4),  # the same in 128 x 256 tiles: 288 tiles, 2 whole waves and 24 tiles in 4 slices
    (24, 128, 128, 128, 2),  # fp8 256 x 8192 x 8192, K-major B: 128 tiles, fewer than the SMs: every tile split
]


@pytest.mark.parametrize(("row", "bm", "bn", "bk", "tail"), TAIL_CASES)
def test_tail_split_gemm_matches_torch_on_every_launch(row: int, bm: int, bn: int, bk: int, tail: int) -> None:
    """The tail split (only the last wave's tiles in K slices) as the recorder launches it, on the shapes of the
    recorded table's rows 2, 5 and 24, 20 launches on one scratch: each output against ``torch.matmul`` in fp32
    and the counters zero after the last."""
    import sys
    from pathlib import Path

    import torch

    root = str(Path(__file__).resolve().parents[2])
    if root not in sys.path:
        sys.path.insert(0, root)
    from bench.recorded_configs import CONFIGS
    from bench.recorded_launch import call, kernel_fn, programs, scratch

    cfg = CONFIGS[row - 1]
    p = {"block_m": bm, "block_n": bn, "block_k": bk, "group_m": 8, "num_warps": 8, "num_stages": 3,
         "ctas_per_sm": 1, "split_k": 1, "tma": False, "tail_split": tail}  # fmt: skip
    g = torch.Generator(device="cuda").manual_seed(0)
    fp8 = cfg.dtype == "fp8"
    dt = torch.float8_e4m3fn if fp8 else getattr(torch, {"bf16": "bfloat16", "fp16": "float16"}[cfg.dtype])
    a = torch.randn((cfg.m, cfg.k), generator=g, device="cuda").to(dt)
    # fp8: B stored K-major (n x k contiguous), as the recorder and torch._scaled_mm take it
    b = torch.randn((cfg.n, cfg.k), generator=g, device="cuda").to(dt).t() if fp8 else torch.randn(
        (cfg.k, cfg.n), generator=g, device="cuda").to(dt)  # fmt: skip
    ref = a.float() @ b.float()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    t = {"a": a, "b": b} | scratch(cfg, p, "cuda", sms)
    outs = []
    for _ in range(20):
        c = torch.full((cfg.m, cfg.n), float("nan"), device="cuda", dtype=torch.bfloat16 if fp8 else dt)
        launch = call(cfg, p, t | {"c": c}, instrumented=False, sms=sms)
        assert launch.grid == programs(cfg, p, sms)
        kernel_fn(launch)[(launch.grid,)](*launch.args, **dict(launch.kwargs))
        outs.append(c)
    torch.cuda.synchronize()
    for c in outs:
        _close(c, ref, 2e-2)
    assert int(t["locks"].abs().sum()) == 0
