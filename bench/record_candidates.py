#!/usr/bin/env python3
"""Record the whole optimisation table on one GPU: every candidate of every configuration, both baselines.

    python bench/record_candidates.py OUT [--budget-s 480] [--procs 15] [--launches 30] [--only 1-10]
    python bench/record_candidates.py OUT --dry-run [--per-config 2] [--only 1,25]   # compile only, no GPU
    python bench/record_candidates.py OUT --only 1,2,4,7,8,10,24 --study group       # a side study (not the table)

For each configuration of bench/recorded_configs.py, in one process, with one timing protocol for everything
(:func:`time_calls`: ``warmup`` launches, then ``launches`` launches each between two CUDA events, queued behind a
GPU sleep so that the host's launch cost never shows in the events; every sample kept):

* baseline (b), the vendor kernel: ``torch.matmul`` (cuBLAS), ``torch._scaled_mm`` for fp8, and
  ``scaled_dot_product_attention`` restricted to the flash backend; its output is the reference every candidate's
  first output is checked against;
* baseline (a), Triton's own autotuner: ``triton.autotune`` over the tutorials' config list
  (bench/recorded_spaces.py) wrapping the same JIT kernel, run for real on the GPU (its own benchmark: Triton's
  ``do_bench`` with 5 ms warm-up and 25 ms of repetitions per config); which config it picked, its timings of every
  config, and then the tuned call under the protocol above;
* every candidate of the configuration's space (bench/recorded_spaces.py): the clean variant's samples, the
  compiler's facts (registers and spills from the loaded kernel, ``cuobjdump -res-usage`` from the compile), and
  one instrumented launch whose probe buffer is decoded in the pool into device-region phases;
* baseline (a) and (b) again after the candidates: the run-to-run noise.

Every kernel is compiled ahead by a pool of CPU processes (``JITFunction.warmup`` for sm_90 into Triton's cache,
the same call the GPU process then makes: it loads the cubins).  Results go to ``OUT/*.jsonl`` line by line as they
are measured (a timeout keeps everything measured so far): ``candidates.jsonl``, ``phases.jsonl``,
``baselines.jsonl``, ``configs.jsonl``, ``compiles.jsonl``; ``OUT/plan.json`` holds the plan and the estimate,
``OUT/record.json`` the run's facts at the end.  ``--only`` measures some configurations (numbered from 1): the
continuation of a run that ran out of time.  ``--study NAME`` also measures a side study's GEMM points
(bench/recorded_spaces.py ``STUDIES``): such a recording is kept apart from the table.  ``--dry-run`` compiles (a
few candidates per configuration with ``--per-config``) and writes the plan without a GPU.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import platform
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.recorded_configs import CONFIGS, SMS, Config, bound_ns, parse_only  # noqa: E402
from bench.recorded_launch import UnitResult  # noqa: E402
from bench.recorded_spaces import STUDIES, autotune_list, default, key_of, space  # noqa: E402

SCHEMA = "argus_lab.recorded-table/1"
COMPILE_S = 1.2
"""Seconds one compile takes on one CPU core (measured: 0.5-3 s on this project's machines)."""
CANDIDATE_OVERHEAD_S = 0.03
"""Host seconds per candidate besides its launches (load, check, probe copy)."""
AUTOTUNE_PER_CONFIG_S = 0.045
"""Triton's autotuner per config: 5 ms warm-up, 25 ms of repetitions, and its own overhead."""


# -- the plan --------------------------------------------------------------------------------------------------
def candidates_of(cfg: Config, per_config: int | None, study: str = "") -> list[dict[str, Any]]:
    """The candidates measured for ``cfg`` (the first ``per_config`` of its space in a dry run)."""
    pts = space(cfg, study)
    return pts[:per_config] if per_config else pts


def units(numbers: list[int], per_config: int | None, study: str = "") -> dict[str, tuple[int, dict[str, Any], bool]]:
    """Distinct compiles: unit key -> (configuration number, candidate, instrumented), in measuring order."""
    from bench.recorded_launch import unit_key

    out: dict[str, tuple[int, dict[str, Any], bool]] = {}
    for n in numbers:
        cfg = CONFIGS[n - 1]
        pts = candidates_of(cfg, per_config, study)
        tuned = autotune_list(cfg) if per_config is None else []
        for p in [*pts, *(t for t in tuned if t not in pts)]:
            for instr in (False, True):
                if instr and p not in pts:
                    continue
                out.setdefault(unit_key(cfg, p, instr), (n, p, instr))
    return out


def estimate(
    numbers: list[int], per_config: int | None, procs: int, launches: int, warmup: int, study: str = ""
) -> dict[str, Any]:
    """GPU-machine wall time of the run from its compile and launch counts (seconds)."""
    n_units = len(units(numbers, per_config, study))
    compile_s = n_units * COMPILE_S / max(procs, 1)
    measure_s = 0.0
    tune_s = 0.0
    n_cands = 0
    for n in numbers:
        cfg = CONFIGS[n - 1]
        pts = candidates_of(cfg, per_config, study)
        n_cands += len(pts)
        # candidates run ~1.3x the roofline bound on average here; tiny kernels at least 10 us
        per_launch = max(bound_ns(cfg) * 1.6e-9, 10e-6)
        measure_s += len(pts) * ((warmup + launches + 2) * per_launch + CANDIDATE_OVERHEAD_S)
        measure_s += 4 * (warmup + launches) * per_launch  # both baselines, two passes
        tune_s += len(autotune_list(cfg)) * AUTOTUNE_PER_CONFIG_S
    startup_s = 25.0  # imports, CUDA context, the pool's start
    return {
        "configurations": len(numbers),
        "candidates": n_cands,
        "compile_units": n_units,
        "compile_s": round(compile_s, 1),
        "measure_s": round(measure_s, 1),
        "autotune_s": round(tune_s, 1),
        "startup_s": startup_s,
        "total_s": round(startup_s + compile_s + measure_s + tune_s, 1),
        "assumes": f"{COMPILE_S} s per compile on {procs} processes; launches at 1.6x the roofline bound "
        f"(>= 10 us); {CANDIDATE_OVERHEAD_S} s host cost per candidate; {AUTOTUNE_PER_CONFIG_S} s per autotuned "
        "config",
    }


def order(numbers: list[int]) -> list[int]:
    """GEMM and attention alternating, so a run cut short has measured both kinds."""
    g = [n for n in numbers if CONFIGS[n - 1].kind == "gemm"]
    a = [n for n in numbers if CONFIGS[n - 1].kind == "attn"]
    out: list[int] = []
    while g or a:
        if g:
            out.append(g.pop(0))
        if a:
            out.append(a.pop(0))
    return out


# -- output ----------------------------------------------------------------------------------------------------
class Sink:
    """Append-only JSON lines, flushed per line."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self._files: dict[str, Any] = {}
        self._lock = threading.Lock()  # the pool's callbacks write from another thread

    def write(self, name: str, row: dict[str, Any]) -> None:
        with self._lock:
            f = self._files.get(name)
            if f is None:
                f = self._files[name] = (self.out / f"{name}.jsonl").open("a")
            f.write(json.dumps(row, separators=(",", ":")) + "\n")
            f.flush()

    def close(self) -> None:
        for f in self._files.values():
            f.close()


# -- compile pool ----------------------------------------------------------------------------------------------
def _pool_init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from bench.recorded_launch import pin_cache_keys, use_sm90_driver

    pin_cache_keys()  # the same keys as the GPU process (see there)
    use_sm90_driver()


def _compile(n: int, p: dict[str, Any], instr: bool) -> Any:
    from bench.recorded_launch import compile_unit

    return compile_unit(CONFIGS[n - 1], p, instr)


def _phases(n: int, p: dict[str, Any], buf: Any) -> dict[str, Any]:
    from bench.recorded_launch import phases_job

    return phases_job(CONFIGS[n - 1], p, buf)


# -- the GPU side ----------------------------------------------------------------------------------------------
SLEEP_RETRIES = 2
"""Times a measurement is taken again, with twice the GPU sleep, when the sleep ran out before the host had queued
every launch (:func:`time_calls`)."""


def time_calls(fn: Any, *, warmup: int, launches: int, sleep_cycles: int) -> tuple[list[float], int]:
    """The one timing protocol: ``warmup`` calls, then ``launches`` calls each between two CUDA events, queued
    behind a GPU sleep so the events time the GPU work alone. Returns ns per call and how many times it was
    taken again.

    The sleep must outlast the host's queueing of every launch, or the GPU waits for the host between two events
    and the wait counts as kernel time (a busy host: the compile pool beside it).  An event recorded right after
    the sleep tells: when it has completed by the time the last launch is queued, the sleep ran out, and the
    measurement is taken again with twice the sleep (at most :data:`SLEEP_RETRIES` times; the last one is kept).
    """
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    retries = 0
    while True:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(launches)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(launches)]
        awake = torch.cuda.Event()
        torch.cuda._sleep(sleep_cycles)
        awake.record()
        for s, e in zip(starts, ends, strict=True):
            s.record()
            fn()
            e.record()
        ran_out = awake.query()
        torch.cuda.synchronize()
        if not ran_out or retries >= SLEEP_RETRIES:
            return [float(s.elapsed_time(e)) * 1e6 for s, e in zip(starts, ends, strict=True)], retries
        retries += 1
        sleep_cycles *= 2


def make_inputs(cfg: Config, seed: int = 0) -> dict[str, Any]:
    """The configuration's tensors on the GPU (fp8: B is stored K-major, as ``torch._scaled_mm`` takes it)."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)

    def rnd(*shape: int) -> Any:
        return torch.randn(shape, generator=g, device="cuda", dtype=torch.float32)

    if cfg.kind == "gemm":
        if cfg.dtype == "fp8":
            a = rnd(cfg.m, cfg.k).to(torch.float8_e4m3fn)
            b = rnd(cfg.n, cfg.k).to(torch.float8_e4m3fn).t()  # k x n, K-major
            c = torch.empty((cfg.m, cfg.n), device="cuda", dtype=torch.bfloat16)
        else:
            dt = torch.bfloat16 if cfg.dtype == "bf16" else torch.float16
            a, b = rnd(cfg.m, cfg.k).to(dt), rnd(cfg.k, cfg.n).to(dt)
            c = torch.empty((cfg.m, cfg.n), device="cuda", dtype=dt)
        return {"a": a, "b": b, "c": c}
    dt = torch.bfloat16 if cfg.dtype == "bf16" else torch.float16
    bh = (cfg.batch, cfg.heads)
    q = rnd(*bh, cfg.seq_q, cfg.head_dim).to(dt)
    k = rnd(*bh, cfg.seq_kv, cfg.head_dim).to(dt)
    v = rnd(*bh, cfg.seq_kv, cfg.head_dim).to(dt)
    return {"q": q, "k": k, "v": v, "o": torch.empty_like(q)}


def vendor_call(cfg: Config, t: dict[str, Any]) -> Any:
    """Baseline (b) as a call: cuBLAS through torch, or SDPA's flash backend."""
    import torch

    if cfg.kind == "gemm":
        if cfg.dtype == "fp8":
            one = torch.ones((), device="cuda", dtype=torch.float32)
            return lambda: torch._scaled_mm(t["a"], t["b"], scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        return lambda: torch.matmul(t["a"], t["b"], out=t["c"])
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def sdpa() -> Any:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(t["q"], t["k"], t["v"], is_causal=cfg.causal)

    return sdpa


def reference(cfg: Config, t: dict[str, Any]) -> Any:
    """The fp32 result every output is checked against."""
    import torch

    if cfg.kind == "gemm":
        return torch.matmul(t["a"].float(), t["b"].float())
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(t["q"].float(), t["k"].float(), t["v"].float(), is_causal=cfg.causal)


def error_of(cfg: Config, out: Any, ref: Any) -> tuple[float, str | None]:
    """Max abs error and why it is wrong (``None``: right): 2 % of max |ref| for GEMM, 0.02 for attention."""
    import math

    err = float((out.float() - ref).abs().max())
    if cfg.kind == "gemm":
        limit = 2e-2 * float(ref.abs().max())
        what = "max |C - A@B|"
    else:
        limit, what = 2e-2, "max |O - sdpa|"
    if not math.isfinite(err) or err > limit:
        return err, f"{what} = {err:.4g} > {limit:.4g} (fp32 torch reference)"
    return err, None


def autotuner(cfg: Config, sms: int) -> tuple[Any, Any]:
    """Baseline (a): ``triton.autotune`` over the tutorial list around the same JIT kernel, and its grid."""
    import triton

    from bench.recorded_launch import function_of

    def bench(fn: Any, quantiles: Any) -> Any:
        return triton.testing.do_bench(fn, warmup=5, rep=25, quantiles=quantiles)

    confs = [triton_config(cfg, p) for p in autotune_list(cfg)]
    if cfg.kind == "gemm":
        fn = function_of("examples.gpu.persistent_gemm", "persistent_gemm")
        tuned = triton.autotune(confs, key=["M", "N", "K"], do_bench=bench)(fn)

        def grid(meta: dict[str, Any]) -> tuple[int]:
            t = triton.cdiv(cfg.m, meta["BLOCK_M"]) * triton.cdiv(cfg.n, meta["BLOCK_N"])
            return (min(sms, t),)
    else:
        fn = function_of("examples.gpu.persistent_attention", "persistent_attention")
        tuned = triton.autotune(confs, key=["heads_total", "n_ctx", "n_kv"], do_bench=bench)(fn)

        def grid(meta: dict[str, Any]) -> tuple[int]:
            return (min(sms, cfg.batch * cfg.heads * triton.cdiv(cfg.seq_q, meta["BLOCK_M"])),)

    return tuned, grid


def autotuned_call(cfg: Config, tuned: Any, grid: Any, t: dict[str, Any], sms: int) -> Any:
    """The tuned kernel as a call (the tutorial configs fix blocks, warps and stages; one program per SM)."""
    import math

    if cfg.kind == "gemm":
        m, n, k = cfg.m, cfg.n, cfg.k
        sbk, sbn = (1, k) if cfg.dtype == "fp8" else (n, 1)
        args = (t["a"], t["b"], t["c"], m, n, k, k, 1, sbk, sbn, n, 1, None)
        return lambda: tuned[grid](*args, NUM_SMS=sms, MARKS="none")
    scale = 1.4426950408889634 / math.sqrt(cfg.head_dim)
    args = (t["q"], t["k"], t["v"], t["o"], None, scale, cfg.batch * cfg.heads, cfg.seq_q, cfg.seq_kv)
    return lambda: tuned[grid](
        *args, HEAD_DIM=cfg.head_dim, CAUSAL=cfg.causal, HEAVY_FIRST=False, NUM_PROGRAMS=sms, MARKS="none"
    )


def triton_config(cfg: Config, p: dict[str, Any]) -> Any:
    """A tutorial point as the ``triton.Config`` the autotuner is given (blocks, warps and stages)."""
    import triton

    kw = {"BLOCK_M": p["block_m"], "BLOCK_N": p["block_n"]}
    if cfg.kind == "gemm":
        kw |= {"BLOCK_K": p["block_k"], "GROUP_M": p["group_m"]}
    return triton.Config(kw, num_warps=p["num_warps"], num_stages=p["num_stages"])


def picked_params(cfg: Config, best: Any) -> dict[str, Any]:
    """The autotuner's pick as a candidate of the space: what a tutorial config sets, and the kernel's defaults for
    the rest (one program per SM, no split, no TMA, ...)."""
    kw = best.kwargs
    tuned = {"block_m": kw["BLOCK_M"], "block_n": kw["BLOCK_N"], "num_warps": best.num_warps,
             "num_stages": best.num_stages}  # fmt: skip
    if cfg.kind == "gemm":
        tuned |= {"block_k": kw["BLOCK_K"], "group_m": kw["GROUP_M"]}
    return default(cfg) | tuned


def launch_facts(kernel: Any) -> dict[str, Any]:
    """Registers and spills of the loaded kernel (the driver's view), shared memory, warps and stages."""
    md = getattr(kernel, "metadata", None)
    return {
        "registers": getattr(kernel, "n_regs", None),
        "spills": getattr(kernel, "n_spills", None),
        "shared_bytes": getattr(md, "shared", None),
        "num_warps": getattr(md, "num_warps", None),
        "num_stages": getattr(md, "num_stages", None),
    }


def finite(v: Any) -> Any:
    """JSON-safe timings: the autotuner's ``inf`` (a config that could not run) becomes ``None``."""
    import math

    if isinstance(v, list | tuple):
        return [finite(x) for x in v]
    return None if isinstance(v, float) and not math.isfinite(v) else v


def summary(samples: list[float]) -> dict[str, Any]:
    import statistics

    return {"samples_ns": [round(s, 1) for s in samples], "median_ns": statistics.median(samples) if samples else None}


class Recorder:
    """The GPU process's loop over configurations (see the module docstring)."""

    def __init__(self, args: argparse.Namespace, sink: Sink, pool: Any, compiles: dict[str, Any]) -> None:
        import torch

        self.args, self.sink, self.pool, self.compiles = args, sink, pool, compiles
        self.sms = int(torch.cuda.get_device_properties(0).multi_processor_count)
        clock_khz = getattr(torch.cuda.get_device_properties(0), "clock_rate", 0) or 1980000
        # the sleep covers the host's enqueueing of all timed launches (100 us each: a JIT or autotuner launch and
        # two event records take well under that)
        self.sleep_cycles = int(clock_khz * 1e3 * 100e-6 * args.launches)
        self.decodes: list[cf.Future[Any]] = []
        from examples.gpu.tma_gemm import set_scratch_allocator

        set_scratch_allocator("cuda")  # the TMA candidates' device-side descriptors need global scratch

    def timed(self, fn: Any) -> dict[str, Any]:
        """The samples' summary, and how often the GPU sleep ran out first (``sleep_retries``, when it did)."""
        samples, retries = time_calls(
            fn, warmup=self.args.warmup, launches=self.args.launches, sleep_cycles=self.sleep_cycles
        )
        return summary(samples) | ({"sleep_retries": retries} if retries else {})

    def baseline(self, n: int, which: str, pas: int, fn: Any, extra: dict[str, Any]) -> None:
        self.sink.write("baselines", {"config": n, "which": which, "pass": pas, **self.timed(fn), **extra})

    def config(self, n: int, deadline: float) -> bool:
        """Measure configuration ``n``; ``False`` when the deadline stopped it."""
        import torch

        from bench.recorded_launch import call, events_per_slot, kernel_fn, probe_buffer, scratch, unit_key

        cfg = CONFIGS[n - 1]
        t0 = time.monotonic()
        t = make_inputs(cfg)
        ref = reference(cfg, t)
        vendor = vendor_call(cfg, t)
        v_err, v_bad = error_of(cfg, vendor(), ref)
        self.baseline(n, "vendor", 1, vendor, {"max_err": v_err, "wrong": v_bad})
        tuned, grid = autotuner(cfg, self.sms)
        tuned_call = autotuned_call(cfg, tuned, grid, t, self.sms)
        t_tune = time.monotonic()
        (t["c"] if cfg.kind == "gemm" else t["o"]).fill_(float("nan"))
        a_out = tuned_call()
        torch.cuda.synchronize()
        tune_s = time.monotonic() - t_tune
        a_err, a_bad = error_of(cfg, t["c"] if cfg.kind == "gemm" else t["o"], ref)
        picked = picked_params(cfg, tuned.best_config)
        tuning = getattr(tuned, "configs_timings", None) or {}
        timings = {key_of(picked_params(cfg, c)): finite(v) for c, v in tuning.items()}
        del a_out
        extra = {"picked": key_of(picked), "params": picked, "tune_s": tune_s, "tuning_ms": timings,
                 "max_err": a_err, "wrong": a_bad}  # fmt: skip
        self.baseline(n, "autotune", 1, tuned_call, extra)
        complete = True
        recompiled = 0
        for p in space(cfg, self.args.study):
            if time.monotonic() > deadline:
                complete = False
                break
            row: dict[str, Any] = {"config": n, "key": key_of(p), "params": p, "status": "ok", "cause": ""}
            unit = self.compiles.get(unit_key(cfg, p, False))
            if unit is not None:
                row["cuobjdump"] = {k: getattr(unit, k) for k in ("registers", "local_bytes", "shared_bytes")}
            if unit is not None and unit.error:
                row |= {"status": "compile_failed", "cause": unit.error}
                self.sink.write("candidates", row)
                continue
            out = t["c"] if cfg.kind == "gemm" else t["o"]
            try:
                tp = t | scratch(cfg, p, "cuda", self.sms)  # a split candidate's workspace and counters
                c = call(cfg, p, tp, instrumented=False, sms=self.sms)
                fn = kernel_fn(c)
                out.fill_(float("nan"))
                t_first = time.monotonic()
                kernel = fn[(c.grid,)](*c.args, **dict(c.kwargs))
                torch.cuda.synchronize()
                row["first_launch_s"] = round(time.monotonic() - t_first, 4)
                if row["first_launch_s"] > 0.3:  # compiled here: the pool's compile was not found in the cache
                    recompiled += 1
            except Exception as exc:
                row |= {"status": "launch_failed", "cause": " ".join(f"{type(exc).__name__}: {exc}".split())[:500]}
                self.sink.write("candidates", row)
                continue
            row["facts"] = launch_facts(kernel)
            err, bad = error_of(cfg, out, ref)
            row["max_err"] = err
            if bad:
                row |= {"status": "wrong_result", "cause": bad}
                self.sink.write("candidates", row)
                continue

            def launch(c: Any = c, fn: Any = fn) -> None:
                fn[(c.grid,)](*c.args, **dict(c.kwargs))

            try:
                row |= self.timed(launch)
            except Exception as exc:  # launched once, failed in the timed launches
                row |= {"status": "failed", "cause": " ".join(f"{type(exc).__name__}: {exc}".split())[:500]}
                self.sink.write("candidates", row)
                continue
            row["events_per_slot"] = events_per_slot(cfg, p, self.sms)
            self.sink.write("candidates", row)
            try:  # one instrumented launch: the device-region phases, decoded in the pool
                buf = probe_buffer(cfg, p, "cuda", self.sms)
                ci = call(cfg, p, tp | {"probe": buf}, instrumented=True, sms=self.sms)
                fn[(ci.grid,)](*ci.args, **dict(ci.kwargs))
                host = buf.cpu().numpy()
                fut = self.pool.submit(_phases, n, p, host)
                fut.add_done_callback(self._phases_done(n, key_of(p)))
                self.decodes.append(fut)
            except Exception as exc:
                self.sink.write("phases", {"config": n, "key": key_of(p), "phases": None,
                                           "error": f"{type(exc).__name__}: {exc}"[:500]})  # fmt: skip
        self.baseline(n, "autotune", 2, tuned_call, {"picked": key_of(picked)})
        self.baseline(n, "vendor", 2, vendor, {})
        self.sink.write("configs", {"config": n, "label": cfg.label, "complete": complete,
                                    "seconds": round(time.monotonic() - t0, 2), "recompiled": recompiled})  # fmt: skip
        if recompiled:
            print(
                f"WARNING: configuration {n}: {recompiled} candidates took > 0.3 s to launch the first time "
                "(compiled again in the GPU process: Triton's cache keys differ from the pool's)",
                flush=True,
            )
        del t, ref
        torch.cuda.empty_cache()
        return complete

    def _phases_done(self, n: int, key: str) -> Any:
        def done(fut: cf.Future[Any]) -> None:
            try:
                self.sink.write("phases", {"config": n, "key": key, "phases": fut.result(), "error": None})
            except Exception as exc:
                self.sink.write("phases", {"config": n, "key": key, "phases": None,
                                           "error": f"{type(exc).__name__}: {exc}"[:500]})  # fmt: skip

        return done


# -- main ------------------------------------------------------------------------------------------------------
def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--budget-s", type=float, default=480.0, help="wall seconds for the whole run (default 480)")
    ap.add_argument("--procs", type=int, default=15, help="compile processes (default 15)")
    ap.add_argument("--launches", type=int, default=30, help="timed launches per measurement (default 30)")
    ap.add_argument("--warmup", type=int, default=5, help="launches before the timed ones (default 5)")
    ap.add_argument("--only", default="", help="configuration numbers, e.g. 1-10,25")
    ap.add_argument(
        "--study",
        default="",
        choices=["", *STUDIES],
        help="also measure a side study's GEMM points (bench/recorded_spaces.py STUDIES)",
    )
    ap.add_argument("--cache", default="", help="TRITON_CACHE_DIR (default OUT/triton-cache)")
    ap.add_argument("--dry-run", action="store_true", help="compile and plan only (no GPU)")
    ap.add_argument("--per-config", type=int, default=0, help="dry run: compile this many candidates per config")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    started = time.monotonic()
    deadline = started + args.budget_s
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = args.cache or str(out / "triton-cache")
    numbers = order(parse_only(args.only, len(CONFIGS)) if args.only else list(range(1, len(CONFIGS) + 1)))
    per_config = args.per_config or None
    est = estimate(numbers, per_config, args.procs, args.launches, args.warmup, args.study)
    plan = {"schema": SCHEMA, "configs": [CONFIGS[n - 1].to_dict() | {"number": n} for n in numbers],
            "order": numbers, "estimate": est, "argv": sys.argv[1:] if argv is None else argv}  # fmt: skip
    (out / "plan.json").write_text(json.dumps(plan, indent=1))
    print(f"plan: {est['configurations']} configurations, {est['candidates']} candidates, {est['compile_units']} "
          f"compiles; estimated {est['total_s']} s (compile {est['compile_s']} s, measure {est['measure_s']} s, "
          f"autotune {est['autotune_s']} s)", flush=True)  # fmt: skip
    from bench.recorded_launch import pin_cache_keys

    keys = pin_cache_keys()  # before any launch, autotuning or compile: the cache keys every process uses
    plan["cache_keys"] = list(keys)
    (out / "plan.json").write_text(json.dumps(plan, indent=1))
    sink = Sink(out)
    todo = units(numbers, per_config, args.study)
    ctx = mp.get_context("spawn")
    compiles: dict[str, Any] = {}
    status = 0
    with cf.ProcessPoolExecutor(args.procs, mp_context=ctx, initializer=_pool_init) as pool:
        futs = {pool.submit(_compile, n, p, instr): u for u, (n, p, instr) in todo.items()}
        pending_by_config: dict[int, set[str]] = {}
        for u, (n, _, _) in todo.items():
            pending_by_config.setdefault(n, set()).add(u)
        t_c = time.monotonic()

        def collect(block_for: set[str] | None = None) -> None:
            done = [f for f in futs if f.done()]
            if block_for:
                waits = [f for f, u in futs.items() if u in block_for]
                done = list(cf.wait(waits).done) + [f for f in futs if f.done()]
            for f in set(done):
                u = futs.pop(f)
                try:
                    r = f.result()
                except Exception as exc:  # a compile process died: the unit is recorded as failed
                    r = UnitResult(u, 0.0, f"{type(exc).__name__}: {exc}"[:500])
                compiles[u] = r
                row = {"unit": u, "seconds": round(r.seconds, 2), "error": r.error, "registers": r.registers,
                       "local_bytes": r.local_bytes, "shared_bytes": r.shared_bytes}  # fmt: skip
                sink.write("compiles", row)

        if args.dry_run:
            collect(set(todo))
            failed = sum(1 for r in compiles.values() if r.error)
            print(f"dry run: {len(compiles)} compiles in {time.monotonic() - t_c:.1f} s on {args.procs} processes, "
                  f"{failed} failed to compile", flush=True)  # fmt: skip
        else:
            rec = Recorder(args, sink, pool, compiles)
            for n in numbers:
                collect({u for u in pending_by_config.get(n, set()) if u not in compiles})
                if time.monotonic() > deadline - 5:
                    print(f"budget spent before configuration {n}", flush=True)
                    break
                t_n = time.monotonic()
                try:
                    ok = rec.config(n, deadline)
                except Exception:
                    status = 1
                    sink.write("configs", {"config": n, "label": CONFIGS[n - 1].label, "complete": False,
                                           "error": traceback.format_exc()[-2000:]})  # fmt: skip
                    print(f"configuration {n} failed:\n{traceback.format_exc()}", flush=True)
                    continue
                print(f"[{time.monotonic() - started:6.1f} s] {n:2d} {CONFIGS[n - 1].label}: "
                      f"{time.monotonic() - t_n:.1f} s{'' if ok else ' (cut by the budget)'}", flush=True)  # fmt: skip
            cf.wait(rec.decodes, timeout=max(5.0, deadline - time.monotonic()))
            collect()
        for f in futs:
            f.cancel()
    sink.close()
    meta = {"schema": SCHEMA, "wall_s": round(time.monotonic() - started, 1), "dry_run": args.dry_run,
            "python": platform.python_version(), "sms_assumed": SMS, **versions()}  # fmt: skip
    (out / "record.json").write_text(json.dumps(meta, indent=1))
    print(f"done in {meta['wall_s']} s: {out}", flush=True)
    return status


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        import torch
        import triton

        out |= {"torch": torch.__version__, "triton": triton.__version__}
        if torch.cuda.is_available():
            out["device"] = torch.cuda.get_device_name()
            out["sms"] = torch.cuda.get_device_properties(0).multi_processor_count
    except Exception as exc:
        out["versions_error"] = str(exc)
    return out


if __name__ == "__main__":
    sys.exit(main())
