"""Per-instance values the backends stored themselves (the host's clocks: ``host.wall``, ``host.cpu`` ...).

For every signal the join did not derive itself (kernels, samples and ncu counters take precedence), each instance
gets the value its run stored (summed where a backend stored several rows of one signal for it): inclusive as
stored, exclusive minus the values its children stored (none for a signal that does not add up, such as a lag);
where an instance's children overlap in time (``asyncio.gather`` of child regions), ``host.wall`` exclusive is its
time less the union of its children's intervals and ``host.cpu`` exclusive is left empty.
Computed over numpy arrays, after the join's other values (run by :mod:`argus_lab.join.attribution`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from argus_lab.join.arrays import changes, ints
from argus_lab.join.values import DERIVED_SIGNALS
from argus_lab.plan.catalog import aggregation

if TYPE_CHECKING:
    import duckdb

    from argus_lab.join.kernel_values import Nodes
    from argus_lab.join.values import Values

ROWS = f"""
SELECT m.run_id, m.instance_id, m.signal, m.value, m.unit, m.backend, m.provenance_id
FROM metrics m
WHERE m.run_id IN (SELECT run_id FROM _j_runs) AND m.instance_id IS NOT NULL AND m.kernel_key IS NULL
  AND (m.run_id, m.signal) NOT IN ({DERIVED_SIGNALS})
"""

# parents whose direct children overlap in time (asyncio.gather of child regions, threads' children of one parent):
# the part of the parent the children cover, as the union of their intervals clipped to the parent
OVERLAPPED = """
WITH kids AS (
    SELECT k.run_id, k.parent_instance_id AS parent, greatest(k.start_ns, p.start_ns) AS s,
           least(k.end_ns, p.end_ns) AS e
    FROM region_instances k
    JOIN region_instances p ON p.run_id = k.run_id AND p.instance_id = k.parent_instance_id
    WHERE k.run_id IN (SELECT run_id FROM _j_runs) AND k.parent_instance_id <> 0 AND k.end_ns > k.start_ns
), ordered AS (
    SELECT *, max(e) OVER (PARTITION BY run_id, parent ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
              AS prev_end
    FROM kids
), islands AS (
    SELECT *, sum(CASE WHEN prev_end IS NULL OR s > prev_end THEN 1 ELSE 0 END)
                  OVER (PARTITION BY run_id, parent ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS island,
           bool_or(prev_end IS NOT NULL AND s < prev_end) OVER (PARTITION BY run_id, parent) AS has_overlap
    FROM ordered
), spans AS (
    SELECT run_id, parent, island, greatest(max(e) - min(s), 0) AS len FROM islands WHERE has_overlap GROUP BY ALL
)
SELECT run_id, parent, sum(len)::DOUBLE AS covered FROM spans GROUP BY ALL
"""


def _overlapped(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, int], float]:
    """(run, parent instance) -> the time its overlapping direct children cover (only parents whose children
    overlap: elsewhere the children's sum is that time)."""
    return {(str(r), int(p)): float(c) for r, p, c in con.execute(OVERLAPPED).fetchall()}


def derive(con: duckdb.DuckDBPyConnection, nodes: Nodes, values: Values) -> None:
    """Hand the stored values of the join's instances to ``values`` (see the module docstring)."""
    rows = con.sql(ROWS).to_arrow_table()
    if rows.num_rows == 0:
        return
    run = _codes(rows.column("run_id"))
    signal = _codes(rows.column("signal"))
    inst = ints(rows.column("instance_id"))
    valid = rows.column("value").is_valid().to_numpy(zero_copy_only=False)
    value = rows.column("value").combine_chunks().fill_null(0.0).to_numpy(zero_copy_only=False).astype(np.float64)
    order = np.lexsort((inst, signal[0], run[0]))
    r, s, i = run[0][order], signal[0][order], inst[order]
    head = np.flatnonzero(changes(r, s, i))
    total = np.add.reduceat(value[order], head)
    known = np.add.reduceat(valid[order].astype(np.int64), head)
    total = np.where(known > 0, total, np.nan)  # a sum of NULLs is NULL
    count = np.diff(np.r_[head, len(order)])
    g_run, g_sig, g_inst = r[head], s[head], i[head]
    kids = _children(nodes, run[1], g_run, g_sig, g_inst, np.where(np.isnan(total), 0.0, total))
    first = pa.array(order[head], type=pa.int64())  # the row whose unit, backend and provenance the value takes
    labels = [_codes(rows.column(c).take(first)) for c in ("unit", "backend", "provenance_id")]
    parts = [(g_run, len(run[1])), (g_sig, len(signal[1])), *((c, len(d)) for c, d in labels)]
    which, distinct = _combine(parts)
    keys: dict[tuple[str, str, str, str, str], np.ndarray] = {}
    for k, (rc, sc, uc, bc, pc_) in enumerate(distinct):
        names = (run[1][rc], signal[1][sc], labels[0][1][uc], labels[1][1][bc], labels[2][1][pc_])
        keys[names] = np.flatnonzero(which == k)
    overlapped = _overlapped(con) if keys else {}
    for key, sel in keys.items():  # a signal that does not add up has no exclusive value (it does not subtract)
        additive = aggregation(key[1]) == "sum"
        exclusive = total[sel] - kids[sel] if additive else np.full(len(sel), np.nan)
        if additive and overlapped and key[1] in ("host.wall", "host.cpu"):
            _fix_overlaps(key, g_inst[sel], total[sel], exclusive, overlapped)
        zero = np.zeros(len(sel))
        values.add(
            con,
            key,
            {
                "instance_id": g_inst[sel],
                "inclusive": total[sel],
                "exclusive": exclusive,
                "evidence": count[sel],
                "w_exact": count[sel].astype(np.float64),
                "w_ordinal": zero,
                "w_temporal": zero,
                "w_ambiguous": zero,
                "w_mismatch": zero,
            },
        )


def _fix_overlaps(
    key: tuple[str, ...],
    inst: np.ndarray,
    total: np.ndarray,
    exclusive: np.ndarray,
    overlapped: dict[tuple[str, int], float],
) -> None:
    """Where an instance's direct children overlap in time, the children's sum counts the overlap twice (the
    exclusive time went negative): ``host.wall`` exclusive is the instance's time less the union of its children's,
    and ``host.cpu`` exclusive is not known (the children's CPU times overlap as well), so it is left empty."""
    mine = {p: c for (r, p), c in overlapped.items() if r == key[0]}
    if not mine:
        return
    for k in np.flatnonzero(np.isin(inst, np.fromiter(mine, dtype=np.int64, count=len(mine)))).tolist():
        covered = mine[int(inst[k])]
        exclusive[k] = max(total[k] - covered, 0.0) if key[1] == "host.wall" else np.nan


def _codes(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[str]]:
    """Dictionary codes of a string column (NULL: its own code), and the dictionary (NULL as ``None``)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    enc = arr.dictionary_encode(null_encoding="encode")
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist()


def _combine(parts: list[tuple[np.ndarray, int]]) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Group rows by several small codes (each with its number of values): each row's group, and each group's codes."""
    key = np.zeros(len(parts[0][0]), dtype=np.int64)
    for codes, size in parts:
        key = key * max(size, 1) + codes  # the product of the sizes stays far below 2**63: a few labels each
    uniq, which = np.unique(key, return_inverse=True)
    out: list[tuple[int, ...]] = []
    for value in uniq.tolist():
        digits: list[int] = []
        for _, size in reversed(parts):
            value, c = divmod(value, max(size, 1))
            digits.append(c)
        out.append(tuple(reversed(digits)))
    return which.ravel(), out


def _children(
    nodes: Nodes, runs: list[str], g_run: np.ndarray, g_sig: np.ndarray, g_inst: np.ndarray, total: np.ndarray
) -> np.ndarray:
    """Per value (run, signal, instance; sorted so): the sum of the values of the same run and signal stored for
    the instance's children (instances whose recorded parent it is)."""
    where = {r: k for k, r in enumerate(nodes.runs)}
    node = nodes.locate(np.asarray([where.get(r, -1) for r in runs], dtype=np.int64)[g_run], g_inst)
    parent = np.where(node >= 0, nodes.parent_id[np.maximum(node, 0)], 0)
    out = np.zeros(len(total))
    block = np.flatnonzero(changes(g_run, g_sig))
    for lo, hi in zip(block.tolist(), np.r_[block[1:], len(g_run)].tolist(), strict=True):  # one (run, signal)
        kids = lo + np.flatnonzero(parent[lo:hi] != 0)
        at = lo + np.searchsorted(g_inst[lo:hi], parent[kids])  # the parent's own value, if it has one
        ok = at < hi
        ok[ok] = g_inst[at[ok]] == parent[kids][ok]
        np.add.at(out, at[ok], total[kids][ok])
    return out


__all__ = ["ROWS", "derive"]
