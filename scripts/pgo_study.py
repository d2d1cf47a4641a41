#!/usr/bin/env python3
"""Profile-guided overlap tuning on two GPUs: argus_lab's evidence picks a change, before/after throughput says
whether it helped (the seed's cross-level PGO, issue 17).

    python scripts/pgo_study.py OUT                 # two GPUs (nvidia-h200-x2): at most --limit (270) seconds
    python scripts/pgo_study.py OUT --cpu --limit 900   # dry run on the CPU: gloo, tiny sizes
    python scripts/pgo_study.py OUT --only ddp-s-b1000,tp-m-c1

Phases, each one launch of ``torchrun --nproc-per-node 2`` per step, ordered so that a time limit cuts the least
informative part:

A. baseline of every setting (:data:`SETTINGS`) under ``argus-lab run``; the evidence is read back from the
   store (comm.exposed / comm.overlap / comm.time / comm.kernels per region and rank, the attribution classes of
   the NCCL kernels, the streams, the cross-rank skew and clock offsets, the buckets inside ``backward``) and the
   written rule (:data:`RULE`, :func:`decide`) picks a change;
B. the plain (no-tool) throughput of every setting, baseline against changed configuration, in ONE torchrun
   launch (``examples/gpu/ab_suite.py``: alternating rounds A B A B per setting, start-up paid once);
C. the changed configuration of every setting under ``argus-lab run`` (settings with a change first, then the
   unchanged ones, whose second measurement is an A/A pair: the noise floor), then ``Report.diff`` of baseline
   against changed;
D. only while time remains: more argus processes per side (base, changed, ...), the diff judged again over all.

Time: ``--limit`` seconds of wall time in all, hard: no launch starts unless its expected duration (the
slowest launch of its kind so far, or :data:`FIRST_GUESS_S`) fits before ``limit - RESERVE_S``, and every launch
is killed (with its whole process group: torchrun and its ranks) when that moment comes.  Expected on two
H200s: A about 100 s (argus launches of 13-28 s), B 40-60 s, C about 100 s.  Whatever was cut is
recorded as such.  Everything lands in ``OUT/pgo.json`` (written after every step); the stores in
``OUT/stores/<setting>.duckdb`` (compacted at the end); ``scripts/render_pgo.py OUT/pgo.json`` prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
EXAMPLES = ROOT / "examples" / "gpu"

from argus_lab.report import Report  # noqa: E402
from argus_lab.report.diff import ALPHA, MIN_CHANGE, mann_whitney, min_p  # noqa: E402
from argus_lab.store import Store  # noqa: E402
from argus_lab.store.compact import compact  # noqa: E402

SIGNALS = "gpu.time,gpu.kernels,comm.time,comm.kernels,comm.overlap,comm.exposed,host.wall"
COMM_PATTERN = r"(?i)nccl|onerankreduce"  # the join's definition (argus_lab.join.comm.COMM_KERNEL_PATTERN)
RESERVE_S = 10.0  # kept free at the end of the limit: compacting the stores, the final pgo.json and summary
PLAIN_SHARE = 0.4  # the plain throughput launch may start settings during at least this share of the time left
FIRST_GUESS_S = {"argus": 28.0, "suite": 70.0}  # expected launch seconds before one of the kind was timed


@dataclass(frozen=True)
class Setting:
    """One setting of the study: a workload, its baseline configuration (Config fields of the workload) and what
    it stands for."""

    name: str
    workload: str  # ddp_train | tp_mlp
    baseline: dict[str, Any]
    about: str
    cpu: dict[str, Any] = field(default_factory=dict)  # replaces size fields in a CPU dry run


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "ddp-s-b1000",
        "ddp_train",
        {"model": "s", "bucket_cap_mb": 1000.0},
        "data parallel, GPT 12x768, one bucket holding every gradient (communication after backward)",
        {"model": "tiny", "bucket_cap_mb": 10.0},
    ),
    Setting(
        "tp-m-c1",
        "tp_mlp",
        {"size": "m", "chunks": 1},
        "tensor parallel MLP stack (8 layers, hidden 8192), one 64 MiB all-reduce per layer on the critical path",
        {"size": "tiny"},
    ),
    Setting(
        "ddp-s-b1",
        "ddp_train",
        {"model": "s", "bucket_cap_mb": 1.0},
        "data parallel, GPT 12x768, 1 MB buckets (many small all-reduces per step)",
        {"model": "tiny", "bucket_cap_mb": 0.01},
    ),
    Setting(
        "ddp-s-b25",
        "ddp_train",
        {"model": "s", "bucket_cap_mb": 25.0},
        "data parallel, GPT 12x768 (~110 M parameters), DDP's default 25 MB buckets",
        {"model": "tiny"},
    ),
    Setting(
        "ddp-m-b25",
        "ddp_train",
        {"model": "m", "bucket_cap_mb": 25.0},
        "data parallel, GPT 24x1024 (~335 M parameters), 25 MB buckets",
        {"model": "tiny"},
    ),
)

# thresholds of the rule (written down; see RULE)
SKEW_SHARE = 0.5  # skew-bound when the comm region's median start skew exceeds this share of the exposed time
SMALL_MSG_NS = 50_000  # latency-bound when the mean communication kernel is shorter than this ...
MANY_MSGS = 16  # ... and a step launches at least this many
NEGLIGIBLE = 0.03  # nothing to gain when exposed communication is below this share of the step
SERIAL = 0.25  # serialized when less than this share of the communication time overlaps compute

RULE = f"""Evidence: per rank, medians over the measured `step` instances of host.wall (W), comm.time (C),
comm.kernels (K), comm.overlap (O) and comm.exposed (E); the rank with the largest E is used.  The region holding
the communication is the path with most NCCL kernel weight; its median cross-rank start skew is S.  First match:
R0 no communication kernels in the evidence -> keep (nothing to tune; a CPU dry run lands here).
R1 S > {SKEW_SHARE} x E -> keep: the exposed time is one rank waiting for the other (skew-bound), which no
   communication setting fixes.
R2 K >= {MANY_MSGS} and C / K < {SMALL_MSG_NS / 1e3:.0f} us -> larger messages (DDP: bucket_cap_mb x 8; TP: chunks / 2):
   many latency-bound all-reduces.
R3 E < {NEGLIGIBLE:.0%} of W -> keep: communication is hidden or negligible.
R4 O < {SERIAL:.0%} of (O + E) -> more overlap (DDP: bucket_cap_mb = gradient MB / 8, about eight buckets; TP: chunks
   = 4): the communication runs after the compute it could hide behind.
R5 otherwise (partly hidden, still exposed) and NCCL on its own stream -> NCCL stream at high priority: its
   kernels get the SMs first while they overlap compute, which shortens the exposed tail.  Already high -> keep.
A kept setting is measured again unchanged (an A/A comparison: the noise floor of the verdicts)."""


@dataclass(frozen=True)
class Decision:
    rule: str
    change: dict[str, Any]
    reason: str


class Clock:
    """The study's time limit: what fits, and how long a launch may run.  A launch is expected to take as long as
    the last launch of the same kind and key (an argus run of the same setting), else the slowest of its kind so
    far, else :data:`FIRST_GUESS_S`."""

    def __init__(self, limit_s: float) -> None:
        self.t0 = time.monotonic()
        self.end = self.t0 + limit_s - RESERVE_S
        self.slowest: dict[str, float] = {}
        self.last: dict[tuple[str, str], float] = {}

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def left(self) -> float:
        return self.end - time.monotonic()

    def expect(self, kind: str, key: str = "") -> float:
        return self.last.get((kind, key), self.slowest.get(kind, FIRST_GUESS_S[kind]))

    def fits(self, kind: str, key: str = "", launches: int = 1) -> bool:
        """Whether ``launches`` such launches fit in the time left, with a 10 % margin (a launch cut by the limit
        is time lost)."""
        return self.left() >= 1.1 * launches * self.expect(kind, key)

    def took(self, kind: str, seconds: float, key: str = "") -> None:
        self.slowest[kind] = max(self.slowest.get(kind, 0.0), seconds)
        self.last[kind, key] = seconds


# ---------------------------------------------------------------------------------------------------------------
def cli_args(config: dict[str, Any]) -> list[str]:
    """Config fields as the workload's command-line options (``bucket_cap_mb`` -> ``--bucket-cap-mb``)."""
    out: list[str] = []
    for k, v in config.items():
        opt = "--" + k.replace("_", "-")
        if isinstance(v, bool):
            out += [opt] if v else []
        else:
            out += [opt, str(v)]
    return out


def launcher() -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def child_env() -> dict[str, str]:
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return env


RUNNING: list[subprocess.Popen[bytes]] = []  # the launch in flight (its process group is stopped on SIGTERM)


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Terminate ``proc``'s whole process group (torchrun and every rank), then kill what is left."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def on_term(signum: int, frame: object) -> None:
    """SIGTERM/SIGINT (an outer timeout): stop the launch in flight with its ranks, then exit."""
    for proc in RUNNING:
        stop_group(proc)
    raise SystemExit(128 + signum)


def run_logged(cmd: list[str], log: Path, timeout: float) -> dict[str, Any]:
    """Run ``cmd`` in a process group of its own, output to ``log``; at ``timeout`` the whole group (torchrun and
    every rank) is terminated, then killed.  Exit status (124 = timed out), seconds and the command."""
    t0 = time.perf_counter()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        proc = subprocess.Popen(cmd, env=child_env(), stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        RUNNING.append(proc)
        try:
            rc = proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            rc = 124
            stop_group(proc)
            fh.write(f"\n[pgo_study] stopped after {timeout:.0f} s (the study's time limit)\n")
        finally:
            RUNNING.remove(proc)
    return {"command": " ".join(cmd), "exit": rc, "seconds": round(time.perf_counter() - t0, 1), "log": str(log)}


def measure(
    s: Setting, config: dict[str, Any], label: str, out: Path, opts: argparse.Namespace, clock: Clock
) -> dict[str, Any]:
    """One ``argus-lab run`` of the setting's workload under torchrun (a new request in the setting's store)."""
    store = out / "stores" / f"{s.name}.duckdb"
    store.parent.mkdir(parents=True, exist_ok=True)
    before = {r[0] for r in Store(store).rows("SELECT run_id FROM runs")} if store.exists() else set()
    args = [*cli_args(config), "--steps", str(opts.steps)]
    if s.workload == "ddp_train":
        args += ["--info", str(out / "info" / f"{s.name}-{label}.json")]
    cmd = [
        sys.executable, "-m", "argus_lab.faces.cli", "run", str(EXAMPLES / f"{s.workload}.py"),
        "--launch", " ".join(launcher()), "--signals", SIGNALS, "--repeat", str(opts.repeat), "--warmup", "1",
        "--store", str(store), "--", *args,
    ]  # fmt: skip
    res = run_logged(cmd, out / "logs" / f"{s.name}-{label}.log", min(opts.timeout, clock.left()))
    clock.took("argus", res["seconds"], s.name)
    runs = Store(store).rows("SELECT run_id, status, cause FROM runs ORDER BY started_ns") if store.exists() else []
    res["run_ids"] = [r[0] for r in runs if r[0] not in before and r[1] in ("ok", "partial")]
    res["status"] = {r[0]: r[1] for r in runs if r[0] not in before}
    res["causes"] = {r[0]: (r[2] or "")[:400] for r in runs if r[0] not in before and r[2]}
    return res


# ---------------------------------------------------------------------------------------------------------------
PER_RANK = """
SELECT coalesce(i.rank, 0) AS rank, i.path, v.signal, quantile_cont(v.inclusive, 0.5) AS median, count(*) AS n,
       sum(v.w_exact) AS w_exact, sum(v.w_temporal) AS w_temporal, sum(v.w_ambiguous) AS w_ambiguous
FROM instance_values v JOIN region_instances i ON i.run_id = v.run_id AND i.instance_id = v.instance_id
WHERE v.run_id IN (SELECT unnest(?::VARCHAR[])) AND NOT coalesce(i.warmup, false)
GROUP BY ALL ORDER BY rank, path, signal
"""

COMM_ATTRIBUTION = """
SELECT coalesce(k.rank, 0) AS rank, coalesce(i.path, '(none)') AS path, a.class, count(*) AS kernels,
       sum(a.weight) AS weight, sum(a.weight * (k.end_ns - k.start_ns)) AS ns
FROM attributions a
JOIN kernels k ON k.run_id = a.run_id AND k.kernel_key = a.evidence_id
LEFT JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id
WHERE a.run_id IN (SELECT unnest(?::VARCHAR[])) AND a.evidence = 'kernel' AND k.kind = 'kernel'
  AND regexp_matches(k.name, ?)
GROUP BY ALL ORDER BY rank, ns DESC
"""

STREAMS = """
SELECT coalesce(rank, 0) AS rank, device_id, stream_id, regexp_matches(name, ?) AS comm, count(*) AS kernels,
       sum(end_ns - start_ns) AS ns
FROM kernels WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND kind = 'kernel'
GROUP BY ALL ORDER BY rank, device_id, stream_id, comm
"""

# the n-th communication kernel attributed to a `backward` (or `layer`) instance is bucket (chunk) n: its start
# and end relative to the instance's host start and end, per rank, median over the measured instances
BUCKETS = """
WITH c AS (
    SELECT coalesce(k.rank, 0) AS rank, i.path, i.instance_id, i.start_ns AS i_start, i.end_ns AS i_end,
           k.start_ns, k.end_ns,
           row_number() OVER (PARTITION BY k.run_id, i.instance_id ORDER BY k.start_ns) - 1 AS bucket
    FROM attributions a
    JOIN kernels k ON k.run_id = a.run_id AND k.kernel_key = a.evidence_id
    JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id
    WHERE a.run_id IN (SELECT unnest(?::VARCHAR[])) AND a.evidence = 'kernel' AND k.kind = 'kernel'
      AND regexp_matches(k.name, ?) AND NOT coalesce(i.warmup, false) AND a.weight = 1
)
SELECT rank, path, bucket, count(*) AS instances,
       quantile_cont(start_ns - i_start, 0.5) AS start_after_region_start_ns,
       quantile_cont(end_ns - start_ns, 0.5) AS duration_ns,
       quantile_cont(end_ns - i_end, 0.5) AS end_after_region_end_ns
FROM c GROUP BY ALL ORDER BY rank, path, bucket
"""


def read_evidence(store: Path, run_ids: list[str]) -> dict[str, Any]:
    """What the rule reads, from the store through the Python API (Report) and the store's tables."""
    st = Store(store)
    report = Report(st, run_ids)
    per_rank: dict[str, dict[str, dict[str, Any]]] = {}
    for rank, path, sig, med, n, we, wt, wa in st.rows(PER_RANK, [run_ids]):
        entry = {"median": med, "n": n}
        if (we or 0) + (wt or 0) + (wa or 0) > 0:
            entry["weights"] = {"exact": we, "temporal": wt, "ambiguous": wa}
        per_rank.setdefault(str(rank), {}).setdefault(path, {})[sig] = entry
    attribution = [
        {"rank": r, "path": p, "class": c, "kernels": k, "weight": w, "ns": ns}
        for r, p, c, k, w, ns in st.rows(COMM_ATTRIBUTION, [run_ids, COMM_PATTERN])
    ]
    streams = [
        {"rank": r, "device": d, "stream": s, "comm": bool(c), "kernels": k, "ns": ns}
        for r, d, s, c, k, ns in st.rows(STREAMS, [COMM_PATTERN, run_ids])
    ]
    buckets = [
        {"rank": r, "path": p, "bucket": b, "instances": n, "start_after_region_start_ns": s0, "duration_ns": d,
         "end_after_region_end_ns": e0}
        for r, p, b, n, s0, d, e0 in st.rows(BUCKETS, [run_ids, COMM_PATTERN])
    ]  # fmt: skip
    return {
        "run_ids": run_ids,
        "per_rank": per_rank,
        "comm_attribution": attribution,
        "streams": streams,
        "buckets": buckets,
        "ranks": [asdict(r) for r in report.ranks],
        "clock_offsets": [asdict(c) for c in report.clock_offsets],
        "attribution": [asdict(a) for a in report.attribution],
        "coverage": report.coverage(),
    }


def summarize(ev: dict[str, Any], top: str = "step") -> dict[str, Any]:
    """The figures the rule uses (see RULE), from the instances of the region path ``top``."""
    by_rank = {}
    for rank, paths in ev["per_rank"].items():
        step = paths.get(top, {})
        by_rank[rank] = {
            sig: (step.get(sig) or {}).get("median") or 0.0
            for sig in ("host.wall", "gpu.time", "comm.time", "comm.kernels", "comm.overlap", "comm.exposed")
        }
    worst = max(by_rank, key=lambda r: by_rank[r]["comm.exposed"], default=None)
    w = by_rank.get(worst, {}) if worst is not None else {}
    weight_by_path: dict[str, float] = {}
    for a in ev["comm_attribution"]:
        weight_by_path[a["path"]] = weight_by_path.get(a["path"], 0.0) + (a["weight"] or 0.0)
    comm_path = max(weight_by_path, key=lambda p: weight_by_path[p], default=None)
    skew = next((r["start_skew_median"] for r in ev["ranks"] if r["path"] == comm_path), None)
    comm_streams = {(s["rank"], s["stream"]) for s in ev["streams"] if s["comm"]}
    compute_streams = {(s["rank"], s["stream"]) for s in ev["streams"] if not s["comm"]}
    return {
        "rank": worst,
        "W": w.get("host.wall", 0.0),
        "C": w.get("comm.time", 0.0),
        "K": w.get("comm.kernels", 0.0),
        "O": w.get("comm.overlap", 0.0),
        "E": w.get("comm.exposed", 0.0),
        "gpu_time": w.get("gpu.time", 0.0),
        "comm_path": comm_path,
        "S": skew or 0.0,
        "comm_own_stream": bool(comm_streams) and not (comm_streams & compute_streams),
        "by_rank": by_rank,
    }


def decide(s: Setting, config: dict[str, Any], f: dict[str, Any], info: dict[str, Any] | None) -> Decision:
    """The rule (RULE): evidence figures ``f`` -> a change of the setting's configuration."""
    c, k, o, e, w, skew = f["C"], f["K"], f["O"], f["E"], f["W"], f["S"]
    us = 1e-3
    if k <= 0:
        return Decision("R0", {}, "no communication kernels in the evidence")
    if skew > SKEW_SHARE * e and e > 0:
        return Decision("R1", {}, f"skew-bound: start skew {skew * us:.0f} us > {SKEW_SHARE} x exposed {e * us:.0f} us")
    if k >= MANY_MSGS and c / k < SMALL_MSG_NS:
        why = f"latency-bound: {k:.0f} all-reduces per step, {c / k * us:.1f} us each on average"
        if s.workload == "ddp_train":
            return Decision("R2", {"bucket_cap_mb": config["bucket_cap_mb"] * 8}, why)
        if config["chunks"] > 1:
            return Decision("R2", {"chunks": max(1, config["chunks"] // 2)}, why)
        return Decision("R2", {}, why + "; already one chunk per layer")
    if w > 0 and e < NEGLIGIBLE * w:
        return Decision("R3", {}, f"exposed {e * us:.0f} us is {e / w:.1%} of the {w * us:.0f} us step")
    if o < SERIAL * (o + e):
        why = f"serialized: {o * us:.0f} us of {(o + e) * us:.0f} us communication overlaps compute"
        if s.workload == "ddp_train":
            grad_mb = (info or {}).get("grad_mb")
            cap = round(grad_mb / 8, 1) if grad_mb else config["bucket_cap_mb"] / 4
            return Decision("R4", {"bucket_cap_mb": max(1.0, cap)}, why + f" (gradients {grad_mb or '?'} MB)")
        return Decision("R4", {"chunks": 4 if config["chunks"] < 4 else min(8, config["chunks"] * 2)}, why)
    why = f"partly hidden: overlap {o * us:.0f} us, exposed {e * us:.0f} us ({e / max(w, 1.0):.1%} of the step)"
    if not f["comm_own_stream"]:
        return Decision("R5", {}, why + "; NCCL shares a stream with compute, so priority cannot help")
    if config.get("nccl_priority", "normal") == "high":
        return Decision("R5", {}, why + "; NCCL's stream is already high priority")
    return Decision("R5", {"nccl_priority": "high"}, why + "; NCCL runs on its own stream")


# ---------------------------------------------------------------------------------------------------------------
def judge(a: list[float], b: list[float]) -> dict[str, Any]:
    """Plain steps/s, base ``a`` against ``b``: medians, spread, change and the diff module's verdict rule."""
    if not a or not b:
        return {"verdict": "not measured"}
    ma, mb = statistics.median(a), statistics.median(b)
    out: dict[str, Any] = {
        "base_median": ma, "other_median": mb, "change": mb / ma - 1.0,
        "base_min_max": [min(a), max(a)], "other_min_max": [min(b), max(b)], "rounds": [len(a), len(b)],
    }  # fmt: skip
    if min_p(len(a), len(b)) >= ALPHA:
        out["verdict"] = "too few rounds"
        return out
    _, p = mann_whitney(a, b)
    sig = p < ALPHA and abs(mb - ma) >= MIN_CHANGE * abs(ma)
    out.update(p_value=p, verdict=("faster" if mb > ma else "slower") if sig else "same")
    return out


DIFF_SIGNALS = ("host.wall", "gpu.time", "comm.time", "comm.overlap", "comm.exposed", "comm.kernels")


def diff_rows(store: Path, base_ids: list[str], other_ids: list[str]) -> dict[str, Any]:
    st = Store(store)
    d = Report(st, base_ids).diff(Report(st, other_ids))
    rows = [r for r in d.to_dicts() if r["signal"] in DIFF_SIGNALS]
    return {"rule": d.rule, "rows": rows, "text": d.text()}


def judge_diff(store: Path, rec: dict[str, Any]) -> None:
    """``Report.diff`` of every baseline run against every changed run; prints the ``step`` rows."""
    rec["diff"] = diff_rows(store, rec["baseline"]["run_ids"], rec["changed"]["run_ids"])
    rec["diff_processes"] = [len(rec["baseline"]["run_ids"]), len(rec["changed"]["run_ids"])]
    for r in rec["diff"]["rows"]:
        if r["path"] == "step":
            ch = "-" if r["change"] is None else f"{100 * r['change']:+.1f}%"
            print(f"    diff step {r['signal']:13s} {ch:>8s} {r['verdict']}", flush=True)


def setting_of(rec: dict[str, Any]) -> Setting:
    return next(s for s in SETTINGS if s.name == rec["setting"]["name"])


# -- phases ------------------------------------------------------------------------------------------------------
def phase_baseline(s: Setting, out: Path, opts: argparse.Namespace, clock: Clock) -> dict[str, Any]:
    """A: the baseline under argus-lab, its evidence and the rule's decision."""
    base = dict(s.baseline)
    if opts.cpu:
        base.update(s.cpu, device="cpu")
    rec: dict[str, Any] = {"setting": asdict(s), "baseline_config": base}
    print(f"--- {s.name}: {s.about}", flush=True)
    rec["baseline"] = measure(s, base, "base", out, opts, clock)
    print(f"    baseline measured: exit {rec['baseline']['exit']} in {rec['baseline']['seconds']} s", flush=True)
    base_ids = rec["baseline"]["run_ids"]
    if not base_ids:
        rec["error"] = "the baseline produced no finished run (see its log)"
        return rec
    ev = read_evidence(out / "stores" / f"{s.name}.duckdb", base_ids)
    info_path = out / "info" / f"{s.name}-base.json"
    info = json.loads(info_path.read_text()) if info_path.exists() else None
    fig = summarize(ev)
    decision = decide(s, base, fig, info)
    rec.update(evidence=ev, figures=fig, info=info, decision=asdict(decision))
    print(
        f"    evidence (rank {fig['rank']}): step {fig['W'] / 1e6:.2f} ms, comm {fig['C'] / 1e6:.2f} ms in "
        f"{fig['K']:.0f} kernels, overlap {fig['O'] / 1e6:.2f} ms, exposed {fig['E'] / 1e6:.2f} ms, "
        f"skew {fig['S'] / 1e3:.1f} us on {fig['comm_path']}",
        flush=True,
    )
    print(f"    decision {decision.rule}: {decision.change or 'keep (A/A)'} -- {decision.reason}", flush=True)
    change = dict(decision.change)
    if opts.exercise_change and not change:  # dry runs: walk the changed-configuration path anyway
        change = {"bucket_cap_mb": base["bucket_cap_mb"] * 8} if s.workload == "ddp_train" else {"chunks": 2}
        rec["exercised_change"] = change
        print(f"    exercised change (dry run, not chosen by the rule): {change}", flush=True)
    rec["change"] = change
    rec["changed_config"] = {**base, **change}
    return rec


def phase_plain(recs: list[dict[str, Any]], out: Path, opts: argparse.Namespace, clock: Clock, reserve: float) -> None:
    """B: plain throughput of every decided setting, baseline against changed, in one torchrun launch.  The suite
    starts no setting later than ``reserve`` seconds before the limit (the changed argus runs still to come), but
    gets at least :data:`PLAIN_SHARE` of the time left: when time is short, both phases lose their last settings."""
    todo = [r for r in recs if "changed_config" in r]
    if not todo:
        return
    spec = {
        "rounds": opts.rounds,
        "steps": opts.plain_steps,
        "settings": [
            {"name": r["setting"]["name"], "workload": r["setting"]["workload"], "base": r["baseline_config"],
             "change": r["change"]}
            for r in todo
        ],
    }  # fmt: skip
    spec_path, result = out / "plain" / "suite-spec.json", out / "plain" / "suite.json"
    spec_path.write_text(json.dumps(spec, indent=1))
    window = max(10.0, clock.left() - reserve, PLAIN_SHARE * clock.left())
    deadline = time.time() + window
    cmd = [*launcher(), str(EXAMPLES / "ab_suite.py"), str(spec_path), "--result", str(result)]
    cmd += ["--deadline", f"{deadline:.1f}"]
    print(f"--- plain throughput, {len(todo)} setting(s) in one launch ({opts.rounds} rounds x {opts.plain_steps} "
          f"steps a side; no setting starts after {window:.0f} s)", flush=True)  # fmt: skip
    res = run_logged(cmd, out / "logs" / "plain-suite.log", min(opts.timeout * 2, clock.left()))
    clock.took("suite", res["seconds"])
    print(f"    suite: exit {res['exit']} in {res['seconds']} s", flush=True)
    got = json.loads(result.read_text()) if result.exists() else {"settings": {}}
    for r in todo:
        entry = got["settings"].get(r["setting"]["name"])
        r["plain"] = {**res, "result": entry, "environment": got.get("environment")}
        if not entry or "configs" not in entry:
            why = (entry or {}).get("skipped") or (entry or {}).get("error")
            r["throughput"] = {"verdict": why or "not measured (see the suite's log)"}
            continue
        t = judge(entry["configs"]["a"]["steps_per_s"], entry["configs"]["b"]["steps_per_s"])
        r["throughput"] = t
        if "change" in t:
            print(
                f"    {r['setting']['name']:12s} plain steps/s {t['base_median']:.2f} -> {t['other_median']:.2f} "
                f"({100 * t['change']:+.1f} %, {t['verdict']}, p={t.get('p_value', float('nan')):.2g})",
                flush=True,
            )


def phase_changed(rec: dict[str, Any], out: Path, opts: argparse.Namespace, clock: Clock) -> None:
    """C: the changed configuration under argus-lab, then Report.diff against the baseline."""
    s = setting_of(rec)
    rec["changed"] = measure(s, rec["changed_config"], "changed", out, opts, clock)
    print(f"--- {s.name}: changed measured, exit {rec['changed']['exit']} in {rec['changed']['seconds']} s", flush=True)
    store = out / "stores" / f"{s.name}.duckdb"
    if rec["changed"]["run_ids"]:
        rec["changed_evidence"] = read_evidence(store, rec["changed"]["run_ids"])
        rec["changed_figures"] = summarize(rec["changed_evidence"])
        judge_diff(store, rec)


def phase_more(rec: dict[str, Any], out: Path, opts: argparse.Namespace, clock: Clock) -> bool:
    """D: one more argus process per side (base, then changed), the diff judged again over all; False when the
    time left does not hold both."""
    name = rec["setting"]["name"]
    if not rec.get("changed", {}).get("run_ids") or not clock.fits("argus", name, launches=2):
        return False
    s = setting_of(rec)
    i = len(rec.get("base_more", [])) + 1
    for label, config, side in (
        ("base", rec["baseline_config"], "baseline"),
        ("changed", rec["changed_config"], "changed"),
    ):
        more = measure(s, config, f"{label}{i}", out, opts, clock)
        rec.setdefault(f"{label}_more", []).append(more)
        rec[side]["run_ids"] += more["run_ids"]
        print(f"--- {s.name}: {label} process {i + 1}: exit {more['exit']} in {more['seconds']} s", flush=True)
    rec.setdefault("diff_first_process", rec.get("diff"))
    judge_diff(out / "stores" / f"{s.name}.duckdb", rec)
    return True


# ---------------------------------------------------------------------------------------------------------------
def write(out: Path, study: dict[str, Any]) -> None:
    (out / "pgo.json").write_text(json.dumps(study, indent=1, default=str))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="folder for pgo.json, stores, logs")
    p.add_argument("--cpu", action="store_true", help="dry run: gloo on the CPU, tiny sizes")
    p.add_argument("--only", default="", help="comma-separated setting names")
    p.add_argument("--limit", type=float, default=270.0, help="hard wall-time limit of the whole study (seconds)")
    p.add_argument("--repeat", type=int, default=3, help="measured repetitions per argus run (plus 1 warm-up)")
    p.add_argument("--steps", type=int, default=2, help="training steps per repetition")
    p.add_argument("--rounds", type=int, default=6, help="plain rounds per configuration (6 can reach p<0.01)")
    p.add_argument("--plain-steps", type=int, default=5, help="steps per plain round")
    p.add_argument("--timeout", type=float, default=90.0, help="seconds one argus launch may take at most")
    p.add_argument("--no-more", action="store_true", help="never add argus processes per side (phase D)")
    p.add_argument("--exercise-change", action="store_true", help="apply a change even when the rule keeps")
    opts = p.parse_args(argv)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    clock = Clock(opts.limit)
    out = Path(opts.out).resolve()
    for sub in ("stores", "logs", "plain", "info"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    chosen = [s for s in SETTINGS if not opts.only or s.name in opts.only.split(",")]
    if not chosen:
        p.error(f"no setting named {opts.only!r}; the settings are: {', '.join(s.name for s in SETTINGS)}")
    study: dict[str, Any] = {
        "rule": RULE, "signals": SIGNALS, "cpu_dry_run": opts.cpu, "options": vars(opts),
        "launcher": " ".join(launcher()), "nccl_env": {"NCCL_NVLS_ENABLE": "0"}, "settings": [], "phases": {},
    }  # fmt: skip
    recs: list[dict[str, Any]] = study["settings"]

    def guarded(what: str, rec: dict[str, Any] | None, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:  # one setting's failure must not lose the others
            import traceback

            (rec if rec is not None else study).setdefault("errors", []).append(
                f"{what}: {''.join(traceback.format_exception(exc))[-2000:]}"
            )
            print(f"    {what} failed: {exc}", flush=True)
            return None

    # A: baselines and decisions
    for s in chosen:
        if not clock.fits("argus"):
            recs.append({"setting": asdict(s), "error": "the time limit was reached before its baseline"})
            print(f"--- {s.name}: left out (time limit)", flush=True)
            continue
        rec = guarded(f"{s.name} baseline", None, phase_baseline, s, out, opts, clock)
        recs.append(rec if rec is not None else {"setting": asdict(s), "error": study["errors"][-1]})
        write(out, study)
    study["phases"]["A_baseline_s"] = round(clock.elapsed(), 1)
    # C is planned before B runs: B leaves time for the changed runs (changes first, A/A pairs last)
    decided = [r for r in recs if "changed_config" in r]
    order = sorted(decided, key=lambda r: not r["change"])
    reserve_c = sum(clock.expect("argus", r["setting"]["name"]) for r in order)
    if clock.left() >= clock.expect("suite") * 0.5:
        guarded("plain suite", None, phase_plain, decided, out, opts, clock, reserve_c)
    else:
        study["phases"]["B_skipped"] = "the time limit was reached before the plain throughput"
    write(out, study)
    study["phases"]["B_plain_s"] = round(clock.elapsed(), 1)
    for rec in order:
        if not clock.fits("argus", rec["setting"]["name"]):
            rec["changed_error"] = "the time limit was reached before the changed configuration"
            print(f"--- {rec['setting']['name']}: changed configuration left out (time limit)", flush=True)
            continue
        guarded(f"{rec['setting']['name']} changed", rec, phase_changed, rec, out, opts, clock)
        write(out, study)
    study["phases"]["C_changed_s"] = round(clock.elapsed(), 1)
    # D: only while time remains
    while not opts.no_more:
        ran = False
        for rec in order:
            if clock.fits("argus", rec["setting"]["name"]) and guarded(
                f"{rec['setting']['name']} more", rec, phase_more, rec, out, opts, clock
            ):
                ran = True
                write(out, study)
        if not ran:
            break
    study["phases"]["D_more_s"] = round(clock.elapsed(), 1)
    for rec in recs:
        store = out / "stores" / f"{rec['setting']['name']}.duckdb"
        if store.exists():
            done = guarded("compact", rec, compact, store, 16_384, True)
            rec["store"] = {"path": str(store), **(asdict(done) if done else {})}
    changes = [r["throughput"]["change"] for r in recs if "change" in r.get("throughput", {})]
    study["mean_throughput_change"] = statistics.mean(changes) if changes else None
    study["seed_claim"] = "+7 % average throughput over five multi-GPU settings"
    study["seconds"] = round(clock.elapsed(), 1)
    write(out, study)
    print("\n================ PGO study (argus_lab evidence -> change -> plain throughput) ================")
    for r in recs:
        d = r.get("decision", {})
        t = r.get("throughput", {})
        ch = f"{100 * t['change']:+.1f} % ({t['verdict']})" if "change" in t else t.get("verdict", r.get("error", "-"))
        applied = json.dumps(r.get("exercised_change") or d.get("change", {}))
        applied += " (exercised)" if r.get("exercised_change") else ""
        print(f"{r['setting']['name']:13s} {d.get('rule', '-'):3s} {applied:44s} plain steps/s {ch}")
    mean = study["mean_throughput_change"]
    print(f"mean throughput change: {'-' if mean is None else f'{100 * mean:+.1f} %'} (seed: +7 %); "
          f"{study['seconds']} s of {opts.limit:.0f}; {out / 'pgo.json'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
