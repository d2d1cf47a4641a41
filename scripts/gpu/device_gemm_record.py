"""Record issue 18's H200 evidence: the persistent GEMM measured with gpu.time (clean) + dev.* (instrumented).

    PYTHONPATH=/tmp/argus-site:$PWD /opt/torch/.venv/bin/python3 scripts/gpu/device_gemm_record.py DEST
    PYTHONPATH=$PWD python scripts/gpu/device_gemm_record.py DEST --dry-run     # no GPU: the CPU parts only

``scripts/gpu/device_gemm.sh OUT`` runs it with DEST = OUT/issue18.  One host region ``gemm_step`` around one launch of
``examples/gpu/persistent_gemm.py`` (3072 x 3072 x 1024 bf16, k-step marks: load / mma / epilogue; 576 tiles on
132 SMs, so 48 SMs run a fifth tile: a visible tail) is measured by ``argus_lab.measure(step, "gpu.time,dev.*",
repeat=3, warmup=1)``: the planner's clean CUPTI run and its instrumented device run, joined.  Writes into DEST:
``device_gemm_h200.duckdb`` (the store), ``report.txt``, ``report.json``, ``summary.json`` (figures and checks,
including the clean/instrumented kernel times measured independently with CUDA events after the measurement).

``--dry-run`` replaces the GPU by the SYNTHETIC stand-ins of ``tests/device_cases.py`` (a recorded phase-A probe
buffer copied into the probe, made-up kernel records) and runs every step after the measurement as on the H200.
A watchdog ends the script after 50 s; what was stored before stays.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SHAPE = (3072, 3072, 1024)
SIGNALS = "gpu.time,dev.*"
REPEAT, WARMUP = 3, 1
STORE = "device_gemm_h200.duckdb"
WATCHDOG_S = 50


def _measure_gpu(store: Path, summary: dict[str, Any]) -> Any:
    import torch
    import triton

    from argus_lab.app.measure import measure
    from examples.gpu import persistent_gemm as pg

    summary["versions"] = {"torch": torch.__version__, "triton": triton.__version__,
                           "device": torch.cuda.get_device_name(0)}  # fmt: skip
    m, n, k = SHAPE
    cfg = pg.GemmConfig(marks="kstep")
    step = pg.GemmStep(m, n, k, cfg)
    summary["config"] = {**cfg.__dict__, "m": m, "n": n, "k": k, "grid": step.grid, "events_per_cta": step.events,
                         "tiles": pg.num_tiles(m, n, cfg), "sms": step.sms}  # fmt: skip
    ref = torch.matmul(step.a, step.b).float()
    scale = float(ref.abs().max())
    clean = step()  # outside any measurement: the clean variant, compiled now
    torch.cuda.synchronize()
    summary["rel_err_clean"] = float((clean.float() - ref).abs().max()) / scale
    print(
        f"[{time.monotonic() - T0:5.1f} s] clean variant compiled, rel err {summary['rel_err_clean']:.2e}", flush=True
    )
    report = measure(step, SIGNALS, repeat=REPEAT, warmup=WARMUP, store=str(store))
    torch.cuda.synchronize()
    summary["rel_err_instrumented"] = float((step.out.float() - ref).abs().max()) / scale
    print(f"[{time.monotonic() - T0:5.1f} s] measured", flush=True)
    # the two variants timed with CUDA events, outside argus_lab (no CUPTI): an independent view of the overhead
    from argus_lab.backends.device.collector import ProbeBuffer

    probe = ProbeBuffer.allocate(step.grid, step.events, device=step.a.device)

    def timed(p: Any) -> list[float]:
        out = []
        for _ in range(10):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            pg.launch(step.a, step.b, cfg, probe=p, num_sms=step.sms, out=step.out)
            e.record()
            e.synchronize()
            out.append(s.elapsed_time(e) * 1e6)
        return out

    timed(None)
    summary["cuda_events_ns"] = {"clean": timed(None), "instrumented": timed(probe.tensor)}
    return report


def _measure_dry(store: Path, summary: dict[str, Any]) -> Any:
    from tests.device_cases import measure, raw

    summary["versions"] = {"dry_run": "SYNTHETIC kernel records; phase-A H200 probe buffer raw_tail3072_kstep"}
    return measure(str(store), raw("tail3072_kstep"), signals=SIGNALS, repeat=REPEAT, warmup=WARMUP).report


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def summarize(report: Any, summary: dict[str, Any], store: Path) -> None:
    """Figures and checks of the recorded report (the CPU part: runs the same with --dry-run)."""
    from argus_lab.report.device import LAUNCH

    summary["runs"] = [{"run_id": r.run_id, "status": r.status, "backends": list(r.backends), "cause": r.cause[:300]}
                       for r in report.runs]  # fmt: skip
    launches = report.store.rows(
        "SELECT class, count(*) FROM attributions WHERE evidence = 'device_launch' AND run_id IN "
        "(SELECT unnest(?::VARCHAR[])) GROUP BY ALL",
        [list(report.run_ids)],
    )
    summary["device_launches_by_class"] = {c: int(n) for c, n in launches}
    names = report.store.rows(
        "SELECT DISTINCT k.name FROM kernels k JOIN runs r USING (run_id) WHERE r.variant = 'instrumented' "
        "AND k.run_id IN (SELECT unnest(?::VARCHAR[]))",
        [list(report.run_ids)],
    )
    summary["kernel_names_instrumented_run"] = sorted(r[0] for r in names)[:10]
    summary["device"] = [
        {"region": d.region, "signal": d.signal, "median": d.median, "p10": d.spread_p10, "p90": d.spread_p90,
         "unit": d.unit, "launches": d.launches, "attribution": d.attribution}
        for d in report.device
    ]  # fmt: skip
    summary["overhead"] = [o.__dict__ for o in report.device_overhead]
    ev = summary.get("cuda_events_ns")
    if ev:
        summary["cuda_events_ratio"] = _median(ev["instrumented"]) / _median(ev["clean"])
    summary["coverage"] = report.coverage()
    summary["store_bytes"] = store.stat().st_size if store.exists() else 0
    tail = next((d for d in report.device if d.region == LAUNCH and d.signal == "dev.tail"), None)
    exact = summary["device_launches_by_class"].get("exact", 0)
    total = sum(summary["device_launches_by_class"].values())
    runs = ", ".join(f"{r['status']} ({','.join(r['backends'])})" for r in summary["runs"])
    print(f"runs: {runs}")
    print(f"device launches attributed exactly (kernel record + host instance agree): {exact}/{total}")
    print(f"CUPTI kernel names in the instrumented run: {summary['kernel_names_instrumented_run']}")
    if tail is not None:
        print(f"dev.tail median {tail.median / 1e3:.1f} us over {tail.launches} measured launch(es)")
    for o in report.device_overhead:
        print(f"overhead {o.kernel or '-'}: clean {o.clean_median_ns / 1e3:.1f} us, instrumented "
              f"{o.instrumented_median_ns / 1e3:.1f} us, ratio {o.ratio_median:.3f} {o.note}")  # fmt: skip
    if "cuda_events_ratio" in summary:
        print(f"CUDA events (no tool): instrumented / clean = {summary['cuda_events_ratio']:.3f}")
    print(f"store {store.name}: {summary['store_bytes'] / 1e6:.2f} MB")


def broken(summary: dict[str, Any]) -> int:
    """1 when the check failed (a device launch not exact, or no finite overhead ratio), else 0, so that the
    ``device`` part of scripts/gpu-check fails on its own; the reason is printed."""
    import math

    by_class = summary.get("device_launches_by_class", {})
    ratios = [o.get("ratio_median") for o in summary.get("overhead", [])]
    problems = []
    if not by_class or set(by_class) != {"exact"}:
        problems.append(f"device launches not all exact: {by_class}")
    if not ratios or not all(isinstance(r, float) and math.isfinite(r) for r in ratios):
        problems.append(f"no finite instrumented-variant overhead: {ratios}")
    for p in problems:
        print(f"FAILED: {p}", file=sys.stderr)
    return 1 if problems else 0


def compact(store: Path) -> None:
    """Rewrite the store without the free blocks its writes and the join left (``COPY FROM DATABASE``)."""
    import duckdb

    tmp = store.with_name(store.stem + ".compact.duckdb")
    if tmp.exists():
        tmp.unlink()
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{store}' AS src (READ_ONLY)")
        con.execute(f"ATTACH '{tmp}' AS dst")
        con.execute("COPY FROM DATABASE src TO dst")
    finally:
        con.close()
    tmp.replace(store)


def main(dest: Path, dry: bool) -> int:
    dest.mkdir(parents=True, exist_ok=True)
    store = dest / STORE
    for p in (store, store.with_name(store.name + ".lock"), store.with_name(store.name + ".wal")):
        if p.exists():
            p.unlink()
    summary: dict[str, Any] = {"dry_run": dry, "signals": SIGNALS, "repeat": REPEAT, "warmup": WARMUP}
    rc = 0
    try:
        report = _measure_dry(store, summary) if dry else _measure_gpu(store, summary)
        (dest / "report.txt").write_text(report.text())
        (dest / "report.json").write_text(report.to_json(indent=1))
        print(report.device_table())
        before = store.stat().st_size
        compact(store)
        summary["store_bytes_before_compaction"] = before
        summarize(report, summary, store)
        rc = broken(summary)
    except BaseException as exc:  # the watchdog, or anything else: keep what was measured and say what happened
        summary["error"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]
        print(summary["error"], file=sys.stderr)
        rc = 1
    summary["seconds"] = round(time.monotonic() - T0, 2)
    (dest / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(f"[{summary['seconds']:5.1f} s] wrote {dest}/summary.json")
    return rc


T0 = time.monotonic()

if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--dry-run"]
    if len(args) != 1:
        sys.exit(__doc__)

    def _watchdog(*_: object) -> None:
        raise TimeoutError(f"watchdog: {WATCHDOG_S} s")

    signal.signal(signal.SIGALRM, _watchdog)
    signal.alarm(WATCHDOG_S)
    code = main(Path(args[0]), "--dry-run" in sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)
