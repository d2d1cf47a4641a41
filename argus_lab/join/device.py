"""Device regions in the join: each instrumented launch under its kernel record and host region instance, its
per-launch values, and the instrumented variant's overhead.

Inputs (the device backend's raw evidence, :mod:`argus_lab.backends.device.collector`): ``device_launches`` (per
probe: kernel name, thread, the instance it was asked in, CLOCK_REALTIME ns once ready), ``device_programs`` and
``device_intervals`` (what each buffer held, on the GPU's ``%globaltimer``), and the CUPTI kernel records of the
same run.  :func:`derive` runs inside the join's transaction, after the kernels are attributed and the runs'
instances matched to the reference (timing) run, and writes:

``attributions`` (evidence ``device_launch``)
    The launch that took a probe is the first launch of that kernel (a kernel record whose name is the kernel's
    name, or starts with it) on the probe's thread after the probe was ready (and before the thread's next
    probe).  ``exact``: that launch's kernel record carried the external correlation id of the instance the probe
    was asked in (one instance, found two independent ways: the CUPTI correlation of the launch and the host's
    region stack); ``mismatch``: they differ (kept under the kernel's instance, with both in the reason);
    ``temporal``: no kernel record (no CUPTI in the run) or one without a recorded instance, placed by the
    instance the probe was asked in; ``unattributed``: asked outside every region.

``device_values``
    Per launch and device region: ``dev.time`` (a region's time per CTA, the sum of its occurrences there:
    median over CTAs with p10, p90, min, max; ``n`` = CTAs) and ``dev.count`` (occurrences in the launch; p10..max
    over CTAs).  Per launch (``region_id`` NULL): ``dev.sm_busy`` (per SM the union of its CTAs' spans: median
    over SMs, p10..max), ``dev.tail`` (last SM end minus median SM end), ``dev.span`` (first CTA begin to last
    CTA end), ``dev.unmarked`` (per CTA its span minus its top-level regions: median over CTAs).  Every row names
    the host instance and kernel record the launch nests under and its attribution class.

``device_sm``
    Per launch and SM: programs, first begin, last end, busy time, and how long before the last SM it finished.

``instance_values``
    Per host region instance (inclusive of nested instances; exclusive = its own launches): ``dev.span`` and
    ``dev.tail`` summed over its exact and temporal launches, backend ``device``.

``provenance`` (backend ``device.overhead``, one row per instrumented run)
    Instrumented against clean kernel time of the same launch: the instrumented launch's kernel record and the
    clean (reference) run's kernel of the same name, at the same ordinal among that name's launches, in the
    instance matched to the launch's instance (same path, repetition and index); warm-up instances left out.

Times of the values are GPU ns (``%globaltimer``; durations from each CTA's cycles at its measured clock rate).
Quantiles are DuckDB's ``quantile_cont`` (linear interpolation, as numpy's default percentile).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from argus_lab.join.attribution_sql import ANCESTORS_IF_MISSING

if TYPE_CHECKING:
    import duckdb

SIGNALS: tuple[str, ...] = ("dev.time", "dev.count", "dev.sm_busy", "dev.tail", "dev.span", "dev.unmarked")
"""The dev.* signals the join derives (``device_values``); ``dev.span`` and ``dev.tail`` also per host instance."""

OVERHEAD_BACKEND = "device.overhead"
"""The ``provenance.backend`` of the overhead record of an instrumented run."""

_MAX_OVERHEAD_ROWS = 2000

IN_RUNS = "run_id IN (SELECT run_id FROM _j_runs)"

HAS_LAUNCHES = f"SELECT count(*) FROM device_launches WHERE {IN_RUNS}"

DELETE: tuple[str, ...] = (
    f"DELETE FROM device_values WHERE {IN_RUNS}",
    f"DELETE FROM device_sm WHERE {IN_RUNS}",
    f"DELETE FROM provenance WHERE {IN_RUNS} AND backend = '{OVERHEAD_BACKEND}'",
)

LAUNCHES = f"""
CREATE OR REPLACE TEMP TABLE _j_dl AS
WITH p AS (
    SELECT d.run_id, d.launch, d.kernel, d.thread_id, coalesce(d.rank, 0) AS rank,
           coalesce(d.instance_id, 0) AS asked_in, d.probe_ns,
           lead(d.probe_ns) OVER (PARTITION BY d.run_id, coalesce(d.rank, 0), d.thread_id % 4294967296
                                  ORDER BY d.probe_ns, d.launch) AS next_ns
    FROM device_launches d WHERE d.{IN_RUNS}
), c AS (
    SELECT p.run_id, p.launch, k.key, k.correlation_id, k.carried, k.start_ns, k.end_ns,
           row_number() OVER (PARTITION BY p.run_id, p.launch
                              ORDER BY k.q, k.name <> p.kernel, k.correlation_id) AS rn
    FROM p JOIN _j_k k
      ON k.run_id = p.run_id AND k.rank = p.rank AND k.kind = 'kernel' AND starts_with(k.name, p.kernel)
     AND k.q >= p.probe_ns
     AND (p.next_ns IS NULL OR k.q < p.next_ns) AND k.thread_id % 4294967296 = p.thread_id % 4294967296
)
SELECT p.run_id, p.launch, p.kernel, p.asked_in, c.key AS kernel_key, c.correlation_id, c.start_ns AS k_start_ns,
       c.end_ns AS k_end_ns,
       CASE WHEN ki.instance_id IS NOT NULL THEN c.carried WHEN ai.instance_id IS NOT NULL THEN p.asked_in END
           AS instance_id,
       CASE WHEN ki.instance_id IS NOT NULL AND c.carried = p.asked_in THEN 'exact'
            WHEN ki.instance_id IS NOT NULL THEN 'mismatch'
            WHEN ai.instance_id IS NOT NULL THEN 'temporal'
            ELSE 'unattributed' END AS class,
       CASE WHEN ki.instance_id IS NOT NULL AND c.carried = p.asked_in
                THEN 'the launch of ' || p.kernel || ' that took the probe (correlation id ' || c.correlation_id
                     || ') carried this instance''s external correlation id; the probe was asked in it too'
            WHEN ki.instance_id IS NOT NULL
                THEN 'the launch of ' || p.kernel || ' that took the probe (correlation id ' || c.correlation_id
                     || ') carried instance ' || c.carried || ', but the probe was asked in instance '
                     || p.asked_in || ': call argus_lab.device.probe() right before the launch, in the same region'
            WHEN ai.instance_id IS NOT NULL AND c.key IS NOT NULL
                THEN 'the launch of ' || p.kernel || ' that took the probe (correlation id ' || c.correlation_id
                     || ') carried no recorded instance; placed by the instance the probe was asked in'
            WHEN ai.instance_id IS NOT NULL
                THEN 'no kernel record of ' || p.kernel || ' followed the probe on its thread (no CUPTI records in '
                     || 'this run, or the kernel was not launched with it); placed by the instance the probe was '
                     || 'asked in'
            ELSE 'the probe was asked outside every recorded region' END AS reason
FROM p
LEFT JOIN c ON c.run_id = p.run_id AND c.launch = p.launch AND c.rn = 1
LEFT JOIN _j_inst ki ON ki.run_id = p.run_id AND ki.instance_id = c.carried
LEFT JOIN _j_inst ai ON ai.run_id = p.run_id AND ai.instance_id = p.asked_in
"""

ATTRIBUTIONS = """
INSERT INTO attribution_rows (run_id, evidence, evidence_id, instance_id, class, weight, reason, target_run_id)
SELECT run_id, 'device_launch', 'launch:' || launch, instance_id, class, 1.0, reason,
       CASE WHEN instance_id IS NULL THEN NULL ELSE run_id END
FROM _j_dl
"""

# per launch and SM: the union of its programs' spans (programs sorted by begin; a program starting after every
# earlier one ended opens a new island); programs that never ran dm.end (t_end 0) are left out
SM = f"""
INSERT INTO device_sm (run_id, launch, sm, programs, begin_ns, end_ns, busy_ns, idle_tail_ns)
WITH p AS (
    SELECT run_id, launch, cta, sm, t_begin_ns AS b, t_end_ns AS e FROM device_programs
    WHERE {IN_RUNS} AND t_end_ns > 0
), o AS (
    SELECT *, max(e) OVER (PARTITION BY run_id, launch, sm ORDER BY b, cta
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_e
    FROM p
), isl AS (
    SELECT *, sum(CASE WHEN prev_e IS NULL OR b > prev_e THEN 1 ELSE 0 END)
                  OVER (PARTITION BY run_id, launch, sm ORDER BY b, cta ROWS UNBOUNDED PRECEDING) AS island
    FROM o
), busy AS (
    SELECT run_id, launch, sm, sum(e - b) AS busy_ns
    FROM (SELECT run_id, launch, sm, island, min(b) AS b, max(e) AS e FROM isl GROUP BY ALL) GROUP BY ALL
), agg AS (
    SELECT run_id, launch, sm, count(*) AS programs, min(b) AS begin_ns, max(e) AS end_ns FROM p GROUP BY ALL
)
SELECT a.run_id, a.launch, a.sm, a.programs, a.begin_ns, a.end_ns, busy.busy_ns,
       max(a.end_ns) OVER (PARTITION BY a.run_id, a.launch) - a.end_ns
FROM agg a JOIN busy USING (run_id, launch, sm)
"""

VALUES = f"""
INSERT INTO device_values (run_id, launch, instance_id, kernel_key, region_id, signal, value, p10, p90, min, max, n,
                           unit, attribution, provenance_id)
WITH per_cta AS (
    SELECT run_id, launch, region_id, cta, sum(dur_ns) AS t, count(*) AS c
    FROM device_intervals WHERE {IN_RUNS} GROUP BY ALL
), top AS (  -- per CTA, the time inside top-level regions
    SELECT run_id, launch, cta, sum(dur_ns) AS t FROM device_intervals WHERE {IN_RUNS} AND depth = 0 GROUP BY ALL
), unmarked AS (
    SELECT p.run_id, p.launch, (p.t_end_ns - p.t_begin_ns) - coalesce(top.t, 0) AS u
    FROM device_programs p LEFT JOIN top USING (run_id, launch, cta)
    WHERE p.{IN_RUNS} AND p.t_end_ns > 0
), v AS (
    SELECT run_id, launch, region_id, 'dev.time' AS signal, quantile_cont(t, 0.5) AS value,
           quantile_cont(t, 0.1) AS p10, quantile_cont(t, 0.9) AS p90, min(t) AS lo, max(t) AS hi, count(*) AS n,
           'ns' AS unit
    FROM per_cta GROUP BY ALL
    UNION ALL
    SELECT run_id, launch, region_id, 'dev.count', sum(c), quantile_cont(c, 0.1), quantile_cont(c, 0.9), min(c),
           max(c), count(*), 'count'
    FROM per_cta GROUP BY ALL
    UNION ALL
    SELECT run_id, launch, NULL, 'dev.sm_busy', quantile_cont(busy_ns, 0.5), quantile_cont(busy_ns, 0.1),
           quantile_cont(busy_ns, 0.9), min(busy_ns), max(busy_ns), count(*), 'ns'
    FROM device_sm WHERE {IN_RUNS} GROUP BY ALL
    UNION ALL
    SELECT run_id, launch, NULL, 'dev.tail', max(e) - quantile_cont(e, 0.5), NULL, NULL, NULL, NULL, count(*), 'ns'
    FROM (  -- ends relative to the launch's first begin: epoch ns as doubles would round to 256 ns
        SELECT run_id, launch, end_ns - min(begin_ns) OVER (PARTITION BY run_id, launch) AS e
        FROM device_sm WHERE {IN_RUNS})
    GROUP BY ALL
    UNION ALL
    SELECT run_id, launch, NULL, 'dev.span', max(t_end_ns) - min(t_begin_ns), NULL, NULL, NULL, NULL, count(*), 'ns'
    FROM device_programs WHERE {IN_RUNS} AND t_end_ns > 0 GROUP BY ALL
    UNION ALL
    SELECT run_id, launch, NULL, 'dev.unmarked', quantile_cont(u, 0.5), quantile_cont(u, 0.1), quantile_cont(u, 0.9),
           min(u), max(u), count(*), 'ns'
    FROM unmarked GROUP BY ALL
)
SELECT v.run_id, v.launch, dl.instance_id, dl.kernel_key, v.region_id, v.signal, v.value, v.p10, v.p90, v.lo, v.hi,
       v.n, v.unit, coalesce(dl.class, 'unattributed'), pv.provenance_id
FROM v
LEFT JOIN _j_dl dl ON dl.run_id = v.run_id AND dl.launch = v.launch
LEFT JOIN (SELECT run_id, min(provenance_id) AS provenance_id FROM provenance WHERE backend = 'device' GROUP BY ALL)
    pv ON pv.run_id = v.run_id
"""

# per host instance: dev.span and dev.tail summed over its launches (exact and temporal ones give values;
# mismatched ones count as evidence only), inclusive over nested instances
INSTANCE_VALUES = """
INSERT INTO _j_iv (run_id, instance_id, signal, inclusive, exclusive, unit, evidence, w_exact, w_ordinal,
                 w_temporal, w_ambiguous, w_mismatch, backend, provenance_id)
WITH own AS (
    SELECT d.run_id, d.instance_id, d.signal, any_value(d.provenance_id) AS provenance_id,
           sum(d.value) FILTER (WHERE d.attribution IN ('exact', 'temporal')) AS s,
           count(*) AS n, count(*) FILTER (WHERE d.attribution = 'exact') AS n_exact,
           count(*) FILTER (WHERE d.attribution = 'temporal') AS n_temp,
           count(*) FILTER (WHERE d.attribution = 'mismatch') AS n_mis
    FROM device_values d
    WHERE d.run_id IN (SELECT run_id FROM _j_runs) AND d.signal IN ('dev.span', 'dev.tail')
      AND d.instance_id IS NOT NULL
    GROUP BY ALL
), inc AS (
    SELECT a.run_id, a.ancestor_id AS instance_id, o.signal, any_value(o.provenance_id) AS provenance_id,
           sum(o.s) AS s, sum(o.n) AS n, sum(o.n_exact) AS n_exact, sum(o.n_temp) AS n_temp, sum(o.n_mis) AS n_mis
    FROM own o JOIN _j_anc a ON a.run_id = o.run_id AND a.instance_id = o.instance_id GROUP BY ALL
)
SELECT inc.run_id, inc.instance_id, inc.signal, inc.s, own.s, 'ns', inc.n, inc.n_exact, 0, inc.n_temp, 0, inc.n_mis,
       'device', inc.provenance_id
FROM inc LEFT JOIN own USING (run_id, instance_id, signal)
"""

# instrumented launch -> its kernel's ordinal among the same name's kernels in its instance -> the matched instance
# of the reference run -> that run's kernel of the same name and ordinal (warm-up instances left out)
OVERHEAD = """
WITH ordn AS (
    SELECT k.run_id, k.instance_id, k.name, k.correlation_id, k.end_ns - k.start_ns AS dur,
           row_number() OVER (PARTITION BY k.run_id, k.instance_id, k.name ORDER BY k.correlation_id, k.start_ns)
               AS ordinal
    FROM _j_ke k WHERE k.kind = 'kernel'
), mine AS (
    SELECT d.run_id, d.launch, d.kernel, d.instance_id, o.ordinal, o.dur
    FROM _j_dl d
    JOIN ordn o ON o.run_id = d.run_id AND o.instance_id = d.instance_id AND o.correlation_id = d.correlation_id
    JOIN _j_inst i ON i.run_id = d.run_id AND i.instance_id = d.instance_id
    WHERE d.class = 'exact' AND NOT i.warmup
)
SELECT m.run_id, m.launch, m.kernel, m.instance_id, m.ordinal, m.dur AS instrumented_ns, mt.ref_run_id,
       mt.ref_instance_id, c.dur AS clean_ns
FROM mine m
LEFT JOIN instance_matches mt ON mt.run_id = m.run_id AND mt.instance_id = m.instance_id AND mt.status = 'match'
LEFT JOIN ordn c ON c.run_id = mt.ref_run_id AND c.instance_id = mt.ref_instance_id AND c.name = m.kernel
                AND c.ordinal = m.ordinal
ORDER BY m.run_id, m.launch
"""


def derive(con: duckdb.DuckDBPyConnection) -> None:
    """Device regions of the joined runs (see the module docstring); nothing happens for runs without any."""
    for stmt in DELETE:
        con.execute(stmt)
    rows = con.execute(HAS_LAUNCHES).fetchall()
    if not rows or not rows[0][0]:
        return
    for stmt in (LAUNCHES, ATTRIBUTIONS, SM, VALUES, ANCESTORS_IF_MISSING, INSTANCE_VALUES):
        con.execute(stmt)
    _overhead(con)


def _overhead(con: duckdb.DuckDBPyConnection) -> None:
    res = con.execute(OVERHEAD)
    names = [d[0] for d in res.description or ()]
    rows = [dict(zip(names, r, strict=True)) for r in res.fetchall()]
    runs = [r[0] for r in con.execute(f"SELECT DISTINCT run_id FROM device_launches WHERE {IN_RUNS}").fetchall()]
    out: list[tuple[Any, ...]] = []
    for run in runs:
        mine = [r for r in rows if r["run_id"] == run]
        settings = overhead_settings(mine)
        out.append(
            (
                f"{run}:{OVERHEAD_BACKEND}",
                run,
                OVERHEAD_BACKEND,
                "argus_lab.join.device",
                json.dumps(settings, sort_keys=True),
                "{}",
                "derived (CUPTI kernel durations, CLOCK_REALTIME ns, of the instrumented and the clean run)",
            )
        )
    con.executemany(
        "INSERT INTO provenance (provenance_id, run_id, backend, backend_version, settings, clocks, timestamps) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        out,
    )


def overhead_settings(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The overhead record of one instrumented run from its launches' instrumented and clean kernel times."""
    paired = [r for r in rows if r["clean_ns"] is not None and r["clean_ns"] > 0]
    kernels: dict[str, dict[str, Any]] = {}
    for name in sorted({r["kernel"] for r in paired}):
        mine = [r for r in paired if r["kernel"] == name]
        clean = sorted(float(r["clean_ns"]) for r in mine)
        inst = sorted(float(r["instrumented_ns"]) for r in mine)
        ratios = sorted(float(r["instrumented_ns"]) / float(r["clean_ns"]) for r in mine)
        kernels[name] = {
            "launches": len(mine),
            "clean_median_ns": _median(clean),
            "instrumented_median_ns": _median(inst),
            "ratio_median": _median(ratios),
            "ratio_of_medians": _median(inst) / _median(clean),
        }
    refs = sorted({str(r["ref_run_id"]) for r in rows if r["ref_run_id"] is not None})
    out: dict[str, Any] = {
        "rule": "instrumented kernel time / clean kernel time of the same launch: same kernel name, same ordinal "
        "among that name's launches, in the clean run's instance matched to the launch's instance (same path, "
        "repetition and index); warm-up instances left out; CUPTI kernel durations in both runs",
        "clean_runs": refs,
        "kernels": kernels,
        "launches_compared": len(paired),
        "launches_without_clean_counterpart": len(rows) - len(paired),
        "launches": [
            {
                "launch": int(r["launch"]),
                "kernel": r["kernel"],
                "instance_id": int(r["instance_id"]),
                "instrumented_ns": int(r["instrumented_ns"]),
                "clean_ns": int(r["clean_ns"]),
            }
            for r in paired[:_MAX_OVERHEAD_ROWS]
        ],
    }
    if not paired:
        out["not_measured"] = (
            "no instrumented launch had a clean counterpart: the request needs a clean timing run (gpu.time) of the "
            "same workload, with the same region instances, for the overhead"
            if rows or not refs
            else "no exact instrumented launch outside warm-up"
        )
    return out


def _median(xs: list[float]) -> float:
    n = len(xs)
    if n == 0:
        return float("nan")
    mid = n // 2
    return xs[mid] if n % 2 else (xs[mid - 1] + xs[mid]) / 2


__all__ = ["OVERHEAD_BACKEND", "SIGNALS", "derive", "overhead_settings"]
