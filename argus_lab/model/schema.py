"""The DuckDB schema of the evidence store, with its version.

Every table is created by :data:`DDL`.  ``meta`` holds the schema version; a store written with a newer
version is refused (see :mod:`argus_lab.store.db`).  Times are integer nanoseconds on ``CLOCK_REALTIME``
throughout; nothing is stored as floating-point microseconds, except device-region times (``device_*`` tables),
which are on the GPU's own ``%globaltimer`` (ns) and say so in their column names.

Versions: 1 the first layout; 2 added the device-region tables (``device_launches``, ``device_programs``,
``device_intervals`` from the device backend, ``device_values`` and ``device_sm`` from the join); 3 made
``attributions`` a view over the stored ``attribution_rows`` and the exact attributions the kernels table implies
(:data:`VIEWS`); 4 stored ``instance_values`` narrow, as numbers per ``value_series`` (the view joins them).  A
store of an older version is migrated on its first write (:data:`MIGRATIONS`, then the tables and columns added
since) and read as it is before that.
"""

from __future__ import annotations

from argus_lab.model.views import (
    EXACT_ATTRIBUTIONS,
    INSTANCE_VALUE_COLUMNS,
    LARGEST_SERIES,
    store_values_sql,
)

SCHEMA_VERSION = 4

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
        "reason VARCHAR, origin JSON"
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
    # The threads of a timing run that launched work or opened regions: the name Python gave a thread (``name``), the
    # one the system gave it (``system_name``, e.g. ``pt_autograd_0``) and what the run knows it to be (``role``:
    # ``autograd`` for autograd's device threads, else empty); the join links a launch to a region by them.
    "threads": (
        "run_id VARCHAR, rank INTEGER, pid INTEGER, thread_id UBIGINT, name VARCHAR, system_name VARCHAR, role VARCHAR"
    ),
    # Host calls that hand one thread's work to another, with the calling thread and its host clocks:
    # ``autograd.backward`` (a backward() or autograd.grad() call, whose kernels autograd's thread launches).
    "host_calls": (
        "run_id VARCHAR, rank INTEGER, pid INTEGER, thread_id UBIGINT, call VARCHAR, start_ns BIGINT, end_ns BIGINT"
    ),
    # Compiled-kernel facts (Triton metadata + SASS mix, or what CUPTI activity records tell).
    "kernel_facts": (
        "run_id VARCHAR, name VARCHAR, binary_hash VARCHAR, source VARCHAR, registers INTEGER, "
        "local_words INTEGER, shared_bytes INTEGER, num_warps INTEGER, num_stages INTEGER, "
        "sass_instructions INTEGER, sass_mix JSON, unavailable VARCHAR, threads INTEGER, static_shared INTEGER, "
        "config JSON, origin VARCHAR, binary_path VARCHAR"
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
    # exclusive of them, with the weight of each attribution class behind it (see docs/report-json.md).  Stored
    # narrow (a million values are written in a join): the run, signal, unit, backend and provenance of a value
    # are its *series* (``value_series``: one row each, ``series`` unique in the store), and a row holds only
    # numbers; read the ``instance_values`` view, which puts them together again.
    "value_series": (
        "series BIGINT, run_id VARCHAR, signal VARCHAR, unit VARCHAR, backend VARCHAR, provenance_id VARCHAR"
    ),
    "instance_value_rows": (
        "series BIGINT, instance_id BIGINT, inclusive DOUBLE, exclusive DOUBLE, evidence BIGINT, w_exact DOUBLE, "
        "w_ordinal DOUBLE, w_temporal DOUBLE, w_ambiguous DOUBLE, w_mismatch DOUBLE"
    ),
    # Derived by argus_lab.join: region instances of one run matched to the reference (timing) run.
    "instance_matches": (
        "run_id VARCHAR, instance_id BIGINT, ref_run_id VARCHAR, ref_instance_id BIGINT, path VARCHAR, "
        "repetition INTEGER, rep_index INTEGER, status VARCHAR, difference VARCHAR"
    ),
    # Device regions (the device backend, instrumented variant; ``launch`` is unique in a run: rank << 20 plus the
    # rank's own launch count): one row per instrumented launch, with what the
    # probe was asked for on the host (kernel name, thread, the region instance open there, CLOCK_REALTIME ns after
    # the probe was made) and what its buffer held (programs, intervals, dropped events, the decoder's problems).
    "device_launches": (
        "run_id VARCHAR, launch INTEGER, kernel VARCHAR, module VARCHAR, thread_id UBIGINT, instance_id BIGINT, "
        "probe_ns BIGINT, n_slots INTEGER, events_per_slot INTEGER, programs INTEGER, intervals BIGINT, "
        "dropped BIGINT, problems JSON, rank INTEGER"
    ),
    # one row per program (CTA) of an instrumented launch: its SM and first/last timestamps (%globaltimer ns and
    # the SM's %clock64 cycles)
    "device_programs": (
        "run_id VARCHAR, launch INTEGER, cta INTEGER, sm INTEGER, t_begin_ns BIGINT, t_end_ns BIGINT, "
        "clk_begin BIGINT, clk_end BIGINT, n_events INTEGER, dropped INTEGER, n_warps INTEGER"
    ),
    # one row per occurrence of a device region in one program: GPU times (%globaltimer ns), SM cycles, and the
    # duration from the cycles at the program's own measured clock rate
    "device_intervals": (
        "run_id VARCHAR, launch INTEGER, region_id VARCHAR, cta INTEGER, warp INTEGER, sm INTEGER, depth INTEGER, "
        "seq INTEGER, t_start_ns BIGINT, t_end_ns BIGINT, clk_start BIGINT, clk_end BIGINT, dur_ns DOUBLE"
    ),
    # Derived by argus_lab.join.device: per instrumented launch and device region (region_id NULL: the launch as a
    # whole) the value of each dev.* signal with its spread over CTAs or SMs, the host instance and kernel record it
    # nests under, and how it was attributed.
    "device_values": (
        "run_id VARCHAR, launch INTEGER, instance_id BIGINT, kernel_key VARCHAR, region_id VARCHAR, signal VARCHAR, "
        "value DOUBLE, p10 DOUBLE, p90 DOUBLE, min DOUBLE, max DOUBLE, n BIGINT, unit VARCHAR, attribution VARCHAR, "
        "provenance_id VARCHAR"
    ),
    # Derived by argus_lab.join.device: per instrumented launch and SM, its programs, first begin, last end, busy
    # time (union of its programs' spans) and how long before the launch's last SM it finished (GPU ns).
    "device_sm": (
        "run_id VARCHAR, launch INTEGER, sm INTEGER, programs INTEGER, begin_ns BIGINT, end_ns BIGINT, "
        "busy_ns BIGINT, idle_tail_ns BIGINT"
    ),
    # Derived by argus_lab.join: the kernel sequence of each region instance (its own and its nested instances'
    # exactly attributed kernels, in launch order) as a signature, so that instances that ran something else
    # (first-call autotuning, lazy initialisation, compilation, a data-dependent branch) can be told apart.
    "instance_signatures": "run_id VARCHAR, instance_id BIGINT, kernels BIGINT, signature VARCHAR",
    "provenance": (
        "provenance_id VARCHAR PRIMARY KEY, run_id VARCHAR, backend VARCHAR, backend_version VARCHAR, "
        "settings JSON, clocks JSON, timestamps VARCHAR"
    ),
    "artifacts": "run_id VARCHAR, kind VARCHAR, path VARCHAR, sha256 VARCHAR, bytes BIGINT, note VARCHAR",
}

REQUIRED: dict[str, tuple[str, ...]] = {
    "meta": ("key", "value"),
    "sessions": ("session_id",),
    "requests": ("request_id",),
    "runs": ("run_id", "session_id", "request_id", "plan_index", "backends", "signals", "status"),
    "regions": ("region_id", "name"),
    "region_instances": ("run_id", "instance_id", "path", "parent_instance_id", "repetition", "start_ns", "end_ns",
                         "warmup"),
}  # fmt: skip
"""The tables and columns every argus_lab store has had since its first schema version: a store without one was
changed outside argus_lab (a ``DROP TABLE`` or ``ALTER TABLE``), and recreating it empty would hide that its rows are
gone.  Tables and columns added later are created by the first write of an older store."""

DDL: tuple[str, ...] = tuple(f"CREATE TABLE IF NOT EXISTS {name} ({cols})" for name, cols in TABLES.items())

VIEWS: dict[str, str] = {
    # every attribution: the rows the join stored, and the exact ones it derives (argus_lab.join.attribution_sql)
    "attributions": (
        "SELECT run_id, evidence, evidence_id, instance_id, class, weight, reason, target_run_id FROM attribution_rows"
        f"\nUNION ALL{EXACT_ATTRIBUTIONS}"
    ),
    # every instance value with its series' run, signal, unit, backend and provenance
    "instance_values": (
        f"SELECT {', '.join(INSTANCE_VALUE_COLUMNS)} FROM instance_value_rows v JOIN value_series s USING (series)"
    ),
}
"""Views of the store (re-created by every writer, so their definition follows the code that writes)."""

VIEW_DDL: tuple[str, ...] = tuple(f"CREATE OR REPLACE VIEW {name} AS {sql}" for name, sql in VIEWS.items())

STORED_AS: dict[str, str] = {"attributions": "attribution_rows"}
"""The table that rows written under a view's name go to (``Store.write({"attributions": ...})``)."""

BEHIND_VIEWS: frozenset[str] = frozenset({*STORED_AS.values(), "value_series", "instance_value_rows"})
"""Tables read through a view (an export writes the view instead)."""

_OLD_VALUES = (
    "SELECT count(*) FROM information_schema.tables WHERE table_name = 'instance_values' AND table_type = 'BASE TABLE'"
)

MIGRATIONS: dict[int, tuple[tuple[str, str], ...]] = {
    2: (
        (
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'attributions' "
            "AND table_type = 'BASE TABLE' AND NOT EXISTS "
            "(SELECT 1 FROM information_schema.tables WHERE table_name = 'attribution_rows')",
            "ALTER TABLE attributions RENAME TO attribution_rows",
        ),
    ),
    3: (
        *(
            (_OLD_VALUES, f"CREATE TABLE IF NOT EXISTS {t} ({TABLES[t]})")
            for t in ("value_series", "instance_value_rows")
        ),
        *((_OLD_VALUES, stmt) for stmt in store_values_sql("instance_values", LARGEST_SERIES)),
        (_OLD_VALUES, "DROP TABLE instance_values"),
    ),
}
"""(condition, statement) pairs taking a store from version ``v`` to ``v + 1``: the statement runs when the
condition counts more than zero (so a store that already has the new layout is left as it is).  Run by the first
write; the views are re-created after them."""


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
