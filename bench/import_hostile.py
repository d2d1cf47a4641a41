"""Importing SYNTHETIC hostile torch.profiler traces: 10^6 annotation ranges on one thread that overlap, repeat or
nest deeply, each imported in a fresh process with its time and peak RSS (``VmHWM``).

Shapes (``--events`` ranges each, Kineto's layout: ``ts``/``dur`` in microseconds with three decimals relative to
``baseTimeNanoseconds``, one ``record_function`` range per line):

* ``overlapping``: ``ts = 10 i, dur = 25``: each range starts inside the previous one and ends after it (before the
  fix: nested each under the previous; 10^4 took 1.1 GB, 10^6 were killed by the OOM killer at 22.5 GB);
* ``identical``: every range with the same start and end (each encloses the next: nested to the depth cap);
* ``nested``: range ``i`` from ``i`` to ``2 n - i`` microseconds (a chain of ``n`` proper nestings).

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/import_hostile.py --events 1000000``; prints one JSON line per shape.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

BASE_NS = 1_795_938_194_000_000_000

CHILD = """
import json, sys, time, resource
t = time.perf_counter()
import argus_lab
from argus_lab.store import Store
store = Store(sys.argv[2])
res = argus_lab.import_trace(sys.argv[1], store)
seconds = time.perf_counter() - t
depth, path_chars, n = store.rows(
    "SELECT max(len(path) - len(replace(path, '/', '')) + 1), max(len(path)), count(*) FROM region_instances"
)[0]
peak = next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM:')) / 1024
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": round(seconds, 2), "cpu_s": round(r.ru_utime + r.ru_stime, 2),
                  "peak_rss_mib": round(peak), "instances": n, "max_depth": depth, "max_path_chars": path_chars,
                  "improper": res.imported.settings["annotation_nesting_improper"],
                  "capped": res.imported.settings.get("annotation_nesting_capped")}))
"""


def ranges(shape: str, n: int) -> list[tuple[float, float]]:
    """(ts, dur) in microseconds of the ``n`` ranges of ``shape``."""
    if shape == "overlapping":
        return [(10.0 * i, 25.0) for i in range(n)]
    if shape == "identical":
        return [(5.0, 100.0)] * n
    if shape == "nested":
        return [(float(i), float(2 * (n - i))) for i in range(n)]
    raise ValueError(shape)


def write_trace(path: Path, shape: str, n: int) -> None:
    """SYNTHETIC: ``n`` ranges of ``shape`` as a Kineto trace (one event per line)."""
    with path.open("w") as f:
        f.write(f'{{\n  "schemaVersion": 1,\n  "baseTimeNanoseconds": {BASE_NS},\n  "traceEvents": [\n')
        rows = ranges(shape, n)
        for i, (ts, dur) in enumerate(rows):
            sep = "," if i + 1 < len(rows) else ""
            f.write(
                f'  {{"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, '
                f'"ts": {ts:.3f}, "dur": {dur:.3f}, "args": {{}}}}{sep}\n'
            )
        f.write("  ]\n}\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--shapes", default="overlapping,identical,nested")
    ap.add_argument("--timeout", type=float, default=1800.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="argus-hostile-") as tmp:
        for shape in args.shapes.split(","):
            trace = Path(tmp) / f"{shape}.json"
            write_trace(trace, shape, args.events)
            store = Path(tmp) / f"{shape}.duckdb"
            res = subprocess.run(
                [sys.executable, "-c", CHILD, str(trace), str(store)],
                capture_output=True, text=True, timeout=args.timeout, check=False,
            )  # fmt: skip
            out = json.loads(res.stdout) if res.returncode == 0 else {"error": res.stderr.strip()[-400:]}
            print(json.dumps({"shape": shape, "events": args.events, "mib": trace.stat().st_size >> 20, **out}))
            trace.unlink()
            for f in Path(tmp).glob(f"{shape}.duckdb*"):
                f.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
