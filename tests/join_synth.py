"""SYNTHETIC evidence for join/report tests: hand-built rows in the store's schema, not recorded on a GPU.

Each builder writes exactly the rows a test describes, so the expected attribution can be derived by hand.
Tests on recorded H200 evidence live next to these and use ``tests/data``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from argus_lab.store import Store

T0 = 1_795_938_194_000_000_000  # an epoch-ns time like the ones CUPTI reports


@dataclass
class Inst:
    """One region instance (times relative to T0, in ns)."""

    iid: int
    path: str
    start: int
    end: int
    parent: int = 0
    rep: int = 0
    thread: int = 1
    index: int = 0
    warmup: bool = False
    rank: int = 0


@dataclass
class Kern:
    """One kernel record (times relative to T0)."""

    corr: int
    name: str
    start: int
    end: int
    instance: int | None
    stream: int = 7
    thread: int = 1
    api: int = 0
    graph: int = 0
    kind: str = "kernel"
    nbytes: int = 0
    n: int = 0
    device: int = 0
    rank: int = 0
    registers: int = 0
    static_smem: int = 0
    dynamic_smem: int = 0
    block: tuple[int, int, int] = (128, 1, 1)


@dataclass
class SynthRun:
    """A synthetic run: its instances, kernels, host metrics and samples."""

    run_id: str
    backends: Sequence[str] = ("host", "cupti")
    plan_index: int = 0
    instances: list[Inst] = field(default_factory=list)
    kernels: list[Kern] = field(default_factory=list)
    samples: list[tuple[str, int, float, str]] = field(default_factory=list)  # signal, t, value, unit
    host_metrics: bool = True
    repetitions: int = 1
    warmup: int = 0
    signals: Sequence[str] = ("host.wall", "gpu.time", "gpu.kernels", "gpu.span", "hw:*")  # what the request asked
    # (thread id, system name, role, rank) of the ``threads`` table, e.g. (3, "pt_autograd_0", "autograd", 0)
    threads: list[tuple[int, str, str, int]] = field(default_factory=list)
    # (thread id, start, end, rank) of backward() calls (``host_calls``), times relative to T0
    backward_calls: list[tuple[int, int, int, int]] = field(default_factory=list)


def write(store: Store, runs: Sequence[SynthRun], request_id: str = "q-synth") -> None:
    """Write the runs (one request) into ``store``."""
    for r in runs:
        tables: dict[str, Any] = {
            "runs": {
                "run_id": [r.run_id],
                "session_id": ["s-synth"],
                "request_id": [request_id],
                "plan_id": ["p-synth"],
                "plan_index": [r.plan_index],
                "variant": [""],
                "backends": [list(r.backends)],
                "signals": [list(r.signals)],
                "settings": [json.dumps({})],
                "workload": ["synthetic"],
                "command": ["synthetic (tests/join_synth.py)"],
                "env": ["{}"],
                "versions": [json.dumps({"argus_lab": "test"})],
                "status": ["ok"],
                "cause": [""],
                "repetitions": [r.repetitions],
                "warmup": [r.warmup],
                "reps_done": [r.repetitions + r.warmup],
                "started_ns": [T0 + r.plan_index],
                "ended_ns": [T0 + 10**9],
                "host": ["synthetic"],
                "pid": [1],
                "reason": ["synthetic"],
            },
        }
        if r is runs[0]:
            tables["requests"] = {
                "request_id": [request_id],
                "session_id": ["s-synth"],
                "created_ns": [T0],
                "text": [""],
            }
        ins = r.instances
        if ins:
            tables["region_instances"] = {
                "run_id": [r.run_id] * len(ins),
                "instance_id": [i.iid for i in ins],
                "region_id": [i.path.rsplit("/", 1)[-1] for i in ins],
                "path": [i.path for i in ins],
                "instance_index": [i.index for i in ins],
                "parent_instance_id": [i.parent for i in ins],
                "repetition": [i.rep for i in ins],
                "pid": [1] * len(ins),
                "thread_id": [i.thread for i in ins],
                "start_ns": [T0 + i.start for i in ins],
                "end_ns": [T0 + i.end for i in ins],
                "cpu_ns": [(i.end - i.start) // 2 for i in ins],
                "error": [""] * len(ins),
                "warmup": [i.warmup for i in ins],
                "rank": [i.rank for i in ins],
            }
            if r.host_metrics:
                tables["metrics"] = {
                    "run_id": [r.run_id] * len(ins),
                    "instance_id": [i.iid for i in ins],
                    "kernel_key": [None] * len(ins),
                    "signal": ["host.wall"] * len(ins),
                    "value": [float(i.end - i.start) for i in ins],
                    "unit": ["ns"] * len(ins),
                    "attribution": ["exact"] * len(ins),
                    "backend": ["host"] * len(ins),
                    "provenance_id": [f"{r.run_id}:host"] * len(ins),
                }
                tables["provenance"] = {
                    "provenance_id": [f"{r.run_id}:host"],
                    "run_id": [r.run_id],
                    "backend": ["host"],
                    "backend_version": ["synthetic"],
                    "settings": ["{}"],
                    "clocks": ["{}"],
                    "timestamps": ["synthetic"],
                }
        ks = r.kernels
        if ks:
            tables["provenance"] = {
                "provenance_id": [f"{r.run_id}:host", f"{r.run_id}:cupti"],
                "run_id": [r.run_id] * 2,
                "backend": ["host", "cupti"],
                "backend_version": ["synthetic", "synthetic cupti"],
                "settings": ["{}", '{"kinds": ["CONCURRENT_KERNEL"]}'],
                "clocks": ["{}", "{}"],
                "timestamps": ["synthetic", "synthetic"],
            }
            tables["kernels"] = {
                "run_id": [r.run_id] * len(ks),
                "kernel_key": [f"0/1/{k.corr}/{k.n}" for k in ks],
                "correlation_id": [k.corr for k in ks],
                "instance_id": [k.instance for k in ks],
                "name": [k.name for k in ks],
                "start_ns": [T0 + k.start for k in ks],
                "end_ns": [T0 + k.end for k in ks],
                "device_id": [k.device for k in ks],
                "rank": [k.rank for k in ks],
                "context_id": [1] * len(ks),
                "stream_id": [k.stream for k in ks],
                "graph_id": [k.graph for k in ks],
                "kind": [k.kind for k in ks],
                "bytes": [k.nbytes for k in ks],
                "thread_id": [k.thread for k in ks],
                "api_start_ns": [T0 + k.api if k.api else 0 for k in ks],
                "api_end_ns": [T0 + k.api + 1000 if k.api else 0 for k in ks],
                "registers": [k.registers for k in ks],
                "static_smem": [k.static_smem for k in ks],
                "dynamic_smem": [k.dynamic_smem for k in ks],
                "block_x": [k.block[0] for k in ks],
                "block_y": [k.block[1] for k in ks],
                "block_z": [k.block[2] for k in ks],
            }
        if r.threads:
            tables["threads"] = {
                "run_id": [r.run_id] * len(r.threads),
                "rank": [t[3] for t in r.threads],
                "pid": [1] * len(r.threads),
                "thread_id": [t[0] for t in r.threads],
                "name": [""] * len(r.threads),
                "system_name": [t[1] for t in r.threads],
                "role": [t[2] for t in r.threads],
            }
        if r.backward_calls:
            tables["host_calls"] = {
                "run_id": [r.run_id] * len(r.backward_calls),
                "rank": [c[3] for c in r.backward_calls],
                "pid": [1] * len(r.backward_calls),
                "thread_id": [c[0] for c in r.backward_calls],
                "call": ["autograd.backward"] * len(r.backward_calls),
                "start_ns": [T0 + c[1] for c in r.backward_calls],
                "end_ns": [T0 + c[2] for c in r.backward_calls],
            }
        if r.samples:
            tables["samples"] = {
                "run_id": [r.run_id] * len(r.samples),
                "device_id": [0] * len(r.samples),
                "signal": [s[0] for s in r.samples],
                "t_ns": [T0 + s[1] for s in r.samples],
                "value": [s[2] for s in r.samples],
                "unit": [s[3] for s in r.samples],
            }
        store.write(tables)


def attributions(store: Store, run_id: str, evidence: str = "kernel") -> list[tuple[Any, ...]]:
    """(evidence_id, instance_id, class, weight, reason) of one run, sorted."""
    return store.rows(
        "SELECT evidence_id, instance_id, class, weight, reason FROM attributions "
        "WHERE run_id = ? AND evidence = ? ORDER BY evidence_id, instance_id",
        [run_id, evidence],
    )


def values(store: Store, run_id: str, signal: str) -> dict[int, tuple[float | None, float | None]]:
    """{instance: (inclusive, exclusive)} of one signal."""
    rows = store.rows(
        "SELECT instance_id, inclusive, exclusive FROM instance_values WHERE run_id = ? AND signal = ?",
        [run_id, signal],
    )
    return {int(i): (inc, exc) for i, inc, exc in rows}
