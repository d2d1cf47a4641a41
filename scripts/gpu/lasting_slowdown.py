"""Does a measurement that follows torch.profiler leave the process slower?  One H200 diagnosis, fresh processes.

    PYTHONPATH=/tmp/argus-site:$PWD /opt/torch/.venv/bin/python3 scripts/gpu/lasting_slowdown.py OUT [--procs 2]

Each process: a bf16 1024x1024 GEMM's launch rate (host time per ``torch.mm`` call and CUDA events over blocks of
back-to-back launches, medians over blocks) before torch.profiler, after one profile, after a pause (the host's
drift), then after one and after a second ``argus_lab.measure`` of the ``gemm`` region with one cupti setting
variant.  Variant ``none`` runs no measurement (the pause only): the control.  The variants are run one after the
other, process by process, round-robin, so the host's drift falls on all of them alike.  Prints one JSON line a
process and writes ``OUT/lasting_slowdown.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

VARIANTS: dict[str, dict[str, Any] | None] = {
    "none": None,
    "default": {},
    "decode_at_stop": {"decode": "at stop"},
    "python_buffers": {"buffers": "records"},
    "no_backward_proxy": {"backward_calls": False},
    "detach_never": {"detach": "never"},
}


def rates(step: Any, blocks: int = 15, per_block: int = 200) -> dict[str, float]:
    """Median host us per call and CUDA-event us per launch over ``blocks`` blocks of ``per_block`` launches."""
    import torch

    host, dev = [], []
    for _ in range(blocks):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        t0 = time.perf_counter()
        for _ in range(per_block):
            step()
        host.append((time.perf_counter() - t0) * 1e6 / per_block)
        e.record()
        e.synchronize()
        dev.append(s.elapsed_time(e) * 1e3 / per_block)
    return {"host_us": round(statistics.median(host), 3), "events_us": round(statistics.median(dev), 3)}


def one(variant: str, store: Path) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    import argus_lab
    from argus_lab.app.measure import run_plan
    from argus_lab.run.workload import Workload

    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)

    def gemm() -> None:
        torch.mm(a, a)

    def region_step() -> None:
        with argus_lab.region("gemm"):
            torch.mm(a, a)
        torch.cuda.synchronize()

    for _ in range(20):
        gemm()
    torch.cuda.synchronize()
    res: dict[str, Any] = {"variant": variant, "before": rates(gemm)}
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        for _ in range(3):
            gemm()
        torch.cuda.synchronize()
    res["after_profiler"] = rates(gemm)
    time.sleep(1.0)
    res["after_pause"] = rates(gemm)
    settings = VARIANTS[variant]
    for k in ("after_measure_1", "after_measure_2"):
        if settings is None:
            time.sleep(2.0)
        else:
            plan = argus_lab.plan("gpu.time,gpu.kernels", repeat=3, warmup=1)
            runs = []
            for r in plan.runs:
                s = {b: dict(v) for b, v in r.settings.items()}
                if "cupti" in r.backends:
                    s.setdefault("cupti", {}).update(settings)
                runs.append(replace(r, settings=s))
            rep = run_plan(replace(plan, runs=tuple(runs)), Workload.of_callable(region_step), str(store)).report
            res.setdefault("classes", []).append(sorted({str(w)[:80] for w in rep.warnings})[:2])
        res[k] = rates(gemm)
    res["threads"] = sorted(t.name for t in threading.enumerate())
    res["sys_profile"] = repr(sys.getprofile())
    res["sys_trace"] = repr(sys.gettrace())
    res["torch_profiler_enabled"] = bool(torch.autograd.profiler._is_profiler_enabled)
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--one", default="")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.one:
        print("RESULT " + json.dumps(one(args.one, out / f"ls-{args.one}.duckdb")), flush=True)
        return 0
    results = []
    for p in range(args.procs):
        for v in VARIANTS:
            proc = subprocess.run([sys.executable, __file__, str(out), "--one", v], capture_output=True, text=True,
                                  timeout=180, check=False)  # fmt: skip
            line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            r = json.loads(line[0][7:]) if line else {"variant": v, "error": proc.stderr[-1500:]}
            r["proc"] = p
            results.append(r)
            keys = ("before", "after_profiler", "after_pause", "after_measure_1", "after_measure_2")
            fig = " ".join(f"{k}={r[k]['host_us']}/{r[k]['events_us']}" for k in keys if k in r)
            print(f"{v:18s} p{p} host/events us: {fig} {r.get('error', '')[-300:]}", flush=True)
    (out / "lasting_slowdown.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
