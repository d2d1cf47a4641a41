"""A persistent Triton GEMM whose tiles move through the Hopper tensor memory accelerator (TMA): device-side tensor
descriptors (``tl.make_tensor_descriptor``) for A, B and C instead of pointer arithmetic, the tile loop flattened
with the k-loop (``tl.range(..., flatten=True)``: one software pipeline across tile boundaries, so the next tile's
first loads overlap this tile's last MMAs and epilogue), and the epilogue stored in two halves along N
(``EPI_SUBTILE``: half the registers and shared memory for the output tile).

The descriptors need a global scratch allocation per launch: call ``triton.set_allocator`` once per process
before the first launch (bench/record_candidates.py does; :func:`launch` here does when it was not set).

``B_KMAJOR``: B is stored K-major (``n x k`` contiguous, the layout ``torch._scaled_mm`` takes and fp8 wgmma
needs); otherwise ``k x n`` row-major.  A is ``m x k`` and C ``m x n``, both row-major.

``WARP_SPEC``: Triton's Hopper warp specialisation of the tile loop (``tl.range(..., warp_specialize=True)``): a
producer warp group issues the TMA loads into a ring of shared-memory buffers while two consumer warp groups run
the MMAs and the epilogue, so the next tile's loads go on during this tile's epilogue.  Triton 3.6 partitions it
only with ``num_warps=4`` (one group of four warps per role), an unflattened tile loop (``FLATTEN=False``), a whole
epilogue (``EPI_SUBTILE=False``) and no markers inside the k-loop (``MARKS`` other than ``"kstep"``); otherwise it
fails to compile or, with other warp counts, compiles without specialising.

Device regions as in examples/gpu/persistent_gemm.py (``MARKS="kstep"``: ``load``, ``mma`` per k-step;
``epilogue`` per tile).
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from argus_lab.device import markers as dm
from examples.gpu.persistent_gemm import _tile_coords


@triton.jit
def tma_gemm(
    a_ptr, b_ptr, c_ptr, M, N, K, probe,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_SMS: tl.constexpr, B_KMAJOR: tl.constexpr, EPI_SUBTILE: tl.constexpr, FLATTEN: tl.constexpr,
    MARKS: tl.constexpr, WARP_SPEC: tl.constexpr = False,
):  # fmt: skip
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    if B_KMAJOR:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    if EPI_SUBTILE:
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N // 2])
    else:
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    c = dm.begin(probe)
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WARP_SPEC):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            off_k = ki * BLOCK_K
            if MARKS == "kstep":
                c = dm.enter(probe, c, "load")
            a = a_desc.load([off_m, off_k])
            if B_KMAJOR:  # noqa: SIM108 (a constexpr branch: only one load is compiled)
                b = b_desc.load([off_n, off_k]).T
            else:
                b = b_desc.load([off_k, off_n])
            if MARKS == "kstep":
                c = dm.exit(probe, c, "load")
                c = dm.enter(probe, c, "mma")
            acc = tl.dot(a, b, acc)
            if MARKS == "kstep":
                c = dm.exit(probe, c, "mma")
        c = dm.enter(probe, c, "epilogue")
        if EPI_SUBTILE:
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            c_desc.store([off_m, off_n], left.to(c_ptr.dtype.element_ty))
            c_desc.store([off_m, off_n + BLOCK_N // 2], right.to(c_ptr.dtype.element_ty))
        else:
            c_desc.store([off_m, off_n], acc.to(c_ptr.dtype.element_ty))
        c = dm.exit(probe, c, "epilogue")
    dm.end(probe, c)


def set_scratch_allocator(device: Any = "cuda") -> None:
    """Give Triton the global scratch the device-side descriptors need (once per process)."""
    import torch

    def alloc(size: int, alignment: int, stream: int | None) -> Any:
        return torch.empty(size, device=device, dtype=torch.int8)

    triton.set_allocator(alloc)


def launch(
    a: Any, b: Any, *, block_m: int, block_n: int, block_k: int, group_m: int = 8, num_warps: int = 8,
    num_stages: int = 3, num_programs: int = 132, b_kmajor: bool = False, epi_subtile: bool = True,
    flatten: bool = True, warp_spec: bool = False, out: Any = None,
) -> Any:  # fmt: skip
    """``a @ b`` (``b`` given as ``k x n``; with ``b_kmajor`` as its ``n x k`` transpose's storage); with
    ``warp_spec`` (and ``num_warps=4``) warp-specialised, which turns the split epilogue and flattening off."""
    import torch

    m, k = a.shape
    n = b.shape[0] if b_kmajor else b.shape[1]
    c = out if out is not None else torch.empty((m, n), device=a.device, dtype=a.dtype)
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    tma_gemm[(min(num_programs, tiles),)](
        a, b, c, m, n, k, None, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m,
        NUM_SMS=num_programs, B_KMAJOR=b_kmajor, EPI_SUBTILE=epi_subtile and not warp_spec,
        FLATTEN=flatten and not warp_spec, MARKS="none", WARP_SPEC=warp_spec,
        num_warps=num_warps, num_stages=num_stages,
    )  # fmt: skip
    return c
