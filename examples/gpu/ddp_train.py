"""A data-parallel training step: DistributedDataParallel on a GPT-shaped transformer with random weights.

    argus-lab run examples/gpu/ddp_train.py --launch 'torchrun --nproc-per-node 2' \\
        --signals gpu.time,gpu.kernels,comm.time,comm.kernels,comm.overlap,comm.exposed,host.wall -- --model s
    torchrun --nproc-per-node 2 examples/gpu/ddp_train.py --model s --plain-rounds 6 --result plain.json \\
        --ab '{"bucket_cap_mb": 55}'                      # no tool: A/B steps/s, alternating rounds
    torchrun --nproc-per-node 2 examples/gpu/ddp_train.py --device cpu --model tiny   # gloo on the CPU

Regions, as a user would mark them: ``step{ forward; backward; optimizer }``; ``step`` ends with a device
synchronize, so its host wall time is the step's time.  DDP reduces the gradients in buckets: when the last
gradient of a bucket is ready, autograd's device thread (not the thread that entered ``backward``) launches the
bucket's all-reduce on NCCL's stream, while backward goes on computing the gradients of earlier layers.  Those
NCCL kernels carry no region of their own thread; the join attributes them to the instance open on another
thread at their launch, the ``backward`` of the same step (class ``temporal``).  Their order in that instance
is the bucket order: the n-th all-reduce is bucket n in reduction order (bucket 0 holds the last layers).
``--bucket-regions`` instead registers a DDP communication hook that wraps each bucket's all-reduce in a region
``bucket_allreduce`` on autograd's thread (exact attribution, one instance per bucket), at the price of running
the hook in Python.

The model is built once per process (argus_lab runs the script once per repetition; the model lives in
``dist_common.state_slot()``), with the same seed on every rank.  Sizes (``--model``): ``tiny`` (CPU dry runs),
``s`` (12 x 768, ~110 M parameters, batch 8 x 512 tokens), ``m`` (24 x 1024, ~335 M parameters, batch 4 x 512).

Knobs that matter for overlap: ``--bucket-cap-mb`` (DDP's bucket size: one huge bucket = no overlap, tiny
buckets = many latency-bound all-reduces), ``--nccl-priority high`` (the all-reduces run on a high-priority
stream, through a second process group), ``--grad-as-bucket-view`` (gradients alias the buckets: no copy into
them), ``--static-graph``.  ``--info PATH``: rank 0 writes the model and DDP's bucket facts as JSON.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_common

import argus_lab

SIZES: dict[str, dict[str, int]] = {
    "tiny": {"layers": 2, "dim": 64, "heads": 4, "seq": 32, "batch": 2, "vocab": 256},
    "s": {"layers": 12, "dim": 768, "heads": 12, "seq": 512, "batch": 8, "vocab": 32000},
    "m": {"layers": 24, "dim": 1024, "heads": 16, "seq": 512, "batch": 4, "vocab": 32000},
}


@dataclass(frozen=True)
class Config:
    """One training configuration (what a before/after comparison changes)."""

    model: str = "s"
    device: str = "cuda"
    dtype: str = "bf16"
    bucket_cap_mb: float = 25.0
    grad_as_bucket_view: bool = False
    static_graph: bool = False
    nccl_priority: str = "normal"
    bucket_regions: bool = False

    def dims(self) -> dict[str, int]:
        return SIZES[self.model]


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention and a 4x GELU MLP."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """A GPT-shaped decoder with random weights (token and position embeddings, blocks, tied LM head)."""

    def __init__(self, layers: int, dim: int, heads: int, seq: int, vocab: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ self.tok.weight.t()


@dataclass
class Trainer:
    """A DDP model with its optimizer and a fixed batch."""

    config: Config
    device: torch.device
    ddp: DDP
    opt: torch.optim.Optimizer
    idx: torch.Tensor
    target: torch.Tensor
    params: int


def base_model(cfg: Config, device: torch.device) -> GPT:
    """The model, identical on every rank (same seed), initialised on the device itself (a CPU init of 335 M
    parameters would take seconds under torchrun's one OpenMP thread)."""
    d = cfg.dims()
    torch.manual_seed(0)
    with device:
        return GPT(d["layers"], d["dim"], d["heads"], d["seq"], d["vocab"])


def build(cfg: Config, device: torch.device, model: nn.Module | None = None) -> Trainer:
    """Wrap ``model`` (default: a fresh one) in DDP with ``cfg``'s knobs; a random batch per rank."""
    model = model if model is not None else base_model(cfg, device)
    group = dist_common.group_for(cfg.device, cfg.nccl_priority == "high")
    ddp = DDP(
        model,
        device_ids=[device.index] if device.type == "cuda" else None,
        process_group=group,
        bucket_cap_mb=cfg.bucket_cap_mb,
        gradient_as_bucket_view=cfg.grad_as_bucket_view,
        static_graph=cfg.static_graph,
    )
    if cfg.bucket_regions:
        ddp.register_comm_hook(group, marked_allreduce)
    fused = {"fused": True} if device.type == "cuda" else {}
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, **fused)
    d = cfg.dims()
    g = torch.Generator(device=device).manual_seed(1 + dist.get_rank())
    idx = torch.randint(0, d["vocab"], (d["batch"], d["seq"]), device=device, generator=g)
    target = torch.randint(0, d["vocab"], (d["batch"], d["seq"]), device=device, generator=g)
    params = sum(p.numel() for p in model.parameters())
    return Trainer(cfg, device, ddp, opt, idx, target, params)


def marked_allreduce(group, bucket):  # type: ignore[no-untyped-def]
    """DDP communication hook: the bucket's average all-reduce inside a region (on autograd's thread).

    Unannotated on purpose: DDP checks a hook's annotations against the classes themselves, and under
    ``from __future__ import annotations`` they would be strings."""
    with argus_lab.region("bucket_allreduce"):
        buf = bucket.buffer()
        buf.div_(dist.get_world_size(group))
        work = dist.all_reduce(buf, group=group, async_op=True)
        assert work is not None
        fut = work.get_future()
    return fut.then(lambda f: f.value()[0])


def train_step(t: Trainer) -> None:
    """step{ forward; backward; optimizer } and a device synchronize at its end."""
    amp = t.config.dtype == "bf16" and t.device.type == "cuda"
    with argus_lab.region("step"):
        with argus_lab.region("forward"), torch.autocast(t.device.type, dtype=torch.bfloat16, enabled=amp):
            logits = t.ddp(t.idx)
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), t.target.view(-1))
        with argus_lab.region("backward"):
            loss.backward()
        with argus_lab.region("optimizer"):
            t.opt.step()
            t.opt.zero_grad(set_to_none=not t.config.grad_as_bucket_view)
        dist_common.synchronize(t.device)


def ddp_facts(t: Trainer) -> dict[str, Any]:
    """The model's size and DDP's own account of its buckets (``_get_ddp_logging_data``, a private API)."""
    grad_bytes = sum(p.numel() * p.element_size() for p in t.ddp.parameters() if p.requires_grad)
    facts: dict[str, Any] = {"params": t.params, "grad_bytes": grad_bytes, "config": asdict(t.config)}
    try:
        data = t.ddp._get_ddp_logging_data()
    except Exception as exc:  # private API: its absence is recorded, not fatal
        facts["ddp_logging"] = f"unavailable: {exc}"
        return facts
    keep = ("bucket_sizes", "bucket_cap_bytes", "num_buckets_reduced", "has_rebuilt_buckets", "rebuilt_bucket_sizes")
    keep += ("avg_backward_comm_time", "avg_backward_compute_comm_overlap_time", "avg_backward_compute_time")
    facts["ddp_logging"] = {k: data[k] for k in keep if k in data}
    return facts


def parse(argv: list[str]) -> tuple[Config, argparse.Namespace]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(SIZES), default="s")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16", help="autocast dtype on the GPU")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0)
    p.add_argument("--grad-as-bucket-view", action="store_true")
    p.add_argument("--static-graph", action="store_true")
    p.add_argument("--nccl-priority", choices=("normal", "high"), default="normal")
    p.add_argument("--bucket-regions", action="store_true", help="mark each bucket's all-reduce (comm hook)")
    p.add_argument("--steps", type=int, default=4, help="steps per execution of the script (per repetition)")
    p.add_argument("--plain-rounds", type=int, default=0, help="no-tool throughput: this many rounds")
    p.add_argument("--ab", default="", help="JSON of Config fields for a config B, measured in alternating rounds")
    p.add_argument("--result", default="", help="plain rounds: rank 0 writes steps/s here (JSON)")
    p.add_argument("--info", default="", help="rank 0 writes the model's and DDP's bucket facts here (JSON)")
    a = p.parse_args(argv)
    cfg = Config(
        a.model, a.device, a.dtype, a.bucket_cap_mb, a.grad_as_bucket_view, a.static_graph, a.nccl_priority,
        a.bucket_regions,
    )  # fmt: skip
    return cfg, a


def trainer_for(cfg: Config) -> Trainer:
    """The process's trainer for ``cfg`` (built on first use, kept for later repetitions).

    Keyed by the configuration's *fields*: argus_lab runs this script with fresh globals per repetition, so each
    repetition has its own ``Config`` class, and a key of the dataclass itself would never match (the two-rank
    fixture of tests/data was recorded with that bug: each repetition built a new DDP, whose first iteration
    reduces every gradient in one bucket)."""
    slot = dist_common.state_slot()
    cache: dict[tuple[tuple[str, Any], ...], Trainer] = slot.__dict__.setdefault("ddp_trainers", {})
    key = tuple(sorted(asdict(cfg).items()))
    if key not in cache:
        device = dist_common.init_group(cfg.device)
        cache[key] = build(cfg, device)
    return cache[key]


def ab_result(cfg: Config, change: dict[str, Any], rounds: int, steps: int) -> dict[str, Any]:
    """No tool: steps/s of ``cfg`` (config a) and of ``cfg`` with ``change`` (config b; the same configuration
    again when ``change`` is empty: an A/A pair), both from the same initial weights, in alternating rounds of
    ``steps`` steps (``dist_common.ab_rounds``).  Also used by ``ab_suite.py``."""
    device = dist_common.init_group(cfg.device)
    configs = {"a": cfg, "b": replace(cfg, **change)}
    model = base_model(cfg, device)
    trainers = {k: build(c, device, copy.deepcopy(model)) for k, c in configs.items()}
    del model
    step_fns = {k: (lambda t=t: train_step(t)) for k, t in trainers.items()}
    sps = dist_common.ab_rounds(step_fns, rounds, steps, device)
    tokens = cfg.dims()["batch"] * cfg.dims()["seq"] * dist.get_world_size()
    return {
        "workload": "ddp_train",
        "steps_per_round": steps,
        "rounds": rounds,
        "environment": dist_common.environment(),
        "configs": {
            k: {"config": asdict(c), "steps_per_s": sps[k], "tokens_per_step": tokens, **ddp_facts(trainers[k])}
            for k, c in configs.items()
        },
    }


def plain(cfg: Config, a: argparse.Namespace) -> None:
    """``--plain-rounds``: :func:`ab_result` against ``--ab`` (A/A without it), printed and written to ``--result``."""
    payload = ab_result(cfg, json.loads(a.ab) if a.ab else {}, a.plain_rounds, a.steps)
    if a.result:
        dist_common.write_result(a.result, payload)
    if dist.get_rank() == 0:
        for k, entry in payload["configs"].items():
            sps = sorted(entry["steps_per_s"])
            print(f"[ddp_train plain] {k}: {sps[len(sps) // 2]:.2f} steps/s (median of {len(sps)} rounds)")


def main(argv: list[str]) -> None:
    cfg, a = parse(argv)
    if a.plain_rounds:
        plain(cfg, a)
        return
    t = trainer_for(cfg)
    for _ in range(a.steps):
        train_step(t)
    if a.info and dist.get_rank() == 0 and not Path(a.info).exists():
        Path(a.info).parent.mkdir(parents=True, exist_ok=True)
        info = {**ddp_facts(t), "environment": dist_common.environment()}
        info["grad_mb"] = info["grad_bytes"] / 2**20
        info["buckets_at_cap"] = math.ceil(info["grad_bytes"] / (cfg.bucket_cap_mb * 2**20))
        Path(a.info).write_text(json.dumps(info, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
