"""GPU test of the kernel variants the recorded table adds beyond the tutorial lists: split-K GEMM, split-KV
attention (both reduce in the same launch: the last slice to arrive sums the partials) and the TMA GEMM.

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


@pytest.mark.parametrize("fp8", [False, True])
def test_tma_gemm_matches_torch(fp8: bool) -> None:
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
                   num_programs=torch.cuda.get_device_properties(0).multi_processor_count, out=c)  # fmt: skip
    torch.cuda.synchronize()
    _close(out, ref, 2e-2)
