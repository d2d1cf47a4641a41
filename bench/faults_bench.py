"""Reliability bounds (issue 16): glob matching, the planner on thousands of counters, memory per recorded instance,
and the peak memory of ``show`` and ``export`` over a store of a million region instances.

Usage::

    .venv/bin/python bench/faults_bench.py [--instances 1000000] [--out DIR] [--timeout 300]

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=1_000_000, help="region instances of the large store")
    ap.add_argument("--out", default="", help="folder for the large store (default: a temporary folder)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a case may take")
    ap.add_argument("--json", default="", help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    figures: dict[str, Any] = {"argus_lab": str(ROOT), "machine": machine()}
    lines = [f"argus_lab from {ROOT}; {machine()}", ""]

    # 1. glob matching: *a*a*a*a*a*a*b against a name of n 'a's (no match: the worst case of a backtracking regex)
    lines += ["| glob `*a*a*a*a*a*a*b` against | seconds |", "| --- | --- |"]
    for n in (24, 32, 100, 10_000):
        body = f"""
        from argus_lab.plan.scope import Scope
        s = Scope.parse("*a*a*a*a*a*a*b")
        t = time.perf_counter(); assert not s.matches_path("a" * {n}); out["seconds"] = time.perf_counter() - t
        """
        r = probe(body, min(args.timeout, 120.0))
        figures[f"glob_{n}"] = r
        lines.append(f"| {n} characters | {shown(r)} |")

    # 2. the planner on thousands of hw: signals
    lines += ["", "| planner, `hw:` signals | result | seconds | peak RSS |", "| --- | --- | --- | --- |"]
    for n in (1_000, 3_000):
        body = f"""
        import argus_lab
        t = time.perf_counter()
        p = argus_lab.plan(",".join(f"hw:sm__inst_{{k}}.sum" for k in range({n})))
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
    r = probe(body, args.timeout)
    figures["recording"] = r
    per = f"{r['bytes_per_instance']:.0f} bytes" if "bytes_per_instance" in r else shown(r)
    lines += ["", f"Recording {n:,} instances: {per} per instance (tracemalloc, while recording).", ""]

    # 4. a store of n instances: measure, join, show, export (each a fresh process)
    folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="argus-faults-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / f"big-{n}.duckdb"
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
    steps = {"measure (record, store, join)": probe(body, args.timeout * 2)}
    cli = "from argus_lab.faces.cli import main; import contextlib, io\n"
    for name, argv_ in (
        ("show", ["show", "--store", str(store)]),
        ("export", ["export", "--store", str(store), str(folder / "report.html")]),
        ("join again", ["join", "--store", str(store)]),
    ):
        steps[name] = probe(
            cli + f"with contextlib.redirect_stdout(io.StringIO()):\n    out['status'] = main({argv_!r})", args.timeout
        )
    figures["store"] = {"instances": n, **steps}
    lines += [f"| {n:,} region instances | seconds | peak RSS |", "| --- | --- | --- |"]
    for name, r in steps.items():
        rss = "-" if "peak_rss_mb" not in r else f"{r['peak_rss_mb']:.0f} MB"
        lines.append(f"| {name} | {shown(r)} | {rss} |")
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
