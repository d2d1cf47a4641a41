"""Plumbing shared by the multi-rank workloads (``ddp_train.py``, ``tp_mlp.py``): process group, per-process
state, and the plain (no-tool) A/B throughput rounds.

Kept out of the measured regions on purpose: nothing here marks a region.  Works with NCCL on GPUs and with gloo
on the CPU (``--device cpu``), so that every code path can be tried on a machine without a GPU.
"""

from __future__ import annotations

import atexit
import json
import os
import statistics
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist


def init_group(device: str) -> torch.device:
    """Join the default process group once per process (NCCL on ``cuda``, gloo on ``cpu``); return this rank's
    device.  NVLink SHARP (NVLS) stays off: on shared machines it can take the host down."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29561")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if device == "cpu":
        dev = torch.device("cpu")
        if not dist.is_initialized():
            dist.init_process_group("gloo", rank=rank, world_size=world)
            atexit.register(dist.destroy_process_group)
        return dev
    if not torch.cuda.is_available():
        msg = "no CUDA device here; run with `--device cpu` (gloo) or on a GPU machine"
        raise SystemExit(msg)
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(dev)
    if not dist.is_initialized():
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
        atexit.register(dist.destroy_process_group)
    return dev


def nccl_options(high_priority: bool) -> Any:
    """ProcessGroupNCCL options: ``is_high_priority_stream`` puts NCCL's stream at the highest CUDA priority."""
    options = dist.ProcessGroupNCCL.Options()
    options.is_high_priority_stream = high_priority
    return options


def group_for(device: str, high_priority: bool) -> Any:
    """The process group a configuration communicates on: the default one (normal priority), or with NCCL and
    ``high_priority`` a second group whose stream has the highest priority (made once per process; every rank
    makes it at the same point, as ``new_group`` requires)."""
    if device == "cpu" or not high_priority:
        return None
    slot = state_slot()
    if not hasattr(slot, "high_group"):
        slot.high_group = dist.new_group(backend="nccl", pg_options=nccl_options(True))
    return slot.high_group


def state_slot() -> types.ModuleType:
    """A namespace that lives as long as the process.  argus_lab runs a script once per repetition with fresh
    globals, so a workload keeps its model here and builds it once."""
    name = "_argus_examples_dist_state"
    slot = sys.modules.get(name)
    if slot is None:
        slot = types.ModuleType(name)
        sys.modules[name] = slot
    return slot


def synchronize(device: torch.device) -> None:
    """Wait for the device (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def ab_rounds(
    steps: dict[str, Callable[[], None]], rounds: int, per_round: int, device: torch.device, warmup: int = 3
) -> dict[str, list[float]]:
    """Plain throughput, no tool: each configuration's step ``warmup`` times, then ``rounds`` rounds in which every
    configuration runs ``per_round`` steps in turn (A B A B ..., so drift hits both alike); steps/s per round."""
    for fn in steps.values():
        for _ in range(warmup):
            fn()
    synchronize(device)
    out: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, fn in steps.items():
            dist.barrier()
            synchronize(device)
            t0 = time.perf_counter()
            for _ in range(per_round):
                fn()
            synchronize(device)
            out[name].append(per_round / (time.perf_counter() - t0))
    return out


def write_result(path: str, payload: dict[str, Any]) -> None:
    """Rank 0 writes ``payload`` (plus medians of every ``steps_per_s`` list) as JSON; other ranks write nothing."""
    if dist.get_rank() != 0:
        return
    for entry in payload.get("configs", {}).values():
        sps = entry.get("steps_per_s") or []
        if sps:
            entry["median_steps_per_s"] = statistics.median(sps)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=1, sort_keys=True))


def environment() -> dict[str, Any]:
    """What ran: torch, NCCL, device name, world size."""
    out: dict[str, Any] = {"torch": torch.__version__, "world_size": dist.get_world_size()}
    if torch.cuda.is_available():
        out["device"] = torch.cuda.get_device_name()
        out["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    out["env"] = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    return out
