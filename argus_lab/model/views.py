"""The store's views and the layout of its values, defined with the tables (:mod:`argus_lab.model.schema` builds
the views from these; the join writes what they read).

* ``attributions`` is the stored ``attribution_rows`` UNION ALL :data:`EXACT_ATTRIBUTIONS`: the exact attributions
  that the kernels table implies for runs joined since join version 4 (:data:`DERIVED`), computed when read.
* ``instance_values`` is the wide view (:data:`INSTANCE_VALUE_COLUMNS`) over values stored narrow: a
  ``value_series`` row per (:data:`SERIES_KEY`) and numbers per series in ``instance_value_rows``
  (:func:`store_values_sql`).
"""

from __future__ import annotations

DERIVED = "derived"
"""The join's provenance row of a run says ``"exact_rows": "derived"`` in its settings when the run's exact
kernel/copy/set attributions and its instances' own rows are derived by the ``attributions`` view
(:data:`EXACT_ATTRIBUTIONS`); joins before version 4 wrote them as rows, which older stores still hold."""

_DERIVED_RUNS = f"""(SELECT run_id FROM provenance
                WHERE backend = 'join' AND json_extract_string(settings, '$.exact_rows') = '{DERIVED}')"""

# The rows of the store's ``attributions`` view that are not stored (argus_lab.model.schema builds the view: the
# stored rows UNION ALL these).  A record that carried the id of an instance its run recorded is ``exact``; so is
# each region instance for its own host clocks.  The same rules as the join's (KERNEL_EXACT), computed when read:
# a million exact rows cost a second to write and nothing to derive.
_EXACT_LAUNCH = "external correlation id"  # the text stored rows of earlier joins carry (the view must equal them)

EXACT_ATTRIBUTIONS = f"""
SELECT k.run_id, coalesce(k.kind, 'kernel') AS evidence,
       coalesce(k.kernel_key, concat_ws('/', k.device_id, k.context_id, k.correlation_id, k.start_ns)) AS evidence_id,
       k.instance_id, 'exact' AS class, 1.0::DOUBLE AS weight,
       CASE WHEN coalesce(k.graph_id, 0) = 0 AND k.end_ns <= i.end_ns THEN '{_EXACT_LAUNCH}'
            ELSE concat_ws('; ', '{_EXACT_LAUNCH}',
                           CASE WHEN coalesce(k.graph_id, 0) <> 0
                                THEN 'CUDA graph ' || k.graph_id || ' replay (shares the launch''s correlation id)' END,
                           CASE WHEN k.end_ns > i.end_ns
                                THEN printf('ran %.1f us past the region''s host exit', (k.end_ns - i.end_ns) / 1e3)
                           END) END AS reason,
       k.run_id AS target_run_id
FROM kernels k JOIN region_instances i ON i.run_id = k.run_id AND i.instance_id = k.instance_id
WHERE k.run_id IN {_DERIVED_RUNS}
UNION ALL
SELECT i.run_id, 'instance', CAST(i.instance_id AS VARCHAR), i.instance_id, 'exact', 1.0::DOUBLE,
       'the region instance''s own host clocks (entry and exit)', i.run_id
FROM region_instances i
WHERE i.run_id IN {_DERIVED_RUNS}
"""


# -- instance values: the columns of the store's ``instance_values`` view, and wide values stored narrow -----------
INSTANCE_VALUE_COLUMNS: tuple[str, ...] = (
    "run_id", "instance_id", "signal", "inclusive", "exclusive", "unit", "evidence", "w_exact", "w_ordinal",
    "w_temporal", "w_ambiguous", "w_mismatch", "backend", "provenance_id",
)  # fmt: skip
"""The columns of the ``instance_values`` view, in order (what the join stages and stores narrow)."""

SERIES_KEY: tuple[str, ...] = ("run_id", "signal", "unit", "backend", "provenance_id")
"""What one ``value_series`` row stands for."""


LARGEST_SERIES = "(SELECT coalesce(max(series), 0) FROM value_series)"
"""The store's largest series number (0 for none): new series are numbered after it."""


def store_values_sql(source: str, offset: str) -> tuple[str, ...]:
    """Statements storing the wide instance values of ``source`` (a table or view with the columns of
    :data:`INSTANCE_VALUE_COLUMNS`) narrow: a ``value_series`` row per distinct series of ``source``, numbered from
    ``offset`` + 1 (a scalar SQL expression, evaluated before anything is inserted: the store's largest series, so
    that numbers stay unique), then the rows.  Every series of ``source`` must be new to the store (the join deletes
    its runs' series first; a migration starts from none)."""
    key = ", ".join(SERIES_KEY)
    same = " AND ".join(f"s.{c} IS NOT DISTINCT FROM v.{c}" for c in SERIES_KEY)
    numbers = [c for c in INSTANCE_VALUE_COLUMNS if c not in SERIES_KEY]
    return (
        f"CREATE OR REPLACE TEMP TABLE _new_series AS SELECT ({offset}) + row_number() OVER (ORDER BY {key}) "
        f"AS series, {key} FROM (SELECT DISTINCT {key} FROM {source})",
        f"INSERT INTO value_series (series, {key}) SELECT series, {key} FROM _new_series",
        f"INSERT INTO instance_value_rows (series, {', '.join(numbers)}) SELECT s.series, "
        f"{', '.join('v.' + c for c in numbers)} FROM {source} v JOIN _new_series s ON {same}",
        "DROP TABLE _new_series",
    )


__all__ = [
    "DERIVED",
    "EXACT_ATTRIBUTIONS",
    "INSTANCE_VALUE_COLUMNS",
    "LARGEST_SERIES",
    "SERIES_KEY",
    "store_values_sql",
]
