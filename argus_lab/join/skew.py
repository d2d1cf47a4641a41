"""Cross-rank skew of region instances (the join's last step, and the report's ranks table), in set-based SQL.

For a run with more than one rank, the same region occurrence -- same run, path, repetition and occurrence
index within the repetition *on each rank* (its n-th instance of that path there) -- is compared across the
ranks after putting every rank's host timestamps on rank 0's clock: ``corrected = t + offset`` of that rank
(:mod:`argus_lab.run.clock_sync`: ``rank-0 time = rank time + offset``; the mean of the rank's ``before`` and
``after`` estimates, 0 for rank 0 and for a rank whose offset was not estimated).  Per instance:

``rank.start_lag``  corrected start minus the earliest corrected start of the occurrence over the ranks
``rank.end_lag``    the same for ends

written as ``instance_values`` (unit ns, class exact, no exclusive value: a lag does not subtract) whose
provenance is the rank's clock record (the host record when the rank has none).  An occurrence seen on one rank
only gets no lag.  The statements run inside the join's transaction and use its ``_j_runs`` table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

SIGNALS: tuple[str, ...] = ("rank.start_lag", "rank.end_lag")

# per (run, rank): the offset to add to the rank's timestamps, and the provenance record it comes from; {runs} is
# the subquery of the runs it covers (the join's _j_runs, or bound run ids for the views: see offsets_of)
_OFFSETS = """
WITH p AS (
    SELECT run_id, provenance_id, TRY_CAST(settings->>'rank' AS INTEGER) AS rank, settings->>'phase' AS phase,
           settings->>'status' AS status, TRY_CAST(settings->>'offset_ns' AS BIGINT) AS offset_ns
    FROM provenance WHERE backend = 'clock' AND run_id IN ({runs})
)
SELECT run_id, rank,
       CASE WHEN rank = 0 THEN 0
            ELSE coalesce(round(avg(offset_ns) FILTER (WHERE status = 'estimated'))::BIGINT, 0) END AS offset_ns,
       bool_or(status IN ('estimated', 'reference')) AS estimated,
       arg_min(provenance_id, (status NOT IN ('estimated', 'reference'), phase <> 'before')) AS provenance_id
FROM p WHERE rank IS NOT NULL GROUP BY run_id, rank
"""

OFFSETS = "CREATE OR REPLACE TEMP TABLE _k_off AS " + _OFFSETS.format(runs="SELECT run_id FROM _j_runs")

OFFSETS_OF_RUNS = _OFFSETS.format(runs="SELECT unnest(?::VARCHAR[])")
"""The same offsets as a query over bound run ids (one parameter: the list of run ids): ``run_id, rank,
offset_ns, estimated, provenance_id``.  What the views use to put every rank on rank 0's clock, so that a
timeline and the lags agree."""


def offsets_of(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> dict[tuple[str, int], int]:
    """``{(run, rank): offset_ns}``: add it to a rank's host (and CUPTI) timestamps to get rank 0's clock."""
    rows = con.execute(OFFSETS_OF_RUNS, [run_ids]).fetchall()
    return {(str(r[0]), int(r[1])): int(r[2] or 0) for r in rows}


VALUES = """
INSERT INTO _j_iv (run_id, instance_id, signal, inclusive, exclusive, unit, evidence, w_exact, w_ordinal,
                 w_temporal, w_ambiguous, w_mismatch, backend, provenance_id)
WITH multi AS (
    SELECT run_id FROM region_instances WHERE run_id IN (SELECT run_id FROM _j_runs)
    GROUP BY run_id HAVING count(DISTINCT coalesce(rank, 0)) > 1
), i AS (
    SELECT i.run_id, i.instance_id, coalesce(i.rank, 0) AS rank, i.path, i.repetition,
           row_number() OVER (PARTITION BY i.run_id, coalesce(i.rank, 0), i.repetition, i.path
                              ORDER BY i.start_ns, i.instance_id) AS occ,
           i.start_ns + coalesce(o.offset_ns, 0) AS cs, i.end_ns + coalesce(o.offset_ns, 0) AS ce,
           coalesce(o.provenance_id, i.run_id || ':host') AS provenance_id
    FROM region_instances i
    LEFT JOIN _k_off o ON o.run_id = i.run_id AND o.rank = coalesce(i.rank, 0)
    WHERE i.run_id IN (SELECT run_id FROM multi)
), g AS (
    SELECT *, count(*) OVER w AS ranks, min(cs) OVER w AS first_start, min(ce) OVER w AS first_end
    FROM i WINDOW w AS (PARTITION BY run_id, path, repetition, occ)
)
SELECT g.run_id, g.instance_id, s.signal,
       (CASE s.signal WHEN 'rank.start_lag' THEN g.cs - g.first_start ELSE g.ce - g.first_end END)::DOUBLE,
       NULL, 'ns', g.ranks, g.ranks, 0, 0, 0, 0, 'host', g.provenance_id
FROM g CROSS JOIN (SELECT unnest(?::VARCHAR[]) AS signal) s
WHERE g.ranks > 1
"""

# the report's ranks table: per region path, the skew of each occurrence (its largest lag over the ranks), with
# its median and maximum over the occurrences, and the rank that was most often last.  Scope marker as in
# report.sql; warm-up instances left out.
RANKS = """
WITH v AS (
    SELECT v.run_id, v.signal, v.inclusive AS lag, i.path, coalesce(i.rank, 0) AS rank, i.repetition, i.start_ns,
           row_number() OVER (PARTITION BY v.run_id, v.signal, coalesce(i.rank, 0), i.repetition, i.path
                              ORDER BY i.start_ns, i.instance_id) AS occ
    FROM instance_values v
    JOIN region_instances i ON i.run_id = v.run_id AND i.instance_id = v.instance_id
    WHERE v.run_id IN (SELECT unnest(?::VARCHAR[])) AND v.signal IN ('rank.start_lag', 'rank.end_lag')
      AND NOT coalesce(i.warmup, false) /*SCOPE*/
), o AS (
    SELECT run_id, path, repetition, occ, signal, max(lag) AS skew, arg_max(rank, lag) AS last_rank,
           count(*) AS ranks, min(start_ns) AS first_ns
    FROM v GROUP BY ALL
)
SELECT path, max(ranks) AS ranks, count(*) FILTER (WHERE signal = 'rank.start_lag') AS occurrences,
       quantile_cont(skew, 0.5) FILTER (WHERE signal = 'rank.start_lag') AS start_skew_median,
       max(skew) FILTER (WHERE signal = 'rank.start_lag') AS start_skew_max,
       quantile_cont(skew, 0.5) FILTER (WHERE signal = 'rank.end_lag') AS end_skew_median,
       max(skew) FILTER (WHERE signal = 'rank.end_lag') AS end_skew_max,
       mode(last_rank) FILTER (WHERE signal = 'rank.start_lag') AS last_to_start,
       mode(last_rank) FILTER (WHERE signal = 'rank.end_lag') AS last_to_end,
       string_agg(DISTINCT run_id, ',' ORDER BY run_id) AS runs
FROM o GROUP BY path ORDER BY min(first_ns), path
"""


def derive(con: duckdb.DuckDBPyConnection) -> None:
    """Write the lag values of the join's runs that have several ranks (call after the join's own steps)."""
    con.execute(OFFSETS)
    con.execute(VALUES, [list(SIGNALS)])


__all__ = ["OFFSETS", "OFFSETS_OF_RUNS", "RANKS", "SIGNALS", "VALUES", "derive", "offsets_of"]
