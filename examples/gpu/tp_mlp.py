"""A tensor-parallel MLP stack (Megatron layout) forward, with the all-reduce of each layer chunked and overlapped.

    argus-lab run examples/gpu/tp_mlp.py --launch 'torchrun --nproc-per-node 2' \\
        --signals gpu.time,gpu.kernels,comm.time,comm.kernels,comm.overlap,comm.exposed,host.wall -- --chunks 1
    torchrun --nproc-per-node 2 examples/gpu/tp_mlp.py --plain-rounds 6 --result plain.json --ab '{"chunks": 4}'
    torchrun --nproc-per-node 2 examples/gpu/tp_mlp.py --device cpu --size tiny      # gloo on the CPU

Every rank holds a column slice of each layer's first weight and the matching row slice of its second, so a
layer is ``y = all_reduce(gelu(x W1_r) W2_r)``: the all-reduce of the layer's full activation (tokens x hidden)
sits on the critical path, as in tensor-parallel prefill.  Regions: ``step{ layer x L }``, ``step`` ending in a
device synchronize.

``--chunks n`` splits the tokens into ``n`` chunks: chunk c's all-reduce is started asynchronously and runs while
chunk c+1 computes; the next layer waits for chunk c's all-reduce only when it reaches chunk c.  ``n = 1`` is the
serial layout.  ``--nccl-priority high`` runs the all-reduces on a high-priority stream (a second process group).
Sizes (``--size``): ``tiny`` (CPU dry runs), ``m`` (8 layers, hidden 8192, ffn 8192 split over the ranks,
4096 tokens: a 64 MiB bf16 all-reduce per layer).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_common

import argus_lab

SIZES: dict[str, dict[str, int]] = {
    "tiny": {"layers": 2, "hidden": 64, "ffn": 128, "tokens": 64},
    "m": {"layers": 8, "hidden": 8192, "ffn": 8192, "tokens": 4096},
}


@dataclass(frozen=True)
class Config:
    """One configuration of the tensor-parallel stack."""

    size: str = "m"
    device: str = "cuda"
    chunks: int = 1
    nccl_priority: str = "normal"


@dataclass
class Stack:
    """This rank's weight slices, an input, and the group the all-reduces use."""

    config: Config
    device: torch.device
    w1: list[torch.Tensor]
    w2: list[torch.Tensor]
    x: torch.Tensor
    group: Any


def build(cfg: Config) -> Stack:
    """Weight slices of this rank (same seed everywhere, then sliced) and an input identical on every rank."""
    device = dist_common.init_group(cfg.device)
    d = SIZES[cfg.size]
    world, rank = dist.get_world_size(), dist.get_rank()
    if d["ffn"] % world:
        msg = f"ffn {d['ffn']} does not split over {world} ranks; pick a size whose ffn is a multiple of the ranks"
        raise SystemExit(msg)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    part = d["ffn"] // world
    g = torch.Generator(device=device).manual_seed(0)
    w1, w2 = [], []
    for _ in range(d["layers"]):
        full1 = torch.randn(d["hidden"], d["ffn"], device=device, dtype=dtype, generator=g) / d["hidden"] ** 0.5
        full2 = torch.randn(d["ffn"], d["hidden"], device=device, dtype=dtype, generator=g) / d["ffn"] ** 0.5
        w1.append(full1[:, rank * part : (rank + 1) * part].contiguous())
        w2.append(full2[rank * part : (rank + 1) * part].contiguous())
    x = torch.randn(d["tokens"], d["hidden"], device=device, dtype=dtype, generator=g)
    group = dist_common.group_for(cfg.device, cfg.nccl_priority == "high")
    return Stack(cfg, device, w1, w2, x, group)


def forward(s: Stack) -> torch.Tensor:
    """step{ layer x L }: per layer and chunk, the partial MLP and its asynchronous all-reduce."""
    chunks = list(s.x.chunk(s.config.chunks))
    works: list[Any] = [None] * len(chunks)
    with argus_lab.region("step"), torch.no_grad():
        for w1, w2 in zip(s.w1, s.w2, strict=True):
            with argus_lab.region("layer"):
                for c, xc in enumerate(chunks):
                    if works[c] is not None:
                        works[c].wait()  # the stream waits for chunk c's all-reduce of the previous layer
                    yc = F.gelu(xc @ w1) @ w2
                    works[c] = dist.all_reduce(yc, group=s.group, async_op=True)
                    chunks[c] = yc
        for work in works:
            work.wait()
        dist_common.synchronize(s.device)
    return torch.cat(chunks)


def stack_for(cfg: Config) -> Stack:
    """The process's stack for ``cfg`` (built once, kept for later repetitions)."""
    cache: dict[tuple[tuple[str, Any], ...], Stack] = dist_common.state_slot().__dict__.setdefault("tp_stacks", {})
    key = tuple(sorted(asdict(cfg).items()))  # fields, not the class: each repetition runs with fresh globals
    if key not in cache:
        cache[key] = build(cfg)
    return cache[key]


def ab_result(cfg: Config, change: dict[str, Any], rounds: int, steps: int) -> dict[str, Any]:
    """No tool: steps/s of ``cfg`` (config a) and of ``cfg`` with ``change`` (config b; A/A when ``change`` is
    empty) in alternating rounds, after checking that both layouts compute the same result.  Also used by
    ``ab_suite.py``; the stacks are built here (not cached), so they are freed when it returns."""
    configs = {"a": cfg, "b": replace(cfg, **change)}
    stacks = {k: build(c) for k, c in configs.items()}
    ref = forward(stacks["a"])
    for k, st in stacks.items():  # the chunked layout computes the same thing
        torch.testing.assert_close(forward(st), ref, rtol=5e-2, atol=5e-2, msg=lambda m, k=k: f"config {k}: {m}")
    step_fns = {k: (lambda st=st: (forward(st), None)[1]) for k, st in stacks.items()}
    sps = dist_common.ab_rounds(step_fns, rounds, steps, stacks["a"].device)
    return {
        "workload": "tp_mlp",
        "steps_per_round": steps,
        "rounds": rounds,
        "environment": dist_common.environment(),
        "configs": {k: {"config": asdict(c), "steps_per_s": sps[k], **SIZES[c.size]} for k, c in configs.items()},
    }


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=sorted(SIZES), default="m")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--chunks", type=int, default=1)
    p.add_argument("--nccl-priority", choices=("normal", "high"), default="normal")
    p.add_argument("--steps", type=int, default=4, help="steps per execution of the script (per repetition)")
    p.add_argument("--plain-rounds", type=int, default=0, help="no-tool throughput: this many rounds")
    p.add_argument("--ab", default="", help="JSON of Config fields for a config B, measured in alternating rounds")
    p.add_argument("--result", default="", help="plain rounds: rank 0 writes steps/s here (JSON)")
    a = p.parse_args(argv)
    if a.chunks < 1:
        p.error(f"--chunks must be at least 1, got {a.chunks}")
    cfg = Config(a.size, a.device, a.chunks, a.nccl_priority)
    if not a.plain_rounds:
        s = stack_for(cfg)
        for _ in range(a.steps):
            forward(s)
        return
    payload = ab_result(cfg, json.loads(a.ab) if a.ab else {}, a.plain_rounds, a.steps)
    if a.result:
        dist_common.write_result(a.result, payload)
    if dist.get_rank() == 0:
        for k, entry in payload["configs"].items():
            sps = sorted(entry["steps_per_s"])
            print(f"[tp_mlp plain] {k}: {sps[len(sps) // 2]:.2f} steps/s (median of {len(sps)} rounds)")


if __name__ == "__main__":
    main(sys.argv[1:])
