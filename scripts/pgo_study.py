#!/usr/bin/env python3
"""Profile-guided overlap tuning on two GPUs: argus_lab's evidence picks a change, before/after throughput says
whether it helped (the seed's cross-level PGO, issue 17).

    python scripts/pgo_study.py OUT                 # two GPUs (nvidia-h200-x2), about 6-7 minutes
    python scripts/pgo_study.py OUT --cpu           # dry run on the CPU: gloo, tiny sizes, host signals only
    python scripts/pgo_study.py OUT --only ddp-s-b1000,tp-m-c1

For each setting (:data:`SETTINGS`): measure the baseline with ``argus-lab run --launch torchrun(2 ranks)``;
read the evidence back from the store through the Python API (comm.exposed / comm.overlap / comm.time /
comm.kernels per region and rank, the attribution classes of the NCCL kernels, the streams they ran on, the
cross-rank skew and clock offsets, the bucket order inside ``backward``); apply :func:`decide` (the written rule,
:data:`RULE`); measure the changed configuration the same way (a second request in the same store); measure the
plain (no-tool) steps/s of both configurations in one torchrun process, alternating rounds A B A B; compare with
``Report.diff`` and with a Mann-Whitney test over the plain rounds.  A second pass, while the time budget lasts,
adds argus-lab processes per side (``--processes``, default 2) and judges the diff again over all of them: with
one process per side the diff's spread misses process-level noise.  Everything lands in ``OUT/pgo.json``; the
stores in ``OUT/stores/<setting>.duckdb``.  Every subprocess has a timeout; a setting that fails is recorded with
its cause and the study goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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

from argus_lab.diff import ALPHA, MIN_CHANGE, mann_whitney, min_p  # noqa: E402

from argus_lab.report import Report  # noqa: E402
from argus_lab.store import Store  # noqa: E402

SIGNALS = "gpu.time,gpu.kernels,comm.time,comm.kernels,comm.overlap,comm.exposed,host.wall"
COMM_PATTERN = r"(?i)nccl|onerankreduce"  # the join's definition (argus_lab.comm_sql.COMM_KERNEL_PATTERN)


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
        "data parallel, same model, one bucket holding every gradient (communication after backward)",
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
        "data parallel, same model, 1 MB buckets (hundreds of small all-reduces per step)",
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


# ---------------------------------------------------------------------------------------------------------------
def compact_store(path: Path, block_size: int = 16384) -> dict[str, Any]:
    """Rewrite a store with small DuckDB blocks (the default 256 KiB block makes even an empty store of this
    schema ~5 MB); drop its shard folder once every run in it is stored.  Sizes before and after."""
    import duckdb

    tmp = path.with_suffix(".compact.duckdb")
    tmp.unlink(missing_ok=True)
    before = path.stat().st_size
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{tmp}' AS dst (BLOCK_SIZE {block_size})")
        con.execute(f"ATTACH '{path}' AS src (READ_ONLY)")
        con.execute("COPY FROM DATABASE src TO dst")
        statuses = [r[0] for r in con.execute("SELECT status FROM src.runs").fetchall()]
    finally:
        con.close()
    tmp.replace(path)
    shards = Path(str(path) + ".runs")
    dropped = bool(statuses) and all(s in ("ok", "partial") for s in statuses) and shards.is_dir()
    if dropped:
        shutil.rmtree(shards)
    return {"bytes_before": before, "bytes": path.stat().st_size, "shards_dropped": dropped}


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


def run_logged(cmd: list[str], log: Path, timeout: float) -> dict[str, Any]:
    """Run ``cmd`` with a timeout, output to ``log``; exit status, seconds and the command."""
    t0 = time.perf_counter()
    with log.open("w") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        try:
            rc = subprocess.run(cmd, env=child_env(), stdout=fh, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
            fh.write(f"\n[pgo_study] timed out after {timeout:.0f} s\n")
    return {"command": " ".join(cmd), "exit": rc, "seconds": round(time.perf_counter() - t0, 1), "log": str(log)}


def measure(s: Setting, config: dict[str, Any], label: str, out: Path, opts: argparse.Namespace) -> dict[str, Any]:
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
    res = run_logged(cmd, out / "logs" / f"{s.name}-{label}.log", opts.timeout)
    runs = [r for r in Store(store).rows("SELECT run_id, status, cause FROM runs ORDER BY started_ns")]
    res["run_ids"] = [r[0] for r in runs if r[0] not in before]
    res["status"] = {r[0]: r[1] for r in runs if r[0] not in before}
    res["causes"] = {r[0]: (r[2] or "")[:400] for r in runs if r[0] not in before and r[2]}
    return res


def plain(
    s: Setting, base: dict[str, Any], change: dict[str, Any], out: Path, opts: argparse.Namespace
) -> dict[str, Any]:
    """No tool: steps/s of the baseline (a) and the changed configuration (b), alternating rounds in one process."""
    result = out / "plain" / f"{s.name}.json"
    cmd = [
        *launcher(), str(EXAMPLES / f"{s.workload}.py"), *cli_args(base), "--steps", str(opts.plain_steps),
        "--plain-rounds", str(opts.rounds), "--ab", json.dumps(change), "--result", str(result),
    ]  # fmt: skip
    res = run_logged(cmd, out / "logs" / f"{s.name}-plain.log", opts.timeout)
    if result.exists():
        res["result"] = json.loads(result.read_text())
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
    for rank, path, signal, med, n, we, wt, wa in st.rows(PER_RANK, [run_ids]):
        entry = {"median": med, "n": n}
        if (we or 0) + (wt or 0) + (wa or 0) > 0:
            entry["weights"] = {"exact": we, "temporal": wt, "ambiguous": wa}
        per_rank.setdefault(str(rank), {}).setdefault(path, {})[signal] = entry
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
    if e < NEGLIGIBLE * w:
        return Decision("R3", {}, f"exposed {e * us:.0f} us is {e / w:.1%} of the {w * us:.0f} us step")
    if o < SERIAL * (o + e):
        why = f"serialized: {o * us:.0f} us of {(o + e) * us:.0f} us communication overlaps compute"
        if s.workload == "ddp_train":
            grad_mb = (info or {}).get("grad_mb")
            cap = round(grad_mb / 8, 1) if grad_mb else config["bucket_cap_mb"] / 4
            return Decision("R4", {"bucket_cap_mb": max(1.0, cap)}, why + f" (gradients {grad_mb or '?'} MB)")
        return Decision("R4", {"chunks": 4 if config["chunks"] < 4 else min(8, config["chunks"] * 2)}, why)
    why = f"partly hidden: overlap {o * us:.0f} us, exposed {e * us:.0f} us ({e / w:.1%} of the step)"
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


def run_setting(s: Setting, out: Path, opts: argparse.Namespace, deadline: float) -> dict[str, Any]:
    base = dict(s.baseline)
    if opts.cpu:
        base.update(s.cpu, device="cpu")
    rec: dict[str, Any] = {"setting": asdict(s), "baseline_config": base}
    print(f"--- {s.name}: {s.about}", flush=True)
    rec["baseline"] = measure(s, base, "base", out, opts)
    print(f"    baseline measured: exit {rec['baseline']['exit']} in {rec['baseline']['seconds']} s", flush=True)
    store = out / "stores" / f"{s.name}.duckdb"
    base_ids = rec["baseline"]["run_ids"]
    if not base_ids:
        rec["error"] = "the baseline produced no run (see its log)"
        return rec
    ev = read_evidence(store, base_ids)
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
    after = {**base, **change}
    rec["changed_config"] = after
    if time.perf_counter() > deadline:
        rec["error"] = "time budget spent before the changed configuration"
        return rec
    rec["changed"] = measure(s, after, "changed", out, opts)
    print(f"    changed measured: exit {rec['changed']['exit']} in {rec['changed']['seconds']} s", flush=True)
    if rec["changed"]["run_ids"]:
        rec["changed_evidence"] = read_evidence(store, rec["changed"]["run_ids"])
        rec["changed_figures"] = summarize(rec["changed_evidence"])
        judge_diff(store, rec)
    if time.perf_counter() > deadline:
        rec["error"] = "time budget spent before the plain throughput"
        return rec
    rec["plain"] = plain(s, base, change, out, opts)
    res = rec["plain"].get("result")
    if res:
        a = res["configs"]["a"]["steps_per_s"]
        b = res["configs"].get("b", {}).get("steps_per_s", [])
        rec["throughput"] = judge(a, b)
        t = rec["throughput"]
        if "change" in t:
            print(
                f"    plain steps/s {t['base_median']:.2f} -> {t['other_median']:.2f} ({100 * t['change']:+.1f} %, "
                f"{t['verdict']}, p={t.get('p_value', float('nan')):.2g})",
                flush=True,
            )
    else:
        print(f"    plain run: exit {rec['plain']['exit']} (no result; see {rec['plain']['log']})", flush=True)
    return rec


def judge_diff(store: Path, rec: dict[str, Any]) -> None:
    """``Report.diff`` of every baseline run against every changed run; prints the ``step`` rows."""
    rec["diff"] = diff_rows(store, rec["baseline"]["run_ids"], rec["changed"]["run_ids"])
    rec["diff_processes"] = [len(rec["baseline"]["run_ids"]), len(rec["changed"]["run_ids"])]
    for r in rec["diff"]["rows"]:
        if r["path"] == "step":
            ch = "-" if r["change"] is None else f"{100 * r['change']:+.1f}%"
            print(f"    diff step {r['signal']:13s} {ch:>8s} {r['verdict']}", flush=True)


def more_processes(s: Setting, rec: dict[str, Any], out: Path, opts: argparse.Namespace, deadline: float) -> None:
    """Second pass: more argus-lab processes per side (base, changed, base, changed ...), then the diff again over
    all of them, so that process-level noise (placement, clocks) is inside the spread the diff judges against."""
    if not rec.get("changed", {}).get("run_ids"):
        return
    print(f"--- {s.name}: more processes per side", flush=True)
    first = rec.get("diff")
    for i in range(1, opts.processes):
        for label, config in (("base", rec["baseline_config"]), ("changed", rec["changed_config"])):
            if time.perf_counter() > deadline:
                rec["note"] = f"time budget spent during process {i + 1} per side"
                break
            more = measure(s, config, f"{label}{i}", out, opts)
            rec.setdefault(f"{label}_more", []).append(more)
            rec["baseline" if label == "base" else "changed"]["run_ids"] += more["run_ids"]
            print(f"    {label} process {i + 1}: exit {more['exit']} in {more['seconds']} s", flush=True)
    if first is not None:
        rec["diff_first_process"] = first
    judge_diff(out / "stores" / f"{s.name}.duckdb", rec)


def finish_store(s: Setting, out: Path, rec: dict[str, Any]) -> None:
    store = out / "stores" / f"{s.name}.duckdb"
    if store.exists():
        rec["store"] = {"path": str(store), **compact_store(store)}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="folder for pgo.json, stores, logs")
    p.add_argument("--cpu", action="store_true", help="dry run: gloo on the CPU, tiny sizes")
    p.add_argument("--only", default="", help="comma-separated setting names")
    p.add_argument("--repeat", type=int, default=3, help="measured repetitions per argus run")
    p.add_argument("--steps", type=int, default=4, help="training steps per repetition")
    p.add_argument("--rounds", type=int, default=6, help="plain rounds per configuration (6 can reach p<0.01)")
    p.add_argument("--plain-steps", type=int, default=10, help="steps per plain round")
    p.add_argument("--timeout", type=float, default=150.0, help="seconds per subprocess")
    p.add_argument("--budget", type=float, default=380.0, help="no new measurement starts after this many seconds")
    p.add_argument("--processes", type=int, default=2, help="argus-lab processes per configuration (second pass)")
    p.add_argument("--exercise-change", action="store_true", help="apply a change even when the rule keeps")
    opts = p.parse_args(argv)
    out = Path(opts.out).resolve()
    for sub in ("stores", "logs", "plain", "info"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    chosen = [s for s in SETTINGS if not opts.only or s.name in opts.only.split(",")]
    if not chosen:
        p.error(f"no setting named {opts.only!r}; the settings are: {', '.join(s.name for s in SETTINGS)}")
    t0 = time.perf_counter()
    deadline = t0 + opts.budget
    study: dict[str, Any] = {
        "rule": RULE, "signals": SIGNALS, "cpu_dry_run": opts.cpu, "options": vars(opts),
        "launcher": " ".join(launcher()), "nccl_env": {"NCCL_NVLS_ENABLE": "0"}, "settings": [],
    }  # fmt: skip
    for s in chosen:
        if time.perf_counter() > deadline:
            study["settings"].append({"setting": asdict(s), "error": "time budget spent before this setting"})
            print(f"--- {s.name}: skipped (budget)", flush=True)
            continue
        try:
            study["settings"].append(run_setting(s, out, opts, deadline))
        except Exception as exc:  # one setting's failure must not lose the others
            import traceback

            study["settings"].append({"setting": asdict(s), "error": "".join(traceback.format_exception(exc))})
            print(f"    {s.name} failed: {exc}", flush=True)
        (out / "pgo.json").write_text(json.dumps(study, indent=1, default=str))
    for rec in study["settings"]:  # second pass, while time is left; then the stores are compacted
        s = next(x for x in chosen if x.name == rec["setting"]["name"])
        try:
            if opts.processes > 1 and time.perf_counter() < deadline:
                more_processes(s, rec, out, opts, deadline)
        except Exception as exc:
            rec["note"] = f"second pass failed: {exc}"
            print(f"    {s.name} second pass failed: {exc}", flush=True)
        finish_store(s, out, rec)
        (out / "pgo.json").write_text(json.dumps(study, indent=1, default=str))
    changes = [r["throughput"]["change"] for r in study["settings"] if "change" in r.get("throughput", {})]
    study["mean_throughput_change"] = statistics.mean(changes) if changes else None
    study["seed_claim"] = "+7 % average throughput over five multi-GPU settings"
    study["seconds"] = round(time.perf_counter() - t0, 1)
    (out / "pgo.json").write_text(json.dumps(study, indent=1, default=str))
    print("\n================ PGO study (argus_lab evidence -> change -> plain throughput) ================")
    for r in study["settings"]:
        name = r["setting"]["name"]
        d = r.get("decision", {})
        t = r.get("throughput", {})
        ch = f"{100 * t['change']:+.1f} % ({t['verdict']})" if "change" in t else t.get("verdict", r.get("error", "-"))
        applied = json.dumps(r.get("exercised_change") or d.get("change", {}))
        applied += " (exercised)" if r.get("exercised_change") else ""
        print(f"{name:13s} {d.get('rule', '-'):3s} {applied:44s} plain steps/s {ch}")
    mean = study["mean_throughput_change"]
    print(f"mean throughput change: {'-' if mean is None else f'{100 * mean:+.1f} %'} (seed: +7 %); "
          f"{study['seconds']} s; {out / 'pgo.json'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
