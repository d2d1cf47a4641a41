"""SYNTHETIC workloads for tests/test_worker_regions.py: processes started during a measurement that open regions.

A module of its own so that spawned processes (``spawn`` DataLoader workers, ``multiprocessing`` children) can import
the dataset and the targets by name.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

import argus_lab


class Items(Dataset[torch.Tensor]):
    """``n`` items; each one is loaded inside the region ``load`` (in a DataLoader worker when there are some)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        with argus_lab.region("load"), argus_lab.region("decode"):
            return torch.tensor([i])


def loader_step(items: int, workers: int, context: str | None, seen: list[int]) -> Callable[[], None]:
    """One repetition: the measuring process iterates the loader inside ``step`` (a region of its own)."""
    ds = Items(items)

    def step() -> None:
        loader = DataLoader(ds, batch_size=2, num_workers=workers, multiprocessing_context=context)
        with argus_lab.region("step"):
            for batch in loader:
                seen.extend(batch.flatten().tolist())

    return step


def child_regions(count: int) -> None:
    """A ``multiprocessing`` child's work: ``count`` instances of ``child_work``."""
    for _ in range(count):
        with argus_lab.region("child_work"):
            pass


def process_step(count: int, context: str) -> Callable[[], None]:
    """One repetition: a plain ``multiprocessing.Process`` started (and joined) inside the region ``outer``."""

    def step() -> None:
        ctx = multiprocessing.get_context(context)
        with argus_lab.region("outer"):
            proc = ctx.Process(target=child_regions, args=(count,), name="reader")
            proc.start()
            proc.join()

    return step


def write_then_hang(ready: str) -> None:
    """A child that records one instance, waits until its chunk is written (by the periodic flush), says so, and
    hangs (to be killed)."""
    with argus_lab.region("before_kill"):
        pass
    spool = Path(json.loads(os.environ["ARGUS_REGION_SPOOL"])["folder"])
    deadline = time.monotonic() + 20  # the periodic flush writes it within a fraction of a second
    while not list(spool.glob(f"{os.getpid()}-*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    Path(ready).write_text(str(os.getpid()))
    while True:
        time.sleep(1)


def killed_step(ready: Path) -> Callable[[], None]:
    """One repetition: a child records, writes its chunk, and is killed with SIGKILL (no exit hook runs)."""

    def step() -> None:
        proc = multiprocessing.get_context("fork").Process(target=write_then_hang, args=(str(ready),))
        proc.start()
        while not ready.exists():
            time.sleep(0.05)
        os.kill(proc.pid or 0, signal.SIGKILL)
        proc.join()

    return step


def fork_inside_region(out: Path) -> Callable[[], None]:
    """One repetition: ``os.fork`` while ``held`` is open; the child opens ``in_child`` and leaves ``held`` (which
    it inherited open) before it exits."""

    def step() -> None:
        with argus_lab.region("held"):
            pid = os.fork()
            if pid == 0:
                with argus_lab.region("in_child"):
                    out.write_text(argus_lab.current_path())
        if pid == 0:
            from argus_lab.regions.worker import stop_worker

            stop_worker()  # what atexit would do: os._exit skips it
            os._exit(0)
        os.waitpid(pid, 0)

    return step
