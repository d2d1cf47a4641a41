"""A model built before its first region (GPU; issue 15): an ncu run must replay only kernels inside regions.

Measured from examples/gpu as ``model_before_region:step``: building the decoder-shaped model at import launches
initialisation kernels outside every region; each ``decode`` instance runs one forward step.  ``python
examples/gpu/model_before_region.py --profiler OUT.json`` writes the kernel names torch.profiler shows for the
same step (for comparing names).
"""

from __future__ import annotations

import json
import sys

import torch

import argus_lab


class Block(torch.nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        a = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1) @ v
        x = x + self.proj(a)
        return x + self.down(torch.nn.functional.silu(self.up(self.norm(x))))


torch.manual_seed(0)
MODEL = torch.nn.Sequential(*(Block(256) for _ in range(2))).to("cuda", torch.float16)  # init kernels: no region
X = torch.randn(1, 16, 256, device="cuda", dtype=torch.float16)


@torch.no_grad()
def step() -> None:
    """decode{ one forward step of the model }: one instance."""
    with argus_lab.region("decode"):
        MODEL(X)
    torch.cuda.synchronize()


def profiler_names(path: str) -> None:
    """The kernel names torch.profiler reports for one step (after a warm-up step), as JSON."""
    from torch.profiler import ProfilerActivity, profile

    step()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
    names = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
    with open(path, "w") as fh:
        json.dump({"torch": torch.__version__, "kernels": names}, fh, indent=1)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--profiler":
        profiler_names(sys.argv[2])
    else:
        for _ in range(3):
            step()
