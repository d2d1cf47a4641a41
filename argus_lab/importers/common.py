"""What every importer shares: the result type, format detection, region nesting and provenance rows.

An imported trace becomes one run.  Its annotations (``record_function`` ranges, NVTX ranges) become region
instances exactly as :mod:`argus_lab.regions` records them: a path from the nesting on one thread, an instance
index per path in order of entry, a parent instance, integer nanoseconds.  Region identity is (name, kind,
module), with the module naming the tool (``torch.profiler``, ``nvtx``), so the same annotation names of two
imported traces are the same regions and their runs compare.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import stat
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from argus_lab.errors import ImportFormatError
from argus_lab.regions import Region

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS: tuple[str, ...] = ("kineto", "nsys", "ncu")
"""The trace formats argus_lab imports."""

PATH_SEPARATOR = "/"
SEPARATOR_STANDIN = "\u2215"  # DIVISION SLASH: a '/' inside an annotation name would split the region path
_STEP = re.compile(r"^(ProfilerStep)#\d+$")


@dataclass(frozen=True)
class SourceInfo:
    """Where an imported run came from."""

    path: str
    format: str
    tool: str
    sha256: str
    bytes: int
    tool_version: str = ""


@dataclass(frozen=True)
class ImportedTrace:
    """The raw evidence of one imported file, as store tables for one run."""

    run_id: str
    source: SourceInfo
    tables: dict[str, Any]
    """Store table -> an Arrow table, or the SQL of a query on the DuckDB connection the importer was given
    (``con=``: the rows were staged there and go into the store without leaving DuckDB)."""
    counts: dict[str, int]
    started_ns: int
    ended_ns: int
    notes: tuple[str, ...] = ()
    """What the file held that the import could not use, or approximated (one sentence each)."""
    settings: dict[str, Any] = field(default_factory=dict)
    staged: tuple[str, ...] = ()
    """Temporary tables left on the given connection for the queries of ``tables`` (drop them once written)."""
    damage: tuple[str, ...] = ()
    """What the import found wrong with the file itself (truncated, damaged bytes, counts that disagree, values out
    of range), one sentence each: the run is stored as ``partial`` with these as its cause."""

    def text(self) -> str:
        """A short summary: what was read, what was left out, and what is wrong with the file."""
        got = ", ".join(f"{v} {k}" for k, v in self.counts.items())
        lines = [f"imported {self.source.format} trace {self.source.path} as run {self.run_id}: {got}"]
        lines += [f"  DAMAGED FILE: {d}" for d in self.damage]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def cause(self) -> str:
        """The run's cause when the file is damaged (``""`` otherwise)."""
        if not self.damage:
            return ""
        return f"the imported file {self.source.path} is damaged: " + "; ".join(self.damage)


def check_trace_file(path: str | Path) -> Path:
    """``path`` as a :class:`Path` when it names a regular file (or a link to one); raises naming what it is
    instead (nothing there, a folder, a named pipe or another special file, which a read would fail on or wait on
    forever)."""
    p = Path(path)
    accepted = "pass the path of a Kineto JSON, an .nsys-rep/.sqlite or an .ncu-rep"
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        msg = f"no trace file at {str(p)!r}; {accepted}"
        raise ImportFormatError(msg) from None
    except OSError as exc:
        msg = f"cannot read {str(p)!r} ({exc.strerror}); {accepted}"
        raise ImportFormatError(msg) from None
    if stat.S_ISREG(mode):
        return p
    what = "a folder" if stat.S_ISDIR(mode) else "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a special file"
    msg = f"{str(p)!r} is {what}, not a trace file; {accepted}"
    raise ImportFormatError(msg)


def detect_format(path: str | Path) -> str:
    """The format of a trace file from its name and first bytes; raises with the accepted formats otherwise."""
    p = check_trace_file(path)
    name = p.name.lower()
    if name.endswith(".ncu-rep"):
        return "ncu"
    if name.endswith((".nsys-rep", ".qdrep")):
        return "nsys"
    head = _head(p)
    if head.startswith(b"SQLite format 3"):
        return "nsys"
    if head.lstrip()[:1] == b"{" or name.endswith((".json", ".json.gz", ".pt.trace.json")):
        return "kineto"
    msg = (
        f"cannot tell the format of {str(p)!r}; name it .json/.json.gz (torch.profiler/Kineto), .nsys-rep or "
        ".sqlite (Nsight Systems) or .ncu-rep (Nsight Compute), or pass the format explicitly (--format)"
    )
    raise ImportFormatError(msg)


def _head(p: Path, n: int = 64) -> bytes:
    with p.open("rb") as f:
        raw = f.read(n)
    if raw[:2] == b"\x1f\x8b":
        with gzip_errors(p), gzip.open(p, "rb") as g:
            return g.read(n)
    return raw


@contextmanager
def gzip_errors(shown: str | Path) -> Iterator[None]:
    """Reading a gzip file: a truncated or damaged one becomes an :class:`ImportFormatError` naming the file."""
    try:
        yield
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        what = "it ends before its end-of-stream marker (truncated)" if isinstance(exc, EOFError) else f"{exc}"
        msg = (
            f"{str(shown)!r} is a damaged gzip file: {what}; copy the trace again from where the profiler wrote it "
            "(`gzip -t FILE` checks a copy), or record it again"
        )
        raise ImportFormatError(msg) from exc


TEMP_PREFIX = "argus-trace-"
"""The folders an import copies event arrays to are ``<tmp>/argus-trace-<pid>-<random>``."""
_OWNED = re.compile(r"^(?:argus-trace|argus-nsys)-(\d+)-")


def sweep_stale(workdir: str | None = None) -> list[Path]:
    """Remove the temporary folders of imports whose process has ended (killed: it could not remove them); returns
    the folders removed.  A folder whose process id is alive is kept (it may be another import's, running now)."""
    root = Path(workdir or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for entry in entries:
        m = _OWNED.match(entry.name)
        if m is None or not entry.is_dir() or entry.is_symlink() or _alive(int(m.group(1))):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def file_digest(path: str | Path) -> tuple[str, int]:
    """(sha256 hex, bytes) of a file, read in large blocks."""
    h = hashlib.sha256()
    n = 0
    with Path(path).open("rb") as f:
        while block := f.read(1 << 24):
            h.update(block)
            n += len(block)
    return h.hexdigest(), n


def region_name(name: str) -> str:
    """An annotation name as a region name: torch's ``ProfilerStep#7`` is the region ``ProfilerStep`` (its
    instances are the steps), and ``/`` (the path separator) is replaced by a look-alike."""
    m = _STEP.match(name)
    if m:
        return m.group(1)
    return name.replace(PATH_SEPARATOR, SEPARATOR_STANDIN)


MAX_DEPTH = 64
"""The deepest nesting an import builds: an interval that would lie deeper is placed beside the deepest level
instead (counted in :attr:`Nesting.capped`), so that identical or deeply nested ranges cannot make paths grow
without bound."""
MAX_PATH_CHARS = 2048
"""The longest region path an import builds by nesting (a longer one is placed higher up; a single name longer
than this is kept as it is, at the top level)."""


@dataclass(frozen=True)
class Nesting:
    """Region instances built from annotation intervals (arrays aligned with the input order)."""

    instance_id: np.ndarray
    parent_id: np.ndarray
    path_code: np.ndarray
    """The position of each instance's path in :attr:`paths` (the distinct paths, each held once)."""
    paths: list[str]
    instance_index: np.ndarray
    region_of: list[str]
    """The region name of each instance (after :func:`region_name`)."""
    improper: int
    """Intervals that started inside an open one and ended after it: not nested under it (placed beside it)."""
    capped: int
    """Intervals placed higher than they lie, so that no path is deeper than :data:`MAX_DEPTH` levels or longer than
    :data:`MAX_PATH_CHARS` characters."""
    opens: np.ndarray
    """Whether an interval's start makes it the innermost open interval of its thread (not so for one placed higher
    than it lies: the deeper interval that encloses it stays the innermost)."""
    closes: np.ndarray
    """Whether an interval's end makes its parent the innermost open interval again (not so when a later interval
    that outlasts it started while it was open: that one is the innermost from then on)."""

    @property
    def path(self) -> list[str]:
        """The path of each instance."""
        return [self.paths[c] for c in self.path_code.tolist()]


def nest(group: np.ndarray, start: np.ndarray, end: np.ndarray, names: Sequence[str], first_id: int = 1) -> Nesting:
    """Nest intervals per ``group`` (a thread) into region instances.

    Within a thread an interval's parent is the latest-started interval still open that encloses it (starts at or
    before it and ends at or after it; ties: the longer one is the outer one).  An interval that starts inside an
    open one and ends after it *overlaps* it without nesting: it is not its child but its sibling (its parent is the
    latest open interval that encloses both), as Perfetto shows such a slice on a track of its own rather than
    under the one it overlaps.  The open intervals form one chain of enclosing intervals per thread, so the work is
    linear in the intervals and the depth is that of real nesting, capped at :data:`MAX_DEPTH` levels and
    :data:`MAX_PATH_CHARS` characters (see :attr:`Nesting.capped`).  Instance ids count from ``first_id`` in order
    of start time; the instance index of a path counts its instances in order of start time across threads, as the
    recorder numbers them.
    """
    n = len(start)
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    group = np.asarray(group, dtype=np.int64)
    order = np.lexsort((np.arange(n), -(end - start), start, group))
    parent_pos = np.full(n, -1, dtype=np.int64)
    opens = np.ones(n, dtype=bool)
    closes = np.ones(n, dtype=bool)
    named = {x: region_name(str(x)) for x in dict.fromkeys(names)}  # a trace repeats a few names many times
    rnames = [named[x] for x in names]
    paths: list[str] = []
    path_at: dict[tuple[int, str], int] = {}  # (parent's path code or -1, name) -> path code: each path built once
    improper = capped = 0
    stack: list[int] = []  # the open intervals of the thread, each enclosing the next
    g_prev: int | None = None
    g_list, s_list, e_list = group.tolist(), start.tolist(), end.tolist()
    code_of: list[int] = [0] * n
    for pos in order.tolist():
        g, s, e = g_list[pos], s_list[pos], e_list[pos]
        if g != g_prev:
            stack.clear()
            g_prev = g
        while stack and e_list[stack[-1]] <= s and s_list[stack[-1]] != s:  # ended before it started
            stack.pop()
        if stack and e_list[stack[-1]] < e:  # open, but ending before it ends: overlapped, not enclosing
            improper += 1
            while stack and e_list[stack[-1]] < e:
                closes[stack.pop()] = False
        name = rnames[pos]
        at = len(stack)
        while at and (at >= MAX_DEPTH or len(paths[code_of[stack[at - 1]]]) + 1 + len(name) > MAX_PATH_CHARS):
            at -= 1
        parent_code = -1
        if at:
            parent_pos[pos] = stack[at - 1]
            parent_code = code_of[stack[at - 1]]
        c = path_at.get((parent_code, name))
        if c is None:
            c = path_at[(parent_code, name)] = len(paths)
            paths.append(paths[parent_code] + PATH_SEPARATOR + name if parent_code >= 0 else name)
        code_of[pos] = c
        if at < len(stack):  # placed higher than it lies: the deeper interval enclosing it stays the innermost
            capped += 1
            opens[pos] = closes[pos] = False
        else:
            stack.append(pos)
    code = np.asarray(code_of, dtype=np.int64)
    by_start = np.lexsort((group, start))
    ids = np.zeros(n, dtype=np.int64)
    ids[by_start] = np.arange(first_id, first_id + n, dtype=np.int64)
    parent_id = np.where(parent_pos >= 0, ids[np.maximum(parent_pos, 0)], 0)
    index = np.zeros(n, dtype=np.int64)
    counters = [0] * len(paths)
    for pos in by_start.tolist():
        c = code_of[pos]
        index[pos] = counters[c]
        counters[c] += 1
    return Nesting(ids, parent_id, code, paths, index, rnames, improper, capped, opens, closes)


def region_rows(names: Sequence[str], module: str) -> tuple[dict[str, str], dict[str, list[Any]]]:
    """(region id by name, ``regions`` table columns) for distinct region names declared by ``module``."""
    ids: dict[str, str] = {}
    for name in dict.fromkeys(names):
        ids[name] = Region(name, "host", module).region_id
    cols: dict[str, list[Any]] = {
        "region_id": list(ids.values()),
        "name": list(ids),
        "kind": ["host"] * len(ids),
        "module": [module] * len(ids),
        "file": [""] * len(ids),
        "line": [0] * len(ids),
    }
    return ids, cols


def provenance_rows(
    run_id: str, source: SourceInfo, backend: str, settings: dict[str, Any], timestamps: str
) -> dict[str, list[Any]]:
    """The run's provenance: one row for the evidence (``<run>:<backend>``) and one for the import itself."""
    import json

    where = {"imported_from": source.path, "format": source.format, "tool": source.tool, "sha256": source.sha256}
    return {
        "provenance_id": [f"{run_id}:{backend}", f"{run_id}:import"],
        "run_id": [run_id, run_id],
        "backend": [backend, "import"],
        "backend_version": [source.tool_version or source.tool, f"argus_lab.import ({source.format})"],
        "settings": [json.dumps({**where, **settings}, sort_keys=True, default=str), json.dumps(where)],
        "clocks": ["{}", "{}"],
        "timestamps": [timestamps, "derived (read from the imported file; nothing synthesized)"],
    }


def artifact_rows(run_id: str, source: SourceInfo, note: str) -> dict[str, list[Any]]:
    """The imported file as the run's artifact (path, sha256, size)."""
    return {
        "run_id": [run_id],
        "kind": [f"{source.format}-trace"],
        "path": [source.path],
        "sha256": [source.sha256],
        "bytes": [source.bytes],
        "note": [note],
    }


def instance_id_base(rank: int) -> int:
    """First instance id of a rank (as :class:`argus_lab.regions.Recorder` numbers them)."""
    return (int(rank) << 40) + 1


def arrow_of(res: Any) -> pa.Table:
    """The result of a DuckDB query as an Arrow table (the method's name differs across DuckDB versions)."""
    for name in ("to_arrow_table", "fetch_arrow_table", "arrow"):
        fn = getattr(res, name, None)
        if fn is not None:
            tbl = fn()
            return tbl.read_all() if hasattr(tbl, "read_all") else tbl
    msg = "internal: this DuckDB version returns no Arrow tables"
    raise RuntimeError(msg)
