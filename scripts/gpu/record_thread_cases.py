"""Record, on the H200, how the timing run attributes kernels launched by more than one thread, beside the truth.

    PYTHONPATH=/tmp/argus-site:$PWD /opt/torch/.venv/bin/python3 scripts/gpu/record_thread_cases.py OUT

For each case of ``examples/gpu/thread_cases.py`` (side_thread, train_step, two_threads, per_step_threads):

1. the truth, from torch.profiler in a separate process with no argus_lab tool (kernels per launching thread in
   one step, ``truth-<case>.json``);
2. ``argus_lab.measure(step, "gpu.time,gpu.kernels", repeat=3, warmup=1)`` with the planner's default launch
   identity into ``OUT/stores/<case>.duckdb``; for side_thread and two_threads also with the ``probes`` identity
   (``<case>-probes.duckdb``), which cannot tell the launching thread;
3. the torch.profiler-before case: CUDA events of a GEMM before torch.profiler, after it, then
   ``argus_lab.measure`` of it in the same process (another CUPTI client holds the subscriber), then CUDA events
   again (``profiler_before.json``), and the same measurement in a fresh process (``isolate=True``).

Writes ``OUT/thread-cases.json`` (every figure; also printed as a table) and the stores (compacted, for
``tests/data/gpu/threads/``).  A watchdog ends the script after ``--limit-s`` seconds (default 240).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SIGNALS = "gpu.time,gpu.kernels"
REPEAT, WARMUP = 3, 1
CASES = ("side_thread", "train_step", "two_threads", "per_step_threads")
PROBES = ("side_thread", "two_threads")
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f} s] {msg}", flush=True)


def truth(case: str, out: Path) -> dict[str, Any]:
    dest = out / f"truth-{case}.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples/gpu/thread_cases.py"), "truth", case, str(dest)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    return dict(json.loads(dest.read_text()))


DOMAINS: list[str] = []  # --domains: the cupti setting callback_domains for every run (empty: the default)


def measure_case(step: Any, store: Path, identity: str | None) -> Any:
    import argus_lab
    from argus_lab.app.measure import run_plan
    from argus_lab.run.workload import Workload

    the_plan = argus_lab.plan(SIGNALS, repeat=REPEAT, warmup=WARMUP)
    if identity is not None or DOMAINS:
        runs = []
        for r in the_plan.runs:
            settings = {k: dict(v) for k, v in r.settings.items()}
            if "cupti" in r.backends:
                if identity is not None:
                    settings.setdefault("cupti", {})["launch_identity"] = identity
                if DOMAINS and identity is None:
                    settings.setdefault("cupti", {})["callback_domains"] = DOMAINS[0]
            runs.append(replace(r, settings=settings))
        the_plan = replace(the_plan, runs=tuple(runs))
    return run_plan(the_plan, Workload.of_callable(step), str(store)).report


def summary_of(store: Path) -> dict[str, Any]:
    """Per region path: instances, gpu.kernels per measured instance, classes of the kernels, thread names; and the
    classes of every kernel of the timing run with the launching threads' names."""
    from argus_lab.store import Store

    st = Store(store)
    run = st.rows("SELECT run_id FROM runs WHERE list_contains(backends, 'cupti') ORDER BY started_ns DESC LIMIT 1")
    run_id = run[0][0]
    paths: dict[str, Any] = {}
    for path, n, names in st.rows(
        "SELECT path, count(*), list(DISTINCT thread_name ORDER BY thread_name) FROM region_instances "
        "WHERE run_id = ? AND NOT warmup GROUP BY path ORDER BY path",
        [run_id],
    ):
        kernels = st.rows(
            "SELECT v.inclusive FROM instance_values v JOIN region_instances i USING (run_id, instance_id) "
            "WHERE v.run_id = ? AND v.signal = 'gpu.kernels' AND i.path = ? AND NOT i.warmup ORDER BY i.start_ns",
            [run_id, path],
        )
        paths[path] = {"instances": n, "thread_names": names, "gpu.kernels": [k[0] for k in kernels]}
    classes = st.rows(
        "SELECT a.class, coalesce(i.path, '(none)'), count(*), sum(a.weight) FROM attributions a "
        "LEFT JOIN region_instances i ON i.run_id = a.target_run_id AND i.instance_id = a.instance_id "
        "WHERE a.run_id = ? AND a.evidence = 'kernel' GROUP BY ALL ORDER BY 2, 1",
        [run_id],
    )
    reasons = st.rows(
        "SELECT class, any_value(reason), count(*) FROM attributions WHERE run_id = ? AND evidence = 'kernel' "
        "AND class <> 'exact' GROUP BY class",
        [run_id],
    )
    threads = st.rows("SELECT thread_id, name, system_name, role FROM threads WHERE run_id = ?", [run_id])
    prov = st.rows("SELECT settings FROM provenance WHERE run_id = ? AND backend = 'cupti'", [run_id])
    settings = json.loads(prov[0][0]) if prov else {}
    signals = sorted({s for (s,) in st.rows("SELECT DISTINCT signal FROM instance_values WHERE run_id = ?", [run_id])})
    return {
        "run_id": run_id,
        "paths": paths,
        "classes": [list(c) for c in classes],
        "reasons": {c: [r, n] for c, r, n in reasons},
        "threads": [list(t) for t in threads],
        "launch_path": settings.get("launch_path"),
        "launching_threads": settings.get("launching_threads"),
        "backward_calls": settings.get("backward_calls"),
        "other_cupti_client": settings.get("other_cupti_client"),
        "detached_at_stop": settings.get("detached_at_stop"),
        "signals_shown": signals,
    }


def event_times(step: Any, blocks: int = 15, per_block: int = 200) -> float:
    """Median over ``blocks`` blocks of ``per_block`` back-to-back launches of the step's GEMM, timed by CUDA events
    around each block, in us per launch (no region recorder active).  A lasting slowdown of the process (a CUPTI
    client's callbacks at every launch) shows here as a slower launch rate; one block's median of a few launches
    was too noisy to tell (0.73x to 1.18x between recordings)."""
    import statistics

    import torch

    out = []
    for _ in range(blocks):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(per_block):
            step()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) * 1e3 / per_block)
    return statistics.median(out)


def profiler_before(out: Path, stores: Path) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from examples.gpu import thread_cases as tc

    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)

    def gemm() -> None:
        torch.mm(a, a)

    for _ in range(5):
        gemm()
    torch.cuda.synchronize()
    res: dict[str, Any] = {"events_before_profiler_us": event_times(gemm)}
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        for _ in range(3):
            gemm()
        torch.cuda.synchronize()
    res["events_after_profiler_us"] = event_times(gemm)
    step = tc.make_gemm()
    store = stores / "profiler_before.duckdb"
    rep = measure_case(step, store, None)
    res["events_after_argus_us"] = event_times(gemm)
    res["summary"] = summary_of(store)
    res["report_notes"] = [n for n in (*rep.warnings, *rep.coverage()) if "CUPTI" in n]
    res["gpu_time_us"] = gpu_time_us(rep)
    log(f"profiler before: {json.dumps({k: v for k, v in res.items() if k != 'summary'})}")
    return res


def isolated_gemm(stores: Path) -> dict[str, Any]:
    """The same GEMM measured with isolate=True from this process (which holds torch.profiler's subscriber)."""
    import argus_lab

    store = stores / "profiler_before_isolated.duckdb"
    rep = argus_lab.measure("examples.gpu.thread_cases:gemm_step", SIGNALS, repeat=REPEAT, warmup=WARMUP,
                            store=str(store), isolate=True)  # fmt: skip
    summary = summary_of(store)
    summary["gpu_time_us"] = gpu_time_us(rep)
    summary["report_notes"] = [n for n in (*rep.warnings, *rep.coverage()) if "CUPTI" in n]
    return summary


def gpu_time_us(rep: Any) -> float | None:
    """The report's median gpu.time of region ``gemm``, in us."""
    rows = [r for r in rep.regions if r.path == "gemm" and r.signal == "gpu.time"]
    return rows[0].median / 1e3 if rows else None


def compact(stores: Path) -> None:
    from argus_lab.store import Store
    from argus_lab.store.compact import compact as compact_store

    for f in sorted(stores.glob("*.duckdb")):
        try:
            compact_store(Store(f), drop_shards=True)
        except Exception as exc:  # a store that cannot be compacted travels as it is
            log(f"compact {f.name}: {exc}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--limit-s", type=float, default=240)
    ap.add_argument("--only", default="", help="comma-separated cases")
    ap.add_argument("--domains", default="", help="the cupti setting callback_domains (both | driver)")
    args = ap.parse_args()
    if args.domains:
        DOMAINS.append(args.domains)
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("watchdog")))
    signal.alarm(int(args.limit_s))
    out: Path = args.out
    stores = out / "stores"
    stores.mkdir(parents=True, exist_ok=True)
    import torch

    from examples.gpu import thread_cases as tc

    result: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cases": {}}
    cases = [c for c in CASES if not args.only or c in args.only.split(",")]
    try:
        for case in cases:
            entry: dict[str, Any] = {"truth": truth(case, out)}
            log(f"{case}: truth {entry['truth'].get('kernels_per_thread', entry['truth'])}")
            step = tc.CASES[case]()
            measure_case(step, stores / f"{case}.duckdb", None)
            entry["default"] = summary_of(stores / f"{case}.duckdb")
            log(f"{case}: default {json.dumps(entry['default']['paths'])} classes {entry['default']['classes']}")
            if case in PROBES:
                measure_case(step, stores / f"{case}-probes.duckdb", "probes")
                entry["probes"] = summary_of(stores / f"{case}-probes.duckdb")
                log(f"{case}: probes {json.dumps(entry['probes']['paths'])} classes {entry['probes']['classes']}")
            result["cases"][case] = entry
            (out / "thread-cases.json").write_text(json.dumps(result, indent=1, default=str))
        if not args.only or "profiler_before" in args.only:
            result["profiler_before"] = profiler_before(out, stores)
            result["profiler_before_isolated"] = isolated_gemm(stores)
            log(f"isolated: {result['profiler_before_isolated']['launch_path']} "
                f"gpu.time {result['profiler_before_isolated'].get('gpu_time_us')} us")  # fmt: skip
    except Exception as exc:  # what was recorded before stays
        import traceback

        result["error"] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    finally:
        signal.alarm(0)
        (out / "thread-cases.json").write_text(json.dumps(result, indent=1, default=str))
    compact(stores)
    log("done")
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
