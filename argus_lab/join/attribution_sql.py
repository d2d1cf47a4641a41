"""The SQL of the join (:mod:`argus_lab.join`), one statement per step, all set-based.

Every statement runs inside one write transaction on the store's DuckDB connection and works on temporary
tables named ``_j_*`` (dropped with the connection).  Times stay integer nanoseconds throughout.  The passes over
every record or every instance are numpy array passes in the join's other modules (the instances' numbers
``_j_node``, the exact records' sums, the candidates ``_j_kc`` of the other records, sample windows, stored values,
signatures); these statements classify, explain and store.
"""

from __future__ import annotations

from argus_lab.model.facts import COMPILE_FACTS as _COMPILE_COLUMNS
from argus_lab.plan import catalog

JOIN_VERSION = "6"
"""Version of the attribution rules; stored in the join's provenance row of every run.  2: device regions
(:mod:`argus_lab.join.device`); no gpu.* values from the kernels of an instrumented run.  3: ncu kernels matched per
instance (a differing instance is `mismatch` alone); instance kernel-sequence signatures.  4: the exact attributions
of GPU records and the instances' own rows are derived by the store's ``attributions`` view, not written.  5: one
aggregation rule per signal (:func:`argus_lab.plan.catalog.aggregation`): a percentage, rate or average is the
duration-weighted mean of its kernels, a launch attribute a per-kernel fact, never a sum; counters reach their
kernels across requests.  6: a timing run's record values (gpu.span, gpu.kernels, gpu.launch_overhead, ...) are
stored only where its request asked for them (:class:`argus_lab.join.kernel_values.Asked`).  A store joined by an
older version holds values of the older rules: the report says so (:func:`argus_lab.report.coverage.stale_join`)
and ``argus-lab join --store X --all`` joins it again."""

JOIN_BACKEND_VERSION = f"argus_lab.join {JOIN_VERSION}"
"""The ``backend_version`` of the join's provenance row of every run it joined."""

RUNS = "CREATE OR REPLACE TEMP TABLE _j_runs AS SELECT DISTINCT unnest(?::VARCHAR[]) AS run_id"

INSTANCES = """
CREATE OR REPLACE TEMP TABLE _j_inst AS
SELECT i.run_id, i.instance_id, i.region_id, i.path, coalesce(i.parent_instance_id, 0) AS parent_id, i.repetition,
       coalesce(i.rank, 0) AS rank, i.thread_id, i.start_ns, i.end_ns, coalesce(i.warmup, false) AS warmup,
       i.instance_index, coalesce(nullif(i.thread_name, ''), 'thread ' || i.thread_id) AS thread_name
FROM region_instances i
WHERE i.run_id IN (SELECT run_id FROM _j_runs)
"""

# the instances with their index within their repetition and path (where runs are matched instance by instance)
INSTANCES_INDEXED = """
CREATE OR REPLACE TEMP VIEW _j_insti AS
SELECT *, (row_number() OVER (PARTITION BY run_id, repetition, path ORDER BY start_ns, instance_id) - 1)::INTEGER
              AS rep_index
FROM _j_inst
"""

# The parent links come from stored rows, which may be wrong (a damaged or merged store, a foreign importer): the
# ancestor closure must end whatever they say.  A link whose parent does not come strictly before its child in
# (start_ns, instance_id) order is *suspect* (argus_lab.join.kernel_values.Nodes.of tells); a forest written by the
# recorder (a parent enters, and takes its id, before its children) has none, and with none there can be no cycle,
# so the closure runs as a plain UNION ALL.  With suspects it runs as a UNION (duplicate rows end the recursion, so
# it ends on any graph), the instances that are their own ancestors' parents (the members of cycles) are cut loose
# (parent 0, named in the join's provenance), and the closure is taken again.
_ANCESTORS = """
CREATE OR REPLACE TEMP TABLE _j_anc AS
WITH RECURSIVE a(run_id, instance_id, ancestor_id) AS (
    SELECT run_id, instance_id, instance_id FROM _j_inst
    {union}
    SELECT a.run_id, a.instance_id, p.parent_id
    FROM a JOIN _j_inst p ON p.run_id = a.run_id AND p.instance_id = a.ancestor_id
    WHERE p.parent_id <> 0
)
SELECT a.* FROM a SEMI JOIN _j_inst i ON i.run_id = a.run_id AND i.instance_id = a.ancestor_id
"""
ANCESTORS = _ANCESTORS.format(union="UNION ALL")
ANCESTORS_GUARDED = _ANCESTORS.format(union="UNION")
# the closure is built where a statement first needs it (many joins need none: no samples, no NCCL, no ncu)
ANCESTORS_IF_MISSING = ANCESTORS.replace(
    "CREATE OR REPLACE TEMP TABLE _j_anc", "CREATE TEMP TABLE IF NOT EXISTS _j_anc"
)
NO_ANCESTORS = "DROP TABLE IF EXISTS _j_anc"

# members of parent cycles: instances that are an ancestor of their own parent
CYCLE_MEMBERS = """
CREATE OR REPLACE TEMP TABLE _j_cycle AS
SELECT DISTINCT i.run_id, i.instance_id, i.path, i.parent_id
FROM _j_inst i JOIN _j_anc a ON a.run_id = i.run_id AND a.instance_id = i.parent_id AND a.ancestor_id = i.instance_id
WHERE i.parent_id <> 0
"""

CUT_CYCLES = """
UPDATE _j_inst SET parent_id = 0 FROM _j_cycle c
WHERE _j_inst.run_id = c.run_id AND _j_inst.instance_id = c.instance_id
"""

CYCLES_BY_RUN = """
SELECT run_id, count(*) AS n, list(instance_id ORDER BY instance_id)[1:5] AS ids,
       list(DISTINCT path ORDER BY path)[1:3] AS paths
FROM _j_cycle GROUP BY run_id
"""

# the runs whose kernel records give gpu.* values: every run but those of an instrumented variant (their kernels
# carry probes and read timers; they place device regions, and their time is the overhead, not gpu.time)
TIMED = """
CREATE OR REPLACE TEMP TABLE _j_timed AS
SELECT run_id FROM _j_runs
WHERE run_id NOT IN (SELECT run_id FROM runs WHERE coalesce(variant, '') = 'instrumented')
"""

# the provenance record of each (run, backend), so derived values point at what measured their inputs
PROVENANCE_IDS = """
CREATE OR REPLACE TEMP TABLE _j_prov AS
SELECT r.run_id, b.backend, coalesce(min(p.provenance_id), r.run_id || ':' || b.backend) AS provenance_id
FROM _j_runs r CROSS JOIN (VALUES ('cupti'), ('nvml'), ('pm'), ('compiler')) b(backend)
LEFT JOIN provenance p ON p.run_id = r.run_id AND p.backend = b.backend
GROUP BY r.run_id, b.backend
"""

DELETE_ATTRIBUTIONS = """
DELETE FROM attribution_rows
WHERE run_id IN (SELECT run_id FROM _j_runs) AND evidence IN (SELECT unnest(?::VARCHAR[]))
"""
DELETE_DERIVED = (
    "DELETE FROM instance_value_rows WHERE series IN "
    "(SELECT series FROM value_series WHERE run_id IN (SELECT run_id FROM _j_runs))",
    "DELETE FROM value_series WHERE run_id IN (SELECT run_id FROM _j_runs)",
    "DELETE FROM instance_matches WHERE run_id IN (SELECT run_id FROM _j_runs)",
    "DELETE FROM instance_signatures WHERE run_id IN (SELECT run_id FROM _j_runs)",
    "DELETE FROM provenance WHERE run_id IN (SELECT run_id FROM _j_runs) AND backend = 'join'",
)

# -- kernels, copies and sets (CUPTI activity records) ------------------------------------------------------
KERNELS = """
CREATE OR REPLACE TEMP VIEW _j_k AS
SELECT k.run_id, coalesce(k.kind, 'kernel') AS kind,
       coalesce(k.kernel_key, concat_ws('/', k.device_id, k.context_id, k.correlation_id, k.start_ns)) AS key,
       k.instance_id AS carried, k.name, k.start_ns, k.end_ns, coalesce(k.graph_id, 0) AS graph_id,
       coalesce(k.thread_id, 0) AS thread_id, coalesce(nullif(k.api_start_ns, 0), k.start_ns) AS q,
       coalesce(k.bytes, 0) AS bytes, k.correlation_id, coalesce(k.device_id, 0) AS device_id,
       coalesce(k.rank, 0) AS rank, coalesce(k.api_start_ns, 0) AS api_s, coalesce(k.api_end_ns, 0) AS api_e,
       k.registers, k.static_smem, k.dynamic_smem, k.block_x * k.block_y * k.block_z AS threads, k.local_mem,
       k.rowid AS row
FROM kernels k
WHERE k.run_id IN (SELECT run_id FROM _j_runs)
"""

# Exact: the launch carried the id of a recorded instance.  A view (not materialized), read only where single records
# matter (signatures, ncu's kernel sequence, communication kernels, compile facts); the sums read the kernels table
# directly.
KERNEL_EXACT = """
CREATE OR REPLACE TEMP VIEW _j_ke AS
SELECT k.run_id, k.kind, k.key, k.name, k.correlation_id, i.instance_id, 'exact' AS class, 1.0::DOUBLE AS weight,
       k.start_ns, k.end_ns, k.bytes, k.graph_id, k.end_ns - i.end_ns AS past_ns, k.api_s, k.api_e
FROM _j_k k JOIN _j_inst i ON i.run_id = k.run_id AND i.instance_id = k.carried
"""

# Kernels without a recorded instance: their candidates (``_j_kc``: argus_lab.join.candidates, where the rules are
# stated) become one attribution each: temporal when one candidate is left (or the launching thread's own), ambiguous
# among several, unattributed with none; the reason says which rule decided and names the threads.
# The name of a launching thread: what the run noted of it (``threads``), else the name its regions carry.
THREAD_NAMES = """
CREATE OR REPLACE TEMP TABLE _j_tname AS
SELECT run_id, rank, thread_id % 4294967296 AS tid32, min(name) AS name
FROM (
    SELECT run_id, coalesce(rank, 0) AS rank, thread_id, coalesce(nullif(name, ''), nullif(system_name, '')) AS name
    FROM threads WHERE run_id IN (SELECT run_id FROM _j_runs)
    UNION ALL
    SELECT run_id, rank, thread_id, thread_name FROM _j_inst
)
WHERE name IS NOT NULL
GROUP BY ALL
"""

KERNEL_OTHER = """
CREATE OR REPLACE TEMP TABLE _j_ka AS
WITH c AS (
    SELECT c.*,
           CASE WHEN ln.name IS NULL THEN 'thread ' || c.thread_id
                WHEN contains(ln.name, CAST(c.thread_id AS VARCHAR)) THEN ln.name
                ELSE ln.name || ' (' || c.thread_id || ')' END AS launcher,
           coalesce(cn.name, 'thread ' || c.caller_tid) AS caller, i.path AS inner_path, i.thread_name AS inner_thread,
           e.path AS ex_path, e.thread_name AS ex_thread
    FROM _j_kc c
    LEFT JOIN _j_inst i ON i.run_id = c.run_id AND i.instance_id = c.inner_id
    LEFT JOIN _j_inst e ON e.run_id = c.run_id AND e.instance_id = c.ex_id
    LEFT JOIN _j_tname ln ON ln.run_id = c.run_id AND ln.rank = c.rank AND ln.tid32 = c.thread_id % 4294967296
    LEFT JOIN _j_tname cn ON cn.run_id = c.run_id AND cn.rank = c.rank AND cn.tid32 = c.caller_tid % 4294967296
    WHERE c.n_cand = 0 OR c.rule NOT IN ('unknown', 'unnamed') OR c.n_same = 0
       OR c.r_tid % 4294967296 = c.thread_id % 4294967296
)
SELECT run_id, kind, key,
       CASE WHEN n_cand = 0 THEN NULL ELSE inner_id END AS instance_id,
       CASE WHEN n_cand = 0 THEN 'unattributed'
            WHEN n_same > 0 OR n_cand = 1 THEN 'temporal'
            ELSE 'ambiguous' END AS class,
       CASE WHEN n_cand = 0 OR n_same > 0 OR n_cand = 1 THEN 1.0 ELSE 1.0 / n_cand END AS weight,
       CASE WHEN n_cand = 0 AND carried IS NOT NULL
                THEN 'carried instance id ' || carried || ', which the run did not record'
            WHEN rule = 'own'
                THEN 'no external correlation id; launched on the thread of this instance while it was open'
            WHEN rule = 'other' AND n_seen = 0
                THEN 'launched outside every region (by ' || launcher || ', no region open on any thread)'
            WHEN rule = 'other'
                THEN 'launched by ' || launcher || ', which had no region open; a thread is never attributed to '
                     || 'another thread''s region (' || n_seen || ' instance(s) were open on other threads, e.g. '
                     || coalesce(ex_path, '?') || ' on ' || coalesce(ex_thread, '?') || ')'
            WHEN rule = 'backward' AND n_cand = 0
                THEN 'launched by ' || launcher || ', autograd''s thread, during backward() called on ' || caller
                     || ' outside every region'
            WHEN rule = 'backward' AND n_cand = 1
                THEN 'launched by ' || launcher || ', autograd''s thread, during backward() called on '
                     || inner_thread || ' inside this instance'
            WHEN rule = 'backward'
                THEN 'launched by ' || launcher || ', autograd''s thread, while ' || n_cand || ' threads were in '
                     || 'backward() inside a region (' || inner_path || ' on ' || inner_thread || ' is one of them)'
            WHEN rule = 'autograd' AND n_cand = 0
                THEN 'launched by ' || launcher || ', autograd''s thread, outside every region (no backward() call '
                     || 'recorded covers it)'
            WHEN rule = 'autograd' AND n_cand = 1
                THEN 'launched by ' || launcher || ', autograd''s thread; no backward() call recorded covers it, '
                     || 'and this was the only region open (on ' || inner_thread || ')'
            WHEN rule = 'autograd'
                THEN 'launched by ' || launcher || ', autograd''s thread; no backward() call recorded covers it, '
                     || 'and ' || n_cand || ' region instances were open (' || inner_path || ' on ' || inner_thread
                     || ' is one of them)'
            WHEN rule = 'unnamed' AND n_cand = 0
                THEN 'launched outside every region (thread ' || thread_id || ', no region open on any thread)'
            WHEN rule = 'unnamed' AND n_cand = 1
                THEN 'no external correlation id; launched by thread ' || thread_id || ', which the run did not '
                     || 'name (it may be autograd''s), while this instance was the only region open (on '
                     || inner_thread || ')'
            WHEN rule = 'unnamed'
                THEN 'no external correlation id; launched by thread ' || thread_id || ', which the run did not '
                     || 'name, while ' || n_cand || ' region instances were open on other threads (' || inner_path
                     || ' on ' || inner_thread || ' is one of them)'
            WHEN n_cand = 0
                THEN 'launched outside every region (launching thread not known, no region open on any thread)'
            WHEN n_same > 0
                THEN 'no external correlation id; launched on the thread of this instance while it was open'
            WHEN n_cand = 1
                THEN 'the launching thread is not known (the launch identity gives none); this instance was the '
                     || 'only region open then (on ' || inner_thread || ')'
            ELSE 'the launching thread is not known (the launch identity gives none); ' || n_cand
                 || ' region instances were open then (' || inner_path || ' on ' || inner_thread
                 || ' is one of them)'
       END AS reason,
       start_ns, end_ns, bytes
FROM c
"""

# Exact records are not copied into the attribution rows: the store's ``attributions`` view derives them from the
# kernels table (:data:`EXACT_ATTRIBUTIONS`) for runs this version of the join processed.  Only the others are
# written, one row per candidate instance, in one insert with the samples' rows (:func:`insert_rows`).
KERNEL_ATTRIBUTION_ROWS = """
SELECT run_id, kind, key, instance_id, class, weight, reason, CASE WHEN instance_id IS NULL THEN NULL ELSE run_id END
FROM _j_ka
"""

ATTRIBUTION_COLUMNS = "run_id, evidence, evidence_id, instance_id, class, weight, reason, target_run_id"


def insert_rows(*parts: str) -> str:
    """One INSERT of the attribution rows several queries give (a partial row group costs as much to commit and
    checkpoint as a whole one to write: one insert of them all is cheaper than one each)."""
    body = "\nUNION ALL\n".join(f"SELECT * FROM ({p})" for p in parts)
    return f"INSERT INTO attribution_rows ({ATTRIBUTION_COLUMNS})\n{body}"


# -- compile.* per instance: the static facts of the kernel functions an instance ran ------------------------------
# A launch's facts: those of the compiled binary that ran (``kernel_facts`` of the same run, linked as
# COMPILER_ATTRIBUTIONS links them: the name, and registers per thread, Triton's dynamic shared memory and threads per
# block where the binary states them; the largest when several binaries fit), else what its CUPTI launch record
# carries (registers, static shared memory, local memory / 4 words: the rule of ``backends.compiler.facts``).
COMPILE_FACTS: tuple[tuple[str, str, str], ...] = tuple((s, column, catalog.unit(s)) for s, column in _COMPILE_COLUMNS)
"""(signal, fact column, unit) of every ``compile.*`` signal of the catalog
(:data:`argus_lab.model.facts.COMPILE_FACTS`, units from the catalog)."""

COMPILE_SIGNALS = """
CREATE OR REPLACE TEMP TABLE _j_csig AS
SELECT unnest(?::VARCHAR[]) AS signal, unnest(?::VARCHAR[]) AS col, unnest(?::VARCHAR[]) AS unit
"""

# For every timed run whose request asked for a compile.* signal (in any of its runs: the compiler backend rides
# along with one of them), per instance the largest value over the kernel functions of its launches placed exactly
# or temporally (a register or shared-memory budget is set by the heaviest kernel): inclusive over the instance and
# its nested instances, exclusive over its own launches (NULL when it launched none itself); evidence = launches.
# does any timed run's request ask for a compile.* signal (COMPILE_VALUES writes nothing otherwise)?
COMPILE_WANTED = """
SELECT count(*) FROM runs r
WHERE r.run_id IN (SELECT run_id FROM _j_timed)
  AND EXISTS (SELECT 1 FROM runs o WHERE coalesce(o.request_id, o.run_id) = coalesce(r.request_id, r.run_id)
              AND list_has_any(o.signals, (SELECT list(signal) FROM _j_csig)))
"""

COMPILE_VALUES = """
INSERT INTO _j_iv (run_id, instance_id, signal, inclusive, exclusive, unit, evidence, w_exact, w_ordinal,
                 w_temporal, w_ambiguous, w_mismatch, backend, provenance_id)
WITH asked AS (
    SELECT DISTINCT coalesce(request_id, run_id) AS request, unnest(signals) AS signal
    FROM runs WHERE run_id IN (SELECT run_id FROM _j_runs)
), want AS (
    SELECT DISTINCT r.run_id, a.signal
    FROM runs r JOIN asked a ON a.request = coalesce(r.request_id, r.run_id)
    WHERE r.run_id IN (SELECT run_id FROM _j_timed) AND a.signal IN (SELECT signal FROM _j_csig)
), att AS (
    SELECT run_id, key, instance_id, 'exact' AS class FROM _j_ke
    WHERE kind = 'kernel' AND run_id IN (SELECT run_id FROM want)
    UNION ALL
    SELECT run_id, key, instance_id, class FROM _j_ka
    WHERE kind = 'kernel' AND class = 'temporal' AND instance_id IS NOT NULL AND run_id IN (SELECT run_id FROM want)
), launch AS (
    SELECT att.run_id, att.instance_id, att.key, any_value(att.class) AS class,
           coalesce(max(f.registers), any_value(k.registers)) AS registers,
           coalesce(max(f.local_words), any_value(k.local_mem) // 4) AS local_words,
           coalesce(max(f.shared_bytes), any_value(k.static_smem)) AS shared_bytes,
           max(f.num_warps) AS num_warps, max(f.num_stages) AS num_stages,
           max(f.sass_instructions) AS sass_instructions
    FROM att JOIN _j_k k ON k.run_id = att.run_id AND k.key = att.key
    LEFT JOIN kernel_facts f
      ON f.run_id = k.run_id AND f.name = k.name
     AND (f.registers IS NULL OR k.registers IS NULL OR f.registers = k.registers)
     AND (coalesce(f.source, '') <> 'triton' OR f.shared_bytes IS NULL OR k.dynamic_smem IS NULL
          OR f.shared_bytes = k.dynamic_smem)
     AND (f.threads IS NULL OR k.threads IS NULL OR f.threads = k.threads)
    GROUP BY att.run_id, att.instance_id, att.key
), v AS (
    SELECT l.run_id, l.instance_id, l.class, s.signal, s.unit,
           CASE s.col WHEN 'registers' THEN l.registers WHEN 'local_words' THEN l.local_words
                      WHEN 'shared_bytes' THEN l.shared_bytes WHEN 'num_warps' THEN l.num_warps
                      WHEN 'num_stages' THEN l.num_stages ELSE l.sass_instructions END::DOUBLE AS value
    FROM launch l JOIN want w ON w.run_id = l.run_id JOIN _j_csig s ON s.signal = w.signal
), own AS (
    SELECT run_id, instance_id, signal, max(value) AS value FROM v GROUP BY ALL
), inc AS (
    SELECT v.run_id, a.ancestor_id AS instance_id, v.signal, any_value(v.unit) AS unit, max(v.value) AS value,
           count(*) AS n, count(*) FILTER (WHERE v.class = 'exact') AS n_exact,
           count(*) FILTER (WHERE v.class = 'temporal') AS n_temporal
    FROM v JOIN _j_anc a ON a.run_id = v.run_id AND a.instance_id = v.instance_id GROUP BY ALL
)
SELECT inc.run_id, inc.instance_id, inc.signal, inc.value, own.value, inc.unit, inc.n, inc.n_exact, 0,
       inc.n_temporal, 0, 0, 'compiler', pv.provenance_id
FROM inc
JOIN _j_prov pv ON pv.run_id = inc.run_id AND pv.backend = 'compiler'
LEFT JOIN own ON own.run_id = inc.run_id AND own.instance_id = inc.instance_id AND own.signal = inc.signal
WHERE inc.value IS NOT NULL
"""

# -- Nsight Compute kernels: matched to the reference (timing) run by path, position and name ---------------------
# the run with the most kernel records (exact ones counted in _j_kxs, the others in _j_ka), timed runs first
REFERENCE_RUN = """
WITH counts AS (
    SELECT run_id, sum(w) AS n FROM _j_kxs WHERE kind = 'kernel' GROUP BY run_id
    UNION ALL SELECT run_id, count(DISTINCT key) FROM _j_ka WHERE kind = 'kernel' GROUP BY run_id
)
SELECT c.run_id FROM counts c JOIN runs r USING (run_id)
WHERE c.run_id NOT IN (SELECT run_id FROM ncu_kernels WHERE run_id IN (SELECT run_id FROM _j_runs))
GROUP BY c.run_id, r.plan_index
ORDER BY bool_or(c.run_id NOT IN (SELECT run_id FROM _j_timed)), sum(c.n) DESC, r.plan_index LIMIT 1
"""

TIMING_SEQUENCE = """
CREATE OR REPLACE TEMP TABLE _j_tseq AS
SELECT k.run_id, i.path, k.instance_id, i.repetition, i.rep_index, k.name, k.key, k.end_ns - k.start_ns AS dur,
       (row_number() OVER (PARTITION BY k.instance_id ORDER BY k.correlation_id, k.start_ns, k.key) - 1)::INTEGER
           AS ordinal,
       row_number() OVER (PARTITION BY i.path ORDER BY i.start_ns, i.instance_id, k.correlation_id, k.start_ns, k.key)
           AS seq
FROM _j_ke k
JOIN _j_insti i ON i.run_id = k.run_id AND i.instance_id = k.instance_id
WHERE k.run_id = ? AND k.kind = 'kernel'
"""

# Each ncu kernel is placed in the timing run's instance of the same path and instance index (the NVTX payload the
# region pushed in the ncu run), at its ordinal within that instance; kernels whose instance index ncu's reader
# inferred from path changes (no payload) are placed by position under their path instead (the n-th kernel ncu
# profiled under a path is the n-th the timing run launched there).  Then each instance is compared on its own:
# an instance whose ncu kernels differ from the timing run's (another name at some ordinal, or another count) is
# `mismatch` with the first difference kept; every other instance's kernels stay `ordinal`, so one instance that
# differs (autotuning, lazy initialisation) never takes the counters of the instances that agree with it.
NCU_MATCH = """
CREATE OR REPLACE TEMP TABLE _j_nm AS
WITH n AS (
    SELECT run_id, kernel_key, path, instance_index, coalesce(instance_inferred, false) AS inferred,
           ordinal AS n_ordinal, name,
           row_number() OVER (PARTITION BY run_id, path ORDER BY instance_index, ordinal) AS seq
    FROM ncu_kernels WHERE run_id IN (SELECT run_id FROM _j_runs)
), ri AS (  -- the reference run's instances by (path, instance index)
    SELECT run_id, instance_id, path, instance_index, repetition, rep_index FROM _j_insti WHERE run_id = ?
), placed AS (
    SELECT n.*, ri.run_id AS ref_run_id, ri.instance_id, n.n_ordinal AS ordinal, ri.repetition, ri.rep_index
    FROM n LEFT JOIN ri ON ri.path = n.path AND ri.instance_index = n.instance_index
    WHERE NOT n.inferred
    UNION ALL BY NAME
    SELECT n.*, t.run_id AS ref_run_id, t.instance_id, t.ordinal, t.repetition, t.rep_index
    FROM n LEFT JOIN _j_tseq t ON t.path = n.path AND t.seq = n.seq
    WHERE n.inferred
), m AS (
    SELECT p.*, t.name AS ref_name, t.dur AS ref_dur
    FROM placed p LEFT JOIN _j_tseq t ON t.instance_id = p.instance_id AND t.ordinal = p.ordinal
), ref_n AS (SELECT instance_id, count(*) AS n_ref FROM _j_tseq GROUP BY instance_id),
inst AS (  -- per (ncu run, reference instance): does its kernel sequence agree with the timing run's?
    SELECT m.run_id, m.instance_id, count(*) AS n_ncu, any_value(coalesce(r.n_ref, 0)) AS n_ref,
           min(m.ordinal) FILTER (WHERE m.name IS DISTINCT FROM m.ref_name) AS first_diff,
           any_value(m.path) AS path, any_value(m.rep_index) AS rep_index, any_value(m.repetition) AS repetition,
           any_value(m.instance_index) AS instance_index
    FROM m LEFT JOIN ref_n r USING (instance_id) WHERE m.instance_id IS NOT NULL GROUP BY m.run_id, m.instance_id
), d AS (
    SELECT i.run_id, i.instance_id,
           CASE WHEN i.first_diff IS NOT NULL
                    THEN 'kernel sequences differ at ordinal ' || i.first_diff || ' of ' || i.path || ' #'
                         || i.instance_index || ' (repetition ' || i.repetition || '): timing run ran '
                         || coalesce(left(any_value(m.ref_name) FILTER (WHERE m.ordinal = i.first_diff), 80),
                                     '(nothing)')
                         || ', ncu run ran '
                         || coalesce(left(any_value(m.name) FILTER (WHERE m.ordinal = i.first_diff), 80), '(nothing)')
                         || CASE WHEN i.n_ncu <> i.n_ref
                                 THEN ' (' || i.n_ref || ' kernels in the timing run, ' || i.n_ncu || ' under ncu)'
                                 ELSE '' END
                WHEN i.n_ncu <> i.n_ref
                    THEN 'kernel counts differ in ' || i.path || ' #' || i.instance_index || ' (repetition '
                         || i.repetition || '): the timing run launched ' || i.n_ref || ', ncu profiled ' || i.n_ncu
           END AS difference
    FROM inst i JOIN m ON m.run_id = i.run_id AND m.instance_id = i.instance_id
    GROUP BY i.run_id, i.instance_id, i.first_diff, i.path, i.instance_index, i.repetition, i.n_ncu, i.n_ref
), paths AS (SELECT path, count(*) AS n_ref FROM _j_tseq GROUP BY path)
SELECT m.run_id, m.kernel_key, m.path, m.seq, m.name, m.ref_run_id, m.instance_id, m.ordinal, m.repetition,
       m.rep_index, m.ref_dur,
       CASE WHEN m.instance_id IS NULL AND coalesce(p.n_ref, 0) = 0 THEN 'unattributed'
            WHEN m.instance_id IS NULL OR d.difference IS NOT NULL THEN 'mismatch'
            ELSE 'ordinal' END AS class,
       CASE WHEN coalesce(m.path, '') = ''
                THEN 'profiled outside every region (no argus NVTX range was open)'
            WHEN m.instance_id IS NULL AND coalesce(p.n_ref, 0) = 0
                THEN 'no kernel of the timing run ran under ' || m.path
            WHEN m.instance_id IS NULL AND NOT m.inferred
                THEN 'the timing run has no instance #' || m.instance_index || ' of ' || m.path
            WHEN m.instance_id IS NULL
                THEN 'the ncu run launched more kernels under ' || m.path || ' than the timing run ('
                     || m.seq || ' > ' || p.n_ref || ')'
            WHEN d.difference IS NOT NULL THEN d.difference
            WHEN m.inferred
                THEN 'same path, position under it and name as in the timing run (instance index inferred)'
            ELSE 'same path, instance, kernel ordinal and name as in the timing run' END AS reason
FROM m
LEFT JOIN d ON d.run_id = m.run_id AND d.instance_id = m.instance_id
LEFT JOIN paths p ON p.path = m.path
"""

# without a timing run: the ncu run's own instance with the same path and instance index (NVTX path: exact)
NCU_OWN = """
CREATE OR REPLACE TEMP TABLE _j_nm AS
SELECT n.run_id, n.kernel_key, n.path, NULL::BIGINT AS seq, n.name, i.run_id AS ref_run_id, i.instance_id,
       n.ordinal, i.repetition, i.rep_index, NULL::BIGINT AS ref_dur,
       CASE WHEN i.instance_id IS NULL THEN 'unattributed' WHEN n.instance_inferred THEN 'ordinal'
            ELSE 'exact' END AS class,
       CASE WHEN i.instance_id IS NULL
                THEN 'the ncu run recorded no instance #' || n.instance_index || ' of ' || n.path
            WHEN n.instance_inferred
                THEN 'NVTX range path of the profiled kernel; its instance index was inferred from path changes '
                     || '(no timing run to match against)'
            ELSE 'NVTX range path and payload of the profiled kernel' END AS reason
FROM ncu_kernels n
LEFT JOIN (SELECT j.*, r.instance_index FROM _j_insti j JOIN region_instances r USING (run_id, instance_id)) i
  ON i.run_id = n.run_id AND i.path = n.path AND i.instance_index = n.instance_index
WHERE n.run_id IN (SELECT run_id FROM _j_runs)
"""

NCU_ATTRIBUTIONS = """
INSERT INTO attribution_rows (run_id, evidence, evidence_id, instance_id, class, weight, reason, target_run_id)
SELECT run_id, 'ncu_kernel', kernel_key, instance_id, class, 1.0, reason, ref_run_id FROM _j_nm
"""

# The ncu counters of each instance, combined by each signal's aggregation rule (``_j_agg``, from the signal catalog:
# plan.catalog.aggregation): ``sum`` adds; ``mean`` is the mean over the instance's kernels weighted by each kernel's
# duration (the timing run's kernel matched at the same ordinal, else ncu's own gpu__time_duration, else equal
# weights), so a percentage never grows by combining; ``max``/``min`` as such; ``fact`` (launch attributes) the
# largest kernel's.  Inclusive over nested instances, exclusive over the instance's own kernels.
NCU_VALUES = """
INSERT INTO _j_iv (run_id, instance_id, signal, inclusive, exclusive, unit, evidence, w_exact, w_ordinal,
                 w_temporal, w_ambiguous, w_mismatch, backend, provenance_id)
WITH v AS (
    SELECT nm.ref_run_id AS run_id, nm.instance_id, m.signal, m.value, m.unit, m.provenance_id, nm.class,
           coalesce(g.agg, 'mean') AS agg, greatest(coalesce(nm.ref_dur, d.value, 1), 1) AS w
    FROM _j_nm nm JOIN metrics m ON m.run_id = nm.run_id AND m.kernel_key = nm.kernel_key
    LEFT JOIN _j_agg g ON g.signal = m.signal
    LEFT JOIN metrics d ON d.run_id = nm.run_id AND d.kernel_key = nm.kernel_key
                       AND d.signal = 'hw:gpu__time_duration.sum' AND d.value > 0
    WHERE nm.class IN ('ordinal', 'exact', 'mismatch') AND nm.instance_id IS NOT NULL AND m.value IS NOT NULL
), x AS (  -- mismatched kernels count as evidence but give no value
    SELECT run_id, instance_id, signal, any_value(unit) AS unit, any_value(agg) AS agg,
           any_value(provenance_id) AS provenance_id, sum(value) FILTER (WHERE class <> 'mismatch') AS s,
           sum(value * w) FILTER (WHERE class <> 'mismatch') AS sw, sum(w) FILTER (WHERE class <> 'mismatch') AS ww,
           max(value) FILTER (WHERE class <> 'mismatch') AS hi, min(value) FILTER (WHERE class <> 'mismatch') AS lo,
           count(*) FILTER (WHERE class <> 'mismatch') AS n, count(*) FILTER (WHERE class = 'exact') AS n_exact,
           count(*) FILTER (WHERE class = 'mismatch') AS n_mis
    FROM v GROUP BY run_id, instance_id, signal
), inc AS (
    SELECT a.run_id, a.ancestor_id AS instance_id, x.signal, any_value(x.unit) AS unit, any_value(x.agg) AS agg,
           any_value(x.provenance_id) AS provenance_id, sum(x.s) AS s, sum(x.sw) AS sw, sum(x.ww) AS ww,
           max(x.hi) AS hi, min(x.lo) AS lo, sum(x.n) AS n, sum(x.n_exact) AS n_exact, sum(x.n_mis) AS n_mis
    FROM x JOIN _j_anc a ON a.run_id = x.run_id AND a.instance_id = x.instance_id GROUP BY ALL
)
SELECT inc.run_id, inc.instance_id, inc.signal,
       CASE WHEN inc.n = 0 THEN NULL WHEN inc.agg = 'sum' THEN inc.s WHEN inc.agg IN ('max', 'fact') THEN inc.hi
            WHEN inc.agg = 'min' THEN inc.lo ELSE inc.sw / inc.ww END,
       CASE WHEN coalesce(x.n, 0) = 0 THEN (CASE WHEN inc.agg = 'sum' AND inc.n_mis = 0 THEN 0 END)
            WHEN inc.agg = 'sum' THEN x.s WHEN inc.agg IN ('max', 'fact') THEN x.hi WHEN inc.agg = 'min' THEN x.lo
            ELSE x.sw / x.ww END,
       inc.unit, inc.n + inc.n_mis, inc.n_exact, inc.n - inc.n_exact, 0, 0, inc.n_mis, 'ncu', inc.provenance_id
FROM inc LEFT JOIN x USING (run_id, instance_id, signal)
"""

# the hw: signals of the join's ncu kernels, whose aggregation rules the join registers as ``_j_agg``
NCU_SIGNALS = """
SELECT DISTINCT m.signal FROM metrics m
WHERE m.run_id IN (SELECT run_id FROM _j_runs) AND m.kernel_key IS NOT NULL AND m.signal LIKE 'hw:%'
"""

INSTANCE_MATCHES = """
INSERT INTO instance_matches (run_id, instance_id, ref_run_id, ref_instance_id, path, repetition, rep_index, status,
                              difference)
WITH other AS (SELECT run_id FROM _j_runs WHERE run_id <> ?),
o AS (SELECT i.* FROM _j_insti i WHERE i.run_id IN (SELECT run_id FROM other) AND NOT i.warmup),
r AS (SELECT i.* FROM _j_insti i WHERE i.run_id = ? AND NOT i.warmup),  -- warm-up instances are never measured
bad AS (SELECT run_id, instance_id AS ref_instance_id, any_value(reason) AS reason
        FROM _j_nm WHERE class = 'mismatch' AND instance_id IS NOT NULL GROUP BY ALL),
pairs AS (
    SELECT oth.run_id, o.instance_id, r.run_id AS ref_run_id, r.instance_id AS ref_instance_id,
           coalesce(o.path, r.path) AS path, coalesce(o.repetition, r.repetition) AS repetition,
           coalesce(o.rep_index, r.rep_index) AS rep_index
    FROM other oth
    CROSS JOIN r
    FULL OUTER JOIN o ON o.run_id = oth.run_id AND o.region_id IS NOT DISTINCT FROM r.region_id AND o.path = r.path
                     AND o.repetition = r.repetition AND o.rep_index = r.rep_index
),
ncu_runs AS (  -- runs with ncu kernels, and ncu runs that profiled none (their instances were not replayed)
    SELECT DISTINCT run_id FROM _j_nm WHERE run_id IS NOT NULL
    UNION SELECT run_id FROM runs WHERE run_id IN (SELECT run_id FROM other) AND list_contains(backends, 'ncu')
),
placed AS (SELECT DISTINCT run_id, instance_id FROM _j_nm WHERE instance_id IS NOT NULL),
owns AS (SELECT instance_id, count(*) AS n FROM _j_tseq GROUP BY instance_id)
SELECT p.run_id, p.instance_id, p.ref_run_id, p.ref_instance_id, p.path, p.repetition, p.rep_index,
       CASE WHEN bad.reason IS NOT NULL THEN 'mismatch'  -- evidence of this run disagrees with the reference
            WHEN p.instance_id IS NULL OR p.ref_instance_id IS NULL THEN 'missing'
            WHEN nr.run_id IS NOT NULL AND ow.n > 0 AND pl.run_id IS NULL THEN 'not replayed'
            ELSE 'match' END,
       CASE WHEN bad.reason IS NOT NULL THEN bad.reason
            WHEN p.instance_id IS NULL THEN 'only the reference run has this instance'
            WHEN p.ref_instance_id IS NULL THEN 'the reference run has no such instance'
            WHEN nr.run_id IS NOT NULL AND ow.n > 0 AND pl.run_id IS NULL
                THEN 'ncu replayed none of its ' || ow.n || ' kernel(s): outside the request''s scope (or launched '
                     || 'on a thread without the region''s NVTX range)' END
FROM pairs p LEFT JOIN bad ON bad.run_id = p.run_id AND bad.ref_instance_id = p.ref_instance_id
LEFT JOIN ncu_runs nr ON nr.run_id = p.run_id
LEFT JOIN placed pl ON pl.run_id = p.run_id AND pl.instance_id = p.ref_instance_id
LEFT JOIN owns ow ON ow.instance_id = p.ref_instance_id
WHERE p.run_id IS NOT NULL
"""

# Each launched kernel is linked to the compiled binaries it can be: the same run's facts of the same name whose
# registers per thread, dynamic shared memory (Triton's `shared` is passed at launch) and threads per block agree
# with the launch record (a fact that does not state one of them does not restrict by it).  One row per (binary,
# region instance that launched it): `exact` when every such launch had this binary as its only candidate,
# `ambiguous` (weight 1/n) when n binaries fit a launch; a binary no traced launch fits is `unattributed`.
COMPILER_ATTRIBUTIONS = """
INSERT INTO attribution_rows (run_id, evidence, evidence_id, instance_id, class, weight, reason, target_run_id)
WITH f AS (
    SELECT run_id, name, 'bin:' || name || ':' || coalesce(binary_hash, '') AS key, registers, shared_bytes,
           threads, coalesce(source, '') AS source
    FROM kernel_facts WHERE run_id IN (SELECT run_id FROM _j_runs)
), launched AS (  -- kernels with the instance they were attributed to (exact, temporal or ambiguous candidates)
    SELECT run_id, key, instance_id, 1.0 AS w FROM _j_ke WHERE kind = 'kernel'
    UNION ALL
    SELECT run_id, key, instance_id, weight FROM _j_ka WHERE kind = 'kernel' AND instance_id IS NOT NULL
), c AS (  -- candidate binaries of each launch
    SELECT k.run_id, k.key AS kkey, f.key AS fkey, k.registers, k.dynamic_smem, k.threads,
           count(*) OVER (PARTITION BY k.run_id, k.key) AS n
    FROM _j_k k JOIN f ON f.run_id = k.run_id AND f.name = k.name
    WHERE k.kind = 'kernel'
      AND (f.registers IS NULL OR k.registers IS NULL OR f.registers = k.registers)
      AND (f.source <> 'triton' OR f.shared_bytes IS NULL OR k.dynamic_smem IS NULL OR f.shared_bytes = k.dynamic_smem)
      AND (f.threads IS NULL OR k.threads IS NULL OR f.threads = k.threads)
), per AS (
    SELECT c.run_id, c.fkey, l.instance_id, count(*) AS launches, max(c.n) AS n, sum(l.w / c.n) AS w,
           any_value(c.registers) AS regs, any_value(c.dynamic_smem) AS dsm, any_value(c.threads) AS thr
    FROM c JOIN launched l ON l.run_id = c.run_id AND l.key = c.kkey
    GROUP BY c.run_id, c.fkey, l.instance_id
)
SELECT run_id, 'compiler', fkey, instance_id, CASE WHEN n = 1 THEN 'exact' ELSE 'ambiguous' END,
       CASE WHEN n = 1 THEN 1.0 ELSE 1.0 / n END,
       launches || ' launch(es) of this binary in the instance, linked by name and the launch record''s '
           || regs || ' registers/thread, ' || dsm || ' B dynamic shared memory, ' || thr || ' threads/block'
           || CASE WHEN n > 1 THEN ' (' || n || ' compiled binaries fit these launches equally)' ELSE '' END,
       run_id
FROM per
UNION ALL
SELECT f.run_id, 'compiler', f.key, NULL, 'unattributed', 1.0,
       CASE WHEN EXISTS (SELECT 1 FROM _j_k k WHERE k.run_id = f.run_id AND k.name = f.name)
            THEN 'a compiled binary of a launched kernel, but no traced launch had its registers, shared memory '
                 || 'and block size (another configuration ran)'
            ELSE 'static fact of a kernel function that no traced launch of these runs ran' END,
       NULL
FROM f WHERE f.key NOT IN (SELECT fkey FROM per WHERE run_id = f.run_id)
"""

# what was attributed, per run, evidence kind and class: items (distinct evidence; split samples counted once per
# class they reach), weight, and for GPU records the weighted device time
SUMMARY = """
WITH rows AS (
    SELECT run_id, evidence, class, evidence_id, weight FROM attribution_rows
    WHERE run_id IN (SELECT run_id FROM _j_runs) AND evidence IN ('ncu_kernel', 'sample', 'compiler', 'device_launch')
), inst AS (
    SELECT run_id, 'instance' AS evidence, 'exact' AS class, count(*) AS items, count(*)::DOUBLE AS weight
    FROM _j_inst GROUP BY run_id
)
SELECT run_id, kind AS evidence, 'exact' AS class, round(sum(w))::BIGINT AS items, sum(w) AS weight, sum(dur) AS time_ns
FROM _j_kxs GROUP BY ALL
UNION ALL
SELECT run_id, kind AS evidence, class, round(sum(weight))::BIGINT AS items, sum(weight) AS weight,
       sum(weight * (end_ns - start_ns)) AS time_ns
FROM _j_ka GROUP BY ALL
UNION ALL
SELECT run_id, evidence, class, count(DISTINCT evidence_id), sum(weight), NULL FROM rows GROUP BY ALL
UNION ALL
SELECT run_id, evidence, class, items, weight, NULL FROM inst
UNION ALL  -- class '*': every item once
SELECT run_id, kind, '*', round(sum(w))::BIGINT, sum(w), sum(dur) FROM (
    SELECT run_id, kind, w, dur FROM _j_kxs
    UNION ALL SELECT run_id, kind, weight, weight * (end_ns - start_ns) FROM _j_ka
) GROUP BY ALL
UNION ALL
SELECT run_id, evidence, '*', count(DISTINCT evidence_id), sum(weight), NULL FROM rows GROUP BY ALL
UNION ALL
SELECT run_id, evidence, '*', items, weight, NULL FROM inst
"""

HAS_NCU = "SELECT count(*) FROM ncu_kernels WHERE run_id IN (SELECT run_id FROM _j_runs)"
HAS_NCU_RUN = (
    "SELECT count(*) FROM runs WHERE run_id IN (SELECT run_id FROM _j_runs) AND list_contains(backends, 'ncu')"
)
HAS_FACTS = "SELECT count(*) FROM kernel_facts WHERE run_id IN (SELECT run_id FROM _j_runs)"

# no ncu kernels: an empty match table, so that instance matching has nothing to flag
NCU_NONE = """
CREATE OR REPLACE TEMP TABLE _j_nm AS
SELECT NULL::VARCHAR AS run_id, NULL::BIGINT AS instance_id, NULL::VARCHAR AS class, NULL::VARCHAR AS reason
WHERE false
"""
