"""Join and region summary at scale, on SYNTHETIC records generated in bulk inside DuckDB.

One run of ``--reps`` repetitions of ``step{ layer x L { attn; mlp } }`` with ``--kernels`` kernel records in
all, spread evenly over the leaf instances (``attn``/``mlp``), on two streams.  A share of the kernels carries no
external correlation id and is launched from a second thread while the step is open (``--other-thread``,
autograd-style: temporal), and a share is launched outside every region (``--outside``).  NVML-like power samples
every 10 ms (``--no-samples``: none).  Everything is written through the store's real schema, then timed:

* ``join``: :func:`argus_lab.join.attribute_request` (wall and CPU seconds: every attribution, instance values with
  inclusive and exclusive sums, samples split over instances, instance matching);
* ``region summary``: the Report's region table over the instance values (:data:`argus_lab.report.sql.REGIONS`);
* ``report``: a whole :class:`argus_lab.report.Report` (all tables).

Run: ``.venv/bin/python bench/join_bench.py --kernels 10000000``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

from argus_lab import join
from argus_lab.report import Report
from argus_lab.report import rows as rt
from argus_lab.store import Store

T0 = 1_795_938_194_000_000_000


def generate(
    store: Store, kernels: int, reps: int, layers: int, other: float, outside: float, samples: bool = True
) -> dict[str, int]:
    """Write the synthetic run with set-based SQL (no Python loop over records)."""
    leaves = reps * layers * 2
    per_leaf = max(1, kernels // leaves)
    leaf_ns = per_leaf * 12_000  # 10 us kernels, 2 us gaps
    layer_ns = 2 * leaf_ns + 4_000
    step_ns = layers * layer_ns + 10_000
    run = "r-bench"
    store.write(
        {
            "runs": {
                "run_id": [run],
                "plan_index": [0],
                "backends": [["host", "cupti", "nvml"]],
                "status": ["ok"],
                "repetitions": [reps],
                "warmup": [0],
                "command": ["bench/join_bench.py (synthetic)"],
                "versions": ["{}"],
                "env": ["{}"],
                "settings": ["{}"],
            },
            "provenance": {
                "provenance_id": [f"{run}:cupti", f"{run}:host", f"{run}:nvml"],
                "run_id": [run] * 3,
                "backend": ["cupti", "host", "nvml"],
                "backend_version": ["synthetic"] * 3,
                "settings": ["{}"] * 3,
                "clocks": ["{}"] * 3,
                "timestamps": ["synthetic"] * 3,
            },
        }
    )
    p = {"run": run, "reps": reps, "layers": layers, "per": per_leaf, "leaf": leaf_ns, "layer": layer_ns}
    p.update({"step": step_ns, "t0": T0})
    with store.connect(write=True) as con:
        # instance ids: step = rep * S + 1, layer = step + 1 + l * 3, attn = layer + 1, mlp = layer + 2
        con.execute(
            """
            INSERT INTO region_instances (run_id, instance_id, region_id, path, instance_index, parent_instance_id,
                                          repetition, pid, thread_id, start_ns, end_ns, cpu_ns, error, warmup)
            WITH s AS (SELECT r AS rep, r * (1 + 3 * $layers) + 1 AS iid, $t0 + r * ($step + 100000) AS t
                       FROM range($reps) t(r)),
            l AS (SELECT s.rep, s.iid AS parent, s.iid + 1 + 3 * l AS iid, s.t + 5000 + l * $layer AS t, l
                  FROM s, range($layers) t(l))
            SELECT $run, iid, 'step', 'step', rep, 0, rep, 1, 1, t, t + $step, $step // 2, '', false FROM s
            UNION ALL
            SELECT $run, iid, 'layer', 'step/layer', rep * $layers + l, parent, rep, 1, 1, t, t + $layer - 1000,
                   0, '', false FROM l
            UNION ALL
            SELECT $run, iid + 1, 'attn', 'step/layer/attn', rep * $layers + l, iid, rep, 1, 1, t + 1000,
                   t + 1000 + $leaf, 0, '', false FROM l
            UNION ALL
            SELECT $run, iid + 2, 'mlp', 'step/layer/mlp', rep * $layers + l, iid, rep, 1, 1, t + 2000 + $leaf,
                   t + 2000 + 2 * $leaf, 0, '', false FROM l
            """,
            {k: v for k, v in p.items() if k != "per"},
        )
        con.execute(
            """
            INSERT INTO metrics (run_id, instance_id, signal, value, unit, attribution, backend, provenance_id)
            SELECT run_id, instance_id, 'host.wall', end_ns - start_ns, 'ns', 'exact', 'host', run_id || ':host'
            FROM region_instances WHERE run_id = $run
            """,
            {"run": run},
        )
        # kernels: per leaf instance `per` launches; kernel j of a leaf starts 12 us after kernel j-1
        con.execute(
            """
            INSERT INTO kernels (run_id, kernel_key, correlation_id, instance_id, name, start_ns, end_ns, device_id,
                                 context_id, stream_id, graph_id, kind, bytes, thread_id, api_start_ns, api_end_ns)
            WITH leaf AS (
                SELECT instance_id AS iid, start_ns, row_number() OVER (ORDER BY instance_id) AS n, path
                FROM region_instances WHERE run_id = $run AND path <> 'step' AND path <> 'step/layer'
            ), k AS (
                SELECT leaf.*, j, leaf.n * $per + j AS corr, hash(leaf.n * $per + j) % 1000 AS h
                FROM leaf, range($per) t(j)
            )
            SELECT $run, '0/1/' || corr || '/0', corr,
                   CASE WHEN h < $other_pm + $outside_pm THEN NULL ELSE iid END,
                   CASE WHEN path = 'step/layer/attn' THEN 'attn_kernel_' || (j % 4) ELSE 'mlp_kernel_' || (j % 3) END,
                   start_ns + 500 + j * 12000 + CASE WHEN h < $outside_pm THEN $shift ELSE 0 END,
                   start_ns + 10500 + j * 12000 + CASE WHEN h < $outside_pm THEN $shift ELSE 0 END,
                   0, 1, 7 + j % 2, 0, 'kernel', 0,
                   CASE WHEN h < $other_pm + $outside_pm THEN 2 ELSE 1 END,
                   start_ns + 100 + j * 12000 + CASE WHEN h < $outside_pm THEN $shift ELSE 0 END,
                   start_ns + 400 + j * 12000 + CASE WHEN h < $outside_pm THEN $shift ELSE 0 END
            FROM k
            """,
            {
                **{k: p[k] for k in ("run", "per")},
                "other_pm": int(other * 1000),
                "outside_pm": int(outside * 1000),
                "shift": reps * (step_ns + 100_000) + 1_000_000_000,  # after the last repetition
            },
        )
        con.execute(
            """
            INSERT INTO samples (run_id, device_id, signal, t_ns, value, unit)
            SELECT $run, 0, 'sys.power', t, 300 + (t // 10000000) % 50, 'W'
            FROM range($t0, $t0 + $reps::BIGINT * ($step + 100000), 10000000) t(t)
            WHERE $samples
            """,
            {**{k: p[k] for k in ("run", "t0", "reps", "step")}, "samples": samples},
        )
        counts = con.execute(
            "SELECT (SELECT count(*) FROM kernels), (SELECT count(*) FROM region_instances), "
            "(SELECT count(*) FROM samples)"
        ).fetchone()
    assert counts is not None
    return {"kernels": counts[0], "instances": counts[1], "samples": counts[2]}


def _cpu() -> float:
    """CPU seconds of this process (all its threads): the join's work, whatever else the machine runs."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=10_000_000)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--layers", type=int, default=1000)
    ap.add_argument("--other-thread", type=float, default=0.02, help="share of kernels launched from thread 2")
    ap.add_argument("--outside", type=float, default=0.005, help="share of kernels outside every region")
    ap.add_argument("--no-samples", action="store_true", help="leave out the NVML-like power samples")
    ap.add_argument("--store", default="", help="store path (default: a temporary folder)")
    ap.add_argument("--json", default="", help="also write the results as JSON here")
    args = ap.parse_args()
    folder = Path(args.store).parent if args.store else Path(tempfile.mkdtemp(prefix="argus-join-bench-"))
    path = Path(args.store) if args.store else folder / "bench.duckdb"
    if path.exists():
        os.remove(path)
    store = Store(path)
    t = time.perf_counter()
    sizes = generate(store, args.kernels, args.reps, args.layers, args.other_thread, args.outside, not args.no_samples)
    gen_s = time.perf_counter() - t
    load = os.getloadavg()[0]
    t, c = time.perf_counter(), _cpu()
    summary = join.attribute_request(store, ["r-bench"])
    join_s, join_cpu = time.perf_counter() - t, _cpu() - c
    t = time.perf_counter()
    regions = rt.read_summary(store, ["r-bench"]).regions
    summary_s = time.perf_counter() - t
    t = time.perf_counter()
    rep = Report(store, ["r-bench"])
    report_s = time.perf_counter() - t
    t = time.perf_counter()
    kernel_rows = len(rep.kernels)
    kernels_s = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = {
        **sizes,
        "generate_s": round(gen_s, 2),
        "join_s": round(join_s, 2),
        "join_cpu_s": round(join_cpu, 2),
        "load_avg_before_join": round(load, 2),
        "kernels_per_s": round(sizes["kernels"] / join_s),
        "region_summary_s": round(summary_s, 2),
        "report_s": round(report_s, 2),
        "kernel_table_s": round(kernels_s, 2),
        "kernel_table_rows": kernel_rows,
        "peak_rss_mib": round(rss),
        "store_mib": round(path.stat().st_size / 2**20),
        "attributed": summary.counts,
        "regions": len(regions),
        "report_regions": len(rep.regions),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(out, indent=1))
    print(rep.region_table())
    print(rep.attribution_table())
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
