"""GPU probe for device regions (issue 18, phase A): run on the H200, writes evidence under OUT.

    PYTHONPATH=$PWD /opt/torch/.venv/bin/python3 scripts/gpu_probe_device.py OUT

For two shapes of the persistent GEMM (examples/gpu/persistent_gemm.py; 8192^3, and 3072x3072x8192 whose 576
tiles leave a tail on 132 SMs) it: checks clean and instrumented results against torch.matmul; compares the
clean variant's SASS with the marker-free kernel's; times unmarked, clean, instrumented (tile marks) and
instrumented (k-step marks) with CUDA events (medians); decodes the probe buffers; prints per-phase time per SM
and the tail imbalance; measures the %globaltimer tick. Then, in a child process with a timeout, it tries Proton's
intra-kernel instrumentation on a small kernel and records what its output holds. Writes
OUT/device_probe.json, OUT/rows_<shape>_<marks>.npz (decoded rows), OUT/raw_<shape>_<marks>.npz (raw buffers,
where small enough), OUT/sass_*.txt. Finishes in about 1-2 minutes; a watchdog stops it at 170 s.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = {"8192": (8192, 8192, 8192), "tail3072": (3072, 3072, 8192)}
REPS = 20
RAW_LIMIT_BYTES = 8 << 20
ROWS_LIMIT = 200_000

PROTON_CHILD = r"""
import json, os, sys, glob
import torch, triton, triton.language as tl
import triton.profiler as proton
import triton.profiler.language as pl
pl.enable_semantic("triton")
out = sys.argv[1]

@triton.jit
def add(x, y, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    o = pid * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    with pl.scope("load"):
        v = tl.load(x + o, mask=m)
    with pl.scope("store"):
        tl.store(y + o, v + 1, mask=m)

x = torch.randn(1 << 20, device="cuda"); y = torch.empty_like(x)
res = {}
for data in ("trace", "tree"):
    name = os.path.join(out, f"proton_{data}")
    try:
        proton.start(name, backend="instrumentation", data=data)
        k = add[(x.numel() // 1024,)](x, y, x.numel(), BLOCK=1024)
        torch.cuda.synchronize()
        proton.finalize()
        res[data] = {"profile_scratch_size": getattr(k.metadata, "profile_scratch_size", None),
                     "files": sorted(os.path.basename(f) for f in glob.glob(name + "*"))}
        for f in glob.glob(name + "*"):
            try:
                j = json.load(open(f))
            except Exception as e:
                res[data]["parse_" + os.path.basename(f)] = repr(e)[:200]
                continue
            if isinstance(j, dict):
                res[data]["keys"] = sorted(j)[:20]
                ev = j.get("traceEvents")
                if ev:
                    res[data]["n_events"] = len(ev)
                    res[data]["first_events"] = ev[:3]
            elif isinstance(j, list):
                res[data]["head"] = json.dumps(j[:1])[:1500]
    except Exception as e:
        res[data] = {"error": repr(e)[:500]}
print("PROTON_RESULT " + json.dumps(res, default=str))
"""


def _cuobjdump() -> str:
    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    return str(bundled) if bundled.exists() else "/usr/local/cuda/bin/cuobjdump"


def _sass(kernel: Any) -> list[str]:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        out = subprocess.run([_cuobjdump(), "-sass", f.name], capture_output=True, text=True, timeout=60).stdout
    return [m.group(1).strip() for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+([^;]*);", out)]


def _compiled(fn: Any) -> list[Any]:
    """The CompiledKernels a JITFunction holds (Triton 3.6: device_caches[device][0] maps keys to kernels)."""
    return [k for cache in fn.device_caches.values() for k in cache[0].values()]


def _median_ms(fn: Any, reps: int) -> tuple[float, list[float]]:
    import torch

    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times)), times


def _per_sm_table(fig: Any, limit: int = 8) -> str:
    sms = fig.sms
    order = np.argsort(sms.end_ns)
    pick = order if len(order) <= limit else np.r_[order[: limit // 2], order[-(limit // 2) :]]
    head = f"{'sm':>4} {'ctas':>4} {'busy µs':>9} {'end-first µs':>12} " + " ".join(f"{r:>11}" for r in sms.region_ns)
    lines = [head]
    t0 = int(sms.begin_ns.min())
    for i in pick:
        cells = " ".join(f"{sms.region_ns[r][i] / 1e3:>9.1f}µs" for r in sms.region_ns)
        lines.append(
            f"{int(sms.sm[i]):>4} {int(sms.programs[i]):>4} {sms.busy_ns[i] / 1e3:>9.1f} "
            f"{(int(sms.end_ns[i]) - t0) / 1e3:>12.1f} {cells}"
        )
    return "\n".join(lines)


def main(out: Path) -> int:
    import torch
    import triton

    from argus_lab.backends.device.collector import ProbeBuffer
    from argus_lab.backends.device.decode import decode
    from examples.gpu import persistent_gemm as pg
    from tests.device_reference import summarize

    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "device": torch.cuda.get_device_name(0),
        "sms": pg.num_sms_of(),
        "reps": REPS,
        "shapes": {},
        "errors": [],
    }
    sms = summary["sms"]
    print(f"device {summary['device']} sms={sms} torch {torch.__version__} triton {triton.__version__}", flush=True)
    for shape_name, (m, n, k) in SHAPES.items():
        res: dict[str, Any] = {"m": m, "n": n, "k": k}
        summary["shapes"][shape_name] = res
        a, b = pg.make_inputs(m, n, k)
        ref = torch.matmul(a, b).float()
        scale = float(ref.abs().max())
        base = pg.GemmConfig(marks="tile")
        res["config"] = base.__dict__ | {"grid": pg.grid_size(m, n, base, sms), "tiles": pg.num_tiles(m, n, base)}

        def err(c: Any) -> float:
            return float((c.float() - ref).abs().max()) / scale  # noqa: B023

        # clean and unmarked: correctness and SASS
        c_un = pg.launch_unmarked(a, b, base)
        c_cl = pg.launch(a, b, base)
        torch.cuda.synchronize()
        res["rel_err"] = {"unmarked": err(c_un), "clean": err(c_cl)}
        try:
            s_un = _sass(_compiled(pg.unmarked)[0])
            s_cl = _sass(_compiled(pg.persistent_gemm)[0])  # only the clean variant is compiled so far
            res["sass"] = {"unmarked": len(s_un), "clean": len(s_cl), "equal": s_un == s_cl}
            if s_un != s_cl and shape_name == "8192":
                (out / "sass_unmarked.txt").write_text("\n".join(s_un))
                (out / "sass_clean.txt").write_text("\n".join(s_cl))
        except Exception as e:  # the cache layout is Triton-internal: report, go on
            res["sass"] = {"error": repr(e)[:300]}
        times: dict[str, float] = {}
        raw_times: dict[str, list[float]] = {}
        times["unmarked"], raw_times["unmarked"] = _median_ms(lambda: pg.launch_unmarked(a, b, base, out=c_un), REPS)  # noqa: B023
        times["clean"], raw_times["clean"] = _median_ms(lambda: pg.launch(a, b, base, out=c_cl), REPS)  # noqa: B023
        for marks in ("tile", "kstep"):
            cfg = pg.GemmConfig(marks=marks)
            grid = pg.grid_size(m, n, cfg, sms)
            probe = ProbeBuffer.allocate(grid, pg.events_per_cta(m, n, k, cfg, sms), kernel="persistent_gemm")
            c_in = pg.launch(a, b, cfg, probe=probe.tensor)
            torch.cuda.synchronize()
            res["rel_err"][f"instrumented_{marks}"] = err(c_in)
            t, rt = _median_ms(lambda: pg.launch(a, b, cfg, probe=probe.tensor, out=c_in), REPS)  # noqa: B023
            times[f"instrumented_{marks}"], raw_times[f"instrumented_{marks}"] = t, rt
            host = probe.host()
            t0 = time.perf_counter()
            d = decode(host, pg.PHASES, launch=0, strict=False)
            decode_s = time.perf_counter() - t0
            fig = summarize(d)
            cols = d.columns()
            cols["region"] = cols["region"].astype(str)
            if len(d.intervals) <= ROWS_LIMIT:
                np.savez_compressed(out / f"rows_{shape_name}_{marks}.npz", **cols)
            if host.nbytes <= RAW_LIMIT_BYTES:
                np.savez_compressed(out / f"raw_{shape_name}_{marks}.npz", buffer=host)
            ticks = np.diff(np.sort(np.unique(cols["t_start_ns"])))
            rate = d.programs.cycles_per_ns
            res[marks] = {
                "events": int(d.programs.n_events.sum()),
                "intervals": len(d.intervals),
                "decode_s": decode_s,
                "problems": list(d.problems),
                "globaltimer_min_gap_ns": int(ticks[ticks > 0].min()) if (ticks > 0).any() else None,
                "globaltimer_gcd_ns": int(np.gcd.reduce(ticks[ticks > 0][:100_000])) if (ticks > 0).any() else None,
                "globaltimer_zero_length_frac": float(np.mean(cols["t_end_ns"] == cols["t_start_ns"])),
                "cycles_per_ns_median": float(np.nanmedian(rate)),
                "span_us": fig.span_ns / 1e3,
                "tail_imbalance_us": fig.tail_imbalance_ns / 1e3,
                "sm_end_spread_us": float(fig.sms.end_ns.max() - fig.sms.end_ns.min()) / 1e3,
                "ctas_per_sm_max": int(fig.sms.programs.max()),
                "regions": [r.__dict__ for r in fig.regions],
            }
            print(
                f"\n== {shape_name} marks={marks}: {len(d.intervals)} intervals, decode {decode_s * 1e3:.0f} ms, "
                f"span {fig.span_ns / 1e3:.1f} µs, tail imbalance {fig.tail_imbalance_ns / 1e3:.1f} µs, "
                f"problems {len(d.problems)}",
                flush=True,
            )
            for r in fig.regions:
                print(
                    f"   {r.region:>9}: count {r.count:>8} per-CTA median {r.time_per_cta_median_ns / 1e3:9.1f} µs "
                    f"[p10 {r.time_per_cta_p10_ns / 1e3:.1f}, p90 {r.time_per_cta_p90_ns / 1e3:.1f}] "
                    f"one {r.occurrence_median_ns:8.0f} ns"
                )
            print(_per_sm_table(fig))
        res["median_ms"] = times
        res["times_ms"] = raw_times
        res["overhead_vs_clean"] = {k2: v / times["clean"] for k2, v in times.items()}
        tflops = 2 * m * n * k / (times["clean"] * 1e-3) / 1e12
        print(
            f"\n{shape_name}: medians ms {json.dumps({k2: round(v, 4) for k2, v in times.items()})} "
            f"clean {tflops:.0f} TFLOP/s rel_err {json.dumps({k2: round(v, 5) for k2, v in res['rel_err'].items()})} "
            f"sass {res.get('sass')}",
            flush=True,
        )
    # Proton, in a child: its instrumentation mode changes process-wide compiler state
    try:
        p = subprocess.run([sys.executable, "-c", PROTON_CHILD, str(out)], capture_output=True, text=True, timeout=90)
        line = next((ln for ln in p.stdout.splitlines() if ln.startswith("PROTON_RESULT ")), None)
        summary["proton"] = (
            json.loads(line[len("PROTON_RESULT ") :]) if line else {"rc": p.returncode, "stderr": p.stderr[-2000:]}
        )
    except Exception as e:
        summary["proton"] = {"error": repr(e)[:500]}
    print("\nproton:", json.dumps(summary["proton"], default=str)[:3000])
    (out / "device_probe.json").write_text(json.dumps(summary, indent=1, default=str))
    print(f"\nwrote {out}/device_probe.json")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gpu_probe_device.py OUT")
    target = Path(sys.argv[1])
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("watchdog: 170 s")))
    signal.alarm(170)
    try:
        rc = main(target)
    except Exception:
        traceback.print_exc()
        target.mkdir(parents=True, exist_ok=True)
        (target / "device_probe_error.txt").write_text(traceback.format_exc())
        rc = 1
    os._exit(rc)
