"""torch.profiler (Kineto) Chrome-trace JSON -> region instances and kernel evidence of one run.

What a Kineto trace holds, and what it becomes (``libkineto/src/output_json.cpp``):

* ``user_annotation`` complete events (``record_function``, ``ProfilerStep#N``) on a CPU thread (``pid`` = process,
  ``tid`` = thread) become region instances: the path from their nesting on that thread, the instance index per
  path in order of entry, module ``torch.profiler``;
* ``kernel``, ``gpu_memcpy`` and ``gpu_memset`` events (``pid`` = device, ``tid`` = stream; ``args.correlation``
  = CUPTI's correlation id) become ``kernels`` rows with their integer-ns times;
* ``cuda_runtime``/``cuda_driver`` events with the same ``correlation`` are the launching calls: their thread and
  start give the kernel's ``thread_id`` and ``api_start_ns``, and the innermost annotation open on that thread at
  that instant is the kernel's region instance (stored as the instance the launch carried, so the join classes it
  ``exact``: the correlation id ties kernel and launch as CUPTI's external correlation ties them in a measured
  run).  A launch on a thread with no annotation open carries none, and the join's own rules decide (temporal
  while one region is open elsewhere, e.g. autograd's backward thread; ambiguous; unattributed);
* ``gpu_user_annotation`` events (Kineto's GPU-side copy of an annotation, from the first to the last kernel it
  launched) are used as a cross-check only: the provenance counts the kernels whose GPU annotation names the
  region they were attributed to.

Times: Kineto writes ``ts``/``dur`` in microseconds with three decimals, relative to ``baseTimeNanoseconds``
(newer versions) or since the epoch (older).  They are parsed as decimals (DuckDB ``DECIMAL``), never as floats,
so every nanosecond survives; zero-length and sub-microsecond kernels are kept as they are.

Speed: the ``traceEvents`` array is copied to files of its own (gzip decompressed on the way) while the file is
hashed on a second thread (which goes on while the copies are parsed), read by DuckDB's JSON reader with typed
columns (no Python object per event), and every table is built by set-based SQL; only the annotations (far fewer
than kernels) are nested in a Python loop.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from argus_lab.errors import ImportFormatError
from argus_lab.importers import chrome_json, events
from argus_lab.importers.common import (
    ImportedTrace,
    SourceInfo,
)

MODULE = "torch.profiler"
"""The module of imported ``record_function`` regions (part of their identity)."""

_CATS = {
    "user_annotation": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_runtime": "launch",
    "cuda_driver": "launch",
    "runtime": "launch",
    "driver": "launch",
}

_ARGS = (
    "STRUCT(correlation BIGINT, device BIGINT, context BIGINT, stream BIGINT, "
    'grid BIGINT[], block BIGINT[], "registers per thread" BIGINT, bytes BIGINT, name VARCHAR, mangled VARCHAR)'
)
_COLUMNS = (
    "{ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', pid: 'VARCHAR', tid: 'VARCHAR', "
    "ts: '%s', dur: 'DECIMAL(18,3)', args: '%s'}"
)
_ARG_FIELDS = (
    ("corr", "correlation", "BIGINT"),
    ("device", "device", "BIGINT"),
    ("context", "context", "BIGINT"),
    ("stream", "stream", "BIGINT"),
    ("grid", "grid", "BIGINT[]"),
    ("block", "block", "BIGINT[]"),
    ("regs", "registers per thread", "BIGINT"),
    ("nbytes", "bytes", "BIGINT"),
    ("arg_name", "name", "VARCHAR"),
    ("mangled", "mangled", "VARCHAR"),  # argus_lab's own exports name kernels demangled, keeping the recorded name
)


# ------------------------------------------------------------------------------------------------------------
# events -> tables
# ------------------------------------------------------------------------------------------------------------
NARROW_TS = "DECIMAL(18,3)"
"""Relative times (Kineto with ``baseTimeNanoseconds``) fit 64-bit decimals: exact and ten times cheaper to convert."""
WIDE_TS = "DECIMAL(24,3)"
"""Epoch microseconds (older Kineto) need 128-bit decimals."""


def _stage(con: Any, files: list[str], base_ns: int, ts_type: str) -> None:
    cats = ", ".join(f"'{c}'" for c in _CATS)
    case = " ".join(f"WHEN '{c}' THEN '{k}'" for c, k in _CATS.items())
    calls = ", ".join(f"'{c}'" for c, k in _CATS.items() if k == "launch")

    def load(args_type: str, fields: str) -> None:
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE ev AS
            WITH raw AS (
                SELECT * FROM read_json(?, format = 'array', columns = {_COLUMNS % (ts_type, args_type)},
                                        maximum_object_size = 67108864)
            )
            -- categories as Kineto writes them (lower case) are matched as they are, others lowered; a launching
            -- call's name ("cudaLaunchKernel": a million copies) is never read, so it is not kept
            SELECT CASE WHEN ph = 'M' THEN 'meta' ELSE CASE cat {case} ELSE CASE lower(cat) {case} END END END AS kind,
                   CASE WHEN cat IN ({calls}) THEN NULL ELSE name END AS name,
                   coalesce(TRY_CAST(pid AS BIGINT), TRY_CAST(regexp_extract(pid, '(-?\\d+)', 1) AS BIGINT)) AS pid,
                   coalesce(TRY_CAST(tid AS BIGINT), TRY_CAST(regexp_extract(tid, '(-?\\d+)', 1) AS BIGINT)) AS tid,
                   CAST(ts * 1000 AS BIGINT) + {int(base_ns)} AS t, coalesce(CAST(dur * 1000 AS BIGINT), 0) AS d,
                   {fields}
            FROM raw
            WHERE (ph = 'X' AND (cat IN ({cats}) OR lower(cat) IN ({cats}))) OR (ph = 'M' AND name = 'thread_name')
            """,
            [files],
        )

    struct_fields = ", ".join(f'args."{src}" AS {dst}' for dst, src, _ in _ARG_FIELDS)
    try:
        load(_ARGS, struct_fields)
    except Exception as exc:  # an args value of an unexpected type: read args as JSON and cast each value
        if "duckdb" not in type(exc).__module__:
            raise
        json_fields = ", ".join(
            f"TRY_CAST(json_extract(args, '$.\"{src}\"') AS {typ}) AS {dst}"
            if typ != "VARCHAR"
            else f"json_extract_string(args, '$.\"{src}\"') AS {dst}"
            for dst, src, typ in _ARG_FIELDS
        )
        load("JSON", json_fields)
    con.execute("UPDATE ev SET name = mangled WHERE mangled IS NOT NULL")  # the name as the kernel was recorded


MEMORY_LIMIT = "2GB"
"""DuckDB's memory limit while a trace is staged (the events spill to disk beyond it)."""


def _size(text: str) -> str:
    """``text`` if it is a DuckDB memory size such as ``2GB`` or ``512MiB``; raises otherwise."""
    import re

    if not re.fullmatch(r"\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*", text, flags=re.IGNORECASE):
        msg = f"memory_limit={text!r} is not a size; pass e.g. memory_limit='2GB'"
        raise ImportFormatError(msg)
    return text.strip()


CROSS_CHECK_MAX = 200_000
"""Above this many kernels the GPU-annotation cross-check is left out unless asked for (it costs an ASOF join)."""


def read(
    path: str | Path,
    run_id: str,
    *,
    workdir: str | None = None,
    threads: int | None = None,
    cross_check: bool | None = None,
    con: Any = None,
    memory_limit: str = MEMORY_LIMIT,
) -> ImportedTrace:
    """Read a Kineto trace (``.json`` or ``.json.gz``) as the evidence of run ``run_id``.

    ``cross_check``: compare each kernel's GPU-side annotation with its attributed region (default: when the trace
    has at most :data:`CROSS_CHECK_MAX` kernels).  ``workdir``: where the event array is copied (default: the
    system's temporary folder).  ``con``: a DuckDB connection to stage the events on (the store's, so that the
    kernels go into it without leaving DuckDB; see :attr:`ImportedTrace.staged`), else a private in-memory one.
    ``memory_limit``: DuckDB's memory limit while the events are staged (beyond it they spill to a temporary folder,
    so the import's memory stays bounded however large the trace; ``""`` leaves DuckDB's default).
    """
    import duckdb

    p = Path(path)
    n_threads = int(threads or os.cpu_count() or 1)
    with chrome_json.event_parts(p, parts=n_threads, workdir=workdir) as src:
        meta = src.meta
        base_ns = int(meta.get("baseTimeNanoseconds") or 0)
        dist = meta.get("distributedInfo") or {}
        rank = int(dist.get("rank") or 0) if isinstance(dist, dict) else 0
        own = con is None
        if own:
            con = duckdb.connect()
        try:
            con.execute(f"SET threads = {n_threads}")
            con.execute("SET enable_progress_bar = false")
            if memory_limit:
                con.execute(f"SET memory_limit = '{_size(memory_limit)}'")
                if own:
                    con.execute(f"SET temp_directory = '{str(src.workdir / 'spill').replace(chr(39), chr(39) * 2)}'")
            _read_events(con, src, base_ns, str(p))
            src.parsed()  # the copies are deleted while the tables are built
            source = SourceInfo(
                str(p.resolve()), "kineto", "torch.profiler (Kineto)", src.sha256, src.bytes, _tool_version(meta)
            )
            checked = cross_check if cross_check is not None else _kernel_count(con) <= CROSS_CHECK_MAX
            return events.build(
                con,
                run_id,
                rank,
                source,
                MODULE,
                {"base_time_ns": base_ns, "device_properties": meta.get("deviceProperties", [])},
                cross_check=checked,
                check_skipped=f"not run (more than {CROSS_CHECK_MAX} kernels; pass cross_check=True)",
                timestamps="measured by the profiler (CUPTI via Kineto), read from the file as integer ns",
                rules=(
                    "kernel -> cuda_runtime/cuda_driver event with its correlation id -> innermost user_annotation "
                    "open on that thread at the launch (carried instance); launches outside every annotation left "
                    "to the join"
                ),
                keep_on_connection=not own,
            )
        finally:
            if own:
                con.close()


def _read_events(con: Any, src: chrome_json.Source, base_ns: int, shown: str) -> None:
    """Stage the events (table ``ev``): narrow decimals first, wide on overflow, one part if a cut was bad."""
    import duckdb

    attempts: list[tuple[list[str] | None, str]] = []
    files = [str(f) for f in src.parts]
    if base_ns:
        attempts.append((files, NARROW_TS))
    attempts.append((files, WIDE_TS))
    if len(files) > 1:
        attempts.append((None, WIDE_TS))
    last: Exception | None = None
    for parts, ts_type in attempts:
        try:
            _stage(con, parts if parts is not None else [str(chrome_json.whole_array(src))], base_ns, ts_type)
            return
        except duckdb.Error as exc:
            last = exc
    msg = f"{shown!r}: its trace events could not be read as Chrome-trace JSON ({last})"
    raise ImportFormatError(msg) from last


def _kernel_count(con: Any) -> int:
    row = con.execute("SELECT count(*) FROM ev WHERE kind = 'kernel'").fetchone()
    return int(row[0]) if row else 0


def _tool_version(meta: dict[str, Any]) -> str:
    sv = meta.get("schemaVersion")
    return f"Kineto trace schema {sv}" if sv is not None else "Kineto trace"
