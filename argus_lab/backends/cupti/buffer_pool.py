"""CUPTI activity buffers from a small pool, decoded as CUPTI completes them and then handed out again.

CUPTI asks for a buffer whenever it needs one and gives it back full (or, at the flush at stop, part full).  A
completed buffer goes on a queue; the pool's own thread decodes it into compact columns
(:func:`argus_lab.backends.cupti.decode.decode_buffer` with ``widen=False``: the fields the evidence needs, each in
the narrowest integer type of its kind that holds its values, a field with one value throughout as a read-only
broadcast of it, kernel names as codes into the run's table of distinct names,
:data:`~argus_lab.backends.cupti.decode.NAMES`) and puts the buffer back in the pool.  CUPTI's records therefore
never pile up: the pool holds a few buffers whatever the run's length, and the decoded columns (20 bytes a kernel
record for a kernel launched over and over, about 50 when each kernel has its own launch configuration, instead of
CUPTI's 216-byte record) are all that grows (``decode.held_bytes`` counts them).

The completion callback runs on CUPTI's thread (or inside a CUDA call of the workload's): it only queues the
buffer.  Decoding holds the GIL for a few milliseconds per buffer of ~8 MB (vectorized numpy; a buffer of one
record kind is walked without a Python step per record).  :meth:`DecodingPool.finish` decodes what is left and
returns every record family's columns, also when the workload raised: what CUPTI flushed is kept.

No CUPTI or GPU is needed here: tests and ``bench/scale_bench.py`` feed it synthetic or recorded buffers.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping

import numpy as np

from argus_lab.backends.cupti import decode as dec
from argus_lab.run.memory import release_freed_memory

POOL_BUFFER_BYTES = 8 << 20
"""Size of each activity buffer of the pool (about 38,000 kernel records)."""

SPARE_BUFFERS = 4
"""Decoded buffers kept for CUPTI's next requests; more are let go (CUPTI asks again if it needs them)."""

_ALIGN = 8


class DecodingPool:
    """Hands out activity buffers, decodes each as it completes on its own thread, and collects the columns.

    ``take()`` gives CUPTI a buffer (a reused one when the pool has one), ``completed()`` queues a filled one, and
    ``finish()`` (after CUPTI's last flush) waits for the queue to be decoded and returns the raw columns.
    ``keep_copies``: keep a copy of each filled buffer's bytes too (``self.copies``, for
    :func:`argus_lab.backends.cupti.collector.save_buffers`).
    """

    def __init__(
        self,
        size: int,
        layouts: Mapping[int, np.dtype],
        name_of: Callable[[int], str],
        offsets_of: Callable[[np.ndarray], np.ndarray] | None = None,
        *,
        keep_copies: bool = False,
        spare: int = SPARE_BUFFERS,
    ) -> None:
        self.size = size
        self.layouts = dict(layouts)
        self.name_of = name_of
        self.offsets_of = offsets_of
        self.keep_copies = keep_copies
        self.spare = spare
        self.copies: list[np.ndarray] = []
        self.errors: list[str] = []
        self.times: list[int] = []  # when each buffer completed (ns), for provenance
        self.allocated = 0  # buffers ever made
        self.decode_s = 0.0  # time the pool's thread spent decoding
        self._free: list[np.ndarray] = []
        self._parts: dict[str, list[dec.RawColumns]] = {f: [] for f in dec.FAMILY_FIELDS}
        self._queue: queue.Queue[tuple[np.ndarray, int, int] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="argus-cupti-decode", daemon=True)
        self._thread.start()
        self._finished: dec.Raw | None = None
        self.names = dec.NameTable()  # the kernel names seen, the kernel family's ``name`` codes index them

    def take(self) -> tuple[np.ndarray, int]:
        """A buffer for CUPTI: (the array, the offset of its 8-byte aligned start); ``size`` bytes from there."""
        try:
            arr = self._free.pop()
        except IndexError:
            arr = np.empty(self.size + _ALIGN, dtype=np.uint8)  # pages cost memory once CUPTI writes them
            self.allocated += 1
        addr = int(arr.ctypes.data)
        return arr, ((addr + _ALIGN - 1) & ~(_ALIGN - 1)) - addr

    def completed(self, arr: np.ndarray, off: int, valid: int) -> None:
        """CUPTI gave back ``arr`` with ``valid`` bytes of records from ``off``: queue it (nothing else here)."""
        self.times.append(time.time_ns())
        self._queue.put((arr, off, valid))

    def wait_decoded(self) -> None:
        """Return once every buffer queued so far is decoded and back in the pool."""
        self._queue.join()

    def finish(self) -> dec.Raw:
        """Decode what is queued, stop the thread, and return every family's columns (call once CUPTI flushed)."""
        if self._finished is None:
            self._queue.put(None)
            self._thread.join()
            parts, self._parts = self._parts, {f: [] for f in dec.FAMILY_FIELDS}
            self._finished = {f: _concat_releasing(p, f) for f, p in parts.items()}
            self._finished[dec.NAMES] = self.names.family()
            self._free = []
        return self._finished

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                self._queue.task_done()
                return
            arr, off, valid = item
            t0 = time.perf_counter()
            try:
                self._decode(arr[off : off + valid])
            finally:
                self.decode_s += time.perf_counter() - t0
                if len(self._free) < self.spare:
                    self._free.append(arr)
                self._queue.task_done()

    def _decode(self, filled: np.ndarray) -> None:
        if len(filled) == 0:
            return
        if self.keep_copies:
            self.copies.append(filled.copy())
        try:
            got = dec.decode_buffer(filled, self.layouts, self.name_of, self.offsets_of, widen=False, names=self.names)
        except Exception as exc:  # a buffer that cannot be read is reported; the others are kept
            self.errors.append(f"{len(filled)} bytes of activity records could not be decoded ({exc})")
            return
        for family, cols in got.items():
            self._parts[family].append({key: _constant_or_column(col) for key, col in cols.items()})


def _concat_releasing(parts: list[dec.RawColumns], family: str) -> dec.RawColumns:
    """:func:`~argus_lab.backends.cupti.decode.concat_families`, one column at a time, each column's chunks let go
    (and their pages returned) once joined: the columns are never held twice."""
    parts = [p for p in parts if dec.count(p)]
    if not parts:
        return dec.empty_family(family)
    out: dec.RawColumns = {}
    for key in list(parts[0]):
        chunks = [p.pop(key) for p in parts]
        first = chunks[0]
        if all(_is_constant(c) and c.dtype == first.dtype and c[0] == first[0] for c in chunks):
            out[key] = np.broadcast_to(first.dtype.type(first[0]), (sum(len(c) for c in chunks),))
            continue
        out[key] = np.concatenate(chunks)
        del chunks, first
        release_freed_memory()  # the chunks' heap pages go back at once: the next column takes new ones
    return out


def _is_constant(col: np.ndarray) -> bool:
    return col.ndim == 1 and len(col) > 0 and col.strides == (0,)


def _constant_or_column(col: np.ndarray) -> np.ndarray:
    """An integer column whose values are all one value as a read-only broadcast of it (no bytes per record: a
    device id, a graph id of 0, a block's z extent ...); any other integer column in the narrowest integer type of its
    own kind that holds its values (a grid extent of 512 in 2 bytes, a register count in 1: the chunks of a run are
    joined in the widest type among them); a column of another type as it is."""
    if col.dtype.kind not in "iu" or len(col) == 0:
        return col
    lo, hi = col.min(), col.max()
    if lo == hi:
        return np.broadcast_to(col.dtype.type(col[0]), col.shape)
    for size in (1, 2, 4):
        if size >= col.dtype.itemsize:
            break
        narrow = np.dtype(f"{col.dtype.kind}{size}")
        info = np.iinfo(narrow)
        if info.min <= int(lo) and int(hi) <= info.max:
            return col.astype(narrow)
    return col
