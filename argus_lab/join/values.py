"""Where the join's instance values go: staged while it derives them, stored narrow once at its end.

The store keeps an instance value as numbers (``instance_value_rows``) under a *series* (``value_series``: the run,
signal, unit, backend and provenance it belongs to); the ``instance_values`` view joins them again.  The join's values
come two ways: SQL statements insert wide rows into the temporary table ``_j_iv`` (:data:`STAGE`), and array passes
(:mod:`argus_lab.join.kernel_values`) hand whole series as numpy arrays to :class:`Values`.  :meth:`Values.store`
numbers every series after the store's largest and writes all the rows with one insert (a million values written in
one statement cost a fraction of the same values written in several).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from argus_lab.join.arrays import registered
from argus_lab.model.views import INSTANCE_VALUE_COLUMNS, LARGEST_SERIES, SERIES_KEY

if TYPE_CHECKING:
    import duckdb

NUMBERS: tuple[str, ...] = tuple(c for c in INSTANCE_VALUE_COLUMNS if c not in SERIES_KEY)
"""The numeric columns of a stored value (``instance_id``, ``inclusive``, ``exclusive``, ``evidence``, ``w_*``)."""

STAGE = (
    "CREATE OR REPLACE TEMP TABLE _j_iv (run_id VARCHAR, instance_id BIGINT, signal VARCHAR, inclusive DOUBLE, "
    "exclusive DOUBLE, unit VARCHAR, evidence BIGINT, w_exact DOUBLE, w_ordinal DOUBLE, w_temporal DOUBLE, "
    "w_ambiguous DOUBLE, w_mismatch DOUBLE, backend VARCHAR, provenance_id VARCHAR)"
)
"""Where the join's SQL statements insert instance values (the columns of the ``instance_values`` view)."""

# the series the array passes hold (what the SQL statements ask when they look for values the join derived)
ARRAY_SERIES = (
    "CREATE OR REPLACE TEMP TABLE _j_vnp (run_id VARCHAR, signal VARCHAR, unit VARCHAR, backend VARCHAR, "
    "provenance_id VARCHAR, series BIGINT)"
)

DERIVED_SIGNALS = "SELECT DISTINCT run_id, signal FROM _j_iv UNION SELECT DISTINCT run_id, signal FROM _j_vnp"
"""(run, signal) of every value the join has derived so far."""

_KEY = ", ".join(SERIES_KEY)
_SAME = " AND ".join(f"s.{c} IS NOT DISTINCT FROM v.{c}" for c in SERIES_KEY)

# the staged series that no array holds, numbered after the arrays' (parameter: the first number)
SQL_SERIES = f"""
CREATE OR REPLACE TEMP TABLE _j_vsq AS
SELECT ? + row_number() OVER (ORDER BY {_KEY}) - 1 AS series, {_KEY}
FROM (SELECT DISTINCT {_KEY} FROM _j_iv) v
WHERE NOT EXISTS (SELECT 1 FROM _j_vnp s WHERE {_SAME})
"""

INSERT_SERIES = f"""
INSERT INTO value_series (series, {_KEY})
SELECT series, {_KEY} FROM _j_vnp UNION ALL SELECT series, {_KEY} FROM _j_vsq
"""

# every value: the arrays' rows (registered as _j_vrows) and the staged ones under their series
INSERT_ROWS = f"""
INSERT INTO instance_value_rows (series, {", ".join(NUMBERS)})
SELECT series, {", ".join(NUMBERS)} FROM _j_vrows
UNION ALL
SELECT s.series, {", ".join("v." + c for c in NUMBERS)}
FROM _j_iv v JOIN (SELECT series, {_KEY} FROM _j_vnp UNION ALL SELECT series, {_KEY} FROM _j_vsq) s ON {_SAME}
"""


@dataclass
class Values:
    """The instance values of one join: the staged SQL rows (``_j_iv``) and the series handed in as arrays."""

    keys: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    columns: list[dict[str, np.ndarray]] = field(default_factory=list)

    def begin(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create the (empty) staging tables."""
        con.execute(STAGE)
        con.execute(ARRAY_SERIES)

    def add(
        self,
        con: duckdb.DuckDBPyConnection,
        key: tuple[str, str, str, str, str],
        cols: dict[str, np.ndarray],
    ) -> None:
        """One series as arrays of equal length (every column of :data:`NUMBERS`); ``key`` = (run, signal, unit,
        backend, provenance).  A key given twice adds rows to the same series."""
        if key not in self.keys:
            self.keys.append(key)
            con.execute("INSERT INTO _j_vnp VALUES (?, ?, ?, ?, ?, ?)", [*key, len(self.keys) - 1])
        missing = set(NUMBERS) - set(cols)
        if missing:
            msg = f"internal: instance values without {sorted(missing)}"
            raise ValueError(msg)
        self.columns.append({"series": np.full(len(cols["instance_id"]), self.keys.index(key), dtype=np.int64), **cols})

    def store(self, con: duckdb.DuckDBPyConnection) -> None:
        """Number every series after the store's largest and write the series and all the values."""
        rows = con.execute(f"SELECT {LARGEST_SERIES}").fetchall()
        first = int(rows[0][0] if rows else 0) + 1
        con.execute("UPDATE _j_vnp SET series = series + ?", [first])
        con.execute(SQL_SERIES, [first + len(self.keys)])
        con.execute(INSERT_SERIES)
        with registered(con, _j_vrows=_table(self.columns, first)):
            con.execute(INSERT_ROWS)


def _table(columns: list[dict[str, np.ndarray]], first: int) -> pa.Table:
    """The array series as one table (a chunk per series, nothing copied into one array), their series numbered from
    ``first``."""
    types = {"series": pa.int64(), "instance_id": pa.int64(), "evidence": pa.int64()}
    out: dict[str, pa.ChunkedArray] = {}
    for name in ("series", *NUMBERS):
        typ = types.get(name, pa.float64())
        chunks = [_array(c[name] + first if name == "series" else c[name], typ) for c in columns]
        out[name] = pa.chunked_array(chunks, type=typ)
    return pa.table(out)


def _array(values: np.ndarray, typ: pa.DataType) -> pa.Array:
    """An Arrow array of ``values``; NaN stands for NULL in float columns (an undefined exclusive value)."""
    if pa.types.is_floating(typ):
        arr = values.astype(np.float64, copy=False)
        nan = np.isnan(arr)
        return pa.array(arr, type=typ, mask=nan) if nan.any() else pa.array(arr, type=typ)  # NaN -> NULL
    return pa.array(values.astype(np.int64, copy=False), type=typ)


__all__ = ["DERIVED_SIGNALS", "NUMBERS", "STAGE", "Values"]
