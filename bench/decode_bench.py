"""ms/token of a TinyLlama-1.1B-shaped decode step on one GPU: the Triton megakernel against PyTorch, one harness.

    PYTHONPATH=/tmp/argus-site:$PWD python bench/decode_bench.py OUT/decode                 # every stage
    PYTHONPATH=$PWD python bench/decode_bench.py OUT/decode --stages setup,check,mk_time     # some stages

(``scripts/gpu/decode_check.sh OUT`` installs the carried wheels and runs it under ``timeout``.)

Stages run in order; each is wrapped, so a failing stage records its error and the next still runs; results are
written to ``OUT/decode_bench.json`` after every stage and summarised on stdout (lines starting ``==``):

* ``warm``: a pool of processes compiles every configuration's kernels into Triton's cache while the next stages
  run (the first timing stage waits for it: no compile competes with a timed host loop);
* ``setup``: a seeded ``LlamaForCausalLM`` of TinyLlama's shape (random weights, bf16) on the GPU, its weights
  packed, a 1,024-token random prompt prefilled by ``transformers``, the reference logits of the next step
  (``transformers`` bf16, and an fp32 copy of the model);
* ``check``: the phased driver, the megakernel with one launch per layer and with one launch per step, each
  against ``transformers`` (max abs diff, top-1) and the megakernel against the phased driver; the barrier error
  word must stay 0;
* ``mk_time``: greedy decoding (each step's argmax is the next token, no host sync) of ``--steps`` tokens from
  position 1,024, CUDA events around the whole loop, median over ``--repeats``: megakernel per step and per layer,
  the phased driver;
* ``probe``: the instrumented megakernel (a probe buffer made here, ``examples/gpu/decode/raw_probe.py``): its
  ms/token against the clean variant (the overhead) and per region the time per program, per SM the spans;
* ``measure``: ``argus_lab.measure(DecodeStep, "gpu.time,dev.*")``, the store kept in OUT (needs CUPTI, DuckDB);
* ``baselines``: the plain PyTorch step of ``examples/gpu/decode/torch_step.py`` eager and in a CUDA graph;
* ``optimize``: ``argus_lab.optimize`` on the megakernel's parameters (examples/gpu/decode/optimize_target.py):
  the evidence-guided search and the timing-only one with the same budget (``--opt-budget``), one shared record;
  needs CUPTI and DuckDB like ``measure``; with it in the stages the warm pool compiles the whole space;
* ``hf``: ``transformers``' step with a static cache, eager and captured in a CUDA graph (late: a device assert
  in it would spoil the CUDA context of the stages after it);
* ``compile``: ``torch.compile(mode="reduce-overhead")`` of ``transformers``' step, in a child process capped at
  ``--compile-cap`` seconds (a cap reached is recorded as such);
* ``sweep``: megakernel configurations (block rows per phase, ``bk``, warps, programs per SM), each checked
  against ``transformers`` and timed, within ``--sweep-budget`` seconds; the best one's regions from a probe;
* ``floor``: the weights' bytes over 4.8 TB/s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

H200_BANDWIDTH = 4.8e12
PROMPT_LEN = 1024
DEV = "cuda"
DRY = False
"""``--dry-cpu``: the tiny shape on the CPU, the megakernel replaced by the phased driver under the Triton
interpreter (checks the harness itself; its figures mean nothing)."""
STAGES = (
    "warm", "setup", "check", "mk_time", "probe", "floor", "sweep", "optimize", "baselines", "measure", "hf", "compile",
)  # fmt: skip

SWEEP: list[dict[str, Any]] = [
    {"splits": 4, "bn_qkv": 8, "stages": 4},
    {"splits": 4, "bn_qkv": 8, "stages": 4, "prefetch": 1},
    {"splits": 4, "bn_qkv": 8, "stages": 4, "prefetch": 2},
    {"splits": 4, "bn_qkv": 8, "stages": 4, "combine": 1},
    {"splits": 4, "bn_qkv": 8, "stages": 4, "combine": 1, "prefetch": 2},
    {"splits": 4, "bt": 128, "bn_qkv": 8, "stages": 4, "combine": 1, "prefetch": 2},
    {"splits": 8, "bt": 128, "bn_qkv": 8, "stages": 4, "combine": 1, "prefetch": 2},
    {"splits": 4, "bt": 128, "bn_qkv": 8, "stages": 4, "prefetch": 2},
    {"splits": 4, "bn_qkv": 8, "stages": 3, "num_warps": 8, "bk": 512, "prefetch": 2},
    {"splits": 4, "bn_qkv": 8, "stages": 3, "num_warps": 8, "bk": 512},
    {"splits": 4, "bn_qkv": 8, "stages": 3},
    {"splits": 4, "bn_qkv": 8, "stages": 5},
    {"splits": 4, "bt": 128, "bn_qkv": 8, "stages": 4},
    {"splits": 4, "bt": 256, "bn_qkv": 8, "stages": 4},
    {"splits": 8, "bt": 128, "bn_qkv": 8, "stages": 4},
    {"splits": 2, "bt": 256, "bn_qkv": 8, "stages": 4},
    {"splits": 4, "bt": 128, "bn_qkv": 8, "stages": 4, "num_warps": 8, "bk": 512},
    {"splits": 4, "bt": 128, "bn_qkv": 8, "stages": 4, "bn_gu": 8},
    {"splits": 4, "bt": 128, "bn_qkv": 8, "stages": 4, "bn_gu": 32},
    {"splits": 4, "bt": 128, "bn_qkv": 8, "stages": 4, "bn_down": 8, "bn_o": 8},
    {"splits": 4, "bt": 128, "bn_qkv": 8, "stages": 4, "bn_head": 128},
    {"splits": 4, "bt": 128, "bn_qkv": 8, "stages": 3, "bk": 512},
    {"splits": 4, "bn_qkv": 8, "stages": 4, "programs_per_sm": 2},
    {"splits": 4, "bn_qkv": 8, "unroll": 4},
    {"splits": 4, "bn_qkv": 8},
    {"splits": 4},
    {"stages": 3},
    {"unroll": 4},
]
"""Changes to the default KernelConfig (``programs_per_sm``: programs = that x SMs), most promising first, from the
first H200 run's device regions (tests/data/gpu/decode): the waits after the attention were 39 % of a program's
time, because each of the 32 heads was one work item walking all 1,024 cached positions while 100 SMs waited
(``splits`` cuts them into slices); the waits after qkv were 6 %, because 192 row tiles of 16 fall unevenly on 132
programs (``bn_qkv`` 8: 384 tiles); the weight phases streamed at 1.6-2.3 TB/s with one k-step of loads in flight
per program (``stages``: cp.async pipelining, ``unroll``: several steps in flight). Run 2 found
``splits=4, bn_qkv=8, stages=4`` at 1.27 ms/token (v1: 2.30); the list now starts there and varies the attention
block (``bt``), the tiles of the other phases, the load width and the warps around it, and L2 prefetches of the
next phases' weights issued before the barrier after qkv (``prefetch``: the HBM is idle while most programs wait
for the attention), and the slices combined by each head's last slice (``combine``) rather than in the output
projection's loads (v2's o_proj took 132 us against 91 without slices)."""


class Bench:
    """The state shared by the stages and the results file."""

    def __init__(self, out: Path, args: argparse.Namespace) -> None:
        self.out, self.args = out, args
        self.results: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self.t0 = time.monotonic()
        self.hf: Any = None
        self.w: Any = None
        self.pre: Any = None
        self.phased: Any = None  # the phased driver's logits of the first step (check stage)
        self.pool: Any = None  # the compile pool of the warm stage, and its jobs
        self.jobs: list[Any] = []
        self.n_sweep_jobs = 0
        self.max_len = PROMPT_LEN + max(args.steps, 8) + 8

    def save(self) -> None:
        self.results["elapsed_s"] = round(time.monotonic() - self.t0, 1)
        (self.out / "decode_bench.json").write_text(json.dumps(self.results, indent=1, default=str))

    def stage(self, name: str, fn: Any) -> None:
        t = time.monotonic()
        print(f"== [{t - self.t0:6.1f} s] stage {name}", flush=True)
        try:
            self.results[name] = fn()
        except Exception as exc:  # every stage is independent: record and go on
            self.results[name] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}
            print(f"== stage {name} FAILED: {type(exc).__name__}: {str(exc)[:400]}", flush=True)
        self.results.setdefault("stage_seconds", {})[name] = round(time.monotonic() - t, 1)
        self.save()


# -- helpers -----------------------------------------------------------------------------------------------------
def shape() -> Any:
    from examples.gpu.decode import model as M

    return M.TINY if DRY else M.TINYLLAMA


def _sync() -> None:
    import torch

    if DEV == "cuda":
        torch.cuda.synchronize()


def _sms() -> int:
    import torch

    return int(torch.cuda.get_device_properties(0).multi_processor_count) if DEV == "cuda" else 4


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def time_loop(step: Any, steps: int, repeats: int) -> dict[str, Any]:
    """ms/token of ``step(i)`` for i in range(steps), CUDA events around each repeat; one warm-up repeat first."""
    import torch

    for i in range(min(steps, 4)):
        step(i)
    _sync()
    per: list[float] = []
    for _ in range(repeats):
        if DEV != "cuda":
            t = time.perf_counter()
            for i in range(steps):
                step(i)
            per.append(1e3 * (time.perf_counter() - t) / steps)
            continue
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for i in range(steps):
            step(i)
        e.record()
        e.synchronize()
        per.append(s.elapsed_time(e) / steps)
    return {"ms_per_token": _median(per), "repeats_ms": [round(x, 4) for x in per], "steps": steps}


def _cmp(logits: Any, ref: Any) -> dict[str, Any]:
    from examples.gpu.decode.model import compare

    return compare(logits, ref)


def _config(base: Any, change: dict[str, Any], sms: int) -> Any:
    change = dict(change)
    per_sm = int(change.pop("programs_per_sm", 1))
    cfg = replace(base, **change)
    return replace(cfg, programs=per_sm * sms) if per_sm != 1 else cfg


# -- stages ------------------------------------------------------------------------------------------------------
def _sweep_configs(sms: int) -> list[Any]:
    from examples.gpu.decode.runner import KernelConfig

    return [_config(KernelConfig(), change, sms) for change in [{}, *SWEEP]]


def warm(b: Bench) -> dict[str, Any]:
    """Start a pool of processes compiling every configuration's kernels into Triton's cache (not waited for here:
    the first timing stage waits, so that no compile competes with a timed host loop)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from examples.gpu.decode.runner import KernelConfig, warm_job

    if DEV != "cuda":
        return {"skipped": "no GPU"}
    sms = 132  # the grid is no part of a compile key: any count gives the same kernels
    workers = max(1, min(b.args.compile_workers, (os.cpu_count() or 2) - 2))
    b.pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
    configs = _sweep_configs(sms)
    jobs: list[tuple[Any, tuple[str, ...]]] = [(configs[0], ("clean", "phased", "instrumented"))]
    jobs.append((KernelConfig(launch="layer"), ("clean",)))
    jobs += [(c, ("clean", "instrumented", "phased")) for c in configs[1:]]
    n_sweep = len(jobs)
    if "optimize" in b.args.stages:
        from examples.gpu.decode.optimize_target import space_configs

        seen = {json.dumps(c.as_dict(), sort_keys=True) for c, _ in jobs}
        jobs += [
            (c, ("clean", "instrumented"))
            for c in space_configs(sms)
            if json.dumps(c.as_dict(), sort_keys=True) not in seen
        ]
    b.jobs = [b.pool.submit(warm_job, shape(), cfg, variants) for cfg, variants in jobs]
    b.n_sweep_jobs = n_sweep
    return {"workers": workers, "jobs": len(b.jobs), "sweep_jobs": n_sweep}


def wait_warm(b: Bench, timeout: float = 150.0, *, sweep_only: bool = False) -> None:
    """Wait for the compile pool (at most ``timeout`` s; ``sweep_only``: for the jobs of the sweep's configurations)
    and, once all are done, record what it did and shut it down."""
    from concurrent.futures import wait

    if b.pool is None:
        return
    t = time.monotonic()
    if sweep_only:
        done, pending = wait(b.jobs[: b.n_sweep_jobs], timeout=timeout)
        print(f"   compile pool: the sweep's {len(done)} jobs done, {len(pending)} pending, waited "
              f"{time.monotonic() - t:.1f} s", flush=True)  # fmt: skip
        return
    done, pending = wait(b.jobs, timeout=timeout)
    res = [f.result() for f in done]
    b.results["warm_done"] = {
        "waited_s": round(time.monotonic() - t, 1), "done": len(done), "pending": len(pending),
        "errors": [(k, e) for k, _, e in res if e], "job_seconds": [round(x, 1) for _, x, _ in res],
    }  # fmt: skip
    print(f"   compile pool: {len(done)} done, {len(pending)} pending, waited {b.results['warm_done']['waited_s']} s,"
          f" errors {len(b.results['warm_done']['errors'])}", flush=True)  # fmt: skip
    b.pool.shutdown(wait=False, cancel_futures=True)
    b.pool = None


def setup(b: Bench) -> dict[str, Any]:
    import torch
    import transformers
    import triton

    from examples.gpu.decode import model as M

    torch.backends.cuda.matmul.allow_tf32 = False
    t = time.monotonic()
    b.hf = M.make_model(shape(), max_len=b.max_len, seed=b.args.seed, device=DEV)
    made = time.monotonic() - t
    b.w = M.pack(b.hf, shape(), b.max_len)
    b.pre = M.prefill(b.hf, shape(), b.max_len, PROMPT_LEN, fp32_reference=True)
    _sync()
    return {
        "versions": {"torch": torch.__version__, "triton": triton.__version__, "transformers": transformers.__version__,
                     "cuda": torch.version.cuda},
        "device": torch.cuda.get_device_name(0) if DEV == "cuda" else "cpu (dry run)", "sms": _sms(),
        "shape": shape().__dict__, "max_len": b.max_len, "prompt_len": PROMPT_LEN, "token": b.pre.token,
        "model_build_s": round(made, 1), "weight_bytes": shape().weight_bytes(),
        "ref_bf16_vs_fp32": _cmp(b.pre.ref_logits, b.pre.ref_logits_fp32),
    }  # fmt: skip


def _decoder(b: Bench, cfg: Any) -> Any:
    from examples.gpu.decode.runner import Decoder

    return Decoder(b.w, b.pre.k_cache.clone(), b.pre.v_cache.clone(), cfg)


def check(b: Bench) -> dict[str, Any]:
    """The phased driver and the megakernel (per layer, per step) against transformers; each part on its own, so
    one failing leaves the others' figures."""
    from examples.gpu.decode.runner import KernelConfig

    out: dict[str, Any] = {}
    pre = b.pre
    try:
        dec = _decoder(b, KernelConfig())
        t = time.monotonic()
        phased = dec.phased_step(pre.token, pre.pos, programs=dec.programs).clone()
        b.phased = phased
        _sync()
        out["phased"] = {"vs_hf_bf16": _cmp(phased, pre.ref_logits), "vs_hf_fp32": _cmp(phased, pre.ref_logits_fp32),
                         "first_call_s": round(time.monotonic() - t, 1)}  # fmt: skip
        print(f"   phased: {out['phased']['vs_hf_bf16']}", flush=True)
    except Exception as exc:
        out["phased"] = _failed(exc)
        print(f"   phased FAILED: {exc!s:.300}", flush=True)
    for launch in ("layer", "step"):
        try:
            d = _decoder(b, KernelConfig(launch=launch))
            t = time.monotonic()
            lg = d.step(pre.token, pre.pos).clone()
            _sync()
            first = time.monotonic() - t
            err = d.error()
            lg2 = d.step(pre.token, pre.pos).clone()  # again: the barrier counter was reset by the first launch
            r = {
                "vs_hf_bf16": _cmp(lg, pre.ref_logits), "vs_hf_fp32": _cmp(lg, pre.ref_logits_fp32),
                "second_call_vs_first_max_abs": float((lg2 - lg).abs().max()),
                "barrier_error": err, "barrier_error_after_second": d.error(), "sync_words": d.sync.tolist(),
                "first_call_s": round(first, 1), "programs": d.programs,
            }  # fmt: skip
            if b.phased is not None:
                r["vs_phased"] = _cmp(lg, b.phased)
            out[f"megakernel_per_{launch}"] = r
            vs_phased = r["vs_phased"]["max_abs_diff"] if "vs_phased" in r else None
            print(f"   megakernel per {launch}: {r['vs_hf_bf16']} vs phased max {vs_phased} error={err}", flush=True)
        except Exception as exc:
            out[f"megakernel_per_{launch}"] = _failed(exc)
            print(f"   megakernel per {launch} FAILED: {exc!s:.300}", flush=True)
    return out


def _greedy(dec: Any, pos0: int) -> Any:
    def step(i: int) -> None:
        dec.step(None, pos0 + i)
        dec.tok.copy_(dec.logits.argmax())

    return step


def mk_time(b: Bench) -> dict[str, Any]:
    """ms/token of the megakernel v1 (one launch per step, one per layer) and of the phased driver."""
    from examples.gpu.decode.runner import KernelConfig

    wait_warm(b, sweep_only=True)
    out: dict[str, Any] = {}
    a = b.args
    for name, cfg in (
        ("megakernel_v1_per_step", KernelConfig()),
        ("megakernel_per_layer", KernelConfig(launch="layer")),
    ):
        try:
            dec = _decoder(b, cfg)
            dec.set_token(b.pre.token)
            out[name] = {**time_loop(_greedy(dec, b.pre.pos), a.steps, a.repeats), "config": dec.cfg.as_dict(),
                         "barrier_error": dec.error()}  # fmt: skip
            print(f"   {name}: {out[name]['ms_per_token']:.4f} ms/token", flush=True)
        except Exception as exc:
            out[name] = _failed(exc)
            print(f"   {name} FAILED: {exc!s:.300}", flush=True)
    try:
        pdec = _decoder(b, KernelConfig())
        pdec.set_token(b.pre.token)

        def phased(i: int) -> None:
            pdec.phased_step(None, b.pre.pos + i)
            pdec.tok.copy_(pdec.logits.argmax())

        out["phased"] = time_loop(phased, max(4, a.steps // 4), a.repeats)
        print(f"   phased: {out['phased']['ms_per_token']:.4f} ms/token", flush=True)
    except Exception as exc:
        out["phased"] = _failed(exc)
        print(f"   phased FAILED: {exc!s:.300}", flush=True)
    return out


def _probe_run(b: Bench, cfg: Any, steps: int) -> dict[str, Any]:
    """The instrumented variant: ms/token with a probe against without, and the regions of the last step."""
    from examples.gpu.decode import kernels as K
    from examples.gpu.decode import raw_probe
    from examples.gpu.decode.runner import events_per_program

    dec = _decoder(b, cfg)
    dec.set_token(b.pre.token)
    probes = [
        raw_probe.allocate(dec.programs, events_per_program(e - s, h), dec.x.device) for s, e, h in dec.launches()
    ]

    def instrumented(i: int) -> None:
        dec.step(None, b.pre.pos + i, probes=probes)
        dec.tok.copy_(dec.logits.argmax())

    clean = time_loop(_greedy(dec, b.pre.pos), steps, b.args.repeats)
    instr = time_loop(instrumented, steps, b.args.repeats)
    for p in probes:
        p[8:].zero_()
    dec.set_token(b.pre.token)
    dec.step(None, b.pre.pos, probes=probes)
    summaries = [raw_probe.summarize(p, K.PHASES) for p in probes]
    return {
        "clean_ms_per_token": clean["ms_per_token"], "instrumented_ms_per_token": instr["ms_per_token"],
        "overhead_ratio": instr["ms_per_token"] / clean["ms_per_token"], "barrier_error": dec.error(),
        "launches": summaries if len(summaries) <= 2 else summaries[:1] + summaries[-1:], "config": dec.cfg.as_dict(),
    }  # fmt: skip


def _print_regions(summary: dict[str, Any]) -> None:
    regs = summary.get("regions", {})
    total = sum(r["median_ns"] for r in regs.values()) or 1.0
    span = (summary.get("program_span_median_ns") or 0) / 1e3
    tail = (summary.get("tail_ns") or 0) / 1e3
    print(f"   programs {summary.get('programs')} on {summary.get('sms')} SMs, program span median {span:.1f} us, "
          f"tail {tail:.1f} us, dropped events {summary.get('dropped_events')}")  # fmt: skip
    for name, r in regs.items():
        print(f"   {name:16s} median/program {r['median_ns'] / 1e3:9.1f} us ({100 * r['median_ns'] / total:5.1f} %)"
              f"  min {r['min_ns'] / 1e3:8.1f}  max {r['max_ns'] / 1e3:8.1f}  intervals {r['intervals']}")  # fmt: skip


def probe(b: Bench) -> dict[str, Any]:
    from examples.gpu.decode.runner import KernelConfig

    r = _probe_run(b, KernelConfig(), b.args.steps)
    print(f"   instrumented/clean = {r['overhead_ratio']:.3f} ({r['instrumented_ms_per_token']:.4f} vs "
          f"{r['clean_ms_per_token']:.4f} ms/token)")  # fmt: skip
    _print_regions(r["launches"][0])
    return r


def measure(b: Bench) -> dict[str, Any]:
    """argus_lab.measure(DecodeStep, "gpu.time,dev.*") of v1 and of the sweep's best, one store each."""
    import argus_lab
    from examples.gpu.decode.runner import V2, DecodeStep, KernelConfig

    variants = [("v1", KernelConfig())]
    best = b.results.get("sweep", {}).get("best") if isinstance(b.results.get("sweep"), dict) else None
    if best and best.get("change"):
        variants.append(("best", _config(KernelConfig(), best["change"], _sms())))
    else:  # no sweep in this run (or none correct): the optimised config of the second run
        variants.append(("best", V2))
    out: dict[str, Any] = {}
    for name, cfg in variants:
        try:
            dec = _decoder(b, cfg)
            step = DecodeStep(dec, b.pre.token, b.pre.pos)
            store = b.out / f"decode_megakernel_{name}_h200.duckdb"
            if store.exists():
                store.unlink()
            report = argus_lab.measure(step, "gpu.time,dev.*", repeat=3, warmup=1, store=str(store), progress=False)
            text = report.text()
            (b.out / f"measure_report_{name}.txt").write_text(text)
            print(f"   -- {name}: {dec.cfg.as_dict()}")
            print("\n".join("   " + ln for ln in text.splitlines()[:60]), flush=True)
            dev = [
                {"region": d.region, "signal": d.signal, "median": d.median, "unit": d.unit, "launches": d.launches}
                for d in getattr(report, "device", [])
            ]
            over = [o.__dict__ for o in getattr(report, "device_overhead", [])]
            out[name] = {
                "config": dec.cfg.as_dict(), "store": store.name, "device": dev, "overhead": over,
                "runs": [r.status for r in report.runs],
                "logits_vs_hf": _cmp(step.out, b.pre.ref_logits) if step.out is not None else None,
            }  # fmt: skip
        except Exception as exc:
            out[name] = _failed(exc)
            print(f"   measure {name} FAILED: {exc!s:.300}", flush=True)
        b.results["measure_partial"] = out
        b.save()
    b.results.pop("measure_partial", None)
    return out


def _static_cache(b: Bench) -> Any:
    import torch
    from transformers import StaticCache

    # transformers 5.x ignores the cache_position we pass and appends every call at its own next slot (5.17 on the
    # H200 overflowed a cache sized for the positions: a device assert in index_copy_), so the cache holds every
    # call of this process: the prompt, the check, and the warm-up and timed steps of each stage using it
    calls = 1 + 2 * (min(b.args.steps, 4) + b.args.steps * b.args.repeats) + 8
    return StaticCache(config=b.hf.config, max_batch_size=1, max_cache_len=PROMPT_LEN + calls, device=DEV,
                       dtype=torch.bfloat16)  # fmt: skip


def _hf_stepper(b: Bench) -> tuple[Any, Any, Any, Any]:
    """``transformers``' decode step on a static cache prefilled with the prompt: (step, tok, pos_t, logits holder)."""
    import torch

    cache = _static_cache(b)
    g = torch.Generator(device="cpu").manual_seed(1)
    prompt = torch.randint(0, b.hf.config.vocab_size, (1, PROMPT_LEN), generator=g).to(DEV)
    with torch.no_grad():
        b.hf(input_ids=prompt, past_key_values=cache, cache_position=torch.arange(PROMPT_LEN, device=DEV),
             use_cache=True)  # fmt: skip
    tok = torch.tensor([[b.pre.token]], device=DEV)
    pos_t = torch.tensor([PROMPT_LEN], device=DEV)

    def fwd() -> Any:
        with torch.no_grad():
            return b.hf(input_ids=tok, past_key_values=cache, cache_position=pos_t, use_cache=True).logits

    return fwd, tok, pos_t, cache


def _capture(fn: Any) -> tuple[Any, Any]:
    """``fn()`` captured in a CUDA graph after three warm-up calls on a side stream: (graph, its output)."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def _failed(exc: BaseException) -> dict[str, str]:
    return {"error": f"{type(exc).__name__}: {str(exc)[:500]}", "traceback": traceback.format_exc()[-2000:]}


def baselines(b: Bench) -> dict[str, Any]:
    """The plain PyTorch step (examples/gpu/decode/torch_step.py) eager and in a CUDA graph."""
    import torch

    from examples.gpu.decode.torch_step import TorchStep

    wait_warm(b)  # no compile competes with the host-bound eager loop
    out: dict[str, Any] = {}
    a = b.args
    ts = TorchStep(b.w, b.pre.k_cache.clone(), b.pre.v_cache.clone())
    tok1 = torch.tensor([b.pre.token], device=DEV)
    pos1 = torch.tensor([PROMPT_LEN], device=DEV)
    with torch.no_grad():
        out["torch_step_vs_ref"] = _cmp(ts(tok1, pos1), b.pre.ref_logits)

        def teager(i: int) -> None:
            pos1.fill_(PROMPT_LEN + i)
            tok1.copy_(ts(tok1, pos1).argmax())

        out["pytorch_eager_plain"] = time_loop(teager, a.steps, a.repeats)
        print(f"   pytorch eager (plain step): {out['pytorch_eager_plain']['ms_per_token']:.4f}", flush=True)
        try:
            graph, lg = _capture(lambda: ts(tok1, pos1))

            def treplay(i: int) -> None:
                pos1.fill_(PROMPT_LEN + i)
                graph.replay()
                tok1.copy_(lg.argmax())

            out["pytorch_cuda_graph_plain"] = time_loop(treplay, a.steps, a.repeats)
            ms = out["pytorch_cuda_graph_plain"]["ms_per_token"]
            print(f"   pytorch + CUDA graph (plain step): {ms:.4f}", flush=True)
        except Exception as exc:
            out["pytorch_cuda_graph_plain"] = _failed(exc)
            print(f"   CUDA graph of the plain step failed: {exc!s:.300}", flush=True)
    return out


def hf(b: Bench) -> dict[str, Any]:
    """transformers' step on a static cache: eager, then captured in a CUDA graph (late stages: a device assert in
    transformers' code would spoil the process's CUDA context for every stage after it)."""
    out: dict[str, Any] = {}
    fwd, tok, pos_t, _ = _hf_stepper(b)
    out["first_step_vs_ref"] = _cmp(fwd()[0, -1].float(), b.pre.ref_logits)

    def eager(i: int) -> None:
        pos_t.fill_(PROMPT_LEN + i)
        tok.copy_(fwd()[0, -1].argmax())

    out["pytorch_eager_hf"] = time_loop(eager, b.args.steps, b.args.repeats)
    print(f"   pytorch eager (transformers, static cache): {out['pytorch_eager_hf']['ms_per_token']:.4f}", flush=True)
    b.results["hf_partial"] = out
    b.save()
    try:
        graph, logits = _capture(fwd)

        def replay(i: int) -> None:
            pos_t.fill_(PROMPT_LEN + i)
            graph.replay()
            tok.copy_(logits[0, -1].argmax())

        out["pytorch_cuda_graph_hf"] = time_loop(replay, b.args.steps, b.args.repeats)
        ms = out["pytorch_cuda_graph_hf"]["ms_per_token"]
        print(f"   pytorch + CUDA graph (transformers): {ms:.4f}", flush=True)
    except Exception as exc:
        out["pytorch_cuda_graph_hf"] = _failed(exc)
        print(f"   CUDA graph of transformers' step failed: {exc!s:.300}", flush=True)
    b.results.pop("hf_partial", None)
    return out


def optimize(b: Bench) -> dict[str, Any]:
    """argus_lab.optimize on the megakernel's parameters: timing-only against evidence-guided, the same budget,
    one shared record (a candidate both ask is measured once), into OUT/decode_optimize_h200.duckdb."""
    import argus_lab
    from examples.gpu.decode.optimize_target import DecodeTarget

    wait_warm(b)
    opt = argus_lab.optimize
    target = DecodeTarget(
        b.w, b.pre.k_cache, b.pre.v_cache, b.pre.token, b.pre.pos, b.pre.ref_logits_fp32, _ref_error(b), sms=_sms()
    )
    store = b.out / "decode_optimize_h200.duckdb"
    if store.exists():
        store.unlink()
    session = opt.Session(target, str(store), repeat=b.args.opt_repeat, warmup=2, phases=True)
    ctx = opt.RuleContext(session.space, target.model, session.spec, target.phase_roles)
    budget = opt.Budget(candidates=b.args.opt_budget)
    record: dict[str, Any] = {}
    out: dict[str, Any] = {"budget": b.args.opt_budget, "space_valid": len(session.space.valid())}
    searches = (
        ("evidence_guided", opt.EvidenceGuided(session.space, target.default(), ctx)),
        ("timing_only", opt.TimingOnly(session.space, target.default(), seed=b.args.seed)),
    )
    for name, search in searches:
        res = opt.run_search(search, session.evaluate, budget, target=target.name, record=record)
        out[name] = res.to_dict()
        out[name + "_text"] = res.text()
        print(f"   {name}: {res.speedup_text()}", flush=True)
        print("\n".join("     " + ln for ln in res.text().splitlines()[:30]), flush=True)
        b.results["optimize_partial"] = out
        b.save()
    b.results.pop("optimize_partial", None)
    return out


def compile_child(args: argparse.Namespace) -> int:
    """In a child process: torch.compile(mode="reduce-overhead") of transformers' step; prints one JSON line."""
    b = Bench(Path(args.out), args)
    import torch

    from examples.gpu.decode import model as M

    b.hf = M.make_model(shape(), max_len=b.max_len, seed=args.seed, device=DEV)
    b.pre = M.Prefilled(None, None, 0, PROMPT_LEN, None, None)
    fwd, tok, pos_t, _ = _hf_stepper(b)
    b.hf.forward = torch.compile(b.hf.forward, mode="reduce-overhead", fullgraph=False)
    t = time.monotonic()
    for _ in range(3):
        fwd()
    _sync()
    compile_s = time.monotonic() - t

    def step(i: int) -> None:
        pos_t.fill_(PROMPT_LEN + i)
        tok.copy_(fwd()[0, -1].argmax())

    r = time_loop(step, args.steps, args.repeats)
    print("COMPILE_RESULT " + json.dumps({**r, "compile_s": round(compile_s, 1)}), flush=True)
    return 0


def compile_stage(b: Bench) -> dict[str, Any]:
    cmd = [sys.executable, __file__, str(b.out), "--compile-child", "--steps", str(b.args.steps),
           "--repeats", str(b.args.repeats), "--seed", str(b.args.seed)]  # fmt: skip
    t = time.monotonic()
    cap = b.args.compile_cap
    if b.args.limit:  # never outlive the run's own limit (the child would hold the GPU after the parent is killed)
        cap = min(cap, b.args.limit - (t - b.t0) - 10)
    if cap < 20:
        return {"error": f"not run: {cap:.0f} s left before the run's limit", "cap_s": cap}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=cap, cwd=ROOT)
    except subprocess.TimeoutExpired:
        print(f"   torch.compile: over the {cap:.0f} s cap", flush=True)
        return {"error": f"compile and timing took more than the {cap:.0f} s cap", "cap_s": cap}
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("COMPILE_RESULT ")), None)
    if line is None:
        return {"error": f"child exited {p.returncode}", "stderr": p.stderr[-3000:]}
    r = json.loads(line.split(" ", 1)[1])
    r["wall_s"] = round(time.monotonic() - t, 1)
    print(
        f"   torch.compile reduce-overhead: {r['ms_per_token']:.4f} ms/token (compile {r['compile_s']} s)", flush=True
    )
    return r


def _phases(b: Bench, dec: Any) -> dict[str, Any]:
    """One instrumented step of ``dec`` (a probe made here): per region the median time per program (us), the
    share of the barrier waits in a program's marked time, the span and the tail (the sweep's evidence)."""
    from examples.gpu.decode import kernels as K
    from examples.gpu.decode import raw_probe
    from examples.gpu.decode.runner import events_per_program

    try:
        probes = [
            raw_probe.allocate(dec.programs, events_per_program(e - s, h), dec.x.device) for s, e, h in dec.launches()
        ]
        dec.step(b.pre.token, b.pre.pos, probes=probes)
        summ = raw_probe.summarize(probes[0], K.PHASES)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    regs = {n: round(r["median_ns"] / 1e3, 2) for n, r in summ["regions"].items()}
    total = sum(regs.values()) or 1.0
    waits = sum(v for n, v in regs.items() if n.startswith("wait_"))
    return {
        "median_us_per_program": regs, "wait_share": round(waits / total, 4),
        "span_us": round((summ["program_span_median_ns"] or 0) / 1e3, 1),
        "tail_us": round((summ["tail_ns"] or 0) / 1e3, 1),
        "sms": summ["sms"], "dropped_events": summ["dropped_events"],
    }  # fmt: skip


def _correct(row: dict[str, Any], ref_error: float) -> bool:
    """A swept config counts only if (1) its logits equal those of the phased driver run with the same config (the
    same arithmetic: attention slices change the summation order, so a config is never judged against another
    config's rounding), and (2) they are as close to the fp32 model's as transformers' own bf16 step is (within twice
    ``ref_error``, transformers bf16 against fp32), with the same top-1 token as one of the two references."""
    same = row.get("vs_phased_same")
    fp32, bf16 = row.get("vs_hf_fp32"), row.get("vs_hf_bf16")
    if same is None or fp32 is None or bf16 is None:
        return False
    if same["max_abs_diff"] > 1e-3 * max(same["ref_max_abs"], 1e-6):
        return False
    if fp32["max_abs_diff"] > max(2 * ref_error, 1e-3):
        return False
    return bool(fp32["top1_agree"] or bf16["top1_agree"])


def _ref_error(b: Bench) -> float:
    """transformers' bf16 step against the fp32 model (max abs difference of the logits)."""
    c = b.results.get("setup", {}).get("ref_bf16_vs_fp32") if isinstance(b.results.get("setup"), dict) else None
    if c:
        return float(c["max_abs_diff"])
    return float((b.pre.ref_logits.float() - b.pre.ref_logits_fp32.float()).abs().max())


def sweep(b: Bench) -> dict[str, Any]:

    from examples.gpu.decode.runner import KernelConfig

    wait_warm(b, sweep_only=True)
    sms = _sms()
    ref_error = _ref_error(b)
    rows: list[dict[str, Any]] = []
    t_end = time.monotonic() + b.args.sweep_budget
    base = KernelConfig()
    for change in [{}, *SWEEP]:
        if time.monotonic() > t_end:
            rows.append({"change": change, "skipped": "sweep budget spent"})
            continue
        row: dict[str, Any] = {"change": change}
        try:
            cfg = _config(base, change, sms)
            dec = _decoder(b, cfg)
            lg = dec.step(b.pre.token, b.pre.pos).clone()
            row["vs_hf_bf16"] = _cmp(lg, b.pre.ref_logits)
            row["vs_hf_fp32"] = _cmp(lg, b.pre.ref_logits_fp32)
            if b.phased is not None:
                row["vs_phased_v1"] = _cmp(lg, b.phased)
            row["barrier_error"] = dec.error()
            same = dec.phased_step(b.pre.token, b.pre.pos, programs=dec.programs).clone()
            row["vs_phased_same"] = _cmp(lg, same)
            if row["barrier_error"]:
                dec.clear_error()
                row["skipped"] = "a grid barrier timed out (programs not co-resident?)"
            else:
                dec.set_token(b.pre.token)
                row.update(time_loop(_greedy(dec, b.pre.pos), b.args.steps, b.args.repeats))
                row["phases"] = _phases(b, dec)
            row["config"] = dec.cfg.as_dict()
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        rows.append(row)
        row["correct"] = _correct(row, ref_error)
        ms = row.get("ms_per_token")
        what = f"{ms:.4f} ms/token" if ms else row.get("error", row.get("skipped"))
        same = row.get("vs_phased_same", {}).get("max_abs_diff")
        fp32 = row.get("vs_hf_fp32", {}).get("max_abs_diff")
        print(f"   {json.dumps(change):70s} {what}  correct={row['correct']} vs phased(same) {same} vs fp32 {fp32}",
              flush=True)  # fmt: skip
        ph = row.get("phases", {}).get("median_us_per_program")
        if ph:
            top = sorted(ph.items(), key=lambda kv: -kv[1])[:6]
            print(f"     wait share {row['phases']['wait_share']:.1%}; "
                  + ", ".join(f"{n} {v:.0f} us" for n, v in top), flush=True)  # fmt: skip
        b.results["sweep_partial"] = rows
        b.save()
    ok = [r for r in rows if r.get("ms_per_token") and r.get("correct")]
    out: dict[str, Any] = {"rows": rows, "ref_error": ref_error}
    if ok:
        best = min(ok, key=lambda r: r["ms_per_token"])
        out["best"] = best
        print(f"   best: {best['change']} {best['ms_per_token']:.4f} ms/token", flush=True)
        try:
            out["best_probe"] = _probe_run(b, _config(base, best["change"], sms), b.args.steps)
            _print_regions(out["best_probe"]["launches"][0])
        except Exception as exc:
            out["best_probe"] = {"error": f"{type(exc).__name__}: {exc}"}
    b.results.pop("sweep_partial", None)
    return out


def floor(b: Bench) -> dict[str, Any]:

    s = shape()
    w = s.weight_bytes()
    kv = 2 * s.layers * s.kv_heads * PROMPT_LEN * s.head_dim * 2
    return {
        "weight_bytes": w, "kv_bytes_at_1024": kv, "bandwidth_Bps": H200_BANDWIDTH,
        "floor_ms_per_token": 1e3 * w / H200_BANDWIDTH, "floor_with_kv_ms": 1e3 * (w + kv) / H200_BANDWIDTH,
    }  # fmt: skip


def summary(b: Bench) -> None:
    r = b.results
    rows: list[tuple[str, Any]] = []

    def get(stage: str, *keys: str) -> Any:
        v: Any = r.get(stage, {})
        for k in keys:
            v = v.get(k, {}) if isinstance(v, dict) else {}
        return v if isinstance(v, (int, float)) else None

    rows.append(("pytorch eager (transformers, static cache)", get("hf", "pytorch_eager_hf", "ms_per_token")))
    rows.append(("pytorch + CUDA graph (transformers)", get("hf", "pytorch_cuda_graph_hf", "ms_per_token")))
    rows.append(("pytorch eager (plain step)", get("baselines", "pytorch_eager_plain", "ms_per_token")))
    rows.append(("pytorch + CUDA graph (plain step)", get("baselines", "pytorch_cuda_graph_plain", "ms_per_token")))
    rows.append(("torch.compile reduce-overhead", get("compile", "ms_per_token")))
    rows.append(("megakernel v1 (one launch per step)", get("mk_time", "megakernel_v1_per_step", "ms_per_token")))
    rows.append(("megakernel (one launch per layer)", get("mk_time", "megakernel_per_layer", "ms_per_token")))
    rows.append(("phased driver (one launch per phase)", get("mk_time", "phased", "ms_per_token")))
    v2 = next(
        (x for x in (r.get("sweep") or {}).get("rows", []) if x.get("change") == SWEEP[0] and x.get("correct")), {}
    )
    rows.append(("megakernel v2 (splits 4, qkv tiles 8, stages 4)", v2.get("ms_per_token")))
    rows.append(("megakernel optimised (best of sweep)", get("sweep", "best", "ms_per_token")))
    for search in ("evidence_guided", "timing_only"):
        best = ((r.get("optimize") or {}).get(search) or {}).get("best") or {}
        med = best.get("median") if isinstance(best, dict) else None
        rows.append((f"optimize {search.replace('_', '-')} best (gpu.time of a step)", med / 1e6 if med else None))
    rows.append(("memory-bandwidth floor (weights / 4.8 TB/s)", get("floor", "floor_ms_per_token")))
    r["summary_ms_per_token"] = dict(rows)
    print("== ms/token (median of repeats; greedy decoding from position 1024)")
    for name, v in rows:
        print(f"==   {name:48s} {f'{v:.4f}' if v is not None else 'n/a'}")
    b.save()


def _dry_cpu() -> None:
    global DEV, DRY, PROMPT_LEN
    os.environ["TRITON_INTERPRET"] = "1"
    DEV, DRY, PROMPT_LEN = "cpu", True, 20
    from examples.gpu.decode.check_phased import fix_interpreter_index
    from examples.gpu.decode.runner import Decoder

    fix_interpreter_index()

    def step(self: Any, token: Any, pos: int, *, probes: Any = None) -> Any:
        return self.phased_step(token, pos)

    Decoder.step = step  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="TinyLlama decode ms/token: the Triton megakernel against PyTorch")
    p.add_argument("out", help="directory for decode_bench.json and the store")
    p.add_argument("--stages", default=",".join(STAGES))
    p.add_argument("--steps", type=int, default=48)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile-cap", type=float, default=150.0)
    p.add_argument("--sweep-budget", type=float, default=60.0)
    p.add_argument("--opt-budget", type=int, default=6, help="candidates per search in the optimize stage")
    p.add_argument("--opt-repeat", type=int, default=5, help="measured steps per candidate in the optimize stage")
    p.add_argument(
        "--limit", type=float, default=0.0, help="the run's wall limit in s (the compile child stays within)"
    )
    p.add_argument("--compile-workers", type=int, default=8, help="processes compiling kernels ahead (warm stage)")
    p.add_argument("--compile-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--dry-cpu", action="store_true", help="check the harness on the CPU (tiny shape, interpreter)")
    a = p.parse_args(argv)
    if a.dry_cpu:
        _dry_cpu()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.compile_child:
        return compile_child(a)
    b = Bench(out, a)
    stages = [s.strip() for s in a.stages.split(",") if s.strip()]
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        p.error(f"unknown stages {unknown}; choose from {', '.join(STAGES)}")
    fns = {
        "setup": setup, "check": check, "mk_time": mk_time, "probe": probe, "measure": measure, "baselines": baselines,
        "hf": hf, "compile": compile_stage, "sweep": sweep, "floor": floor, "warm": warm,
        "optimize": optimize,
    }  # fmt: skip
    for name in stages:
        if name not in ("warm", "setup", "floor", "compile") and b.pre is None:
            b.results[name] = {"error": "setup failed: no model"}
            continue
        b.stage(name, lambda fn=fns[name]: fn(b))
    if b.pool is not None:
        b.pool.shutdown(wait=False, cancel_futures=True)
    summary(b)
    return 0 if all("error" not in (b.results.get(s) or {}) for s in ("setup", "check")) else 1


if __name__ == "__main__":
    sys.exit(main())
