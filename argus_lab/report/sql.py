"""SQL behind the Report's tables (read-only; over the join's ``instance_values`` and ``attributions``).

Every query takes the report's run ids as its first parameter (``?::VARCHAR[]``).  :data:`TRACE` is the
documented provenance query (docs/report-json.md): it leads from a region value to its run, backend and
version, settings, clocks and timestamp kind.
"""

from __future__ import annotations

from argus_lab.model.asked import REQUEST_SIGNALS, asked_predicate
from argus_lab.model.schema import column_types

IN_RUNS = "IN (SELECT unnest(?::VARCHAR[]))"

SCOPE_RUNS = f"""
SELECT r.run_id, q.spec FROM runs r LEFT JOIN requests q ON q.request_id = r.request_id WHERE r.run_id {IN_RUNS}
"""
RUN_PATHS = f"""
SELECT run_id, path, count(*) FILTER (WHERE coalesce(warmup, false)) AS warmup
FROM region_instances WHERE run_id {IN_RUNS} GROUP BY run_id, path
"""


# one value per (instance, signal) with the instance's path; warm-up instances left out.  A signal that several
# runs supplied is reported from its run of record: not a replaying run (ncu perturbs host time), lowest plan index.
# Runs of repeated requests at that same plan position are repeats of one measurement: their instances pool.
# a value is shown only where its request asked for it (a name or a pattern such as gpu.*, in any run of the request:
# counters land on the timing run's instances); a run that names no signals (an import) shows every value it has.
# The store keeps the rest (gpu.span beside a requested gpu.time, say).
ASKED = asked_predicate("v.signal", "q", "r0")

VALUES = f"""
WITH v AS (
    SELECT i.path, v.signal, v.run_id, v.instance_id, i.repetition, i.start_ns, v.inclusive, v.exclusive, v.unit,
           v.backend, v.provenance_id, v.w_exact, v.w_ordinal, v.w_temporal, v.w_ambiguous, v.w_mismatch
    FROM instance_values v
    JOIN region_instances i ON i.run_id = v.run_id AND i.instance_id = v.instance_id
    LEFT JOIN runs r0 ON r0.run_id = v.run_id
    LEFT JOIN {REQUEST_SIGNALS} q ON q.request_id = r0.request_id
    WHERE v.run_id {IN_RUNS} AND NOT coalesce(i.warmup, false) AND {ASKED} /*SCOPE*/
), src AS (  -- which runs supplied which (path, signal): a few rows
    SELECT v.path, v.signal, v.run_id,
           any_value(CASE WHEN list_has_any(coalesce(r.backends, []), ?::VARCHAR[]) THEN 1 ELSE 0 END)
               * 1000000 + coalesce(any_value(r.plan_index), 0) AS position
    FROM v LEFT JOIN runs r ON r.run_id = v.run_id GROUP BY v.path, v.signal, v.run_id
), pick AS (  -- the best-placed run; runs at the same plan position of repeated requests pool their instances
    SELECT path, signal, run_id FROM src QUALIFY position = min(position) OVER (PARTITION BY path, signal)
)
SELECT v.* FROM v SEMI JOIN pick USING (path, signal, run_id)
"""

# Instances outside their path's main group: a path whose measured instances ran different kernel sequences
# (instance_signatures; first-call autotuning, compilation) is summarised over its main group (the most instances; on
# a tie, the group that ran last, as Report.groups orders them), and the other groups are shown beside it
# (Report.groups, the heterogeneity sentences), never mixed into its median.  Empty for stores without signatures.
MINOR_INSTANCES = f"""
WITH s AS (
    SELECT i.run_id, i.path, i.instance_id, g.signature, i.start_ns
    FROM instance_signatures g JOIN region_instances i ON i.run_id = g.run_id AND i.instance_id = g.instance_id
    WHERE g.run_id {IN_RUNS} AND NOT coalesce(i.warmup, false)
), grp AS (
    SELECT run_id, path, signature, count(*) AS n, max(start_ns) AS last_ns FROM s GROUP BY ALL
), major AS (
    SELECT run_id, path, list(signature ORDER BY n DESC, last_ns DESC)[1] AS sig FROM grp
    GROUP BY run_id, path HAVING count(*) > 1
)
SELECT s.run_id, s.instance_id, s.path FROM s JOIN major m USING (run_id, path) WHERE s.signature <> m.sig
"""

# over _r_values (VALUES as a temporary table); the few DISTINCT lists come from a small pre-aggregate
REGIONS = """
WITH reps AS (  -- a repetition's value of a path: its instances combined by the signal's rule (_r_agg)
    SELECT v.path, v.signal, v.run_id, v.repetition,
           CASE any_value(coalesce(g.agg, 'sum')) WHEN 'sum' THEN sum(v.inclusive) WHEN 'max' THEN max(v.inclusive)
                WHEN 'fact' THEN max(v.inclusive) WHEN 'min' THEN min(v.inclusive) ELSE avg(v.inclusive) END AS total
    FROM _r_values v LEFT JOIN _r_agg g USING (signal) GROUP BY v.path, v.signal, v.run_id, v.repetition
), rs AS (
    SELECT path, signal, count(total) AS reps, quantile_cont(total, [0.5, 0.25, 0.75]) AS q
    FROM reps GROUP BY path, signal
), src AS (
    SELECT path, signal, string_agg(DISTINCT run_id, ',' ORDER BY run_id) AS runs,
           string_agg(DISTINCT backend, ',' ORDER BY backend) AS backends,
           list(DISTINCT provenance_id ORDER BY provenance_id) FILTER (WHERE provenance_id IS NOT NULL) AS prov
    FROM (SELECT DISTINCT path, signal, run_id, backend, provenance_id FROM _r_values) GROUP BY path, signal
), agg AS (
    SELECT path, signal, count(inclusive) AS n, count(*) AS instances,
           quantile_cont(inclusive, [0.5, 0.25, 0.75]) AS q, min(inclusive) AS lo, max(inclusive) AS hi,
           any_value(unit) AS unit, quantile_cont(exclusive, [0.5, 0.25, 0.75]) AS xq,
           sum(w_exact) AS we, sum(w_ordinal) AS wo, sum(w_temporal) AS wt, sum(w_ambiguous) AS wa,
           sum(w_mismatch) AS wm, min(start_ns) AS first_ns
    FROM _r_values GROUP BY path, signal
), krange AS (  -- per-kernel facts (launch attributes): their range over the path's measured kernels
    SELECT i.path, m.signal, min(m.value) AS k_lo, max(m.value) AS k_hi
    FROM attributions a JOIN ncu_kernels n ON n.run_id = a.run_id AND n.kernel_key = a.evidence_id
    JOIN metrics m ON m.run_id = n.run_id AND m.kernel_key = n.kernel_key
    JOIN region_instances i ON i.run_id = a.target_run_id AND i.instance_id = a.instance_id
    JOIN _r_agg g ON g.signal = m.signal AND g.agg = 'fact'
    WHERE a.evidence = 'ncu_kernel' AND a.class IN ('ordinal', 'exact') AND NOT coalesce(i.warmup, false)
      AND a.target_run_id IN (SELECT DISTINCT run_id FROM _r_values)
    GROUP BY ALL
)
SELECT a.path, a.signal, a.n, a.instances, a.q[1] AS median, a.q[2] AS p25, a.q[3] AS p75, a.lo AS min,
       a.hi AS max, a.unit, src.runs, a.xq[1] AS exclusive_median, a.xq[2] AS exclusive_p25,
       a.xq[3] AS exclusive_p75, rs.reps, rs.q[1] AS rep_median, rs.q[2] AS rep_p25, rs.q[3] AS rep_p75,
       a.we AS w_exact, a.wo AS w_ordinal, a.wt AS w_temporal, a.wa AS w_ambiguous, a.wm AS w_mismatch,
       src.backends, src.prov AS provenance, coalesce(g.agg, 'sum') AS agg, kr.k_lo, kr.k_hi
FROM agg a LEFT JOIN rs USING (path, signal) LEFT JOIN src USING (path, signal) LEFT JOIN _r_agg g USING (signal)
LEFT JOIN krange kr USING (path, signal)
ORDER BY a.first_ns, a.path, a.signal
"""

ORDINAL = (
    "(row_number() OVER (PARTITION BY k.run_id, k.instance_id ORDER BY k.correlation_id, k.start_ns, k.kernel_key)"
    " - 1)::INTEGER"
)
"""A kernel's ordinal within its instance (launch order)."""


def kernel_records(ordinal: str = ORDINAL, kinds: str = "coalesce(k.kind, 'kernel') = 'kernel'") -> str:
    """The ``WITH`` clause of the kernel records a report's kernel tables read, as ``o`` (one row per record and
    region it went to; an ambiguous record has one row per candidate, weight ``1/n``): records launched in a
    recorded instance in the report's scope (``exact``, the instance's path), and records without a recorded
    instance by their attribution (``temporal``: the instance's path, if in scope; ``(ambiguous)``;
    ``(outside regions)``).  ``Report.kernels`` (:data:`KERNELS`) and the report bundle's "kernels by region" and
    kernel-record tables (``argus_lab.report.evidence``) read these same rows, so their counts agree.  Parameters:
    the scope's (:func:`argus_lab.report.scope_sql.scoped`), then the run ids twice; reads ``_r_minor``."""
    return f"""
WITH ex AS (
    SELECT k.run_id, i.path, {ordinal} AS ordinal,
           k.name, k.end_ns - k.start_ns AS dur, 1.0 AS weight, k.kernel_key, k.start_ns, 'exact' AS class,
           k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.registers,
           coalesce(i.warmup, false) AS warm,
           (k.run_id, k.instance_id) IN (SELECT run_id, instance_id FROM _r_minor) AS minor, k.kind
    FROM kernels k JOIN region_instances i ON i.run_id = k.run_id AND i.instance_id = k.instance_id
    WHERE k.run_id {IN_RUNS} AND {kinds} /*SCOPE*/
), other_k AS (  -- kernels without a recorded instance (an integer anti join, before any string key is touched)
    SELECT k.* FROM kernels k ANTI JOIN region_instances i ON i.run_id = k.run_id AND i.instance_id = k.instance_id
    WHERE k.run_id {IN_RUNS} AND {kinds}
), other AS (
    SELECT k.run_id,
           CASE WHEN a.class = 'temporal' THEN i.path WHEN a.class = 'ambiguous' THEN '(ambiguous)'
                ELSE '(outside regions)' END,
           NULL::INTEGER, k.name, k.end_ns - k.start_ns, a.weight, k.kernel_key, k.start_ns, a.class,
           k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.registers, coalesce(i.warmup, false),
           false, k.kind
    FROM other_k k
    JOIN attributions a ON a.run_id = k.run_id AND a.evidence_id = k.kernel_key
    LEFT JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id
    WHERE a.evidence = 'kernel' AND a.class <> 'exact' AND (i.instance_id IS NULL /*SCOPE_OR*/)
), o AS (SELECT * FROM ex UNION ALL SELECT * FROM other)"""


# kernels of the report's runs: (run, path, ordinal within the instance, name).  Exact launches (the ones that
# carried a recorded instance id: the join's `exact` rows) are read straight from the kernel records; the few
# others through their attribution rows: temporal ones at their instance (no ordinal), the rest grouped as
# '(ambiguous)' or '(outside regions)'.
KERNEL_GROUPS = (
    kernel_records()
    + """,
g AS (  -- an ambiguous kernel has n rows of weight 1/n: launches = sum of weights
    SELECT run_id, path, ordinal, name, round(sum(weight))::BIGINT AS launches,
           quantile_cont(dur, [0.5, 0.25, 0.75]) AS q, min(dur) AS lo, max(dur) AS hi, sum(dur * weight) AS total,
           any_value(grid_x) AS gx, any_value(grid_y) AS gy, any_value(grid_z) AS gz, any_value(block_x) AS bx,
           any_value(block_y) AS b_y, any_value(block_z) AS bz, max(registers) AS regs,
           class AS classes, min(start_ns) AS first_ns, minor
    FROM o WHERE NOT warm
    -- one class per group: exact rows have an ordinal, others not; kernels of instances outside their path's main
    -- kernel-sequence group (_r_minor) apart from the main group's
    GROUP BY run_id, path, ordinal, name, class, minor
)"""
)
"""The ``WITH`` clause of :data:`KERNELS`: its rows as ``g``, before they are read out."""
KERNELS = (
    KERNEL_GROUPS
    + """
SELECT run_id, path, ordinal, name, launches, q[1] AS median_ns, q[2] AS p25_ns, q[3] AS p75_ns, lo AS min_ns,
       hi AS max_ns, total AS total_ns, gx || 'x' || gy || 'x' || gz AS grid, bx || 'x' || b_y || 'x' || bz AS block,
       regs AS registers, classes, first_ns, NOT minor AS main_group
FROM g
ORDER BY run_id, NOT minor DESC, first_ns, ordinal, path, name, classes
"""
)
GROUP_KEYS = (
    kernel_records()
    + """,
gk AS (  -- the groups of KERNELS with their launches and first start alone: no quantile holds their durations
    SELECT run_id, path, ordinal, name, class, minor, round(sum(weight))::BIGINT AS launches, min(start_ns) AS first_ns
    FROM o WHERE NOT warm GROUP BY run_id, path, ordinal, name, class, minor
)"""
)
OTHER_KERNEL_GROUPS = (
    GROUP_KEYS
    + """
SELECT path, sum(launches)::BIGINT AS launches, count(DISTINCT name) AS kernels
FROM gk WHERE minor GROUP BY path ORDER BY min({'run': run_id, 'first': first_ns, 'ordinal': ordinal})
"""
)
"""Per region path, the launches and distinct kernels of the :data:`KERNELS` rows outside its main kernel-sequence
group (``main_group`` false), summed in DuckDB; paths in the order those rows come."""


def first_kernel_keys(limit: int, main_only: bool = False, one_path: bool = False) -> str:
    """The keys of the first ``limit`` rows of :data:`KERNELS` (``run_id, path, ordinal, name, class, minor``), found
    with the groups' keys and first start alone (no quantile holds a long run's millions of durations).  The same
    parameters as :data:`KERNELS` (and, with ``one_path``, the path last); :data:`KERNELS_OF_KEYS` then reads those
    rows.  ``main_only``: rows of the main kernel-sequence group alone; ``one_path``: rows of one region path alone."""
    where = [cond for cond, wanted in (("NOT minor", main_only), ("path = ?", one_path)) if wanted]
    return (
        GROUP_KEYS
        + f"""
SELECT run_id, path, ordinal, name, class, minor FROM gk {"WHERE " + " AND ".join(where) if where else ""}
ORDER BY run_id, NOT minor DESC, first_ns, ordinal, path, name, class LIMIT {int(limit)}
"""
    )


KERNEL_ROW_COUNT = (
    GROUP_KEYS
    + """
SELECT count(*) FILTER (WHERE NOT minor) AS main_rows, count(*) AS rows FROM gk
"""
)
"""How many rows :data:`KERNELS` has (``rows``) and how many of them are of the main kernel-sequence group
(``main_rows``), counted in DuckDB; the same parameters as :data:`KERNELS`."""


_SAME_KEY = " AND ".join(f"o.{c} IS NOT DISTINCT FROM t.{c}" for c in ("run_id", "path", "ordinal", "name", "class"))
KERNELS_OF_KEYS = (
    KERNEL_GROUPS.replace(
        "FROM o WHERE NOT warm", f"FROM o SEMI JOIN _r_top t ON {_SAME_KEY} AND o.minor = t.minor WHERE NOT warm", 1
    )
    + KERNELS[len(KERNEL_GROUPS) :]
)
"""The rows of :data:`KERNELS` whose keys are in the temporary table ``_r_top`` (:func:`first_kernel_keys`): the
durations' quantiles taken for those groups alone.  Two queries, not one: a query that reads the kernel records
twice holds them (3 M records did not fit DuckDB's 128 MB)."""


# ncu counters per (timing run, path, ordinal, name, instance group): the ordinal is the position among the ncu
# kernels matched into the same timing instance (the join verified it against the timing run's sequence); `minor`:
# matched into an instance outside its path's main kernel-sequence group (_r_minor), whose kernels are apart
KERNEL_COUNTERS = f"""
WITH a AS (
    SELECT run_id, evidence_id, target_run_id, instance_id FROM attributions
    WHERE run_id {IN_RUNS} AND evidence = 'ncu_kernel' AND class IN ('ordinal', 'exact') AND instance_id IS NOT NULL
), n AS (
    SELECT a.target_run_id, i.path, n.name, n.run_id, n.kernel_key, coalesce(i.warmup, false) AS warmup,
           row_number() OVER (PARTITION BY n.run_id, a.target_run_id, a.instance_id
                              ORDER BY n.instance_index, n.ordinal) - 1 AS ordinal,
           coalesce((a.target_run_id, a.instance_id) IN (SELECT run_id, instance_id FROM _r_minor), false) AS minor
    FROM ncu_kernels n
    JOIN a ON a.run_id = n.run_id AND a.evidence_id = n.kernel_key
    JOIN region_instances i ON i.run_id = a.target_run_id AND i.instance_id = a.instance_id
)
SELECT n.target_run_id AS run_id, n.path, n.ordinal, n.name, n.minor, m.signal,
       quantile_cont(m.value, 0.5) AS value, any_value(m.unit) AS unit
FROM n JOIN metrics m ON m.run_id = n.run_id AND m.kernel_key = n.kernel_key
WHERE NOT n.warmup AND m.value IS NOT NULL
GROUP BY ALL ORDER BY ALL
"""

# compiler facts per binary (kernel_facts, selected by :func:`compiler_sql` with NULL for columns an older store
# lacks), with where each binary ran: per region path, the measured instances in the report's scope (indexes as the
# scope counts them) and how many other instances (warm-up or outside the scope) ran it, from the join's
# `compiler` attributions (launch -> binary by name, registers, shared memory, threads); then the launch-record
# facts of launched kernels that have no fact row at all (cuBLAS, PyTorch's own kernels; an Inductor triton_* kernel
# without facts is said to be a Triton kernel whose binary was not found, never a library's)
COMPILER = f"""
WITH warm AS (
    SELECT run_id, path, count(*) FILTER (WHERE coalesce(warmup, false)) AS warm
    FROM region_instances WHERE run_id {IN_RUNS} GROUP BY ALL
), a AS (
    SELECT a.run_id, a.evidence_id, a.class, i.path, i.instance_index - coalesce(w.warm, 0) AS idx,
           NOT coalesce(i.warmup, false) AND (FALSE /*SCOPE_OR*/) AS measured
    FROM attributions a
    JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id
    LEFT JOIN warm w ON w.run_id = i.run_id AND w.path = i.path
    WHERE a.run_id {IN_RUNS} AND a.evidence = 'compiler' AND a.instance_id IS NOT NULL
), per_path AS (
    SELECT run_id, evidence_id, path, list(DISTINCT idx ORDER BY idx) FILTER (WHERE measured) AS measured_idx,
           count(*) FILTER (WHERE NOT measured) AS other, bool_or(class = 'ambiguous') AS ambiguous
    FROM a GROUP BY ALL
), ran AS (
    SELECT run_id, evidence_id,
           list({{'path': path, 'indexes': coalesce(measured_idx, []), 'other': other}} ORDER BY path) AS places,
           bool_or(len(coalesce(measured_idx, [])) > 0) AS measured, bool_or(ambiguous) AS ambiguous
    FROM per_path GROUP BY ALL
), k AS (
    SELECT k.run_id, k.name, k.registers, k.local_mem, k.static_smem, k.dynamic_smem,
           k.block_x * k.block_y * k.block_z AS threads, i.path
    FROM kernels k LEFT JOIN region_instances i ON i.run_id = k.run_id AND i.instance_id = k.instance_id
    WHERE k.run_id {IN_RUNS} AND k.kind = 'kernel'
), per AS (
    SELECT name, string_agg(DISTINCT path, ', ' ORDER BY path) AS paths, max(registers) AS registers,
           max(coalesce(local_mem, 0)) // 4 AS spill_words, max(static_smem) AS smem, max(dynamic_smem) AS dsmem,
           max(threads) AS threads, any_value(run_id) AS run_id
    FROM k GROUP BY name
), kf AS (SELECT /*FACT_COLUMNS*/ FROM kernel_facts f WHERE f.run_id {IN_RUNS})
SELECT f.name, coalesce(f.source, 'compiler') AS source, f.registers, f.local_words AS spill_words, f.shared_bytes,
       f.num_warps, f.num_stages, f.sass_instructions, coalesce(f.unavailable, '') AS unavailable, f.run_id,
       coalesce(per.paths, '') AS paths, coalesce(f.binary_hash, '') AS binary_hash, f.config, f.sass_mix,
       coalesce(f.origin, '') AS origin, f.threads, f.static_shared, ran.places, ran.measured, ran.ambiguous
FROM kf f
LEFT JOIN per USING (name)
LEFT JOIN ran ON ran.run_id = f.run_id AND ran.evidence_id = 'bin:' || f.name || ':' || coalesce(f.binary_hash, '')
UNION ALL
SELECT name, 'cupti launch record', registers, spill_words, smem, NULL, NULL, NULL,
       CASE WHEN starts_with(name, 'triton_')
            THEN 'warps, stages, SASS mix: a Triton kernel (Inductor names its kernels triton_*) without compiler '
                 || 'facts in this run: the compiler backend did not run (ask for compile.* signals) or found no live '
                 || 'kernel object and no Triton/Inductor cache entry for it (its provenance and the run''s status '
                 || 'say what it found and skipped)'
            ELSE 'warps, stages, SASS mix: not a Triton kernel; its binary is inside a library and not extracted'
       END
           || ' (the launch record gives registers, local and static shared memory; dynamic shared memory at launch: '
           || coalesce(dsmem, 0) || ' B)',
       run_id, coalesce(paths, ''), '', NULL, NULL, 'cupti launch record', threads, smem, NULL, NULL, NULL
FROM per WHERE name NOT IN (SELECT name FROM kf)
ORDER BY 1, 2, 12
"""

FACT_COLUMNS = tuple(name for name, _ in column_types("kernel_facts"))
"""The ``kernel_facts`` columns the compiler table reads (columns a store written before them lacks read NULL)."""


def compiler_sql(have: set[str]) -> str:
    """:data:`COMPILER` with the fact columns the store has (the others NULL)."""
    cols = ", ".join(f"f.{c}" if c in have else f"NULL AS {c}" for c in FACT_COLUMNS)
    return COMPILER.replace("/*FACT_COLUMNS*/", cols)


# per (run, reference run, status, path): how many instances, which ones (measured indexes, as the scope counts
# them: warm-up instances of the path are not counted), and the first difference
MATCHES = f"""
WITH warm AS (
    SELECT run_id, path, count(*) FILTER (WHERE coalesce(warmup, false)) AS warm
    FROM region_instances WHERE run_id IN (SELECT ref_run_id FROM instance_matches WHERE run_id {IN_RUNS})
    GROUP BY ALL
)
SELECT m.run_id, m.ref_run_id, m.status, m.path, count(*) AS n,
       list(DISTINCT coalesce(i.instance_index, oi.instance_index) - coalesce(w.warm, 0)) AS indexes,
       any_value(m.difference) FILTER (WHERE m.status <> 'match') AS difference
FROM instance_matches m
LEFT JOIN region_instances i ON i.run_id = m.ref_run_id AND i.instance_id = m.ref_instance_id
LEFT JOIN region_instances oi ON oi.run_id = m.run_id AND oi.instance_id = m.instance_id
LEFT JOIN warm w ON w.run_id = m.ref_run_id AND w.path = m.path
WHERE m.run_id {IN_RUNS} AND NOT coalesce(i.warmup, oi.warmup, false)  -- warm-up instances are never measured
  AND (i.instance_id IS NULL /*SCOPE_OR*/)  -- instances of the reference run outside the report's scope are left out
GROUP BY m.run_id, m.ref_run_id, m.status, m.path
ORDER BY m.run_id, m.path, m.status
"""

# instances of the report's runs grouped by kernel-sequence signature (join: instance_signatures), per (run,
# path): each group's instances (measured indexes: warm-up instances are left out and not counted), kernels per
# instance, first start, and the median of every instance signal of that run over the group
GROUPS = f"""
WITH warm AS (
    SELECT run_id, path, count(*) FILTER (WHERE coalesce(warmup, false)) AS warm
    FROM region_instances WHERE run_id {IN_RUNS} GROUP BY ALL
), s AS (
    SELECT i.run_id, i.path, i.instance_id, i.instance_index - coalesce(w.warm, 0) AS idx, i.start_ns,
           g.kernels, g.signature
    FROM instance_signatures g
    JOIN region_instances i ON i.run_id = g.run_id AND i.instance_id = g.instance_id
    LEFT JOIN warm w ON w.run_id = i.run_id AND w.path = i.path
    WHERE g.run_id {IN_RUNS} AND NOT coalesce(i.warmup, false) /*SCOPE*/
), grp AS (
    SELECT run_id, path, signature, any_value(kernels) AS kernels, count(*) AS n, list(idx ORDER BY idx) AS indexes,
           min(start_ns) AS first_ns, max(start_ns) AS last_ns
    FROM s GROUP BY run_id, path, signature
), many AS (SELECT run_id, path FROM grp GROUP BY ALL HAVING count(*) > 1), vals AS (
    SELECT s.run_id, s.path, s.signature, v.signal, quantile_cont(v.inclusive, 0.5) AS median, any_value(v.unit) AS unit
    FROM s SEMI JOIN many USING (run_id, path)
    JOIN instance_values v ON v.run_id = s.run_id AND v.instance_id = s.instance_id
    GROUP BY ALL
)
SELECT g.run_id, g.path, g.signature, g.kernels, g.n, g.indexes, g.first_ns, g.last_ns,
       (SELECT list({{'signal': v.signal, 'median': v.median, 'unit': v.unit}} ORDER BY v.signal) FROM vals v
        WHERE v.run_id = g.run_id AND v.path = g.path AND v.signature = g.signature) AS vals
FROM grp g SEMI JOIN many USING (run_id, path)
ORDER BY g.run_id, g.path, g.first_ns
"""

PROVENANCE = f"""
SELECT provenance_id, run_id, backend, coalesce(backend_version, '') AS backend_version,
       coalesce(settings, '{{}}') AS settings, coalesce(clocks, '{{}}') AS clocks,
       coalesce(timestamps, '') AS timestamps
FROM provenance WHERE run_id {IN_RUNS} ORDER BY run_id, backend
"""

CLOCKS_SEEN = f"""
SELECT run_id, signal, count(*) AS samples, min(value) AS min, quantile_cont(value, 0.5) AS median, max(value) AS max,
       any_value(unit) AS unit
FROM samples WHERE run_id {IN_RUNS} AND signal IN ('sys.sm_clock', 'sys.mem_clock', 'sys.temperature', 'sys.power')
GROUP BY ALL ORDER BY ALL
"""

JOINED = f"SELECT run_id FROM provenance WHERE backend = 'join' AND run_id {IN_RUNS}"

TRACE = f"""
SELECT v.run_id, v.instance_id, i.repetition, v.signal, v.inclusive, v.exclusive, v.unit, v.backend,
       v.w_exact, v.w_ordinal, v.w_temporal, v.w_ambiguous, v.w_mismatch,
       p.provenance_id, p.run_id AS measured_in_run, p.backend_version, p.settings, p.clocks, p.timestamps,
       r.command, r.versions, r.host, j.backend_version AS join_rules
FROM instance_values v
JOIN region_instances i ON i.run_id = v.run_id AND i.instance_id = v.instance_id
LEFT JOIN provenance p ON p.provenance_id = v.provenance_id
LEFT JOIN runs r ON r.run_id = p.run_id
LEFT JOIN provenance j ON j.provenance_id = v.run_id || ':join'
WHERE v.run_id {IN_RUNS} AND i.path = ? AND v.signal = ?
ORDER BY v.run_id, i.start_ns
"""
