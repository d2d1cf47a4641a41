"""Plain (no-tool) A/B throughput of several settings in one torchrun launch (the PGO study of issue 17).

    torchrun --nproc-per-node 2 examples/gpu/ab_suite.py SPEC.json --result RESULT.json [--deadline EPOCH_S]

``SPEC.json``: ``{"rounds": 6, "steps": 5, "settings": [{"name", "workload": "ddp_train" | "tp_mlp", "base":
{Config fields}, "change": {Config fields}}]}``.  For each setting in order, the workload's own ``ab_result``
builds configuration a (``base``) and b (``base`` with ``change``; an A/A pair when ``change`` is empty) from the
same initial weights and times them in alternating rounds (A B A B ...); then both are freed before the next
setting.  One launch pays torchrun's, CUDA's and NCCL's start-up once instead of once per setting.

Rank 0 writes ``RESULT.json`` after every setting, so a launch stopped by a timeout keeps what it measured.  No
setting starts after ``--deadline`` (seconds since the epoch, rank 0's clock; rank 0 decides and tells the
others, so that every rank skips the same settings).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_train
import dist_common
import tp_mlp

WORKLOADS = {"ddp_train": (ddp_train, ddp_train.Config), "tp_mlp": (tp_mlp, tp_mlp.Config)}


def agreed(go: bool, device: torch.device) -> bool:
    """Rank 0's ``go``, on every rank."""
    flag = torch.tensor([1 if go else 0], device=device)
    dist.broadcast(flag, 0)
    return bool(flag.item())


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("spec", help="JSON file: rounds, steps, settings (see the module docstring)")
    p.add_argument("--result", required=True, help="rank 0 writes the steps/s of every setting here (JSON)")
    p.add_argument("--deadline", type=float, default=0.0, help="no setting starts after this time (epoch s)")
    a = p.parse_args(argv)
    spec = json.loads(Path(a.spec).read_text())
    unknown = [s.get("workload") for s in spec["settings"] if s.get("workload") not in WORKLOADS]
    if unknown:
        msg = f"unknown workload(s) {unknown} in {a.spec}; the workloads are: {', '.join(WORKLOADS)}"
        raise SystemExit(msg)
    devices = {s["base"].get("device", "cuda") for s in spec["settings"]}
    if len(devices) != 1:
        msg = f"the settings of one suite must share a device, got {sorted(devices)}"
        raise SystemExit(msg)
    device = dist_common.init_group(devices.pop())
    out: dict[str, Any] = {"rounds": spec["rounds"], "steps": spec["steps"], "settings": {}}
    for s in spec["settings"]:
        if not agreed(not a.deadline or time.time() < a.deadline, device):
            out["settings"][s["name"]] = {"skipped": "the suite's deadline passed before this setting"}
            continue
        module, config = WORKLOADS[s["workload"]]
        t0 = time.perf_counter()
        try:
            payload = module.ab_result(config(**s["base"]), dict(s["change"]), spec["rounds"], spec["steps"])
        except Exception as exc:  # e.g. out of memory on every rank: recorded, and the next setting goes on
            out["settings"][s["name"]] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            dist_common.write_result(a.result, out)
            gc.collect()
            dist.barrier()
            continue
        payload["seconds"] = round(time.perf_counter() - t0, 2)
        out["settings"][s["name"]] = payload
        out["environment"] = payload.pop("environment")
        dist_common.write_result(a.result, out)
        if dist.get_rank() == 0:
            med = {k: sorted(c["steps_per_s"])[len(c["steps_per_s"]) // 2] for k, c in payload["configs"].items()}
            print(f"[ab_suite] {s['name']}: a {med['a']:.2f}, b {med['b']:.2f} steps/s in {payload['seconds']} s")
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        dist.barrier()
    dist_common.write_result(a.result, out)


if __name__ == "__main__":
    main(sys.argv[1:])
