"""SYNTHETIC evidence for view and export tests (labelled synthetic: not a measurement).

It writes a store with the shape real runs produce (a timing run with CUPTI-like kernel records, an ncu-like
counter run matched by ordinal, compiler facts, one ambiguous item) and hostile names: a region named
``<img src=x onerror=...>`` and a kernel named ``<script>...</script>``, so escaping can be tested.  Real H200
evidence lives in tests/data/ (see tests/data/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from argus_lab import join
from argus_lab.backends.rows import empty_metrics
from argus_lab.store import Store

XSS_REGION = "<img src=x onerror=window.__argus_xss=1>"
XSS_KERNEL = "<script>window.__argus_xss=2</script>"
T0 = 1_764_000_000_000_000_000


def _run(run_id: str, index: int, backends: list[str], signals: list[str], status: str = "ok") -> dict[str, Any]:
    return {
        "run_id": run_id,
        "session_id": "s-synthetic",
        "request_id": "q-synthetic",
        "plan_id": "p-synthetic",
        "plan_index": index,
        "variant": "",
        "backends": [backends],
        "signals": [signals],
        "settings": json.dumps({}),
        "workload": "synthetic decode step",
        "command": "synthetic (tests/views_synthetic.py)",
        "env": "{}",
        "versions": json.dumps({"argus_lab": "test"}),
        "status": status,
        "cause": "",
        "repetitions": 2,
        "warmup": 0,
        "reps_done": 2,
        "started_ns": T0 + index,
        "ended_ns": T0 + index + 2_000_000_000,
        "host": "synthetic",
        "pid": 1,
        "reason": "first run" if index == 0 else "ncu replays kernels",
    }


def write_store(path: Path, n_kernels: int = 40) -> Store:
    """Write the synthetic store at ``path`` and return it."""
    store = Store(path)
    names = ["decode", "layer", "attn", XSS_REGION]
    regions = {
        "region_id": [f"rid{i}" for i in range(4)],
        "name": names,
        "kind": ["host"] * 4,
        "module": ["synthetic"] * 4,
        "file": ["synthetic.py"] * 4,
        "line": [10, 11, 12, 13],
    }
    inst: dict[str, list[Any]] = {
        k: []
        for k in [
            "run_id",
            "instance_id",
            "region_id",
            "path",
            "instance_index",
            "parent_instance_id",
            "repetition",
            "pid",
            "thread_id",
            "start_ns",
            "end_ns",
            "cpu_ns",
            "error",
            "warmup",
        ]
    }
    iid = 0
    t = T0
    for run_id in ("r-timing", "r-ncu"):
        for rep in range(2):
            iid += 1
            top = iid
            top_start = t
            children = []
            for j, (_name, path) in enumerate(((names[2], "decode/layer/attn"), (names[3], f"decode/{names[3]}"))):
                iid += 1
                children.append((iid, j + 2, path, t + 1000, t + 4_000_000))
                t += 5_000_000
            for row in [
                (top, 0, "decode", top_start, t + 1000, 0),
                *[(c[0], c[1], c[2], c[3], c[4], top) for c in children],
            ]:
                inst["run_id"].append(run_id)
                inst["instance_id"].append(row[0])
                inst["region_id"].append(f"rid{row[1]}")
                inst["path"].append(row[2])
                inst["instance_index"].append(rep)
                inst["parent_instance_id"].append(row[5])
                inst["repetition"].append(rep)
                inst["pid"].append(1)
                inst["thread_id"].append(7)
                inst["start_ns"].append(row[3])
                inst["end_ns"].append(row[4])
                inst["cpu_ns"].append((row[4] - row[3]) // 2)
                inst["error"].append("")
                inst["warmup"].append(False)
            t += 10_000_000
    timing = [i for i, r in enumerate(inst["run_id"]) if r == "r-timing" and inst["path"][i] != "decode"]
    rng = np.random.default_rng(0)
    kern: dict[str, list[Any]] = {
        k: []
        for k in [
            "run_id",
            "correlation_id",
            "instance_id",
            "name",
            "start_ns",
            "end_ns",
            "device_id",
            "context_id",
            "stream_id",
            "registers",
        ]
    }
    for k in range(n_kernels):
        i = timing[k % len(timing)]
        s = inst["start_ns"][i] + 2000 + (k // len(timing)) * 30_000
        kern["run_id"].append("r-timing")
        kern["correlation_id"].append(100 + k)
        kern["instance_id"].append(inst["instance_id"][i])
        kern["name"].append(XSS_KERNEL if k % 5 == 0 else f"gemm_kernel_{k % 3}")
        kern["start_ns"].append(s)
        kern["end_ns"].append(s + int(rng.integers(5_000, 25_000)))
        kern["device_id"].append(0)
        kern["context_id"].append(1)
        kern["stream_id"].append(7 if k % 2 else 13)
        kern["registers"].append(96)
    metrics: dict[str, list[Any]] = empty_metrics()

    def metric(run: str, iid_: Any, key: Any, sig: str, val: float, unit: str, backend: str) -> None:
        row = {"run_id": run, "instance_id": iid_, "kernel_key": key, "signal": sig, "value": val, "unit": unit}
        for name, v in {**row, "backend": backend, "provenance_id": f"pv-{backend}"}.items():
            metrics[name].append(v)

    for i in range(len(inst["run_id"])):
        run = inst["run_id"][i]
        wall = inst["end_ns"][i] - inst["start_ns"][i]
        metric(run, inst["instance_id"][i], None, "host.wall", float(wall), "ns", "host")
        if run == "r-timing" and inst["path"][i] != "decode":
            metric(run, inst["instance_id"][i], None, "gpu.time", wall * 0.6, "ns", "cupti")
    for k in range(min(n_kernels, 8)):
        i = timing[k % len(timing)]
        key = f"ncu/{inst['path'][i]}/0/{k}/gemm_kernel_{k % 3}"
        metric("r-ncu", inst["instance_id"][i] + 6, key, "hw:dram__bytes_read.sum", 1e6 * (k + 1), "byte", "ncu")
    metric("r-timing", None, f"bin:{XSS_KERNEL}:abc", "compile.registers", 96, "register/thread", "compiler")
    metric("r-timing", None, "bin:gemm_kernel_1:def", "compile.spills", 0, "word/thread", "compiler")
    attrs: dict[str, list[Any]] = {
        k: [] for k in ["run_id", "evidence", "evidence_id", "instance_id", "class", "weight", "reason"]
    }
    for k in range(n_kernels):
        for name, v in zip(
            attrs,
            ("r-timing", "kernel", f"0/1/{100 + k}/0", kern["instance_id"][k], "exact", 1.0, "external correlation id"),
            strict=True,
        ):
            attrs[name].append(v)
    for cand, w in ((timing[0], 0.5), (timing[1], 0.5)):
        for name, v in zip(
            attrs,
            (
                "r-timing",
                "pm_sample",
                "pm/0",
                inst["instance_id"][cand],
                "ambiguous",
                w,
                "sample window straddles two instances",
            ),
            strict=True,
        ):
            attrs[name].append(v)
    prov = {
        "provenance_id": ["pv-host", "pv-cupti", "pv-ncu", "pv-compiler"],
        "run_id": ["r-timing", "r-timing", "r-ncu", "r-timing"],
        "backend": ["host", "cupti", "ncu", "compiler"],
        "backend_version": ["test"] * 4,
        "settings": ["{}", "{}", json.dumps({"replay_mode": "kernel", "clock_control": "base"}), "{}"],
        "clocks": ["{}"] * 4,
        "timestamps": ["measured", "measured", "none", "none"],
    }
    runs = [
        _run("r-timing", 0, ["host", "cupti"], ["host.wall", "gpu.time"]),
        _run("r-ncu", 1, ["ncu"], ["hw:dram__bytes_read.sum"]),
    ]
    store.write(
        {
            "requests": {
                "request_id": ["q-synthetic"],
                "session_id": ["s-synthetic"],
                "created_ns": [T0],
                "text": ["synthetic"],
                "spec": ["{}"],
            },
            "runs": {k: [r[k][0] if isinstance(r[k], list) else r[k] for r in runs] for k in runs[0]},
            "regions": regions,
            "region_instances": inst,
            "kernels": kern,
            "metrics": metrics,
            "attributions": attrs,
            "provenance": prov,
        }
    )
    join.attribute_request(store, ["r-timing", "r-ncu"])  # the join runs where the runs end
    return store
