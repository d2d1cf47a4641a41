"""Test workload: two ranks (torchrun) with the gloo backend on the CPU, regions around compute and all_reduce."""

import torch
import torch.distributed as dist

import argus_lab

if not dist.is_initialized():
    dist.init_process_group("gloo")
rank = dist.get_rank()
with argus_lab.region("step"):
    with argus_lab.region("compute"):
        x = torch.full((256,), float(rank + 1)) * 2
    with argus_lab.region("allreduce"):
        dist.all_reduce(x)
assert float(x[0]) == 2.0 * sum(r + 1 for r in range(dist.get_world_size())), x[0]
