
import torch, triton, triton.language as tl
import argus_lab
from argus_lab.regions import Recorder

@triton.jit
def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)

@triton.jit
def exp_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.exp(x) + tl.load(y_ptr + offs, mask=mask), mask=mask)

n = 1 << 16
x = torch.randn(n, device="cuda")
y, z = torch.empty_like(x), torch.empty_like(x)
grid = (triton.cdiv(n, 1024),)
scale_kernel[grid](x, y, n, 1.0, BLOCK=1024)  # compile outside the regions
exp_add_kernel[grid](x, y, z, n, BLOCK=1024)
torch.cuda.synchronize()
with Recorder("recorded"):  # instance indices as NVTX payloads (ARGUS_NVTX_PAYLOAD=1)
    for i in range(3):
        with argus_lab.region("step"):
            with argus_lab.region("attn"):
                scale_kernel[grid](x, y, n, 2.0, BLOCK=1024)
                exp_add_kernel[grid](x, y, z, n, BLOCK=1024)
            with argus_lab.region("mlp"):
                scale_kernel[grid](z, y, n, 0.5, BLOCK=1024)
            torch.cuda.nvtx.range_push("torch_range")
            exp_add_kernel[grid](y, x, z, n, BLOCK=1024)
            torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
print("workload ok")
