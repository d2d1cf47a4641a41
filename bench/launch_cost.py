"""What one kernel launch costs on the host under each CUPTI configuration of a timing run (the per-launch part of
issue 32's overhead: the floor of kernel records, CUPTI's callback dispatch, and argus_lab's recording in it).

One process, one CUDA context.  A block is ``--n`` launches of a small elementwise kernel (``x.add_(1)`` on 256
floats: a runtime launch with its driver launch inside) inside one ``argus_lab.region``, timed with
``perf_counter`` (the GPU keeps up: each kernel is shorter than its launch).  The configurations run in turns,
round after round, each block in a collector started and stopped around it (200 untimed launches after each start:
CUPTI's first launches are slow), so slow periods of the host fall on every configuration alike.  Medians over the
rounds, ns per launch, and each configuration minus ``none``.

    python bench/launch_cost.py [--n 20000] [--rounds 11] [--json OUT.json]
    python bench/launch_cost.py --toggle [--n 1000] [--rounds 300] [--json OUT.json]

``--toggle`` measures inside ONE collector run (launch callbacks on both domains, recording), switching between
blocks only what can be switched live: CUPTI's kernel records (``activity_disable``/``enable``), the subscribed
callback ids (``enable_callbacks``) and what the callback does (``set_clock_reads``; -1: return at once).  Blocks
of a round are adjacent in time (milliseconds apart), so each configuration is compared with the ``floor`` block
of its own round; the median of those ratios over the rounds, with a bootstrap 95 % interval, is the figure.
Toggled configurations: ``off`` (CUPTI attached, nothing enabled), ``floor`` (kernel records), ``dispatch`` (driver
callbacks returning at once), ``reads2``/``reads1``/``reads0`` (driver callbacks recording, clock reads as above),
``both`` (runtime and driver callbacks, two reads).

Configurations: ``none`` (no collector); ``kernels`` (CUPTI's kernel records alone: the floor); ``empty`` (the
launch callback on the driver calls, returning at once: CUPTI's dispatch); ``callbacks`` with the callback reading
the clock at the entry and exit of each launch call (``reads2``, what ``gpu.launch_overhead`` needs), at entries
only (``reads1``) or only for launches outside every region (``reads0``); ``both`` (both callback domains, two
clock reads); ``probes`` (no launch callback).  Also prints what one ``CLOCK_REALTIME`` read costs in C and the
kernel's clock source.
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

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONFIGS: dict[str, tuple[dict[str, Any] | None, int]] = {
    "none": (None, 2),
    "kernels": ({"kinds": ["CONCURRENT_KERNEL"], "detach": "always"}, 2),
    "empty": ({"native_callback": "empty", "callback_domains": "driver"}, 2),
    "reads2": ({"launch_identity": "callbacks", "callback_domains": "driver"}, 2),
    "reads1": ({"launch_identity": "callbacks", "callback_domains": "driver"}, 1),
    "reads0": ({"launch_identity": "callbacks", "callback_domains": "driver"}, 0),
    "both": ({"launch_identity": "callbacks", "callback_domains": "both"}, 2),
    "probes": ({"launch_identity": "probes"}, 2),
}


def clock_source() -> str:
    try:
        return Path("/sys/devices/system/clocksource/clocksource0/current_clocksource").read_text().strip()
    except OSError as exc:
        return f"unknown ({exc})"


def launches(x: Any, n: int) -> float:
    import torch

    import argus_lab

    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    with argus_lab.region("block"):
        for _ in range(n):
            x.add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter_ns() - t0) / n


def block(name: str, x: Any, n: int, out: Path) -> dict[str, Any]:
    from argus_lab.backends.cupti import native as nat
    from argus_lab.backends.cupti.collector import CuptiCollector
    from argus_lab.regions import Recorder
    from argus_lab.run.protocols import RunContext

    settings, reads = CONFIGS[name]
    if settings is None:
        return {"ns": launches(x, n)}
    module = nat.build().module
    before = module.set_clock_reads(reads) if module is not None else None
    coll = CuptiCollector()
    coll.start(RunContext(f"launch-cost-{name}", ("gpu.time",), dict(settings), out))
    try:
        with Recorder(f"launch-cost-{name}", coll.hooks(), cpu_clock=False):
            launches(x, 200)
            ns = launches(x, n)
    finally:
        coll.stop()
        if module is not None and before is not None:
            module.set_clock_reads(before)
    return {"ns": ns, "launch_path": coll.launch_path, "native_launches": coll.native_launches}


TOGGLED = ("off", "floor", "dispatch", "reads2", "reads1", "reads0", "both")


def toggled(x: Any, n: int, rounds: int, out: Path, seed: int = 0) -> dict[str, Any]:
    """The ``--toggle`` design (see the module docstring): per-round ratios to the round's ``floor`` block."""
    import random

    from cupti import cupti

    from argus_lab.backends.cupti import native as nat
    from argus_lab.backends.cupti.collector import CuptiCollector
    from argus_lab.regions import Recorder
    from argus_lab.run.protocols import RunContext

    coll = CuptiCollector()
    settings = {"launch_identity": "callbacks", "callback_domains": "both"}
    coll.start(RunContext("launch-cost-toggle", ("gpu.time",), settings, out))
    module = nat.build().module
    runtime, driver = nat.callback_ids(cupti, copies=False, sets=False)
    kernel = cupti.ActivityKind.CONCURRENT_KERNEL
    state = {"kernels": True, "runtime": True, "driver": True}

    def want(kernels: bool, rt: bool, drv: bool, reads: int) -> None:
        if state["kernels"] != kernels:
            (cupti.activity_enable if kernels else cupti.activity_disable)(kernel)
            state["kernels"] = kernels
        if state["runtime"] != rt:
            module.enable_callbacks(rt, runtime, [])
            state["runtime"] = rt
        if state["driver"] != drv:
            module.enable_callbacks(drv, [], driver)
            state["driver"] = drv
        module.set_clock_reads(reads)

    setups = {
        "off": (False, False, False, 2),
        "floor": (True, False, False, 2),
        "dispatch": (True, False, True, -1),
        "reads2": (True, False, True, 2),
        "reads1": (True, False, True, 1),
        "reads0": (True, False, True, 0),
        "both": (True, True, True, 2),
    }
    samples: dict[str, list[float]] = {c: [] for c in TOGGLED}
    rng = random.Random(seed)
    try:
        with Recorder("launch-cost-toggle", coll.hooks(), cpu_clock=False):
            launches(x, 500)
            for _ in range(rounds):
                order = list(TOGGLED)
                rng.shuffle(order)
                for name in order:
                    want(*setups[name])
                    launches(x, 50)  # settle after the switch
                    samples[name].append(launches(x, n))
    finally:
        module.set_clock_reads(2)
        coll.stop()
    ratios = {c: [a / b for a, b in zip(samples[c], samples["floor"], strict=True)] for c in TOGGLED}
    res: dict[str, Any] = {"launch_path": coll.launch_path, "native_launches": coll.native_launches, "configs": {}}
    for c in TOGGLED:
        med = statistics.median(ratios[c])
        boot = sorted(statistics.median(rng.choices(ratios[c], k=len(ratios[c]))) for _ in range(1000))
        res["configs"][c] = {
            "ns_per_launch": round(statistics.median(samples[c]), 1),
            "over_floor": round(med, 4),
            "over_floor_ci95": [round(boot[25], 4), round(boot[974], 4)],
            "minus_floor_ns": round(statistics.median(np.subtract(samples[c], samples["floor"])), 1),
        }
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--json", default="")
    ap.add_argument("--toggle", action="store_true", help="the in-run design (see the docstring)")
    args = ap.parse_args()
    import torch

    from argus_lab.backends.cupti import native as nat

    names = [c for c in args.configs.split(",") if c]
    unknown = [c for c in names if c not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configurations {unknown}; configurations: {', '.join(CONFIGS)}")
    x = torch.ones(256, device="cuda")
    launches(x, 2000)
    module = nat.build().module
    res: dict[str, Any] = {
        "n": args.n,
        "rounds": args.rounds,
        "clock_source": clock_source(),
        "clock_read_ns": module.clock_cost(1_000_000) if module is not None else None,
        "configs": {},
    }
    out = Path(tempfile.mkdtemp(prefix="launch-cost-"))
    if args.toggle:
        res.update(toggled(x, args.n, args.rounds, out))
        print(f"clock source {res['clock_source']}, CLOCK_REALTIME read in C: {res['clock_read_ns']:.1f} ns")
        print(f"one collector run, {res['native_launches']} launches recorded ({res['launch_path']})")
        for name, r in res["configs"].items():
            lo, hi = r["over_floor_ci95"]
            print(
                f"{name:8s} {r['ns_per_launch']:8.1f} ns a launch  x{r['over_floor']:.4f} of floor "
                f"(95% {lo:.4f}-{hi:.4f}, {r['minus_floor_ns']:+.1f} ns)"
            )
        if args.json:
            Path(args.json).write_text(json.dumps(res, indent=1))
        return
    samples: dict[str, list[float]] = {c: [] for c in names}
    info: dict[str, dict[str, Any]] = {}
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]  # a different configuration first each round
        for name in order:
            b = block(name, x, args.n, out)
            samples[name].append(b.pop("ns"))
            info[name] = b
    base = statistics.median(samples["none"]) if "none" in samples else 0.0
    print(f"clock source {res['clock_source']}, CLOCK_REALTIME read in C: {res['clock_read_ns']:.1f} ns")
    for name in names:
        med = statistics.median(samples[name])
        res["configs"][name] = {
            "ns_per_launch": round(med, 1),
            "over_none_ns": round(med - base, 1),
            "rounds": [round(v, 1) for v in samples[name]],
            **info.get(name, {}),
        }
        print(f"{name:8s} {med:8.1f} ns a launch  (+{med - base:6.1f} over none)  {info.get(name, {})}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
