"""Workloads whose kernels come from more than one thread (GPU): what a launch identity must tell apart.

Each case is a ``make_<case>()`` returning the step to measure; ``python examples/gpu/thread_cases.py truth CASE
OUT.json`` runs one warm-up step and then one step under torch.profiler (a separate process, no argus_lab tool
attached) and writes, per Python thread name, how many kernels it launched: the ground truth the measured
attribution is compared with (scripts/gpu/record_thread_cases.py).

* ``side_thread``: the main thread's region ``main_work`` launches 50 matmuls while a thread with no region
  launches 50 small kernels on its own stream;
* ``train_step``: a 4-layer Llama (``transformers``, random weights) forward, ``loss.backward()`` and an AdamW step,
  each in its region under ``train_step``; autograd's device thread launches the backward kernels;
* ``two_threads``: two long-lived threads, each inside its own region (``t0_work``, ``t1_work``), launch 30 and
  45 kernels interleaved, every step;
* ``per_step_threads``: the same two regions on threads created anew each step (Python reuses their ids);
* ``gemm``: one region around a 1024^3 bf16 GEMM (the torch.profiler-before case measures it).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch

import argus_lab

Step = Callable[[], None]


_NAMES: dict[int, str] = {}  # thread id as Kineto writes it -> Python thread name (truth process)


def _note_thread() -> None:
    # Kineto writes the system thread id of some threads and the low 32 bits of pthread_self of others (both seen on
    # the H200 with torch 2.11): note the name under both
    name = threading.current_thread().name
    _NAMES[threading.get_native_id()] = name
    _NAMES[threading.get_ident() & 0xFFFFFFFF] = name


def make_side_thread() -> Step:
    a = torch.randn(512, 512, device="cuda")
    small = torch.zeros(1024, device="cuda")
    side_stream = torch.cuda.Stream()
    go = threading.Event()

    def side() -> None:
        _note_thread()
        go.wait(5)
        with torch.cuda.stream(side_stream):
            for _ in range(50):
                small.add_(1.0)

    def step() -> None:
        _note_thread()
        t = threading.Thread(target=side, name="side")
        with argus_lab.region("main_work"):
            t.start()
            go.set()
            for _ in range(50):
                torch.mm(a, a)
            t.join()
            go.clear()
        torch.cuda.synchronize()

    return step


def make_train_step() -> Step:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=1000, max_position_embeddings=256,
    )  # fmt: skip
    model = LlamaForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 1000, (4, 64), device="cuda")

    def step() -> None:
        _note_thread()
        with argus_lab.region("train_step"):
            with argus_lab.region("forward"):
                loss = model(ids, labels=ids).loss
            with argus_lab.region("backward"):
                loss.backward()
            with argus_lab.region("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()

    return step


def _interleaved(k: int, n: int, x: torch.Tensor, turn: list[threading.Semaphore]) -> None:
    """Thread ``k``'s work: ``n`` kernels inside region ``t<k>_work``, taking turns with the other thread."""
    _note_thread()
    with argus_lab.region(f"t{k}_work"):
        for i in range(n):
            mine, other = turn[k], turn[1 - k]
            if i < 30:  # both threads launch while the other's region is open, one kernel each in turn
                mine.acquire(timeout=5)
            x.mul_(1.0001)
            if i < 30:
                other.release()


def make_two_threads() -> Step:
    xs = [torch.ones(4096, device="cuda") for _ in range(2)]
    work: list[threading.Event] = [threading.Event(), threading.Event()]
    done = threading.Barrier(3)
    stop = [False]

    def worker(k: int) -> None:
        while True:
            work[k].wait()
            work[k].clear()
            if stop[0]:
                return
            _interleaved(k, (30, 45)[k], xs[k], turn)
            done.wait()

    turn = [threading.Semaphore(1), threading.Semaphore(0)]
    for k in range(2):
        threading.Thread(target=worker, args=(k,), name=f"w{k}", daemon=True).start()

    def step() -> None:
        _note_thread()
        turn[0] = threading.Semaphore(1)
        turn[1] = threading.Semaphore(0)
        for e in work:
            e.set()
        done.wait()
        torch.cuda.synchronize()

    return step


def make_per_step_threads() -> Step:
    xs = [torch.ones(4096, device="cuda") for _ in range(2)]

    def step() -> None:
        _note_thread()
        turn = [threading.Semaphore(1), threading.Semaphore(0)]
        ts = [threading.Thread(target=_interleaved, args=(k, (30, 45)[k], xs[k], turn), name=f"w{k}") for k in (0, 1)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        torch.cuda.synchronize()

    return step


def make_gemm() -> Step:
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)

    def step() -> None:
        with argus_lab.region("gemm"):
            torch.mm(a, a)
        torch.cuda.synchronize()

    return step


_GEMM: list[Step] = []


def gemm_step() -> None:
    """The ``gemm`` case as ``examples.gpu.thread_cases:gemm_step`` (what a fresh process can import and run)."""
    if not _GEMM:
        _GEMM.append(make_gemm())
    _GEMM[0]()


CASES: dict[str, Callable[[], Step]] = {
    "side_thread": make_side_thread,
    "train_step": make_train_step,
    "two_threads": make_two_threads,
    "per_step_threads": make_per_step_threads,
    "gemm": make_gemm,
}


def truth(case: str) -> dict[str, Any]:
    """One warm-up step, then one step under torch.profiler: kernels per launching thread (by Python name; a thread
    Python did not start is named by the system, e.g. ``pt_autograd_0``)."""
    import os
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    step = CASES[case]()
    step()
    torch.cuda.synchronize()
    _NAMES.clear()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    launch_tid = {
        e["args"]["correlation"]: e["tid"]
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    sysname = {
        e["tid"]: e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name" and "pt_autograd" in str(e.get("args", {}).get("name"))
    }
    per_thread: dict[str, int] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            tid = launch_tid.get(e.get("args", {}).get("correlation"))
            name = _NAMES.get(tid) or sysname.get(tid) or f"tid {tid}"
            if name.startswith("thread ") and "pt_autograd" in name:
                name = name.split("(")[-1].rstrip(")")
            per_thread[name] = per_thread.get(name, 0) + 1
    return {"case": case, "kernels_per_thread": per_thread, "torch": torch.__version__}


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "truth":
        result = truth(sys.argv[2])
        with open(sys.argv[3], "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps(result))
    else:
        print("usage: python examples/gpu/thread_cases.py truth CASE OUT.json", file=sys.stderr)
        sys.exit(2)
