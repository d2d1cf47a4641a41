#!/usr/bin/env python3
"""Timing-only against evidence-guided search on the same budget: persistent GEMM and attention on the H200.

    python bench/optimize_bench.py OUT [--budget 8] [--budget-s 180] [--gpus 2] [--tiny]

For every configuration (kernel, shape, dtype, causal or not; :data:`CONFIGS`) two searches run over the same
space of candidates (Triton config + launch settings) with the same budget of measured candidates:
``timing-only`` (the default, then a seeded random order: what an autotuner does) and ``evidence-guided`` (the rule
set of argus_lab.optimize over each candidate's evidence).  Every candidate is measured through
``argus_lab.optimize.Session``: a timing run planned and executed by argus_lab (CUPTI kernel time of 10 launches
after 2 warm-ups, the first output checked against torch), the compiler backend's facts, one instrumented launch for
the device phases, all in one store per worker.  A candidate both searches ask for is measured once and counted by
both.  After both searches the default and each search's best are measured again in fresh runs: the speed-up of a
search is the default's pooled median over its best's, judged by the Report.diff rule (Mann-Whitney p < 0.01 and
>= 1 %), with the default's run-to-run change as the noise.

One worker process per GPU (``CUDA_VISIBLE_DEVICES``), each with a pool of CPU processes that compile candidates for
sm_90 ahead of the GPU (Triton's cache; the GPU process loads the cubins).  Results are written as they come:
``OUT/results/worker<i>.jsonl`` (one line per finished configuration) and ``worker<i>-candidates.jsonl`` (one line
per measured candidate); at the end ``OUT/optimize.json`` and ``OUT/optimize.md`` (the table), and the recorded
evidence of one configuration for notebooks/optimize.ipynb under ``OUT/evidence/``.

Without a GPU (``--device cpu``) the compile paths run for real and every measurement is skipped with the reason
(a dry run of the whole driver).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import gzip
import heapq
import json
import math
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
import zlib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SEED_FIGURES = {
    "configurations": 44,
    "improved_with_evidence": 39,
    "geomean_without_evidence": 0.054,
    "geomean_with_evidence": 0.089,
    "source": "the Argus paper (AlphaEvolve on 44 persistent GEMM and attention configurations, with and without "
    "Argus's evidence)",
}

# fmt: off
CONFIGS: list[dict[str, Any]] = [
    {"kind": "gemm", "m": 3072, "n": 3072, "k": 8192, "dtype": "bf16", "walk": True},
    {"kind": "attn", "batch": 4, "heads": 16, "seq": 2048, "head_dim": 128, "causal": True, "dtype": "bf16"},
    {"kind": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"},
    {"kind": "attn", "batch": 4, "heads": 16, "seq": 2048, "head_dim": 64, "causal": True, "dtype": "bf16"},
    {"kind": "gemm", "m": 1024, "n": 1024, "k": 8192, "dtype": "bf16"},
    {"kind": "attn", "batch": 2, "heads": 16, "seq": 4096, "head_dim": 128, "causal": False, "dtype": "bf16"},
    {"kind": "gemm", "m": 6144, "n": 6144, "k": 4096, "dtype": "bf16"},
    {"kind": "attn", "batch": 2, "heads": 16, "seq": 4096, "head_dim": 64, "causal": False, "dtype": "fp16"},
    {"kind": "gemm", "m": 2048, "n": 2048, "k": 2048, "dtype": "bf16"},
    {"kind": "attn", "batch": 1, "heads": 32, "seq": 4096, "head_dim": 128, "causal": True, "dtype": "fp16"},
    {"kind": "gemm", "m": 8192, "n": 1024, "k": 4096, "dtype": "bf16"},
    {"kind": "attn", "batch": 8, "heads": 16, "seq": 1024, "head_dim": 64, "causal": True, "dtype": "bf16"},
    {"kind": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "fp16"},
    {"kind": "attn", "batch": 1, "heads": 16, "seq": 8192, "head_dim": 128, "causal": True, "dtype": "bf16"},
    {"kind": "gemm", "m": 3072, "n": 3072, "k": 8192, "dtype": "fp16"},
    {"kind": "attn", "batch": 4, "heads": 32, "seq": 1024, "head_dim": 128, "causal": False, "dtype": "bf16"},
    {"kind": "gemm", "m": 1024, "n": 8192, "k": 4096, "dtype": "fp16"},
    {"kind": "attn", "batch": 2, "heads": 8, "seq": 8192, "head_dim": 64, "causal": True, "dtype": "fp16"},
    {"kind": "gemm", "m": 6144, "n": 6144, "k": 2048, "dtype": "bf16"},
    {"kind": "attn", "batch": 16, "heads": 16, "seq": 512, "head_dim": 64, "causal": False, "dtype": "bf16"},
    {"kind": "gemm", "m": 512, "n": 512, "k": 16384, "dtype": "bf16"},
    {"kind": "attn", "batch": 2, "heads": 16, "seq": 2048, "head_dim": 128, "causal": True, "dtype": "fp16"},
    {"kind": "gemm", "m": 4096, "n": 4096, "k": 1024, "dtype": "bf16"},
    {"kind": "gemm", "m": 2048, "n": 8192, "k": 1024, "dtype": "fp16"},
]
# fmt: on
TINY = [CONFIGS[0], CONFIGS[1]]
HOST_DEMO: list[dict[str, Any]] = [{"kind": "host", "n": 96, "walk": True}, {"kind": "host", "n": 64}]
"""``--host-demo``: the driver end to end on a host region (tests/optimize_cpu.py, host.wall), on any machine."""


def label(cfg: dict[str, Any]) -> str:
    """The configuration in words (the target's name)."""
    if cfg["kind"] == "gemm":
        return f"gemm {cfg['dtype']} {cfg['m']}x{cfg['n']}x{cfg['k']}"
    if cfg["kind"] == "host":
        return f"blocked matmul {cfg['n']}"
    kind = "causal" if cfg["causal"] else "full"
    return f"attn {cfg['dtype']} b{cfg['batch']} h{cfg['heads']} n{cfg['seq']} d{cfg['head_dim']} {kind}"


def seed_of(cfg: dict[str, Any], base: int) -> int:
    """The timing-only search's random order: fixed per configuration."""
    return base + zlib.crc32(label(cfg).encode())


def make_target(cfg: dict[str, Any], builds: Any, sms: int) -> Any:
    from examples.gpu.optimize_targets import AttentionTarget, GemmTarget

    if cfg["kind"] == "gemm":
        return GemmTarget(cfg["m"], cfg["n"], cfg["k"], cfg["dtype"], builds=builds, sms=sms)
    if cfg["kind"] == "host":
        from tests.optimize_cpu import BlockedMatmul

        return BlockedMatmul(cfg["n"])
    return AttentionTarget(
        cfg["batch"], cfg["heads"], cfg["seq"], cfg["head_dim"], causal=cfg["causal"], dtype=cfg["dtype"],
        builds=builds, sms=sms,
    )  # fmt: skip


# -- compile pool ---------------------------------------------------------------------------------------------
def _pool_init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import examples.gpu.optimize_targets
    import examples.gpu.persistent_attention
    import examples.gpu.persistent_gemm  # noqa: F401


def _compile(spec: Any) -> Any:
    from examples.gpu.optimize_targets import compile_job

    return compile_job(spec)


class Compiles:
    """Candidates' variants compiled ahead in a process pool, most urgent first; results fill ``builds``."""

    def __init__(self, pool: cf.ProcessPoolExecutor, builds: Any, capacity: int) -> None:
        self.pool, self.builds, self.capacity = pool, builds, capacity
        self.running: dict[str, cf.Future[Any]] = {}
        self.queue: list[tuple[int, int, str, Any]] = []
        self.queued: dict[str, int] = {}
        self.seq = 0
        self.done = 0
        self.seconds = 0.0

    def ready(self, spec: Any) -> bool:
        return spec.key in self.builds.facts or spec.key in self.builds.errors

    def want(self, spec: Any, prio: int) -> None:
        key = spec.key
        if self.ready(spec) or key in self.running or self.queued.get(key, 99) <= prio:
            return
        self.queued[key] = prio
        self.seq += 1
        heapq.heappush(self.queue, (prio, self.seq, key, spec))

    def pump(self) -> None:
        while self.queue and len(self.running) < self.capacity:
            prio, _, key, spec = heapq.heappop(self.queue)
            if self.queued.get(key) != prio or self.ready(spec) or key in self.running:
                continue
            self.queued.pop(key, None)
            self.running[key] = self.pool.submit(_compile, spec)

    def collect(self) -> int:
        n = 0
        for key, fut in list(self.running.items()):
            if fut.done():
                del self.running[key]
                try:
                    res = fut.result()
                except Exception as exc:  # the pool itself failed (a crashed process): the candidate fails to build
                    self.builds.errors[key] = f"compile pool: {type(exc).__name__}: {exc}"
                else:
                    self.builds.add(res)
                    self.seconds += res.seconds
                self.done += 1
                n += 1
        return n

    def wait(self, timeout: float) -> None:
        if self.running:
            cf.wait(list(self.running.values()), timeout=timeout, return_when=cf.FIRST_COMPLETED)
        else:
            time.sleep(min(timeout, 0.05))


# -- one configuration ----------------------------------------------------------------------------------------
@dataclass
class ConfigRun:
    cfg: dict[str, Any]
    target: Any
    session: Any
    runs: dict[str, Any]
    ctx: Any
    record: dict[str, Any] = field(default_factory=dict)
    confirm: dict[str, Any] = field(default_factory=dict)
    confirm_queue: list[tuple[str, Any]] = field(default_factory=list)
    phase: str = "search"
    budget: int = 0
    started: float = field(default_factory=time.monotonic)


def evaluation_short(ev: Any) -> dict[str, Any]:
    """The evidence of one evaluation the result files keep (no Report)."""
    d = ev.to_dict()
    d.pop("report", None)
    d.pop("store", None)
    d.pop("region", None)
    return d


def search_result(run: Any) -> dict[str, Any]:
    return run.result.to_dict()


def pooled(*evs: Any) -> list[float]:
    out: list[float] = []
    for e in evs:
        if e is not None and e.ok and e.time is not None:
            out.extend(e.time.values)
    return out


def judge(default_vals: list[float], best_vals: list[float]) -> dict[str, Any]:
    """Speed-up of best over default on pooled per-launch times, with the Report.diff verdict."""
    import numpy as np

    from argus_lab.report.diff import compare

    if not default_vals or not best_vals:
        return {"speedup": None, "p": None, "verdict": "not measured", "improved": False}
    key = ("k", "t")
    (row,) = compare({key: np.asarray(default_vals)}, {key: np.asarray(best_vals)}, {key: "ns"})
    speed = float(np.median(default_vals) / np.median(best_vals))
    return {
        "speedup": speed,
        "p": row.p_value,
        "verdict": row.verdict,
        "improved": bool(row.verdict == "lower"),
        "default_median_ns": float(np.median(default_vals)),
        "best_median_ns": float(np.median(best_vals)),
        "n": [len(default_vals), len(best_vals)],
    }


def summarize(cr: ConfigRun) -> dict[str, Any]:
    out: dict[str, Any] = {}
    t, g = cr.runs["timing-only"].result, cr.runs["evidence-guided"].result
    d_first = t.default if t.default is not None else g.default
    d_again = cr.confirm.get("default")
    noise = None
    if d_first is not None and d_first.ok and d_again is not None and d_again.ok:
        noise = abs((d_again.median or 0) / (d_first.median or 1) - 1.0)
    out["default_ms"] = d_first.median / 1e6 if d_first is not None and d_first.ok else None
    out["default_noise_iqr"] = d_first.time.noise if d_first is not None and d_first.time is not None else None
    out["run_to_run"] = noise
    for name, res in (("timing-only", t), ("evidence-guided", g)):
        best = res.best
        if best is None or d_first is None:
            out[name] = {
                "best": None,
                "speedup": None,
                "verdict": "not measured",
                "improved": False,
                "asked": res.asked,
            }
            continue
        same = best.candidate == d_first.candidate
        again = cr.confirm.get(name) if not same else None
        dv = pooled(d_first, d_again)
        bv = dv if same else pooled(best, again)
        j = judge(dv, bv) if not same else {"speedup": 1.0, "p": None, "verdict": "default kept", "improved": False}
        j["speedup_found"] = res.speedup
        j["best"] = best.candidate.key
        j["confirmed"] = bool(same or (again is not None and again.ok))
        j["asked"] = res.asked
        j["stopped"] = res.stopped
        j["rules"] = sorted({s.rule for s in res.steps if s.rule not in ("default", "random")})
        out[name] = j
    return out


# -- the worker ------------------------------------------------------------------------------------------------
def worker_main(args: argparse.Namespace) -> int:
    out = Path(args.out)
    wid = args.worker
    (out / "results").mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    deadline = args.deadline
    log = open(out / "logs" / f"worker{wid}.log", "a", buffering=1)  # noqa: SIM115

    def say(msg: str) -> None:
        line = f"[w{wid} {time.time() - args.t0:6.1f}s] {msg}"
        print(line, file=log)
        print(line, flush=True)

    ctx_mp = mp.get_context("spawn")
    pool = cf.ProcessPoolExecutor(max_workers=args.compile_procs, mp_context=ctx_mp, initializer=_pool_init)
    from examples.gpu.optimize_targets import Builds

    builds = Builds()
    compiles = Compiles(pool, builds, capacity=args.compile_procs + 2)
    configs = [c for i, c in enumerate(load_configs(args)) if i % args.of == wid]
    say(f"{len(configs)} configurations; compile pool of {args.compile_procs}")

    import argus_lab
    from argus_lab.run.machine import gpu_available

    opt = argus_lab.optimize
    have_gpu = args.device != "cpu" and gpu_available() and not args.host_demo
    sms = 132
    device_name = None
    if have_gpu:
        from examples.gpu.persistent_gemm import num_sms_of

        sms = num_sms_of()
        import torch

        device_name = torch.cuda.get_device_name()
        say(f"GPU {device_name}, {sms} SMs")
    elif args.host_demo:
        say("host demo: a host region measured by host.wall (no GPU, nothing to compile)")
    else:
        say("no GPU (or --device cpu): candidates are compiled for sm_90 and every measurement is skipped")
    spec = opt.device_spec(device_name) or opt.device_spec("NVIDIA H200")
    stores = out / "stores"
    stores.mkdir(exist_ok=True)
    # one store per worker, one connection held for the whole run (each evaluation nests in it: no open and
    # checkpoint per candidate); the walk configuration has a store of its own (notebooks/optimize.ipynb)
    shared_store = argus_lab.open_store(str(stores / f"worker{wid}.duckdb"))
    signals = ("host.wall",) if args.host_demo else tuple(args.signals.split(","))
    pace = {"evals": 0, "first": 0.0}  # wall time per evaluation so far (compile waits included)

    def choose_budget(left_configs: int) -> int:
        """The per-search budget of the next configuration: ``--budget``, or less (never below 4) when the evaluations
        so far say the configurations left would not finish by the deadline at that budget. Both searches of one
        configuration always get the same budget."""
        if pace["evals"] < 6:
            return args.budget
        per_eval = (time.monotonic() - pace["first"]) / pace["evals"]
        return fit_budget(args.budget, per_eval, deadline - args.margin_s - time.time(), left_configs)

    cand_log = open(out / "results" / f"worker{wid}-candidates.jsonl", "a", buffering=1)  # noqa: SIM115
    res_log = open(out / "results" / f"worker{wid}.jsonl", "a", buffering=1)  # noqa: SIM115

    def start(cfg: dict[str, Any], left_configs: int) -> ConfigRun:
        target = make_target(cfg, builds, sms)
        n = choose_budget(left_configs)
        budget = opt.Budget(candidates=n)
        store: Any = shared_store
        if cfg.get("walk"):
            (out / "evidence").mkdir(exist_ok=True)
            store = out / "evidence" / "optimize_walk.duckdb"
        session = opt.Session(
            target, store, signals=signals, repeat=args.repeat, warmup=args.warmup, phases=True, spec=spec,
            include_report=False,
        )  # fmt: skip
        space = session.space
        ctx = opt.RuleContext(space, target.model, spec, target.phase_roles)

        def static(c: Any) -> Any:
            specs = target.specs(c)
            if not specs:
                return None
            return builds.errors.get(specs[0].key) or builds.facts.get(specs[0].key)

        timing = opt.TimingOnly(space, target.default(), seed=seed_of(cfg, args.seed))
        guided = opt.EvidenceGuided(space, target.default(), ctx, static=static)
        runs = {
            "timing-only": opt.SearchRun(timing, budget, target=target.name),
            "evidence-guided": opt.SearchRun(guided, budget, target=target.name),
        }
        say(f"start {target.name}: space {space.size()} ({len(space.valid())} valid), budget {n} per search")
        return ConfigRun(cfg, target, session, runs, ctx, budget=n)

    def want_specs(cr: ConfigRun, cands: list[Any], prio: int) -> None:
        for c in cands:
            for s in cr.target.specs(c):
                compiles.want(s, prio)

    def evaluate(cr: ConfigRun, cand: Any, *, again: bool = False) -> Any:
        if pace["evals"] == 0:
            pace["first"] = time.monotonic()
        ev = cr.session.evaluate(cand, again=again)
        pace["evals"] += 1
        cand_log.write(
            json.dumps(
                {
                    "target": cr.target.name,
                    "candidate": cand.key,
                    "status": ev.status,
                    "median": ev.median,
                    "noise": None if ev.time is None else ev.time.noise,
                    "again": again,
                    "seconds": ev.seconds,
                    "cause": ev.cause[:200],
                }
            )
            + "\n"
        )
        return ev

    def step_search(cr: ConfigRun, run: Any) -> bool:
        if run.finished:
            return False
        if run.search.name == "evidence-guided":  # its pruning reads the compiler's facts: compile the next ones first
            head = [c for c in run.search.lookahead(2) if c.key not in cr.record]
            if not all(compiles.ready(s) for c in head for s in cr.target.specs(c)[:1]):
                want_specs(cr, head, 0)
                return False
        cand = run.next()
        if cand is None:
            return False
        known = cr.record.get(cand.key)
        if known is not None:
            run.record(known, shared=True)
            return True
        specs = cr.target.specs(cand)
        if not all(compiles.ready(s) for s in specs):
            for s in specs:
                compiles.want(s, 0)
            return False
        ev = evaluate(cr, cand)
        cr.record[cand.key] = ev
        run.record(ev)
        return True

    def step_confirm(cr: ConfigRun) -> bool:
        if not cr.confirm_queue:
            cr.phase = "done"
            return True
        name, cand = cr.confirm_queue[0]
        if not all(compiles.ready(s) for s in cr.target.specs(cand)):
            return False
        cr.confirm_queue.pop(0)
        cr.session.phases = False
        try:
            cr.confirm[name] = evaluate(cr, cand, again=True)
        finally:
            cr.session.phases = True
        for other, c in list(cr.confirm_queue):  # the same candidate confirms every search that chose it
            if c == cand:
                cr.confirm_queue.remove((other, c))
                cr.confirm[other] = cr.confirm[name]
        return True

    def begin_confirm(cr: ConfigRun) -> None:
        cr.phase = "confirm"
        t, g = cr.runs["timing-only"].result, cr.runs["evidence-guided"].result
        default = t.default or g.default
        if default is None or not default.ok:
            cr.phase = "done"
            return
        cr.confirm_queue.append(("default", default.candidate))
        for name, res in (("timing-only", t), ("evidence-guided", g)):
            if res.best is not None and res.best.candidate != default.candidate:
                cr.confirm_queue.append((name, res.best.candidate))

    def finish(cr: ConfigRun, complete: bool, why: str = "") -> None:
        summary = summarize(cr)
        line = {
            "config": cr.cfg,
            "target": cr.target.name,
            "region": cr.session.summary()["region"],
            "worker": wid,
            "device": device_name,
            "budget": cr.budget,
            "space": cr.session.space.to_dict(),
            "default": cr.target.default().to_dict(),
            "searches": {n: search_result(r) for n, r in cr.runs.items()},
            "evaluations": {k: evaluation_short(e) for k, e in cr.record.items()},
            "confirm": {n: evaluation_short(e) for n, e in cr.confirm.items()},
            "summary": summary,
            "store": str(cr.session.store.path.relative_to(out)),
            "seconds": time.monotonic() - cr.started,
            "complete": complete,
            "incomplete": why,
        }
        res_log.write(json.dumps(line) + "\n")
        if cr.cfg.get("walk"):
            (out / "evidence" / "optimize_walk.json").write_text(json.dumps(line, indent=1))
        t, g = summary["timing-only"], summary["evidence-guided"]
        verb = "done" if complete else "stopped"
        say(
            f"{verb} {cr.target.name} in {line['seconds']:.1f}s: default {fmt_ms(summary['default_ms'])}, "
            f"timing-only x{fmt_x(t.get('speedup'))} ({t.get('verdict')}), "
            f"evidence-guided x{fmt_x(g.get('speedup'))} ({g.get('verdict')})"
        )
        release = getattr(cr.target, "release", None)
        if release is not None:
            release()
        if have_gpu:
            import torch

            torch.cuda.empty_cache()

    queue: deque[dict[str, Any]] = deque(configs)
    active: list[ConfigRun] = []
    firsts: dict[str, tuple[Any, list[Any]]] = {}
    status = 0

    def terminated(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminated)  # the parent's deadline: finish what is measured, close the store
    held = shared_store.connect(write=True)
    held.__enter__()
    try:
        while (queue or active) and time.time() < deadline - args.margin_s:
            while len(active) < args.active and queue:
                active.append(start(queue.popleft(), len(queue) + len(active) + 1))
            compiles.collect()
            progressed = False
            for cr in list(active):
                if cr.phase == "search":
                    for run in cr.runs.values():
                        if time.time() >= deadline - args.margin_s:
                            break
                        progressed |= step_search(cr, run)
                    if all(r.finished for r in cr.runs.values()):
                        begin_confirm(cr)
                if cr.phase == "confirm" and time.time() < deadline - args.margin_s:
                    progressed |= step_confirm(cr)
                if cr.phase == "done":
                    finish(cr, True)
                    active.remove(cr)
            # compile ahead: what the active searches would ask next, then the next configurations' first asks
            for cr in active:
                for run in cr.runs.values():
                    if not run.finished:
                        want_specs(cr, run.search.lookahead(args.lookahead), 1)
                for _, c in cr.confirm_queue:
                    want_specs(cr, [c], 0)
            for cfg in list(queue)[: args.active]:
                if label(cfg) not in firsts:
                    firsts[label(cfg)] = start_static(cfg, builds, sms, args)
                tgt, cands = firsts[label(cfg)]
                for c in cands:
                    for s in tgt.specs(c):
                        compiles.want(s, 2)
            compiles.pump()
            if not progressed:
                compiles.wait(0.1)
    except KeyboardInterrupt:
        say("terminated by the driver (deadline): writing what was measured")
    except Exception:
        status = 1
        say("worker failed:\n" + traceback.format_exc())
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for cr in active:
            finish(cr, False, "the time budget ended first" if status == 0 else "the worker failed")
        for cfg in queue:
            res_log.write(json.dumps({"config": cfg, "target": label(cfg), "complete": False,
                                      "incomplete": "not started: the time budget ended first"}) + "\n")  # fmt: skip
        say(f"compiled {compiles.done} variants ({compiles.seconds:.0f} CPU s); {len(builds.errors)} failed to build")
        workers = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in workers:  # compile jobs still running are not waited for
            p.terminate()
        held.__exit__(None, None, None)
    return status


def fit_budget(most: int, per_eval_s: float, left_s: float, left_configs: int, least: int = 4) -> int:
    """The largest per-search budget (``least``..``most``) with which ``left_configs`` configurations fit ``left_s``
    at ``per_eval_s`` a measured candidate: a configuration takes about 2 x budget - 1 distinct candidates (the two
    searches share the default) and three confirmation runs."""
    evals_each = left_s / max(per_eval_s, 1e-6) / max(left_configs, 1)
    return max(least, min(most, int((evals_each - 2) // 2)))


def start_static(cfg: dict[str, Any], builds: Any, sms: int, args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """A configuration's first candidates (known before anything is measured): the default and timing-only's order."""
    import argus_lab

    target = make_target(cfg, builds, sms)
    timing = argus_lab.optimize.TimingOnly(target.space(), target.default(), seed=seed_of(cfg, args.seed))
    return target, timing.lookahead(args.budget)


def load_configs(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.host_demo:
        return HOST_DEMO
    return TINY if args.tiny else CONFIGS


def fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f} ms"


def fmt_x(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


# -- the parent: workers, merge, table ------------------------------------------------------------------------
def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def merge(out: Path, args: argparse.Namespace, wall: float) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    for path in sorted((out / "results").glob("worker*.jsonl")):
        if path.name.endswith("-candidates.jsonl"):
            continue
        for line in path.read_text().splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill
            have = rows.get(r["target"])
            if have is None or (not have.get("complete") and r.get("complete")) or "summary" not in have:
                rows[r["target"]] = r
    order = [label(c) for c in load_configs(args)]
    results = [rows[t] for t in order if t in rows]
    measured = [r for r in results if r.get("summary", {}).get("default_ms")]
    agg: dict[str, Any] = {}
    for name in ("timing-only", "evidence-guided"):
        speeds = [r["summary"][name].get("speedup") or 1.0 for r in measured]
        gm = geomean(speeds)
        agg[name] = {
            "configurations": len(measured),
            "improved": sum(1 for r in measured if r["summary"][name].get("improved")),
            "geomean_speedup": gm,
            "geomean_gain": None if gm is None else gm - 1.0,
        }
    both = [r for r in measured if all(r["summary"][n].get("speedup") for n in ("timing-only", "evidence-guided"))]
    agg["guided_better"] = sum(
        1 for r in both if r["summary"]["evidence-guided"]["speedup"] > r["summary"]["timing-only"]["speedup"] * 1.01
    )
    agg["timing_better"] = sum(
        1 for r in both if r["summary"]["timing-only"]["speedup"] > r["summary"]["evidence-guided"]["speedup"] * 1.01
    )
    devices = sorted({str(r.get("device")) for r in measured if r.get("device")})
    doc = {
        "schema": "argus_lab.optimize-bench/1",
        "device": ", ".join(devices) if devices else ("host" if args.host_demo else "none"),
        "command": " ".join(sys.argv),
        "budget": args.budget,
        "repeat": args.repeat,
        "warmup": args.warmup,
        "wall_s": wall,
        "configurations": len(load_configs(args)),
        "measured": len(measured),
        "aggregate": agg,
        "seed": SEED_FIGURES,
        "results": results,
    }
    (out / "optimize.json").write_text(json.dumps(doc, indent=1))
    md = table(doc)
    (out / "optimize.md").write_text(md)
    return doc


def table(doc: dict[str, Any]) -> str:
    lines = [
        f"Budget: up to {doc['budget']} measured candidates per search (the default included; the same for both "
        "searches of a configuration, column B: fewer for configurations started when time ran short); each candidate: "
        f"{doc['repeat']} timed launches after {doc['warmup']} warm-ups. Speed-up = default / best on pooled "
        "launches of the search's measurement and a fresh confirmation run; `*` = faster beyond noise "
        "(Mann-Whitney p < 0.01 and >= 1 %); noise = the default's change between its two runs.",
        "",
        "| # | configuration | B | default | timing-only best | x | evidence-guided best | x | noise |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i, r in enumerate(doc["results"], 1):
        s = r.get("summary")
        if not s or s.get("default_ms") is None:
            why = r.get("incomplete") or "not measured"
            first = next(iter(r.get("evaluations", {}).values()), None)
            if first is not None and first.get("status") != "ok":
                why = f"{first.get('status')}: {first.get('cause', '')[:80]}"
            lines.append(f"| {i} | {r['target']} | {r.get('budget', '-')} | - | - | - | - | - | {why} |")
            continue
        cells = []
        for name in ("timing-only", "evidence-guided"):
            x = s[name]
            mark = "*" if x.get("improved") else ""
            sp = x.get("speedup")
            cells += [f"`{x.get('best') or '-'}`", "-" if sp is None else f"{sp:.3f}{mark}"]
        noise = s.get("run_to_run")
        lines.append(
            f"| {i} | {r['target']} | {r.get('budget', '-')} | {s['default_ms']:.3f} ms | {cells[0]} | {cells[1]} "
            f"| {cells[2]} | {cells[3]} "
            f"| {'-' if noise is None else f'{noise:.1%}'} |"
        )
    a = doc["aggregate"]
    seed = doc["seed"]
    t, g = a["timing-only"], a["evidence-guided"]

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:+.1f} %"

    lines += [
        "",
        "| | configurations improved | geometric-mean speed-up |",
        "| --- | --- | --- |",
        f"| timing-only (argus_lab, {doc['device']}) | {t['improved']}/{t['configurations']} "
        f"| {pct(t['geomean_gain'])} |",
        f"| evidence-guided (argus_lab, {doc['device']}) | {g['improved']}/{g['configurations']} "
        f"| {pct(g['geomean_gain'])} |",
        f"| seed: without evidence | - | {pct(seed['geomean_without_evidence'])} |",
        f"| seed: with Argus evidence | {seed['improved_with_evidence']}/{seed['configurations']} "
        f"| {pct(seed['geomean_with_evidence'])} |",
        "",
        f"evidence-guided ahead by > 1 %: {a['guided_better']} configurations; timing-only ahead: "
        f"{a['timing_better']}. Wall time {doc['wall_s']:.0f} s.",
    ]
    return "\n".join(lines) + "\n"


def compress_stores(out: Path) -> None:
    """The DuckDB files (and a write-ahead log left by a killed worker) gzipped: a store of a few runs is megabytes of
    blocks and some tens of kilobytes compressed."""
    for folder in (out / "stores", out / "evidence"):
        for f in sorted(folder.glob("*.duckdb*")):
            if f.suffix == ".lock":
                f.unlink()
            elif f.is_file() and f.suffix in (".duckdb", ".wal"):
                with f.open("rb") as src, gzip.open(f.with_name(f.name + ".gz"), "wb") as dst:
                    shutil.copyfileobj(src, dst)
                f.unlink()


def parent_main(args: argparse.Namespace) -> int:
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    (out / "results").mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    deadline = t0 + args.budget_s
    env = dict(os.environ)
    env.setdefault("TRITON_CACHE_DIR", str(Path(args.cache) / "triton"))
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(ROOT)
    n = args.gpus if args.device != "cpu" else 1
    procs = []
    for i in range(n):
        wenv = dict(env)
        wenv["ARGUS_NATIVE_CACHE"] = str(Path(args.cache) / f"native-{i}")
        if args.device != "cpu":
            wenv["CUDA_VISIBLE_DEVICES"] = str(i)
        else:
            wenv["CUDA_VISIBLE_DEVICES"] = ""
        cmd = [
            sys.executable, str(Path(__file__).resolve()), str(out), "--worker", str(i), "--of", str(n),
            "--deadline", str(deadline), "--t0", str(t0), "--budget", str(args.budget), "--device", args.device,
            "--repeat", str(args.repeat), "--warmup", str(args.warmup), "--seed", str(args.seed),
            "--compile-procs", str(args.compile_procs), "--signals", args.signals, "--active", str(args.active),
            "--lookahead", str(args.lookahead), "--margin-s", str(args.margin_s),
        ]  # fmt: skip
        if args.tiny:
            cmd.append("--tiny")
        if args.host_demo:
            cmd.append("--host-demo")
        procs.append(subprocess.Popen(cmd, env=wenv, cwd=ROOT, start_new_session=True))
    print(f"optimize_bench: {n} worker(s), budget {args.budget} candidates per search, deadline {args.budget_s:.0f} s")
    hard = deadline + args.kill_grace_s
    for p in procs:
        left = hard - time.time()
        try:
            p.wait(timeout=max(left, 0.1))
        except subprocess.TimeoutExpired:
            print(f"worker pid {p.pid} past its deadline: terminated")
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=3)
    doc = merge(out, args, time.time() - t0)
    compress_stores(out)
    print((out / "optimize.md").read_text())
    return 0 if doc["measured"] or args.device == "cpu" else 1


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--budget", type=int, default=8, help="measured candidates per search (default 8)")
    ap.add_argument("--budget-s", type=float, default=180.0, help="wall-clock seconds for everything (default 180)")
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--compile-procs", type=int, default=max(1, min(14, ((os.cpu_count() or 2) - 2) // 2)))
    ap.add_argument("--signals", default="gpu.time,compile.registers,compile.spills,compile.shared")
    ap.add_argument("--active", type=int, default=2, help="configurations a worker searches at once")
    ap.add_argument("--lookahead", type=int, default=4)
    ap.add_argument("--margin-s", type=float, default=4.0)
    ap.add_argument("--kill-grace-s", type=float, default=6.0)
    ap.add_argument("--cache", default=os.environ.get("ARGUS_I21_CACHE", "/tmp/argus-issue21"))
    ap.add_argument("--tiny", action="store_true", help="two configurations (a dry run)")
    ap.add_argument(
        "--host-demo",
        action="store_true",
        help="the driver end to end on a host region measured by host.wall (tests/optimize_cpu.py), any machine",
    )
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--of", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--t0", type=float, default=0.0, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.worker is not None:
        return worker_main(args)
    return parent_main(args)


if __name__ == "__main__":
    sys.exit(main())
