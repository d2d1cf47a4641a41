"""Time samples (NVML, PM sampling) over region instances: the join's one implementation of sample windows.

A sample at ``t`` stands for the time nearer to it than to its neighbours of the same series (device, signal);
PM samples carry their own window end.  Each window is cut at the innermost-instance timeline of every thread
(``_j_seg``) and split over the instances it overlaps: one ``temporal`` attribution per piece (``ambiguous`` when
instances of several threads overlap the window), ``unattributed`` for what lies outside every region.  Values
per instance: *levels* (units in :data:`LEVEL_UNITS`: W, MHz, %, C ...) are the time-weighted mean over the
instance; other sampled values (PM ``.sum`` counters) are the overlapped share of each sample's value.  Each value
is labelled with the backend that sampled it (:data:`SAMPLE_BACKENDS`).

Run by :mod:`argus_lab.join.attribution` after the kernel attribution (it reads ``_j_runs``, ``_j_threads``,
``_j_seg``, ``_j_anc`` and ``_j_prov``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

LEVEL_UNITS: tuple[str, ...] = ("W", "MHz", "C", "%", "pct", "percent", "ratio")
"""Units of sampled *levels* (time-weighted mean over an instance); other sampled values are split by share."""

SAMPLE_BACKENDS: tuple[tuple[str, str], ...] = (("pm:", "pm"), ("", "nvml"))
"""(signal prefix, backend) of sampled signals, the longest matching prefix wins: ``pm:`` signals come from PM
sampling, the others (``sys.*``) from NVML."""

SAMPLES = """
CREATE OR REPLACE TEMP TABLE _j_s AS
WITH s AS (
    SELECT run_id, coalesce(device_id, 0) AS device_id, signal, t_ns, value, unit,
           lag(t_ns) OVER g AS prev_ns, lead(t_ns) OVER g AS next_ns
    FROM samples WHERE run_id IN (SELECT run_id FROM _j_runs) AND value IS NOT NULL
    WINDOW g AS (PARTITION BY run_id, coalesce(device_id, 0), signal ORDER BY t_ns)
)
SELECT run_id, device_id, signal, t_ns, value, unit,
       signal || '@' || device_id || '@' || t_ns AS key,
       CASE WHEN prev_ns IS NOT NULL THEN (prev_ns + t_ns) // 2
            WHEN next_ns IS NOT NULL THEN t_ns - (next_ns - t_ns) // 2 ELSE t_ns END AS w0,
       CASE WHEN next_ns IS NOT NULL THEN (t_ns + next_ns) // 2
            WHEN prev_ns IS NOT NULL THEN t_ns + (t_ns - prev_ns) // 2 ELSE t_ns + 1 END AS w1
FROM s
"""

# The timeline of each thread (``_j_seg``: region entries and exits) merged with the window boundaries of each
# series: consecutive boundaries delimit pieces, each lying inside one window and one innermost instance (the last
# timeline event at or before the piece's start, carried forward; a window boundary sorts after the region events of
# its nanosecond).  The pieces' lengths per (sample, thread, innermost instance).
SAMPLE_PIECES = """
CREATE OR REPLACE TEMP TABLE _j_sp AS
WITH series AS (SELECT DISTINCT run_id, device_id, signal FROM _j_s),
grp AS (
    SELECT th.run_id, th.rank, th.thread_id, sr.device_id, sr.signal FROM _j_threads th JOIN series sr USING (run_id)
),
pts AS (
    SELECT g.run_id, g.rank, g.thread_id, g.device_id, g.signal, s.t AS b, s.key, 0 AS w, s.inner_id
    FROM grp g JOIN _j_seg s ON s.run_id = g.run_id AND s.rank = g.rank AND s.thread_id = g.thread_id
    UNION ALL
    SELECT g.run_id, g.rank, g.thread_id, g.device_id, g.signal, x.b, x.b * 2 + 1, 1, NULL
    FROM grp g JOIN (SELECT run_id, device_id, signal, w0 AS b FROM _j_s
                     UNION ALL SELECT run_id, device_id, signal, w1 FROM _j_s) x
      ON x.run_id = g.run_id AND x.device_id = g.device_id AND x.signal = g.signal
),
pieces AS (
    SELECT run_id, rank, thread_id, device_id, signal, b, lead(b) OVER o AS b2,
           last_value(inner_id IGNORE NULLS) OVER (o ROWS UNBOUNDED PRECEDING) AS inner_id
    FROM pts
    WINDOW o AS (PARTITION BY run_id, rank, thread_id, device_id, signal ORDER BY key, w)
)
SELECT p.run_id, w.key, p.signal, w.unit, w.value, p.rank, p.thread_id, p.inner_id,
       sum(p.b2 - p.b) AS len, any_value(w.w1 - w.w0) AS wlen
FROM pieces p ASOF JOIN _j_s w
  ON w.run_id = p.run_id AND w.device_id = p.device_id AND w.signal = p.signal AND p.b >= w.w0
WHERE p.b2 > p.b AND p.b < w.w1 AND p.inner_id <> 0
GROUP BY ALL
"""

SAMPLE_ATTRIBUTIONS = """
INSERT INTO attribution_rows (run_id, evidence, evidence_id, instance_id, class, weight, reason, target_run_id)
WITH tot AS (
    SELECT run_id, key, sum(len / wlen) AS covered, count(DISTINCT (rank, thread_id)) AS threads FROM _j_sp GROUP BY ALL
)
SELECT p.run_id, 'sample', p.key, p.inner_id,
       CASE WHEN t.threads > 1 THEN 'ambiguous' ELSE 'temporal' END,
       p.len / p.wlen,
       CASE WHEN t.threads > 1
            THEN printf('%.1f%% of the sample window; region instances of %d threads overlap it', 100 * p.len / p.wlen,
                        t.threads)
            ELSE printf('%.1f%% of the sample window overlaps this instance', 100 * p.len / p.wlen) END,
       p.run_id
FROM _j_sp p JOIN tot t USING (run_id, key)
UNION ALL
SELECT s.run_id, 'sample', s.key, NULL, 'unattributed', greatest(0.0, 1.0 - coalesce(t.covered, 0)),
       printf('%.1f%% of the sample window lies outside every region',
              100 * greatest(0.0, 1.0 - coalesce(t.covered, 0))),
       NULL
FROM _j_s s LEFT JOIN tot t USING (run_id, key)
WHERE coalesce(t.covered, 0) < 1.0 - 1e-9
"""

# level signals (W, MHz, %, C): time-weighted mean; others (pm ... .sum): the overlapping fraction of the value
SAMPLE_VALUES = """
INSERT INTO instance_values (run_id, instance_id, signal, inclusive, exclusive, unit, evidence, w_exact, w_ordinal,
                             w_temporal, w_ambiguous, w_mismatch, backend, provenance_id)
WITH x AS (
    SELECT run_id, inner_id AS instance_id, signal, any_value(unit) AS unit,
           sum(value * len) AS vlen, sum(len) AS len, sum(value * len / wlen) AS vfrac, sum(len / wlen) AS w,
           count(*) AS n
    FROM _j_sp GROUP BY ALL
), amb AS (
    SELECT run_id, key FROM _j_sp GROUP BY ALL HAVING count(DISTINCT (rank, thread_id)) > 1
), xa AS (
    SELECT p.run_id, p.inner_id AS instance_id, p.signal, sum(p.len / p.wlen) AS w
    FROM _j_sp p SEMI JOIN amb USING (run_id, key) GROUP BY ALL
), inc AS (
    SELECT a.run_id, a.ancestor_id AS instance_id, x.signal, any_value(x.unit) AS unit, sum(x.vlen) AS vlen,
           sum(x.len) AS len, sum(x.vfrac) AS vfrac, sum(x.w) AS w, sum(x.n) AS n, sum(coalesce(xa.w, 0)) AS wa
    FROM x JOIN _j_anc a ON a.run_id = x.run_id AND a.instance_id = x.instance_id
    LEFT JOIN xa ON xa.run_id = x.run_id AND xa.instance_id = x.instance_id AND xa.signal = x.signal
    GROUP BY ALL
), lvl AS (SELECT unnest(?::VARCHAR[]) AS unit)
SELECT inc.run_id, inc.instance_id, inc.signal,
       CASE WHEN inc.unit IN (SELECT unit FROM lvl) THEN inc.vlen / nullif(inc.len, 0) ELSE inc.vfrac END,
       CASE WHEN inc.unit IN (SELECT unit FROM lvl) THEN x.vlen / nullif(x.len, 0) ELSE coalesce(x.vfrac, 0) END,
       inc.unit, inc.n, 0, 0, inc.w - inc.wa, inc.wa, 0,
       pv.backend, pv.provenance_id
FROM inc LEFT JOIN x USING (run_id, instance_id, signal)
JOIN _j_prov pv ON pv.run_id = inc.run_id AND pv.backend = {backend}
"""


def _backend_case() -> str:
    """SQL: the backend of ``inc.signal`` by :data:`SAMPLE_BACKENDS` (longest matching prefix first)."""
    arms = sorted(SAMPLE_BACKENDS, key=lambda pb: -len(pb[0]))
    whens = " ".join(f"WHEN starts_with(inc.signal, '{p}') THEN '{b}'" for p, b in arms)
    return f"CASE {whens} END"


def derive(con: duckdb.DuckDBPyConnection) -> None:
    """Attribute the samples of the join's runs and insert their per-instance values."""
    con.execute(SAMPLES)
    row = con.execute("SELECT count(*) FROM _j_s").fetchone()
    if not row or not row[0]:
        return
    con.execute(SAMPLE_PIECES)
    con.execute(SAMPLE_ATTRIBUTIONS)
    con.execute(SAMPLE_VALUES.replace("{backend}", _backend_case()), [list(LEVEL_UNITS)])


__all__ = ["LEVEL_UNITS", "SAMPLE_BACKENDS", "derive"]
