"""A torch.compile'd MLP in a region (GPU; issue 15): Inductor's Triton kernels need compiler facts and SASS mix.

Measured from examples/gpu as ``compiled_mlp:step``: the module and its compiled form are built at import; the first
``mlp`` instance compiles (Inductor generates and loads its Triton kernels, launched by its own launcher), every
later one reuses them.
"""

from __future__ import annotations

import torch

import argus_lab

torch.manual_seed(0)
MODEL = torch.nn.Sequential(
    torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.LayerNorm(1024), torch.nn.Linear(1024, 256)
).to("cuda", torch.float16)
X = torch.randn(64, 256, device="cuda", dtype=torch.float16)
COMPILED = torch.compile(MODEL)


@torch.no_grad()
def step() -> None:
    """mlp{ the compiled forward }: one instance."""
    with argus_lab.region("mlp"):
        COMPILED(X)
    torch.cuda.synchronize()


if __name__ == "__main__":
    for _ in range(3):
        step()
