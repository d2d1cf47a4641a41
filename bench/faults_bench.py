"""Reliability bounds (issue 16): glob matching, the planner on thousands of counters, memory per recorded instance,
and the peak memory of ``show`` and ``export`` over a store of a million region instances.

Usage::

    .venv/bin/python bench/faults_bench.py [--instances 1000000] [--out DIR] [--timeout 300]
        [--only glob,planner,recording,store,measure] [--repeat 3]

``--only measure``: the in-process ``argus_lab.measure`` of the large store alone (the measured process's peak); with
``--repeat N`` each case of the store runs N times in fresh processes (a new store each time) and its figures are
the medians, with the range beside them.

Every figure is taken in a fresh Python process (its own peak RSS, ``VmHWM``), with the ``argus_lab`` that this
interpreter imports (run it with ``PYTHONPATH`` pointing at another checkout to measure that one).  Prints a
markdown section for docs/benchmarks.md; a case that does not finish within ``--timeout`` seconds is reported as
such, and one that raises is reported with its exception.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import argus_lab

ROOT = Path(argus_lab.__file__).resolve().parents[1]

PROBE = """
import json, resource, sys, time, traceback
def peak_mib():  # this process's own peak (ru_maxrss of a child starts at its parent's peak)
    return next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM:')) / 1024
out = {{}}
t0 = time.perf_counter()
try:
{body}
except BaseException as exc:
    out["error"] = f"{{type(exc).__name__}}: {{str(exc).splitlines()[0][:120] if str(exc) else ''}}"
out.setdefault("seconds", time.perf_counter() - t0)
out["peak_rss_mb"] = peak_mib()
print("RESULT " + json.dumps(out))
"""


def probe(body: str, timeout: float) -> dict[str, Any]:
    """Run ``body`` (Python, may set ``out[...]``) in a fresh process; its result, time and peak RSS."""
    code = PROBE.format(body=textwrap.indent(textwrap.dedent(body), "    "))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        return {"error": (proc.stderr.strip().splitlines() or ["no result"])[-1][:160]}
    return json.loads(line[len("RESULT ") :])


def shown(r: dict[str, Any], key: str = "seconds", unit: str = "s") -> str:
    if "timeout" in r:
        return f"> {r['timeout']:.0f} s (stopped)"
    if key not in r:
        return r.get("error", "-")
    v = r[key]
    return f"{v * 1e3:.3g} ms" if unit == "s" and v < 1 else f"{v:.3g} {unit}"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}"


def recording(n: int, timeout: float, figures: dict[str, Any]) -> list[str]:
    """Bytes a recorded instance costs while recording (the recorder alone, tracemalloc)."""
    body = f"""
    import tracemalloc, argus_lab
    from argus_lab.regions import Recorder
    a, b = argus_lab.region("a"), argus_lab.region("b")
    rec = Recorder("mem", cpu_clock=False)
    tracemalloc.start(); before = tracemalloc.get_traced_memory()[0]
    with rec:
        for _ in range({n // 2}):
            with a, b:
                pass
    out["bytes_per_instance"] = (tracemalloc.get_traced_memory()[0] - before) / rec.count()
    """
    r = probe(body, timeout)
    figures["recording"] = r
    per = f"{r['bytes_per_instance']:.0f} bytes" if "bytes_per_instance" in r else shown(r)
    return ["", f"Recording {n:,} instances: {per} per instance (tracemalloc, while recording).", ""]


def store_cases(n: int, args: argparse.Namespace, figures: dict[str, Any], measure_only: bool) -> list[str]:
    """A store of ``n`` instances made by one in-process ``argus_lab.measure`` (``a{b}`` x n/2, host.wall and
    host.cpu), then ``show``, ``export`` and ``join`` of it, each in a fresh process, ``--repeat`` times."""
    folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="argus-faults-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / f"big-{n}.duckdb"
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(max(args.repeat, 1)):
        for extra in folder.glob(store.name + "*"):
            if extra.is_file():
                extra.unlink()
        body = f"""
        import argus_lab
        a, b = argus_lab.region("a"), argus_lab.region("b")
        def work():
            for _ in range({n // 2}):
                with a:
                    with b:
                        pass
        argus_lab.measure(work, signals="host.wall,host.cpu", repeat=1, warmup=0, store={str(store)!r})
        """
        runs.setdefault("measure (record, store, join)", []).append(probe(body, args.timeout * 2))
        cli = "from argus_lab.faces.cli import main; import contextlib, io\n"
        for name, argv_ in (
            ("show", ["show", "--store", str(store)]),
            ("export", ["export", "--store", str(store), str(folder / "report.html")]),
            ("join again", ["join", "--store", str(store)]),
        ):
            if measure_only:
                continue
            code = cli + f"with contextlib.redirect_stdout(io.StringIO()):\n    out['status'] = main({argv_!r})"
            runs.setdefault(name, []).append(probe(code, args.timeout))
    steps = {name: median_of(rs) for name, rs in runs.items()}
    figures["store"] = {"instances": n, "repeat": args.repeat, **steps, "runs": runs}
    lines = [f"| {n:,} region instances | seconds | peak RSS |", "| --- | --- | --- |"]
    for name, r in steps.items():
        rss = "-" if "peak_rss_mb" not in r else f"{r['peak_rss_mb']:.0f} MB{r.get('range', '')}"
        lines.append(f"| {name} | {shown(r)} | {rss} |")
    return lines


def median_of(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The median run's seconds and peak (each its own median), with the peaks' range when there are several."""
    ok = [r for r in results if "peak_rss_mb" in r and "error" not in r and "timeout" not in r]
    if len(ok) < len(results) or not ok:
        return next(r for r in results if r not in ok)
    peaks = sorted(r["peak_rss_mb"] for r in ok)
    out = {"seconds": statistics.median(r["seconds"] for r in ok), "peak_rss_mb": statistics.median(peaks)}
    if len(ok) > 1:
        out["range"] = f" ({peaks[0]:.0f}-{peaks[-1]:.0f}, {len(ok)} runs)"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=1_000_000, help="region instances of the large store")
    ap.add_argument("--out", default="", help="folder for the large store (default: a temporary folder)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a case may take")
    ap.add_argument("--json", default="", help="also write the figures to this JSON file")
    ap.add_argument("--only", default="", help="comma-separated cases: glob, planner, recording, store, measure")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each case of the store (medians)")
    args = ap.parse_args(argv)
    only = {c.strip() for c in args.only.split(",") if c.strip()}
    if only and "store" in only:
        only.add("measure")
    figures: dict[str, Any] = {"argus_lab": str(ROOT), "machine": machine()}
    lines = [f"argus_lab from {ROOT}; {machine()}", ""]

    # 1. glob matching: *a*a*a*a*a*a*b against a name of n 'a's (no match: the worst case of a backtracking regex)
    if not only or "glob" in only:
        lines += ["| glob `*a*a*a*a*a*a*b` against | seconds |", "| --- | --- |"]
    for n in (24, 32, 100, 10_000) if not only or "glob" in only else ():
        body = f"""
        from argus_lab.plan.scope import Scope
        s = Scope.parse("*a*a*a*a*a*a*b")
        t = time.perf_counter(); assert not s.matches_path("a" * {n}); out["seconds"] = time.perf_counter() - t
        """
        r = probe(body, min(args.timeout, 120.0))
        figures[f"glob_{n}"] = r
        lines.append(f"| {n} characters | {shown(r)} |")

    # 2. the planner on thousands of hw: signals
    if not only or "planner" in only:
        lines += ["", "| planner, `hw:` signals | result | seconds | peak RSS |", "| --- | --- | --- | --- |"]
    for n in (1_000, 3_000) if not only or "planner" in only else ():
        body = f"""
        import argus_lab
        t = time.perf_counter()
        # SYNTHETIC counter names (no chip has them): the name check would refuse them; the split is under test
        names = ",".join(f"hw:sm__inst_{{k}}.sum" for k in range({n}))
        p = argus_lab.plan(names, allow_unknown_counters=True)
        out["seconds"] = time.perf_counter() - t
        out["runs"] = len(p.runs); out["minimal"] = p.minimal
        """
        r = probe(body, args.timeout)
        figures[f"plan_{n}"] = r
        what = r.get("error") or ("stopped" if "timeout" in r else f"{r['runs']} runs, minimal={r['minimal']}")
        rss = "-" if "peak_rss_mb" not in r else f"{r['peak_rss_mb']:.0f} MB"
        lines.append(f"| {n:,} | {what} | {shown(r)} | {rss} |")

    # 3. memory per recorded instance (the recorder alone, tracemalloc)
    n = args.instances
    if not only or "recording" in only:
        lines += recording(n, args.timeout, figures)
    # 4. a store of n instances: measure, join, show, export (each a fresh process)
    if not only or "measure" in only:
        lines += store_cases(n, args, figures, measure_only=bool(only) and "store" not in only)
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
