"""The join: attributes every piece of evidence of some runs to region instances, and derives region values.

:func:`attribute_request` runs where a plan's runs end (:func:`argus_lab.app.measure.run_plan` calls it once they
are stored) and writes, in
one transaction, for the given runs:

``attributions``
    one row per (evidence, candidate instance) with a class, a weight and a reason:

    * ``exact`` -- a CUPTI kernel/copy/set whose launch carried the instance's external correlation id
      (CUDA-graph kernels share their launch's id; a kernel still running after the region's host exit stays
      the region's); the region instance itself (host clocks); an ncu kernel matched to its own run's
      instance by NVTX path and payload (instance index) when the request has no timing run; a compiler fact
      of a kernel function that ran in a region.
    * ``ordinal`` -- an ncu (replay) kernel matched to the timing run: the timing instance of the same path and
      instance index (the NVTX payload its region pushed under ncu), the kernel at the same ordinal within it,
      verified by kernel name and the instance's kernel count; an ncu kernel whose instance index ncu's reader
      inferred from path changes (no payload) is placed by position under its path instead.
    * ``temporal`` -- a time sample split over the instances its window overlaps (weight = overlapped share);
      a kernel without an id whose launch fell inside exactly one open instance (e.g. autograd's backward
      thread while the forward thread waits inside its region), or inside one on its own thread.
    * ``ambiguous`` -- several instances were open on other threads at launch (or sample windows overlapped
      instances of several threads): every candidate is kept, with weight ``1/n`` and the reason.
    * ``unattributed`` -- outside every region (or carrying an id the run never recorded).
    * ``mismatch`` -- the runs disagree: the ncu run's kernel sequence of an instance differs from the timing
      run's (autotuning, JIT, a data-dependent branch); kept with the first difference, never forced; confined
      to that instance (the other instances of the path keep ``ordinal``).

``instance_values``
    per region instance and signal: ``inclusive`` (the instance and its nested instances) and ``exclusive``
    (the instance alone; NULL for non-additive signals such as ``gpu.span``), the unit, and the weight of each
    attribution class behind the value.  Runs with several ranks also get ``rank.start_lag`` and
    ``rank.end_lag`` per instance (:mod:`argus_lab.join.skew`: lags behind the earliest rank, on rank 0's clock).
    The ``compile.*`` signals a request asked for are the largest static fact of the kernel functions the instance
    ran (the compiler backend's ``kernel_facts`` row of the function, else what its CUPTI launch record carries).

``instance_matches``
    every measured (not warm-up) instance of the other runs matched to the reference (timing) run by (path,
    repetition, index of the instance within its repetition): ``match``, ``mismatch`` (its ncu kernels differ
    from the timing run's; the first difference is kept) or ``missing``.  Matching is per instance: an ncu kernel
    is placed in the timing instance of the same path and instance index (its NVTX payload), so an instance
    that differs never shifts or poisons the others.

``instance_signatures``
    per instance of a run that traced kernels: how many kernels it (with its nested instances) launched and a hash
    of their names in launch order; the report groups a region's instances by it (instance heterogeneity).

``provenance``
    one row ``<run>:join`` per run with the rules' version and what was attributed.

Instrumented runs (device regions) are joined by :mod:`argus_lab.join.device` in the same transaction: each
launch under its kernel record and host instance (evidence ``device_launch``), ``device_values``, ``device_sm``, and
the overhead against the clean run; their own kernels give no ``gpu.*`` values.

Everything is set-based SQL in DuckDB (:mod:`argus_lab.join.attribution_sql`), except the kernel-sequence
signatures, which are array passes over numpy columns (:mod:`argus_lab.join.signatures`): no Python loop touches a
record.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from argus_lab.join import attribution_sql as q
from argus_lab.join import candidates, comm, device, kernel_values, signatures, stored_values, windows
from argus_lab.join import skew as skew_sql
from argus_lab.join.arrays import registered
from argus_lab.join.timeline import Timeline
from argus_lab.join.values import Values
from argus_lab.join.windows import LEVEL_UNITS
from argus_lab.model.memory_limits import same_memory_limit
from argus_lab.model.views import DERIVED
from argus_lab.model.vocabulary import CLASSES, EVIDENCE_KINDS
from argus_lab.plan.catalog import aggregation

if TYPE_CHECKING:
    import duckdb


class JoinTarget(Protocol):
    """What the join needs of a store (:class:`argus_lab.store.Store` is one): a connection under its lock, and
    rows of a read-only query."""

    def connect(self, *, write: bool = False) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A connection to the store's DuckDB file, held under the store's lock."""

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a query."""


MEMORY_LIMIT = "3GB"
"""DuckDB's memory limit while the join runs (its hash tables spill to disk beyond it), so that joining ten million
records stays within a bounded amount of memory; the connection's own limit is restored afterwards."""


@dataclass(frozen=True)
class JoinSummary:
    """What :func:`attribute_request` attributed."""

    run_ids: tuple[str, ...]
    reference_run: str | None
    counts: dict[str, dict[str, int]]
    """``{evidence kind: {class: rows}}``."""
    seconds: float

    def text(self) -> str:
        """One line per evidence kind."""
        lines = [f"join of {len(self.run_ids)} run(s) in {self.seconds:.3f} s (reference run {self.reference_run})"]
        for ev, by in sorted(self.counts.items()):
            lines.append(f"  {ev}: " + ", ".join(f"{c} {by[c]}" for c in CLASSES if c in by))
        return "\n".join(lines)


def attribute_request(store: JoinTarget, run_ids: Sequence[str]) -> JoinSummary:
    """Attribute all evidence of ``run_ids`` and derive their instance values (replacing earlier results).

    Call it once the runs are stored; calling it again (e.g. with more runs of the same request, so that
    ncu kernels find their timing run) recomputes everything for the given runs.
    """
    t0 = time.perf_counter()
    ids = list(dict.fromkeys(run_ids))
    with store.connect(write=True) as con:
        settings = con.execute("SELECT current_setting('memory_limit')").fetchall()
        limit = settings[0][0] if settings else None
        con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        con.execute("BEGIN")
        try:
            ref, cycles = _attribute(con, ids)
            res = con.execute(q.SUMMARY)
            names = [d[0] for d in res.description or ()]
            summary = [dict(zip(names, row, strict=True)) for row in res.fetchall()]
            _provenance(con, ids, ref, summary, time.perf_counter() - t0, cycles)
            con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):  # an aborted transaction (a full disk) must not hide the cause
                con.execute("ROLLBACK")
            raise
        finally:
            if limit:
                con.execute(f"SET memory_limit = '{same_memory_limit(str(limit))}'")
    counts: dict[str, dict[str, int]] = {}
    for row in summary:
        if row["class"] == "*":
            continue
        by = counts.setdefault(row["evidence"], {})
        by[row["class"]] = by.get(row["class"], 0) + int(row["items"])
    return JoinSummary(tuple(ids), ref, counts, time.perf_counter() - t0)


def joined_runs(store: JoinTarget, run_ids: Sequence[str]) -> set[str]:
    """Those of ``run_ids`` the join has already processed (they have a ``<run>:join`` provenance row)."""
    rows = store.rows(
        "SELECT run_id FROM provenance WHERE backend = 'join' AND run_id IN (SELECT unnest(?::VARCHAR[]))",
        [list(run_ids)],
    )
    return {r[0] for r in rows}


def _instances(con: duckdb.DuckDBPyConnection) -> tuple[pa.Table, kernel_values.Nodes, dict[str, dict[str, Any]]]:
    """The join's instances, read once (the node numbers, the thread timelines), with the parent cycles found per
    run (their members are taken as top-level instances).  Without a suspect parent link (the recorder's forests
    have none) no cycle can exist, and the ancestor closure is left to the statements that need it."""
    rows = con.sql(kernel_values.INSTANCE_ROWS).to_arrow_table()
    nodes, suspect = kernel_values.Nodes.of(con, rows)
    if not suspect:
        con.execute(q.NO_ANCESTORS)  # built where first needed (q.ANCESTORS_IF_MISSING)
        return rows, nodes, {}
    cycles = _ancestors(con)
    rows = con.sql(kernel_values.INSTANCE_ROWS).to_arrow_table()  # with the cycles cut
    nodes, _ = kernel_values.Nodes.of(con, rows)
    return rows, nodes, cycles


def _ancestors(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """The ancestor closure ``_j_anc`` of instances whose stored parent links may form cycles: it ends whatever they
    say; the members of cycles are cut loose (parent 0) and returned per run."""
    con.execute(q.ANCESTORS_GUARDED)
    con.execute(q.CYCLE_MEMBERS)
    res = con.execute(q.CYCLES_BY_RUN)
    names = [d[0] for d in res.description or ()]
    cycles = {row[0]: dict(zip(names, row, strict=True)) for row in res.fetchall()}
    if cycles:
        con.execute(q.CUT_CYCLES)
        con.execute(q.ANCESTORS)  # no cycle is left
    return {
        run: {"instances": int(c["n"]), "ids": list(c["ids"]), "paths": list(c["paths"])} for run, c in cycles.items()
    }


def _attribute(con: duckdb.DuckDBPyConnection, ids: list[str]) -> tuple[str | None, dict[str, dict[str, Any]]]:
    con.execute(q.RUNS, [ids])
    con.execute(q.INSTANCES)
    con.execute(q.INSTANCES_INDEXED)  # a view: computed only where runs are matched
    rows, nodes, cycles = _instances(con)
    for stmt in (q.TIMED, q.PROVENANCE_IDS):
        con.execute(stmt)
    con.execute(q.DELETE_ATTRIBUTIONS, [list(EVIDENCE_KINDS)])
    for stmt in q.DELETE_DERIVED:
        con.execute(stmt)
    values = Values()
    values.begin(con)
    # GPU activity records: the exact ones read once, for the signatures and the kernel values
    con.execute(q.KERNELS)
    con.execute(q.KERNEL_EXACT)
    records, exact = kernel_values.Records.read(con, nodes)  # summed as read, before the second thread starts
    pending = signatures.start(con, nodes.parent, records.table, records.kernels)  # on a second thread
    timeline = Timeline.of(rows, nodes.runs)
    with registered(con, _j_kc=candidates.derive(con, timeline, nodes.runs)):  # records without an instance id
        con.execute(q.THREAD_NAMES)
        con.execute(q.KERNEL_OTHER)  # their classes and reasons
    del records
    kernel_values.derive(con, nodes, exact, values)
    # compile.*: the static facts of the kernel functions each instance ran (compiler rows, else launch records)
    con.execute(q.COMPILE_SIGNALS, [list(col) for col in zip(*q.COMPILE_FACTS, strict=True)])
    if _count(con, q.COMPILE_WANTED):
        con.execute(q.ANCESTORS_IF_MISSING)
        con.execute(q.COMPILE_VALUES)
    # communication kernels: overlap with compute, exposed time
    comm.derive(con)
    # time samples: split over the instances their windows overlap
    _insert_attributions(con, windows.derive(con, nodes, timeline, values))
    traced = {r for (r,) in con.execute("SELECT DISTINCT run_id FROM _j_kinds WHERE kind = 'kernel'").fetchall()}
    keep = np.isin(nodes.run, [k for k, r in enumerate(nodes.runs) if r in traced])
    signatures.finish(con, pending, nodes.run_ids(), nodes.instance, keep)
    # Nsight Compute kernels, across runs
    found = con.execute(q.REFERENCE_RUN).fetchall()
    ref: str | None = found[0][0] if found else None
    has_ncu = _count(con, q.HAS_NCU) > 0
    # empty without an ncu run to match (an ncu run that profiled nothing still says which instances it missed)
    con.execute(q.TIMING_SEQUENCE, [ref if has_ncu or _count(con, q.HAS_NCU_RUN) > 0 else None])
    if has_ncu:
        if ref is not None:
            con.execute(q.NCU_MATCH, [ref])
        else:
            con.execute(q.NCU_OWN)
        con.execute(q.NCU_ATTRIBUTIONS)
        con.execute(q.ANCESTORS_IF_MISSING)
        signals = [str(r[0]) for r in con.execute(q.NCU_SIGNALS).fetchall()]
        rules = pa.table({"signal": signals, "agg": [aggregation(sig) for sig in signals]})
        with registered(con, _j_agg=rules):
            con.execute(q.NCU_VALUES)
    else:
        con.execute(q.NCU_NONE)
    if ref is None and ids:
        ref = _first_run(con, ids)
    if ref is not None and len(ids) > 1:  # a run alone has nothing to be matched with
        con.execute(q.INSTANCE_MATCHES, [ref, ref])
    if _count(con, q.HAS_FACTS):
        con.execute(q.COMPILER_ATTRIBUTIONS)
    # per-instance values the backends stored, for signals not derived above; the instances themselves
    stored_values.derive(con, nodes, values)
    if pc.count_distinct(rows.column("rank")).as_py() > 1:  # multi-rank runs: lags on rank 0's clock
        skew_sql.derive(con)
    device.derive(con)  # instrumented runs: device regions under their kernel and host instance; the overhead
    values.store(con)  # every instance value derived above, stored narrow at once
    return ref, cycles


def _insert_attributions(con: duckdb.DuckDBPyConnection, split: windows.Split | None) -> None:
    """The attribution rows of the GPU records that are not exact and of the samples, in one insert."""
    if split is None:
        con.execute(q.insert_rows(q.KERNEL_ATTRIBUTION_ROWS))
        return
    with registered(con, _j_sp=split.pieces, _j_sw=split.samples):
        con.execute(q.insert_rows(q.KERNEL_ATTRIBUTION_ROWS, windows.SAMPLE_ATTRIBUTION_ROWS))


def _first_run(con: duckdb.DuckDBPyConnection, ids: list[str]) -> str | None:
    rows = con.execute(
        "SELECT run_id FROM runs WHERE run_id IN (SELECT run_id FROM _j_runs) ORDER BY plan_index, started_ns LIMIT 1"
    ).fetchall()
    return rows[0][0] if rows else (ids[0] if ids else None)


def _count(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    rows = con.execute(sql).fetchall()  # fetched to the end: the connection then takes relation queries again
    return int(rows[0][0]) if rows else 0


def _provenance(
    con: duckdb.DuckDBPyConnection,
    ids: list[str],
    ref: str | None,
    summary: list[dict[str, Any]],
    secs: float,
    cycles: dict[str, dict[str, Any]],
) -> None:
    by_run: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for row in summary:
        entry = {"items": int(row["items"]), "weight": float(row["weight"] or 0.0)}
        if row["time_ns"] is not None:
            entry["time_ns"] = float(row["time_ns"])
        by_run.setdefault(row["run_id"], {}).setdefault(row["evidence"], {})[row["class"]] = entry
    known = {r[0] for r in con.execute("SELECT run_id FROM runs WHERE run_id IN (SELECT * FROM _j_runs)").fetchall()}
    rows: list[tuple[Any, ...]] = []
    for run in ids:
        if run not in known and run not in by_run:
            continue
        settings = {
            "rules": f"argus_lab.join v{q.JOIN_VERSION}",
            "reference_run": ref,
            "runs_joined": ids,
            "attributed": by_run.get(run, {}),
            "seconds": round(secs, 4),
            "sample_windows": "each sample stands for the time nearer to it than to its neighbours",
            "exact_rows": DERIVED,
            "level_units": list(LEVEL_UNITS),
        }
        if run in cycles:  # stored parent links that form a cycle: those instances were taken as top level
            settings["parent_cycles"] = cycles[run]
        rows.append(
            (
                f"{run}:join",
                run,
                "join",
                q.JOIN_BACKEND_VERSION,
                json.dumps(settings, sort_keys=True),
                "{}",
                "derived (from the measured timestamps of the inputs; nothing synthesized)",
            )
        )
    if rows:
        con.executemany(
            "INSERT INTO provenance (provenance_id, run_id, backend, backend_version, settings, clocks, timestamps) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


__all__ = ["LEVEL_UNITS", "JoinSummary", "JoinTarget", "attribute_request", "joined_runs"]
