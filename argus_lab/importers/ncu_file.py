"""The framing of an ``.ncu-rep`` file, checked before its kernels are read: a truncated or damaged file is named.

An Nsight Compute report is the magic ``NVR\\0`` followed by protocol-buffer messages, each preceded by its size
(4 bytes, little-endian).  Some messages head a block: their varint field 5 is the number of bytes of the block's
messages that follow (sizes included), field 1 the kind of block (0: profiling results) and field 2 the number of
results in it.  From the framing alone :func:`check` finds

* a file that ends inside a message (a truncated copy or download): the size chain runs past the end;
* a size or a block that does not line up with the messages (damaged bytes where a size was written);
* a message whose protocol-buffer fields do not parse (damaged bytes in a field's tag or length);
* the number of results the blocks declare, for the importer to compare with the kernels the reader returned.

The report has no checksum and no total count: damage inside a value (a name, a metric) keeps the framing, and a file
cut exactly between two blocks reads as a shorter report; neither is found here.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"NVR\x00"
RESULTS_BLOCK = 0


@dataclass(frozen=True)
class Framing:
    """What the framing of a report says."""

    bytes: int
    messages: int
    results_declared: int
    problems: tuple[str, ...]
    """One sentence per damage found (empty: the framing is whole)."""


def check(path: str | Path) -> Framing:
    """The framing of the report at ``path`` (see the module's docstring)."""
    p = Path(path)
    size = p.stat().st_size
    if size < len(MAGIC) or _read(p, len(MAGIC)) != MAGIC:
        return Framing(size, 0, 0, ("it does not start with an Nsight Compute report's signature (NVR)",))
    with p.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        return _walk(mm, size)


def _read(p: Path, n: int) -> bytes:
    with p.open("rb") as f:
        return f.read(n)


def _walk(mm: mmap.mmap, size: int) -> Framing:
    problems: list[str] = []
    off, messages, declared = len(MAGIC), 0, 0
    block_end = -1
    bad_fields = 0
    while off < size:
        if off + 4 > size:
            problems.append(f"it ends {size - off} byte(s) into the size of message {messages + 1} (truncated)")
            break
        (n,) = struct.unpack_from("<I", mm, off)
        body = off + 4
        if body + n > size:
            problems.append(
                f"it is truncated: message {messages + 1} at byte {off} needs {n} bytes, {size - body} are left "
                f"(the file has {size} bytes)"
            )
            break
        fields = _fields(mm, body, body + n)
        if fields is None:
            bad_fields += 1
        elif block_end <= off and fields.get(5, 0) > 0 and fields.get(1) in (0, 1):
            block_end = body + n + fields[5]
            if fields[1] == RESULTS_BLOCK:
                declared += fields.get(2, 0)
        messages += 1
        off = body + n
        if off == block_end:
            block_end = -1
        elif 0 <= block_end < off:
            problems.append(f"a block ending at byte {block_end} does not end with a message (damaged sizes)")
            block_end = -1
    if block_end >= 0 and block_end != off and not problems:
        problems.append(f"a block declares {block_end - off} byte(s) more than the file holds (truncated)")
    if bad_fields:
        problems.append(f"{bad_fields} message(s) hold fields that do not parse (damaged bytes)")
    return Framing(size, messages, declared, tuple(problems))


def _fields(mm: mmap.mmap, at: int, end: int) -> dict[int, int] | None:
    """The varint fields of the protocol-buffer message in ``mm[at:end]``; ``None`` if its wire format is broken."""
    out: dict[int, int] = {}
    i = at
    while i < end:
        key, i = _varint(mm, i, end)
        if key < 0:
            return None
        number, wire = key >> 3, key & 7
        if number == 0:
            return None
        if wire == 0:
            value, i = _varint(mm, i, end)
            if value < 0:
                return None
            out.setdefault(number, value)
        elif wire == 2:
            length, i = _varint(mm, i, end)
            if length < 0 or i + length > end:
                return None
            i += length
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            return None
    return out if i == end else None


def _varint(mm: mmap.mmap, i: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while i < end and shift < 64:
        byte = mm[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7
    return -1, i
