#!/usr/bin/env python3
"""Helpers of ``scripts/gpu/wheel_check.sh``, run with the Python of the venv the wheel was installed into, from a
folder outside the repository (so ``argus_lab`` is the installed package, not the checkout).

``wheel_check.py passes OUT.json [--jobs N] [--timeout S]``
    The planner's default pass model on this machine (live CUPTI count on a GPU host) against ncu's own
    ``profiler__replayer_passes`` for the sets of ``scripts/record_ncu_passes.py:LIVE_SETS`` (ncu runs in parallel).
``wheel_check.py check STORE OUT.json SIGNAL [SIGNAL ...]``
    What the end-to-end run stored: per requested signal, the number of region-instance values and their median;
    runs and their status.  Exit status 1 when a requested signal has no value.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _record_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record_ncu_passes", ROOT / "scripts" / "record_ncu_passes.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def passes(out: Path, jobs: int, timeout: float) -> int:
    import argus_lab
    from argus_lab.plan.passes import default_pass_model

    rec = _record_script()
    t0 = time.monotonic()
    model = default_pass_model()
    started = time.monotonic() - t0
    try:
        got = rec.compare_live(model, rec.LIVE_SETS, rec.NCU, sys.executable, timeout, jobs)
    finally:
        close = getattr(model, "close", None)
        if close is not None:
            close()
    result: dict[str, Any] = {
        "argus_lab": str(Path(argus_lab.__file__).parent),
        "model": model.source,
        "model_seconds": round(started, 2),
        "sets": got,
        "all_equal": all(r["equal"] for r in got.values()),
        "seconds": round(time.monotonic() - t0, 1),
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"pass model ({started:.1f} s to open): {model.source}")
    print(f"{'set':<12} {'cupti':>5} {'model':>5} {'ncu':>5}  equal  from")
    for name, r in got.items():
        equal = "yes" if r["equal"] else "NO"
        error = f"  ncu error: {r['ncu_error']}" if r["ncu_error"] else ""
        print(f"{name:<12} {r.get('cupti', '-')!s:>5} {r['model']!s:>5} {r['ncu']!s:>5}  {equal:5}  {r['from']}{error}")
    return 0 if result["all_equal"] else 1


def check(store: str, out: Path, signals: list[str]) -> int:
    import duckdb

    con = duckdb.connect(store, read_only=True)
    try:
        runs = con.execute("SELECT run_id, status, backends FROM runs ORDER BY started_ns").fetchall()
        values = con.execute(
            "SELECT signal, count(*), median(inclusive) FROM instance_values GROUP BY signal ORDER BY signal"
        ).fetchall()
    finally:
        con.close()
    got = {str(s): (int(n), float(m) if m is not None else None) for s, n, m in values}
    missing = [s for s in signals if got.get(s, (0, None))[0] == 0]
    result = {
        "runs": [{"run_id": r[0], "status": r[1], "backends": str(r[2])} for r in runs],
        "values": {s: {"instances": n, "median": m} for s, (n, m) in got.items()},
        "requested": signals,
        "missing": missing,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    print("runs: " + ", ".join(f"{r[0]} {r[1]} [{r[2]}]" for r in runs))
    for s in signals:
        n, m = got.get(s, (0, None))
        print(f"  {s:<55} {n:>4} values (per instance), median {m}")
    print("every requested signal has values" if not missing else f"MISSING values: {', '.join(missing)}")
    return 0 if not missing else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("passes")
    p.add_argument("out", type=Path)
    p.add_argument("--jobs", type=int, default=4)
    p.add_argument("--timeout", type=float, default=45.0)
    c = sub.add_parser("check")
    c.add_argument("store")
    c.add_argument("out", type=Path)
    c.add_argument("signals", nargs="+")
    args = parser.parse_args(argv)
    if args.cmd == "passes":
        return passes(args.out, args.jobs, args.timeout)
    return check(args.store, args.out, args.signals)


if __name__ == "__main__":
    sys.exit(main())
