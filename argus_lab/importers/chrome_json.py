"""The event array of a Chrome-trace JSON file, cut into parts DuckDB's JSON reader parses in parallel.

A Chrome trace is one object (``{"traceEvents": [...], ...}``, the JSON Object Format) or a bare array (the JSON
Array Format, its closing bracket optional).  DuckDB reads arrays of records fast, but not an array nested in an
object, and one file on one thread.  :func:`event_parts` therefore

* finds the ``traceEvents`` array (the keys before and after it are small and parsed with :mod:`json`),
* cuts it at event boundaries into ``parts`` files, each a JSON array of whole events, copied by the kernel
  (``os.copy_file_range``: no Python copy of the bytes),
* decompresses a gzip file first (to a temporary file),
* hashes the file as stored (sha256) on a second thread meanwhile, while the parts are cut and parsed (through a
  memory map moved along the file, so that the process's RSS does not grow with the file).

An event boundary is ``}`` ``,`` and a line break before the next ``{``: a line break cannot occur inside a JSON
string, and Kineto starts every event on a line of its own.  Should a cut still fall inside an event (an event
holding a pretty-printed array of objects), the parts fail to parse and the caller reads the whole array as one
part (:func:`whole_array`).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import mmap
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from argus_lab.errors import ImportFormatError
from argus_lab.importers.common import TEMP_PREFIX, gzip_errors, sweep_stale

_BOUNDARY = re.compile(rb"\}\s*,[ \t\r]*\n\s*\{")
MIN_PART_BYTES = 16 << 20


@dataclass(frozen=True)
class EventArray:
    """Where the event array lies in a (decompressed) file, and the top-level keys around it."""

    file: Path
    start: int
    """Offset of the first byte after ``[``."""
    end: int
    """Offset of the closing ``]`` (or of the end of the events, when a bare array has none)."""
    meta: dict[str, Any]


class Digest:
    """The sha256 and size of a file as stored, computed on a thread of its own (hashlib releases the GIL) from the
    moment it is made, so that hashing overlaps cutting and parsing the events; reading the result waits for it."""

    def __init__(self, path: Path) -> None:
        self._out: dict[str, Any] = {}
        self._thread = threading.Thread(target=_hash, args=(path, self._out), daemon=True, name="argus-sha256")
        self._thread.start()

    def wait(self) -> None:
        """Until the file is hashed."""
        self._thread.join()

    @property
    def sha256(self) -> str:
        """The file's sha256 (hex)."""
        self.wait()
        return str(self._out.get("sha256", ""))

    @property
    def bytes(self) -> int:
        """The file's size in bytes."""
        self.wait()
        return int(self._out.get("bytes", 0))


class Discard:
    """Deletes the copies of the event array once they are parsed, on a thread of its own, while the import goes on
    (unlinking half a gigabyte of page cache takes a tenth of a second); :func:`event_parts` waits for it on exit."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def start(self, folder: Path) -> None:
        """Begin deleting the files in ``folder`` (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=_unlink_files, args=(folder,), daemon=True, name="argus-discard")
            self._thread.start()

    def wait(self) -> None:
        """Until the files are deleted."""
        if self._thread is not None:
            self._thread.join()


@dataclass(frozen=True)
class Source:
    """A trace file's event array cut into parts, with the file's digest (still being computed when the parts are
    ready: :attr:`sha256` waits for it)."""

    meta: dict[str, Any]
    parts: tuple[Path, ...]
    digest: Digest
    array: EventArray
    workdir: Path
    discard: Discard

    def parsed(self) -> None:
        """The parts have been read: delete them in the background (the decompressed file too: the array's
        location in it is not needed any more)."""
        self.discard.start(self.workdir)

    @property
    def sha256(self) -> str:
        """The sha256 of the file as stored (waits for the hashing thread)."""
        return self.digest.sha256

    @property
    def bytes(self) -> int:
        """The size of the file as stored (waits for the hashing thread)."""
        return self.digest.bytes


@contextmanager
def event_parts(path: str | Path, parts: int = 2, workdir: str | None = None) -> Iterator[Source]:
    """The event array of ``path`` as ``parts`` JSON-array files (fewer for small files); removed on exit."""
    p = Path(path)
    digest = Digest(p)
    discard = Discard()
    sweep_stale(workdir)
    tmp = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=workdir))
    try:
        with p.open("rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        plain = p
        if gz:
            plain = tmp / "trace.json"
            with gzip_errors(p), gzip.open(p, "rb") as src, plain.open("wb") as out:
                shutil.copyfileobj(src, out, 1 << 24)
        array = locate(plain, str(p))
        files = _write_parts(array, parts, tmp)
        yield Source(array.meta, tuple(files), digest, array, tmp, discard)
    finally:
        digest.wait()
        discard.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def whole_array(src: Source) -> Path:
    """The event array as one part (the fallback when a cut fell inside an event)."""
    return _write_parts(src.array, 1, src.workdir, name="whole")[0]


def _unlink_files(folder: Path) -> None:
    for f in folder.iterdir():
        if f.is_file():
            with contextlib.suppress(OSError):
                f.unlink()


HASH_WINDOW = 64 << 20
"""The file is hashed through a memory map of this many bytes at a time: no copy of the bytes into Python, and the
mapped pages, which count in the process's RSS while mapped, stay this few however large the file."""


def _hash(p: Path, out: dict[str, Any]) -> None:
    h = hashlib.sha256()
    with p.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        at = 0
        while at < size:
            n = min(HASH_WINDOW, size - at)
            with mmap.mmap(f.fileno(), n, offset=at, access=mmap.ACCESS_READ) as mm:
                h.update(mm)
            at += n
    out["sha256"], out["bytes"] = h.hexdigest(), size


def locate(file: Path, shown: str) -> EventArray:
    """Find the event array of a plain (not compressed) Chrome-trace file."""
    size = file.stat().st_size
    if size == 0:
        msg = f"{shown!r} is empty; pass a trace written by torch.profiler (prof.export_chrome_trace(...))"
        raise ImportFormatError(msg)
    with file.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        first = len(mm[:4096]) - len(mm[:4096].lstrip())
        if mm[first : first + 1] == b"[":
            end = _bare_end(mm)
            return EventArray(file, first + 1, end, {})
        key = mm.find(b'"traceEvents"')
        open_at = _array_open(mm, key) if key >= 0 else -1
        if open_at < 0:
            msg = (
                f"{shown!r} is not a Chrome trace: no 'traceEvents' array was found; pass a trace written by "
                "torch.profiler (prof.export_chrome_trace(...) or tensorboard_trace_handler)"
            )
            raise ImportFormatError(msg)
        meta = _head_keys(bytes(mm[:key]))
        end, tail = _object_end(mm, open_at, shown)
        meta.update(tail)
        return EventArray(file, open_at + 1, end, meta)


def _array_open(mm: mmap.mmap, key: int) -> int:
    colon = mm.find(b":", key + len(b'"traceEvents"'))
    if colon < 0:
        return -1
    i = colon + 1
    while i < len(mm) and mm[i : i + 1] in b" \t\r\n":
        i += 1
    return i if mm[i : i + 1] == b"[" else -1


def _head_keys(head: bytes) -> dict[str, Any]:
    body = head.rstrip().rstrip(b",")
    if body.strip() in (b"{", b""):
        return {}
    try:
        out = json.loads(body + b"}")
    except json.JSONDecodeError:
        return {}
    return out if isinstance(out, dict) else {}


def _object_end(mm: mmap.mmap, open_at: int, shown: str) -> tuple[int, dict[str, Any]]:
    """The closing ``]`` of the array: the last ``]`` after which the rest of the object parses."""
    size = len(mm)
    lo = max(open_at, size - (8 << 20))
    tail = bytes(mm[lo:])
    pos = len(tail)
    while (pos := tail.rfind(b"]", 0, pos)) >= 0:
        rest = tail[pos + 1 :].strip()
        if rest in (b"}", b""):
            return lo + pos, {}
        if rest.startswith(b","):
            try:
                more = json.loads(b"{" + rest[1:])
            except json.JSONDecodeError:
                continue
            if isinstance(more, dict):
                return lo + pos, more
    msg = f"{shown!r}: the trace's event array does not end (a truncated file?); record the trace again"
    raise ImportFormatError(msg)


def _bare_end(mm: mmap.mmap) -> int:
    i = len(mm) - 1
    while i > 0 and mm[i : i + 1] in b" \t\r\n,":
        i -= 1
    return i if mm[i : i + 1] == b"]" else i + 1


def _write_parts(array: EventArray, parts: int, tmp: Path, name: str = "part") -> list[Path]:
    size = array.end - array.start
    n = max(1, min(parts, size // MIN_PART_BYTES))
    cuts = [array.start]
    with array.file.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for i in range(1, n):
            m = _BOUNDARY.search(mm, array.start + size * i // n, array.end)
            if m is None or m.start() + 1 <= cuts[-1]:
                break
            cuts.append(m.start() + 1)  # just after the '}' ending an event
    cuts.append(array.end)
    out: list[Path] = []
    with array.file.open("rb") as src:
        for i in range(len(cuts) - 1):
            a, b = cuts[i], cuts[i + 1]
            if i > 0:  # skip the comma that separated the events
                a = _after_comma(src, a)
            part = tmp / f"{name}{i}.json"
            with part.open("wb", buffering=0) as dst:  # unbuffered: copy_file_range moves the fd's offset
                dst.write(b"[")
                _copy_range(src, dst, a, b)
                dst.write(b"]")
            out.append(part)
    return out


def _after_comma(src: Any, at: int) -> int:
    src.seek(at)
    chunk = src.read(4096)
    return at + chunk.index(b",") + 1


def _copy_range(src: Any, dst: Any, a: int, b: int) -> None:
    off = a
    try:
        while off < b:
            n = os.copy_file_range(src.fileno(), dst.fileno(), b - off, off)
            if n <= 0:
                break
            off += n
    except OSError:
        pass
    if off < b:  # a file system without copy_file_range: copy in blocks
        src.seek(off)
        left = b - off
        while left > 0:
            block = src.read(min(left, 1 << 24))
            if not block:
                break
            dst.write(block)
            left -= len(block)
