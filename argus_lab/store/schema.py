"""The DuckDB schema of the evidence store, with its version.

Every table is created by :data:`DDL`.  ``meta`` holds the schema version; a store written with a newer
version is refused (see :mod:`argus_lab.store.db`).  Times are integer nanoseconds on ``CLOCK_REALTIME``
throughout; nothing is stored as floating-point microseconds.
"""

from __future__ import annotations

from argus_lab.join.attribution_sql import EXACT_ATTRIBUTIONS

SCHEMA_VERSION = 2
"""2: ``attributions`` became a view over the stored ``attribution_rows`` and the exact attributions the kernels
table implies (:data:`VIEWS`); a version-1 store is migrated on its first write (:data:`MIGRATIONS`) and read as it
is before that."""

TABLES: dict[str, str] = {
    "meta": "key VARCHAR PRIMARY KEY, value VARCHAR",
    "sessions": (
        "session_id VARCHAR PRIMARY KEY, created_ns BIGINT, host VARCHAR, user_name VARCHAR, "
        "argus_version VARCHAR, cwd VARCHAR, label VARCHAR"
    ),
    "requests": "request_id VARCHAR PRIMARY KEY, session_id VARCHAR, created_ns BIGINT, text VARCHAR, spec JSON",
    "plans": "plan_id VARCHAR PRIMARY KEY, request_id VARCHAR, text VARCHAR, spec JSON",
    "runs": (
        "run_id VARCHAR PRIMARY KEY, session_id VARCHAR, request_id VARCHAR, plan_id VARCHAR, plan_index INTEGER, "
        "variant VARCHAR, backends VARCHAR[], signals VARCHAR[], settings JSON, workload VARCHAR, "
        "command VARCHAR, env JSON, versions JSON, status VARCHAR, cause VARCHAR, repetitions INTEGER, "
        "warmup INTEGER, reps_done INTEGER, started_ns BIGINT, ended_ns BIGINT, host VARCHAR, pid INTEGER, "
        "reason VARCHAR"
    ),
    "regions": (
        "region_id VARCHAR PRIMARY KEY, name VARCHAR, kind VARCHAR, module VARCHAR, file VARCHAR, line INTEGER"
    ),
    "region_instances": (
        "run_id VARCHAR, instance_id BIGINT, region_id VARCHAR, path VARCHAR, instance_index INTEGER, "
        "parent_instance_id BIGINT, repetition INTEGER, pid INTEGER, thread_id UBIGINT, start_ns BIGINT, "
        "end_ns BIGINT, cpu_ns BIGINT, error VARCHAR, warmup BOOLEAN, rank INTEGER, thread_name VARCHAR"
    ),
    # One value of one signal.  instance_id is NULL for values that belong to no region instance
    # (device-wide samples, facts about a binary); kernel_key links per-kernel values.
    "metrics": (
        "run_id VARCHAR, instance_id BIGINT, kernel_key VARCHAR, signal VARCHAR, value DOUBLE, unit VARCHAR, "
        "attribution VARCHAR, backend VARCHAR, provenance_id VARCHAR"
    ),
    # GPU activity records (CUPTI); filled by the CUPTI backend.
    "kernels": (
        "run_id VARCHAR, correlation_id BIGINT, instance_id BIGINT, name VARCHAR, start_ns BIGINT, end_ns BIGINT, "
        "device_id INTEGER, context_id INTEGER, stream_id BIGINT, grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, "
        "block_x INTEGER, block_y INTEGER, block_z INTEGER, registers INTEGER, static_smem INTEGER, "
        "dynamic_smem INTEGER, local_mem INTEGER, graph_id BIGINT, graph_node_id BIGINT, kind VARCHAR, "
        "bytes BIGINT, thread_id UBIGINT, api_start_ns BIGINT, api_end_ns BIGINT, kernel_key VARCHAR, "
        "ordinal INTEGER, rank INTEGER"
    ),
    # Nsight Compute kernels (one per profiled action): NVTX region path, instance index, ordinal in it.
    "ncu_kernels": (
        "run_id VARCHAR, kernel_key VARCHAR, path VARCHAR, instance_index INTEGER, instance_inferred BOOLEAN, "
        "ordinal INTEGER, name VARCHAR, demangled VARCHAR"
    ),
    # Compiled-kernel facts (Triton metadata + SASS mix, or what CUPTI activity records tell).
    "kernel_facts": (
        "run_id VARCHAR, name VARCHAR, binary_hash VARCHAR, source VARCHAR, registers INTEGER, "
        "local_words INTEGER, shared_bytes INTEGER, num_warps INTEGER, num_stages INTEGER, "
        "sass_instructions INTEGER, sass_mix JSON, unavailable VARCHAR"
    ),
    # Time samples (NVML, PM sampling): device-wide values with their host timestamp.
    "samples": (
        "run_id VARCHAR, device_id INTEGER, signal VARCHAR, t_ns BIGINT, value DOUBLE, unit VARCHAR, t_end_ns BIGINT"
    ),
    # How a piece of evidence is attributed to region instances (one row per candidate), as the join wrote it; read
    # the ``attributions`` view, which adds the exact attributions the join derives instead of storing them.
    "attribution_rows": (
        "run_id VARCHAR, evidence VARCHAR, evidence_id VARCHAR, instance_id BIGINT, class VARCHAR, "
        "weight DOUBLE, reason VARCHAR, target_run_id VARCHAR"
    ),
    # Derived by argus_lab.join: one value per region instance and signal, inclusive of nested instances and
    # exclusive of them, with the weight of each attribution class behind it (see docs/report-json.md).
    "instance_values": (
        "run_id VARCHAR, instance_id BIGINT, signal VARCHAR, inclusive DOUBLE, exclusive DOUBLE, unit VARCHAR, "
        "evidence BIGINT, w_exact DOUBLE, w_ordinal DOUBLE, w_temporal DOUBLE, w_ambiguous DOUBLE, "
        "w_mismatch DOUBLE, backend VARCHAR, provenance_id VARCHAR"
    ),
    # Derived by argus_lab.join: region instances of one run matched to the reference (timing) run.
    "instance_matches": (
        "run_id VARCHAR, instance_id BIGINT, ref_run_id VARCHAR, ref_instance_id BIGINT, path VARCHAR, "
        "repetition INTEGER, rep_index INTEGER, status VARCHAR, difference VARCHAR"
    ),
    "provenance": (
        "provenance_id VARCHAR PRIMARY KEY, run_id VARCHAR, backend VARCHAR, backend_version VARCHAR, "
        "settings JSON, clocks JSON, timestamps VARCHAR"
    ),
    "artifacts": "run_id VARCHAR, kind VARCHAR, path VARCHAR, sha256 VARCHAR, bytes BIGINT, note VARCHAR",
}

DDL: tuple[str, ...] = tuple(f"CREATE TABLE IF NOT EXISTS {name} ({cols})" for name, cols in TABLES.items())

VIEWS: dict[str, str] = {
    # every attribution: the rows the join stored, and the exact ones it derives (argus_lab.join.attribution_sql)
    "attributions": (
        "SELECT run_id, evidence, evidence_id, instance_id, class, weight, reason, target_run_id FROM attribution_rows"
        f"\nUNION ALL{EXACT_ATTRIBUTIONS}"
    ),
}
"""Views of the store (re-created by every writer, so their definition follows the code that writes)."""

VIEW_DDL: tuple[str, ...] = tuple(f"CREATE OR REPLACE VIEW {name} AS {sql}" for name, sql in VIEWS.items())

STORED_AS: dict[str, str] = {"attributions": "attribution_rows"}
"""The table that rows written under a view's name go to (``Store.write({"attributions": ...})``)."""

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: ("ALTER TABLE attributions RENAME TO attribution_rows",),
}
"""Statements taking a store from version ``v`` to ``v + 1`` (run by the first write; the views are re-created
after them)."""


def _split(cols: str) -> list[str]:
    out: list[str] = []
    depth = 0
    cur = ""
    for ch in cols:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [c for c in out if c.strip()]


def column_types(table: str) -> list[tuple[str, str]]:
    """``(name, SQL type)`` of each column of ``table`` in schema order."""
    out = []
    for part in _split(TABLES[table]):
        name, _, rest = part.strip().partition(" ")
        out.append((name, rest.replace("PRIMARY KEY", "").strip()))
    return out
