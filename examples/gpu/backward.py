"""Autograd: the backward kernels run on autograd's device thread, not on the thread of the region."""

from __future__ import annotations

from typing import Any

import torch

import argus_lab


def setup(n: int = 1024) -> dict[str, Any]:
    """A small MLP and a batch."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(n, n), torch.nn.GELU(), torch.nn.Linear(n, n)).cuda()
    return {"model": model, "x": torch.randn(256, n, device="cuda")}


def step(s: dict[str, Any]) -> None:
    """train_step{ forward{...} backward{ loss.backward() } }."""
    with argus_lab.region("train_step"):
        with argus_lab.region("forward"):
            loss = s["model"](s["x"]).square().mean()
        with argus_lab.region("backward"):
            loss.backward()


if __name__ == "__main__":
    state = setup()
    for _ in range(2):
        step(state)
    torch.cuda.synchronize()
