"""What one region costs on the GPU machine with CUPTI attached, by launch identity (issue 13's decomposition).

The README's inline idiom (``with argus_lab.region("x"):``, an empty body: no kernel launch) is timed inside a real
CUPTI collector run with its recorder, once with ``launch_identity="callbacks"`` (the region boundaries in C, no
callback fires since nothing launches) and once with ``launch_identity="probes"`` (the same plus one probe call per
boundary, which CUPTI calls back for): the difference is what two probes cost; once more with
``launch_identity="clock"`` (a row on CUPTI's clock per boundary, no call): what the clock's rows cost.  ``idle`` is
the same loop with no recorder.  Medians over rounds, ns per region (enter + exit).

    python bench/probe_cost.py [--n 100000] [--rounds 7] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LOOP = "for _ in range(n):\n    with argus_lab.region('x'):\n        pass\n"


def per_region(n: int) -> float:
    import argus_lab

    code = compile(LOOP, "<probe_cost>", "exec")
    t0 = time.perf_counter_ns()
    exec(code, {"argus_lab": argus_lab, "n": n})  # the idiom, compiled as user code would be
    return (time.perf_counter_ns() - t0) / n


def in_run(identity: str, n: int, rounds: int, out: Path) -> dict[str, Any]:
    from argus_lab.backends.cupti.collector import CuptiCollector
    from argus_lab.regions import Recorder
    from argus_lab.run.protocols import RunContext

    coll = CuptiCollector()
    coll.start(RunContext(f"probe-{identity}", ("gpu.time",), {"launch_identity": identity}, out))
    rec = Recorder(f"probe-{identity}", coll.hooks(), cpu_clock=False)  # as a timing run: the C boundary path
    with rec:
        per_region(1000)  # warm the call-site table
        times = [per_region(n) for _ in range(rounds)]
        c_path = bool(rec.native_boundaries)
    coll.stop()
    return {
        "ns_per_region": statistics.median(times),
        "rounds": [round(t, 1) for t in times],
        "launch_path": coll.launch_path,
        "c_boundaries": c_path,
        "probes": coll.launch_order.get("probes", 0),
        "boundary_rows": coll.launch_order.get("boundary rows", 0),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    import torch

    torch.ones(1, device="cuda")  # a context, as in a real workload
    idle = [per_region(args.n) for _ in range(args.rounds)]
    out = Path(tempfile.mkdtemp(prefix="probe-cost-"))
    res: dict[str, Any] = {"n": args.n, "idle": {"ns_per_region": statistics.median(idle)}}
    for identity in ("callbacks", "probes", "clock"):
        res[identity] = in_run(identity, args.n, args.rounds, out)
    res["two_probes_ns"] = res["probes"]["ns_per_region"] - res["callbacks"]["ns_per_region"]
    res["two_clock_rows_ns"] = res["clock"]["ns_per_region"] - res["callbacks"]["ns_per_region"]
    for key in ("idle", "callbacks", "probes", "clock"):
        r = res[key]
        extra = ""
        if key != "idle":
            extra = (
                f" ({r['launch_path']}, C boundaries {r['c_boundaries']}, {r['probes']} probes, "
                f"{r['boundary_rows']} clock rows)"
            )
        print(f"{key:10s} {r['ns_per_region']:8.1f} ns per region{extra}")
    print(f"two probes (enter + exit): {res['two_probes_ns']:.1f} ns")
    print(f"two clock rows (enter + exit): {res['two_clock_rows_ns']:.1f} ns")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
