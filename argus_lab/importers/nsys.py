"""Nsight Systems reports -> region instances (NVTX push/pop ranges) and kernel evidence of one run.

A ``.nsys-rep`` is first exported with ``nsys export --type sqlite`` (``nsys`` from PATH, ``/usr/local/cuda/bin``
or ``/opt/nvidia/nsight-systems*/bin``); an exported ``.sqlite`` is read directly.  The tables used are those of
Nsight Systems' documented SQLite export schema:

* ``NVTX_EVENTS`` with ``eventType`` 59 (``NvtxPushPopRange``): ``start``/``end``, ``globalTid``, ``text`` or
  ``textId`` (-> ``StringIds``), ``domainId`` (the domain's name is the ``text`` of its ``eventType`` 75 row,
  ``NvtxDomainCreate``).  Ranges of the ``argus`` domain are used when there are any, else those of every domain.
  Start/end ranges (``eventType`` 60) may cross threads and are not regions (counted in the provenance).
* ``CUPTI_ACTIVITY_KIND_KERNEL`` (``start``, ``end``, ``deviceId``, ``contextId``, ``streamId``,
  ``correlationId``, ``demangledName``/``shortName`` -> ``StringIds``, grid, block, registers, shared memory),
  ``CUPTI_ACTIVITY_KIND_MEMCPY`` and ``..._MEMSET`` (``bytes``);
* ``CUPTI_ACTIVITY_KIND_RUNTIME`` (``start``, ``end``, ``globalTid``, ``correlationId``): the launching calls.

``globalTid`` serializes the process and thread ids (``tid = globalTid % 2**24``, ``pid = (globalTid >> 24) %
2**24``).  Times are integer ns on the session's clock; ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` (when the
export has it) is the session start in epoch ns and is added, so imported times are ``CLOCK_REALTIME`` like a
measured run's.  The attribution is that of :mod:`argus_lab.importers.events`.
"""

from __future__ import annotations

import glob
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from argus_lab import config
from argus_lab.errors import BackendUnavailableError, ImportFormatError
from argus_lab.importers import events
from argus_lab.importers.common import ImportedTrace, SourceInfo, file_digest, sweep_stale

MODULE = "nvtx"
DOMAIN = "argus"
NSYS_CANDIDATES = (
    "/usr/local/cuda/bin/nsys",
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems*/bin/nsys",
)
PUSH_POP, START_END, DOMAIN_CREATE = 59, 60, 75


def find_nsys(explicit: str | None = None) -> str:
    """The ``nsys`` executable, or :class:`BackendUnavailableError` saying how to get one."""
    cands = [explicit, config.value(config.ARGUS_NSYS), shutil.which("nsys")]
    for pattern in NSYS_CANDIDATES:
        cands += sorted(glob.glob(pattern), reverse=True)
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    msg = (
        "Nsight Systems (`nsys`) was not found (PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-systems*/bin); "
        "export the report elsewhere with `nsys export --type sqlite REPORT.nsys-rep` and import the .sqlite, or "
        "point ARGUS_NSYS at the nsys executable"
    )
    raise BackendUnavailableError(msg)


def export_sqlite(report: Path, out: Path, nsys: str | None = None, timeout_s: float = 600.0) -> Path:
    """``nsys export --type sqlite`` of ``report`` into ``out``."""
    exe = find_nsys(nsys)
    cmd = [exe, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out), str(report)]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        msg = f"`nsys export` of {str(report)!r} took longer than {timeout_s:.0f} s"
        raise BackendUnavailableError(msg) from exc
    if res.returncode != 0 or not out.exists():
        tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-6:])
        msg = f"`nsys export --type sqlite` of {str(report)!r} failed (exit status {res.returncode}):\n{tail}"
        raise BackendUnavailableError(msg)
    return out


def read(
    path: str | Path, run_id: str, *, nsys: str | None = None, domain: str | None = None, workdir: str | None = None
) -> ImportedTrace:
    """Read an Nsight Systems report (``.nsys-rep``/``.qdrep`` or its ``.sqlite`` export) as run ``run_id``."""
    p = Path(path)
    sha, size = file_digest(p)
    sweep_stale(workdir)
    with tempfile.TemporaryDirectory(prefix=f"argus-nsys-{os.getpid()}-", dir=workdir) as tmp:
        db = p
        if not _is_sqlite(p):
            db = export_sqlite(p, Path(tmp) / "report.sqlite", nsys)
        try:
            return _read_sqlite(db, p, run_id, sha, size, domain)
        except _BadCell as exc:
            msg = f"{str(p)!r}: {exc}"
            raise ImportFormatError(msg) from exc
        except sqlite3.DatabaseError as exc:
            msg = (
                f"{str(p)!r} could not be read as an SQLite database ({exc}): the export is truncated or damaged; "
                "export the report again with `nsys export --type sqlite --output NAME.sqlite REPORT.nsys-rep`"
            )
            raise ImportFormatError(msg) from exc


def _is_sqlite(p: Path) -> bool:
    with p.open("rb") as f:
        return f.read(16).startswith(b"SQLite format 3")


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def _read_sqlite(db: Path, shown: Path, run_id: str, sha: str, size: int, domain: str | None) -> ImportedTrace:
    import duckdb
    import pyarrow as pa

    lite = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        have = _tables(lite)
        if "StringIds" not in have:
            msg = f"{str(shown)!r} is not an Nsight Systems SQLite export (no StringIds table)"
            raise ImportFormatError(msg)
        epoch = 0
        if "TARGET_INFO_SESSION_START_TIME" in have:
            row = lite.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1").fetchone()
            epoch = int(row[0]) if row and row[0] is not None else 0
        strings = _arrow(lite, "SELECT id, value FROM StringIds", ["id", "value"], pa)
        parts: dict[str, Any] = {"strings": strings}
        chosen, counts = "", {"start_end_ranges": 0}
        if "NVTX_EVENTS" in have:
            chosen, nvtx, counts = _nvtx(lite, domain, pa)
            parts["nvtx"] = nvtx
        for table, kind in (
            ("CUPTI_ACTIVITY_KIND_KERNEL", "kernel"),
            ("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"),
            ("CUPTI_ACTIVITY_KIND_MEMSET", "memset"),
        ):
            if table in have:
                parts[kind] = _gpu(lite, table, kind, pa)
        if "CUPTI_ACTIVITY_KIND_RUNTIME" in have:
            parts["runtime"] = _arrow(
                lite,
                'SELECT start, "end", globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME',
                ["start", "end", "gtid", "corr"],
                pa,
            )
    finally:
        lite.close()
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        for name, tbl in parts.items():
            con.register(f"n_{name}", tbl)
        _stage(con, parts, epoch)
        source = SourceInfo(str(shown.resolve()), "nsys", "Nsight Systems", sha, size, "nsys SQLite export")
        return events.build(
            con,
            run_id,
            0,
            source,
            MODULE,
            {"session_start_epoch_ns": epoch, "nvtx_domain": chosen or "(all domains)", **counts},
            cross_check=False,
            check_skipped="not applicable (Nsight Systems writes no GPU-side copy of NVTX ranges)",
            timestamps="measured by Nsight Systems (CUPTI), session clock + utcEpochNs of the session start",
            rules=(
                "kernel -> CUPTI_ACTIVITY_KIND_RUNTIME call with its correlation id -> innermost NVTX push/pop range "
                "open on that thread at the call (carried instance); launches outside every range left to the join"
            ),
        )
    finally:
        con.close()


def _arrow(lite: sqlite3.Connection, sql: str, names: list[str], pa: Any) -> Any:
    rows = lite.execute(sql).fetchall()
    cols: list[Any] = list(zip(*rows, strict=True)) if rows else [[] for _ in names]
    out = {}
    for n, c in zip(names, cols, strict=True):
        try:
            out[n] = pa.array(list(c)) if rows else pa.array([], pa.int64())
        except (pa.ArrowTypeError, pa.ArrowInvalid) as exc:
            kinds = Counter(type(v).__name__ for v in c if v is not None)
            rare = min(kinds, key=lambda k: kinds[k])
            odd = next(v for v in c if type(v).__name__ == rare)
            table = sql.rsplit(" FROM ", 1)[-1].split()[0]
            msg = (
                f"column {n!r} of {table} holds {kinds[rare]} {rare} value(s) among {sum(kinds.values())} (e.g. "
                f"{str(odd)[:40]!r}; {exc}): the export is damaged or was edited; "
                "export the report again with `nsys export --type sqlite --output NAME.sqlite REPORT.nsys-rep`"
            )
            raise _BadCell(msg) from exc
    return pa.table(out)


class _BadCell(ValueError):
    """A cell of the export whose type differs from its column's other cells."""


DEFAULT_DOMAIN_NAMES = ("default", "")
"""``domain=`` values naming NVTX's default domain (ranges pushed without a domain)."""


def _nvtx(lite: sqlite3.Connection, domain: str | None, pa: Any) -> tuple[str, Any, dict[str, int]]:
    cols = _columns(lite, "NVTX_EVENTS")
    text = "coalesce(e.text, s.value)" if "textId" in cols else "e.text"
    join = "LEFT JOIN StringIds s ON s.id = e.textId" if "textId" in cols else ""
    dom_col = "e.domainId" if "domainId" in cols else "0"
    domains = {
        int(d): str(t)
        for d, t in lite.execute(
            f"SELECT {dom_col}, {text} FROM NVTX_EVENTS e {join} WHERE e.eventType = {DOMAIN_CREATE}"
        ).fetchall()
        if d is not None
    }
    wanted = domain if domain is not None else (DOMAIN if DOMAIN in domains.values() else None)
    where = f'e.eventType = {PUSH_POP} AND e."end" IS NOT NULL'
    if wanted in DEFAULT_DOMAIN_NAMES:  # the default domain (torch.cuda.nvtx, nvtx.push_range) is created by no event
        where += f" AND coalesce({dom_col}, 0) NOT IN ({', '.join(str(i) for i in domains) or '-1'})"
    elif wanted is not None:
        ids = [d for d, t in domains.items() if t == wanted]
        if not ids:
            msg = f"the report has no NVTX domain {wanted!r}; its domains: {sorted(domains.values()) or ['(default)']}"
            raise ImportFormatError(msg)
        where += f" AND {dom_col} IN ({', '.join(str(i) for i in ids)})"
    sql = f'SELECT e.start, e."end", e.globalTid, {text} FROM NVTX_EVENTS e {join} WHERE {where}'
    tbl = _arrow(lite, sql, ["start", "end", "gtid", "name"], pa)
    row = lite.execute(f"SELECT count(*) FROM NVTX_EVENTS WHERE eventType = {START_END}").fetchone()
    return wanted or "", tbl, {"start_end_ranges": int(row[0]) if row else 0}


def _gpu(lite: sqlite3.Connection, table: str, kind: str, pa: Any) -> Any:
    cols = _columns(lite, table)

    def col(name: str, default: str = "NULL") -> str:
        return name if name in cols else default

    name = col("demangledName", col("shortName", "NULL"))
    sql = (
        f'SELECT start, "end", {col("deviceId", "0")}, {col("contextId", "0")}, {col("streamId", "0")}, '
        f"{col('correlationId', '0')}, {name}, {col('gridX')}, {col('gridY')}, {col('gridZ')}, {col('blockX')}, "
        f"{col('blockY')}, {col('blockZ')}, {col('registersPerThread')}, {col('bytes')}, "
        f"{col('copyKind')} FROM {table}"
    )
    names = ["start", "end", "device", "context", "stream", "corr", "name_id", "gx", "gy", "gz", "bx", "by", "bz",
             "regs", "nbytes", "copy_kind"]  # fmt: skip
    return _arrow(lite, sql, names, pa)


def _stage(con: Any, parts: dict[str, Any], epoch: int) -> None:
    tid = "(gtid % 16777216)"
    pid = "((gtid // 16777216) % 16777216)"
    selects = [
        "SELECT NULL::VARCHAR AS kind, NULL::VARCHAR AS name, NULL::BIGINT AS pid, NULL::BIGINT AS tid, "
        "NULL::BIGINT AS t, NULL::BIGINT AS d, NULL::BIGINT AS corr, NULL::BIGINT AS device, "
        "NULL::BIGINT AS context, NULL::BIGINT AS stream, NULL::BIGINT[] AS grid, NULL::BIGINT[] AS block, "
        "NULL::BIGINT AS regs, NULL::BIGINT AS nbytes, NULL::VARCHAR AS arg_name WHERE false"
    ]
    if "nvtx" in parts:
        selects.append(
            f"SELECT 'annotation' AS kind, name, {pid} AS pid, {tid} AS tid, start + {epoch} AS t, "
            '"end" - start AS d, '
            "NULL::BIGINT AS corr, NULL::BIGINT AS device, NULL::BIGINT AS context, NULL::BIGINT AS stream, "
            "NULL::BIGINT[] AS grid, NULL::BIGINT[] AS block, NULL::BIGINT AS regs, NULL::BIGINT AS nbytes, "
            "NULL::VARCHAR AS arg_name FROM n_nvtx"
        )
    for kind in ("kernel", "memcpy", "memset"):
        if kind not in parts:
            continue
        name = "s.value" if kind == "kernel" else (
            "'memcpy ' || coalesce(CAST(g.copy_kind AS VARCHAR), '?')" if kind == "memcpy" else "'memset'"
        )  # fmt: skip
        selects.append(
            f"SELECT '{kind}', {name}, g.device, g.stream, g.start + {epoch}, g.\"end\" - g.start, g.corr, g.device, "
            "g.context, g.stream, [g.gx, g.gy, g.gz], [g.bx, g.by, g.bz], g.regs, g.nbytes, NULL "
            f"FROM n_{kind} g LEFT JOIN n_strings s ON s.id = g.name_id"
        )
    if "runtime" in parts:
        selects.append(
            f"SELECT 'launch', NULL, {pid}, {tid}, start + {epoch}, \"end\" - start, corr, NULL, NULL, NULL, NULL, "
            "NULL, NULL, NULL, NULL FROM n_runtime"
        )
    con.execute("CREATE OR REPLACE TEMP TABLE ev AS " + " UNION ALL ".join(selects))
