"""SYNTHETIC test workload: two gloo ranks (torchrun, CPU) where rank 1 arrives 30 ms late at a region that ends
in an all_reduce, so rank 1's start lag is about 30 ms and both ranks leave the region together."""

import time

import torch
import torch.distributed as dist

import argus_lab

if not dist.is_initialized():
    dist.init_process_group("gloo")
rank = dist.get_rank()
x = torch.ones(4)
dist.barrier()  # both ranks leave the barrier together ...
if rank == 1:
    time.sleep(0.030)  # ... and rank 1 enters the region 30 ms late
with argus_lab.region("late"):
    dist.all_reduce(x)  # rank 0 waits inside for rank 1: both leave together
assert float(x[0]) == dist.get_world_size()
