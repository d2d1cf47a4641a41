"""What the join's kernel part costs at the least, beside the join itself, on the same SYNTHETIC store.

Issue 19 asks for 1 M kernels joined into 100 k instances in under 1 s.  This benchmark asks how much of the join's
time the kernel sums could ever lose: on a copy of the store :mod:`join_bench` generates, it runs the smallest
statements that give the same kernel numbers (exact kernels only: ``gpu.time``, ``gpu.kernels``, ``gpu.span`` and
``gpu.launch_overhead`` per instance, inclusive over the ancestor closure; the exclusive value of ``gpu.time``) and
writes them as ``instance_values`` (stored narrow: numbers per series of the store's one run) with one commit and a
checkpoint; then, on another copy, the real :func:`argus_lab.join.attribute_request` (every attribution, samples,
signatures, host values).  Alternating ``--reps`` times, each timed in wall seconds.  The floor's rows are not the
join's (no temporal kernels, no weights by class, no samples, no exclusive value but ``gpu.time``'s): it is a lower
bound on one part, not an alternative join.

    .venv/bin/python bench/join_floor.py [--kernels 1000000] [--layers 666] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import duckdb

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from argus_lab import join  # noqa: E402
from argus_lab.store import Store  # noqa: E402
from bench.join_bench import generate  # noqa: E402

T = TypeVar("T")

FLOOR: tuple[tuple[str, str], ...] = (
    (
        "instances",
        "CREATE TEMP TABLE f_inst AS SELECT run_id, instance_id, coalesce(parent_instance_id, 0) AS parent "
        "FROM region_instances",
    ),
    (
        "ancestors",
        """CREATE TEMP TABLE f_anc AS
        WITH RECURSIVE a(run_id, instance_id, ancestor) AS (
            SELECT run_id, instance_id, instance_id FROM f_inst
            UNION ALL
            SELECT a.run_id, a.instance_id, f.parent FROM a JOIN f_inst f
              ON f.run_id = a.run_id AND f.instance_id = a.ancestor WHERE f.parent <> 0
        ) SELECT * FROM a""",
    ),
    (
        "exclusive sums",
        "CREATE TEMP TABLE f_x AS SELECT run_id, instance_id, count(*) AS n, sum(end_ns - start_ns) AS dur, "
        "min(start_ns) AS first_ns, max(end_ns) AS last_ns, sum(api_end_ns - api_start_ns) AS call_ns "
        "FROM kernels WHERE instance_id IS NOT NULL GROUP BY ALL",
    ),
    (
        "inclusive sums",
        """CREATE TEMP TABLE f_in AS
        SELECT a.run_id, a.ancestor AS instance_id, sum(x.n) AS n, sum(x.dur) AS dur, min(x.first_ns) AS first_ns,
               max(x.last_ns) AS last_ns, sum(x.call_ns) AS call_ns,
               sum(x.dur) FILTER (WHERE a.instance_id = a.ancestor) AS x_dur
        FROM f_x x JOIN f_anc a USING (run_id, instance_id) GROUP BY ALL""",
    ),
    (
        "insert values",
        """INSERT INTO instance_value_rows (series, instance_id, inclusive, exclusive, evidence, w_exact, w_ordinal,
                                           w_temporal, w_ambiguous, w_mismatch)
        SELECT s.series, instance_id,
               CASE s.signal WHEN 'gpu.time' THEN dur WHEN 'gpu.kernels' THEN n WHEN 'gpu.span' THEN last_ns - first_ns
                    ELSE call_ns END,
               coalesce(x_dur, 0), n, n, 0, 0, 0, 0
        FROM f_in, (VALUES (1, 'gpu.time'), (2, 'gpu.kernels'), (3, 'gpu.span'), (4, 'gpu.launch_overhead'))
                   s(series, signal)""",
    ),
    (
        "insert series",
        """INSERT INTO value_series (series, run_id, signal, unit, backend, provenance_id)
        SELECT s.series, r.run_id, s.signal, 'ns', 'cupti', r.run_id || ':cupti'
        FROM (SELECT DISTINCT run_id FROM f_inst) r,
             (VALUES (1, 'gpu.time'), (2, 'gpu.kernels'), (3, 'gpu.span'), (4, 'gpu.launch_overhead'))
             s(series, signal)""",
    ),
    ("commit", "COMMIT"),
    ("checkpoint", "CHECKPOINT"),
)
"""The floor's statements, in order, each timed (BEGIN comes first)."""


def floor(path: Path) -> dict[str, float]:
    """Seconds of each floor statement on the store at ``path`` (which it changes)."""
    con = duckdb.connect(str(path))
    try:
        con.execute("BEGIN")
        out: dict[str, float] = {}
        for label, sql in FLOOR:
            t = time.perf_counter()
            con.execute(sql)
            out[label] = time.perf_counter() - t
        out["total"] = sum(out.values())
        return out
    finally:
        con.close()


def real_join(path: Path) -> float:
    """Wall seconds of the join on the store at ``path``, connection opened and closed included."""
    store = Store(path)
    with store.connect(write=True):
        pass  # the schema check of a first write, as the bench's generation did it
    t = time.perf_counter()
    join.attribute_request(store, ["r-bench"])
    return time.perf_counter() - t


def on_copy(base: Path, measure: Callable[[Path], T]) -> T:
    """``measure`` run on a copy of the store at ``base`` (removed afterwards)."""
    work = base.with_name(f"work-{base.name}")
    shutil.copy(base, work)
    try:
        return measure(work)
    finally:
        os.remove(work)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--layers", type=int, default=666)
    ap.add_argument("--runs", type=int, default=50, help="repetitions of the synthetic workload (join_bench --reps)")
    ap.add_argument("--reps", type=int, default=3, help="alternating floor / join measurements")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error(f"--reps must be at least 1, got {args.reps}")
    folder = Path(tempfile.mkdtemp(prefix="argus-join-floor-"))
    try:
        base = folder / "base.duckdb"
        sizes = generate(Store(base), args.kernels, args.runs, args.layers, 0.02, 0.005, True)
        floors: list[dict[str, float]] = []
        joins: list[float] = []
        for _ in range(args.reps):  # alternating
            floors.append(on_copy(base, floor))
            joins.append(on_copy(base, real_join))
        med = {k: statistics.median(f[k] for f in floors) for k in floors[0]}
        out = {
            **sizes,
            "load_avg": round(os.getloadavg()[0], 2),
            "floor_s": {k: round(v, 3) for k, v in med.items()},
            "floor_total_s": [round(f["total"], 3) for f in floors],
            "join_s": [round(j, 3) for j in joins],
        }
        text = json.dumps(out, indent=1)
        print(text)
        if args.json is not None:
            args.json.write_text(text)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
