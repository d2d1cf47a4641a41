"""Pure decoding of CUPTI activity records into raw evidence columns (no CUPTI, no GPU needed).

The CUPTI collector (:mod:`argus_lab.backends.cupti.collector`) turns the activity buffers into *raw columns*
after the run: one dict of numpy arrays per record family (``kernel``, ``memcpy``, ``memset``, ``sync``,
``api``, ``external``).  Everything here works on those columns in bulk, so it is tested in CI on raw
records recorded on the H200 (``tests/data/cupti/*``) and on synthetic edge cases.

Join rules (``docs`` of ``cuptiActivityPushExternalCorrelationId``):

* every runtime/driver API record issued while an id is pushed is preceded by one external-correlation record
  per kind; argus_lab pushes the region instance id with kind ``CUSTOM2`` (5), so a kernel's instance is the
  ``external_id`` of the ``CUSTOM2`` record sharing its ``correlation_id``;
* kernels replayed from a CUDA graph share the correlation id of their ``cudaGraphLaunch``;
* kernels launched from a thread with no open region (autograd workers, data loaders) carry no id.

Nothing here attributes records to region instances or aggregates them per instance: the rows keep the instance
id their launch *carried* (0 = none), and the join (:mod:`argus_lab.join`) decides every attribution and value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

CUSTOM2 = 5
"""``ExternalCorrelationKind.CUSTOM2``: the kind argus_lab pushes region instance ids with."""

RawColumns = dict[str, np.ndarray]
Raw = dict[str, RawColumns]

FAMILY_FIELDS: dict[str, tuple[str, ...]] = {
    "kernel": (
        "start",
        "end",
        "device_id",
        "context_id",
        "stream_id",
        "correlation_id",
        "grid_x",
        "grid_y",
        "grid_z",
        "block_x",
        "block_y",
        "block_z",
        "registers_per_thread",
        "static_shared_memory",
        "dynamic_shared_memory",
        "local_memory_per_thread",
        "graph_id",
        "graph_node_id",
        "launch_type",
        "queued",  # the host time (CUPTI's clock) the launch was queued; 0 unless latency timestamps are on
    ),
    "memcpy": (
        "copy_kind",
        "src_kind",
        "dst_kind",
        "bytes",
        "start",
        "end",
        "device_id",
        "context_id",
        "stream_id",
        "correlation_id",
        "graph_id",
        "graph_node_id",
    ),
    "memset": (
        "value",
        "bytes",
        "start",
        "end",
        "device_id",
        "context_id",
        "stream_id",
        "correlation_id",
        "memory_kind",
        "graph_id",
        "graph_node_id",
    ),
    "sync": ("type", "start", "end", "correlation_id", "context_id", "stream_id", "cuda_event_id"),
    "api": ("kind", "cbid", "start", "end", "process_id", "thread_id", "correlation_id", "return_value"),
    "external": ("external_kind", "external_id", "correlation_id"),
}
"""The fields kept per record family (``kernel`` additionally has a ``name`` string column)."""

NAMES = "kernel_names"
"""The pseudo-family a compact decode adds (:class:`NameTable`): the run's distinct kernel names, column ``name``,
which the kernel family's ``name`` column then indexes (integer codes, 2 bytes a record, none when one kernel runs
throughout) instead of holding a reference per record (8 bytes).  :func:`named` gives the names back as text."""


class NameTable:
    """A run's kernel names, each numbered once in the order first seen (a few hundred in a model's run)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._code: dict[str, int] = {}

    def codes(self, text: Sequence[str]) -> np.ndarray:
        """The code of each name of ``text`` (new names numbered next)."""
        out = np.empty(len(text), dtype=np.int64)
        for i, name in enumerate(text):
            code = self._code.get(name)
            if code is None:
                code = self._code[name] = len(self.names)
                self.names.append(name)
            out[i] = code
        return out

    def family(self) -> RawColumns:
        """The :data:`NAMES` pseudo-family."""
        return {"name": np.asarray(self.names, dtype=object)}


def named(raw: Raw) -> Raw:
    """``raw`` with the kernel names as text (one reference a record) and without the :data:`NAMES` table."""
    out = {f: cols for f, cols in raw.items() if f != NAMES}
    kernel = out.get("kernel")
    if kernel is not None and "name" in kernel and kernel["name"].dtype != object:
        table = raw.get(NAMES, {}).get("name", np.zeros(0, dtype=object))
        out["kernel"] = {**kernel, "name": table[np.asarray(kernel["name"])]}
    return out


COPY_KINDS = {
    0: "unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}
KERNEL_COLUMNS: tuple[str, ...] = (
    "run_id",
    "kind",
    "kernel_key",
    "correlation_id",
    "instance_id",
    "ordinal",
    "name",
    "start_ns",
    "end_ns",
    "device_id",
    "context_id",
    "stream_id",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "registers",
    "static_smem",
    "dynamic_smem",
    "local_mem",
    "graph_id",
    "graph_node_id",
    "bytes",
    "thread_id",
    "api_start_ns",
    "api_end_ns",
    "api_kind",
)
"""Columns of the ``kernels`` store table produced by :func:`kernel_table`."""


# --------------------------------------------------------------------------------------------------------------
# raw columns: empty values, structured arrays, Parquet
# --------------------------------------------------------------------------------------------------------------
def empty_family(family: str) -> RawColumns:
    """Empty columns for one record family."""
    cols: RawColumns = {f: np.zeros(0, dtype=np.int64) for f in FAMILY_FIELDS[family]}
    if family == "kernel":
        cols["name"] = np.zeros(0, dtype=object)
    return cols


def from_structured(family: str, arr: np.ndarray, names: Sequence[str] | None = None) -> RawColumns:
    """Columns of one family from a structured array of CUPTI records (cupti-python's ``activity_*_dtype``).

    Fields missing from ``arr`` (an older record version) become zeros.  For kernels, ``names`` gives the
    decoded kernel names in record order (the record itself holds only a pointer).
    """
    n = len(arr)
    cols: RawColumns = {}
    available = set(arr.dtype.names or ())
    for f in FAMILY_FIELDS[family]:
        cols[f] = arr[f].astype(np.int64) if f in available else np.zeros(n, dtype=np.int64)
    if family == "kernel":
        cols["name"] = np.asarray(list(names) if names is not None else [""] * n, dtype=object)
    return cols


def concat_families(parts: Sequence[RawColumns], family: str) -> RawColumns:
    """Concatenate several column sets of one family."""
    parts = [p for p in parts if len(next(iter(p.values()), ())) > 0]
    if not parts:
        return empty_family(family)
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def save_raw(raw: Raw, folder: str | Path) -> list[Path]:
    """Write each record family as ``<folder>/<family>.parquet``; returns the files written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for family, cols in named(raw).items():
        table = pa.table({k: (v.tolist() if v.dtype == object else v.astype(np.int64)) for k, v in cols.items()})
        path = out / f"{family}.parquet"
        pq.write_table(table, path, compression="zstd")
        files.append(path)
    return files


def load_raw(folder: str | Path) -> Raw:
    """Read what :func:`save_raw` wrote (families without a file are empty)."""
    import pyarrow.parquet as pq

    raw: Raw = {}
    for family in FAMILY_FIELDS:
        path = Path(folder) / f"{family}.parquet"
        if not path.exists():
            raw[family] = empty_family(family)
            continue
        table = pq.read_table(path)
        cols: RawColumns = {}
        for name in table.column_names:
            col = table.column(name)
            cols[name] = np.asarray(col.to_pylist(), dtype=object) if name == "name" else col.to_numpy()
        raw[family] = cols
    return raw


# --------------------------------------------------------------------------------------------------------------
# raw activity buffers (the bytes CUPTI filled) -> columns, without one Python object per record
# --------------------------------------------------------------------------------------------------------------
KIND_FAMILY: dict[int, str] = {1: "memcpy", 2: "memset", 4: "api", 5: "api", 10: "kernel", 38: "sync", 39: "external"}
"""``CUpti_ActivityKind`` values argus_lab decodes, and their record family."""


def walk_records(buf: np.ndarray, sizes: Mapping[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(kinds, byte offsets) of the records in a filled activity buffer.

    Records lie back to back, each starting with its ``kind`` (uint32); ``sizes`` maps a kind to its record
    size (the itemsize of cupti-python's ``activity_*_dtype`` for the CUPTI version in use).  Raises
    ``ValueError`` on a kind without a size or when the walk does not end exactly at the end of the data
    (the caller then falls back to ``cuptiActivityGetNextRecord``).
    """
    import struct

    uniform = _uniform_walk(buf, sizes)
    if uniform is not None:
        return uniform
    mv = np.ascontiguousarray(buf, dtype=np.uint8).data
    unpack = struct.Struct("<I").unpack_from
    n = len(mv)
    kinds: list[int] = []
    offs: list[int] = []
    off = 0
    table = [0] * (max(sizes, default=0) + 1)
    for k, size in sizes.items():
        table[k] = size
    add_kind, add_off = kinds.append, offs.append
    try:
        while off < n:
            (k,) = unpack(mv, off)
            size = table[k]
            if not size:
                raise IndexError
            add_kind(k)
            add_off(off)
            off += size
    except IndexError:
        msg = f"activity record of unknown kind at byte {off}"
        raise ValueError(msg) from None
    if off != n:
        msg = f"activity records overran the buffer ({off} > {n} bytes)"
        raise ValueError(msg)
    return np.asarray(kinds, dtype=np.int64), np.asarray(offs, dtype=np.int64)


def _uniform_walk(buf: np.ndarray, sizes: Mapping[int, int]) -> tuple[np.ndarray, np.ndarray] | None:
    """(kinds, offsets) when every record of ``buf`` has the kind of the first one (a buffer of kernel records
    alone, as with the native launch path), checked without a Python step per record; ``None`` otherwise."""
    n = len(buf)
    if n < 4 or n % 4:
        return None
    u32 = np.ascontiguousarray(buf, dtype=np.uint8).view("<u4")
    first = int(u32[0])
    size = sizes.get(first, 0)
    if size <= 0 or size % 4 or n % size:
        return None
    offs = np.arange(0, n, size, dtype=np.int64)
    if not bool(np.all(u32[offs // 4] == first)):
        return None
    return np.full(len(offs), first, dtype=np.int64), offs


def field_columns(
    buf: np.ndarray, offsets: np.ndarray, dtype: np.dtype, fields: Sequence[str], *, widen: bool = True
) -> RawColumns:
    """Columns of ``fields`` for the records of one layout at ``offsets`` in ``buf`` (vectorized gather).

    Each field is read through a typed view of the buffer at ``offset + field offset`` (fields of CUPTI
    records are naturally aligned and records are 8-byte aligned), so no per-record Python runs.  ``widen``:
    every column as int64; otherwise each keeps the field's own integer type (the compact columns the collector
    keeps while a run lasts: about half the bytes).
    """
    u8 = np.ascontiguousarray(buf, dtype=np.uint8)
    n8 = len(u8)
    if _back_to_back(offsets, dtype.itemsize, n8):  # one layout fills the buffer: read fields as strided views
        return _strided_columns(u8, dtype, fields, widen)
    cols: RawColumns = {}
    names: Mapping[str, Any] = dtype.fields or {}
    for f in fields:
        if f not in names:
            cols[f] = np.zeros(len(offsets), dtype=np.int64)
            continue
        ftype, fo = names[f][0], names[f][1]
        base = ftype.base
        size = base.itemsize
        if base.kind not in "iu" or size not in (1, 2, 4, 8):
            cols[f] = np.zeros(len(offsets), dtype=np.int64)
            continue
        pos = offsets + fo
        if len(pos) and (np.any(pos % size) or int(pos.max()) + size > n8):
            msg = f"field {f!r} is not aligned or lies outside the buffer"
            raise ValueError(msg)
        view = u8[: n8 - n8 % size].view(np.dtype(f"<{base.kind}{size}"))
        got = view[pos // size]
        cols[f] = got.astype(np.int64) if widen else got
    return cols


def _back_to_back(offsets: np.ndarray, size: int, nbytes: int) -> bool:
    """Whether ``offsets`` are the records of one ``size`` filling ``nbytes`` from byte 0, one after another."""
    n = len(offsets)
    return (
        n > 0
        and size > 0
        and n * size == nbytes
        and int(offsets[0]) == 0
        and int(offsets[-1]) == (n - 1) * size
        and bool(np.all(np.diff(offsets) == size))
    )


def _strided_columns(u8: np.ndarray, dtype: np.dtype, fields: Sequence[str], widen: bool) -> RawColumns:
    """:func:`field_columns` of a buffer holding records of ``dtype`` back to back: each field copied from a strided
    view (no index array, no random access)."""
    records = u8.view(dtype)
    names: Mapping[str, Any] = dtype.fields or {}
    cols: RawColumns = {}
    for f in fields:
        base = names[f][0].base if f in names else None
        if base is None or base.kind not in "iu" or base.itemsize not in (1, 2, 4, 8):
            cols[f] = np.zeros(len(records), dtype=np.int64)
            continue
        got = records[f]
        cols[f] = got.astype(np.int64) if widen else got.astype(got.dtype.newbyteorder("="))
    return cols


def decode_buffers(
    buffers: Sequence[np.ndarray],
    layouts: Mapping[int, np.dtype],
    name_of: Callable[[int], str],
    offsets_of: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Raw:
    """Raw columns of every record family from filled activity buffers (bulk; the records are never objects).

    ``layouts`` maps each enabled kind to its record dtype; ``name_of`` turns a kernel-name pointer into text
    (called once per distinct pointer).  When walking by record size fails and ``offsets_of`` is given, it
    supplies the record offsets instead (``cuptiActivityGetNextRecord`` in the live process).
    """
    parts: dict[str, list[RawColumns]] = {f: [] for f in FAMILY_FIELDS}
    for buf in buffers:
        for family, cols in decode_buffer(buf, layouts, name_of, offsets_of).items():
            parts[family].append(cols)
    return {f: concat_families(p, f) for f, p in parts.items()}


def decode_buffer(
    buf: np.ndarray,
    layouts: Mapping[int, np.dtype],
    name_of: Callable[[int], str],
    offsets_of: Callable[[np.ndarray], np.ndarray] | None = None,
    *,
    widen: bool = True,
    names: NameTable | None = None,
) -> dict[str, RawColumns]:
    """The columns of one filled activity buffer, by record family (only the families it holds), in the order
    :func:`decode_buffers` concatenates them.  ``widen=False`` keeps each field's own integer type (see
    :func:`field_columns`); kernel names are the strings ``name_of`` returns, one object per distinct pointer, or with
    ``names`` their codes in that table (uint16 while it holds fewer than 65,536 names)."""
    out: dict[str, RawColumns] = {}
    if len(buf) == 0:
        return out
    sizes = {k: d.itemsize for k, d in layouts.items()}
    try:
        kinds, offs = walk_records(buf, sizes)
    except ValueError:
        if offsets_of is None:
            raise
        offs = offsets_of(buf)
        u32 = np.ascontiguousarray(buf, dtype=np.uint8)[: len(buf) - len(buf) % 4].view("<u4")
        kinds = u32[offs // 4].astype(np.int64)
    present = np.unique(kinds).tolist()
    for kind in present:
        family = KIND_FAMILY.get(int(kind))
        if family is None or int(kind) not in layouts:
            continue
        sel = offs[kinds == kind] if len(present) > 1 else offs
        cols = field_columns(buf, sel, layouts[int(kind)], FAMILY_FIELDS[family], widen=widen)
        if family == "api":
            cols["kind"] = np.full(len(sel), int(kind), dtype=np.int64)
        if family == "kernel":
            ptr = field_columns(buf, sel, layouts[int(kind)], ("name",))["name"]
            uniq, inv = np.unique(ptr, return_inverse=True)
            text = [name_of(int(p)) if p else "" for p in uniq.tolist()]
            if names is not None:
                codes = names.codes(text)
                cols["name"] = codes.astype(np.uint16 if len(names.names) < 2**16 else np.uint32)[inv]
            else:
                table = np.asarray(text, dtype=object)
                cols["name"] = table[inv] if len(uniq) else np.zeros(0, dtype=object)
        if family in out:  # two kinds of one family in one buffer (runtime and driver API records)
            out[family] = concat_families([out[family], cols], family)
        else:
            out[family] = cols
    return out


def count(cols: Mapping[str, np.ndarray]) -> int:
    """Number of records in a column set."""
    return len(next(iter(cols.values()))) if cols else 0


def held_bytes(raw: Raw, rows: KernelRows | None = None) -> dict[str, dict[str, int]]:
    """The bytes each raw column holds (family -> field -> bytes), counted from the arrays themselves: a broadcast
    holds none, memory another column already counted holds none (the launch families are views of the launch
    records: counted once), an object column its references (the strings are shared).  With ``rows``, its run-wide
    arrays too (family ``kernels table``).  Deterministic: for tests and ``bench/scale_bench.py``'s breakdown."""
    seen: set[tuple[int, int]] = set()
    out = {
        family: {key: _own_bytes(np.asarray(col), seen) for key, col in cols.items()} for family, cols in raw.items()
    }
    if rows is not None:
        out["kernels table"] = {key: _own_bytes(np.asarray(a), seen) for key, a in rows.arrays().items()}
    return out


def _own_bytes(col: np.ndarray, seen: set[tuple[int, int]]) -> int:
    """``col``'s bytes unless it is a broadcast or memory counted already (``seen``: (address, bytes) of the memory
    each counted array lies in)."""
    if col.size == 0 or 0 in col.strides:
        return 0
    owner = col
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    key = (owner.__array_interface__["data"][0], owner.nbytes)
    if key in seen:
        return 0
    seen.add(key)
    return int(owner.nbytes)


# --------------------------------------------------------------------------------------------------------------
# joins
# --------------------------------------------------------------------------------------------------------------
def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray, missing: int = 0) -> np.ndarray:
    """Vectorized dict lookup: ``values[keys == q]`` for each q (``missing`` where absent; keys unique)."""
    out = np.full(len(query), missing, dtype=np.int64)
    if len(keys) == 0 or len(query) == 0:
        return out
    if _increasing(keys):  # already sorted (np.unique's keys): no copies
        sk, sv = keys, values
    else:
        order = np.argsort(keys, kind="stable")
        sk, sv = keys[order], values[order]
    sk, query = _comparable(sk, query)
    pos = np.searchsorted(sk, query)
    np.minimum(pos, len(sk) - 1, out=pos)
    hit = sk[pos] == query
    out[hit] = sv[pos[hit]]
    return out


def _comparable(keys: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``keys`` and ``query`` in one integer type for a search: the query in the keys' own width when its values fit
    (a run's correlation ids are CUPTI's uint32: the long keys are never copied), else both as int64."""
    if keys.dtype == query.dtype:
        return keys, query
    if keys.dtype.kind in "iu" and query.dtype.kind in "iu" and len(query):
        info = np.iinfo(keys.dtype)
        if int(query.min()) >= info.min and int(query.max()) <= info.max:
            return keys, query.astype(keys.dtype)
    return keys.astype(np.int64, copy=False), query.astype(np.int64, copy=False)


def instance_of(external: Mapping[str, np.ndarray], correlation_ids: np.ndarray) -> np.ndarray:
    """The region instance id of each correlation id (0 = none) from ``CUSTOM2`` external records."""
    if count(external) == 0:
        return np.zeros(len(correlation_ids), dtype=np.int64)
    sel = external["external_kind"] == CUSTOM2
    every = bool(sel.all())  # the native launch path's rows are all CUSTOM2: no copies of its columns
    corr = np.asarray(external["correlation_id"] if every else external["correlation_id"][sel])
    ext = np.asarray(external["external_id"] if every else external["external_id"][sel])
    if corr.dtype.kind not in "iu":
        corr = corr.astype(np.int64)
    if _increasing(corr):  # launches of one thread, in order: the keys as they are (no sort, no copies)
        corr_u, ext_u = corr, ext
    else:
        corr_u, first = np.unique(corr, return_index=True)
        ext_u = ext[first]
    return _lookup(corr_u, ext_u.astype(np.int64, copy=False), np.asarray(correlation_ids))


def _increasing(values: np.ndarray) -> bool:
    """Whether ``values`` is strictly increasing (sorted, no value twice)."""
    return len(values) < 2 or bool(np.all(values[1:] > values[:-1]))


_TEXT = np.dtypes.StringDType()
"""numpy's variable-width strings: a short key is kept inline in its 16-byte slot, never as a Python object."""


_OBJECT_COLUMNS = ("run_id", "kind", "name")


def _joined_keys(parts: Sequence[np.ndarray]) -> np.ndarray:
    """``a/b/c/d`` per row of integer columns, built by numpy's string functions (no Python object per row)."""
    out = parts[0].astype(_TEXT)
    for part in parts[1:]:
        out = np.strings.add(np.strings.add(out, "/"), part.astype(_TEXT))
    return out


_SHARED_FIELDS = ("start", "end", "device_id", "context_id", "stream_id", "correlation_id", "graph_id", "graph_node_id")
"""Fields of the kernels table that kernels, copies and sets all have (under the same raw name)."""
_KERNEL_FIELDS = {
    "grid_x": "grid_x",
    "grid_y": "grid_y",
    "grid_z": "grid_z",
    "block_x": "block_x",
    "block_y": "block_y",
    "block_z": "block_z",
    "registers": "registers_per_thread",
    "static_smem": "static_shared_memory",
    "dynamic_smem": "dynamic_shared_memory",
    "local_mem": "local_memory_per_thread",
}
"""Columns of the kernels table only kernels have (0 for copies and sets), and the raw field each comes from."""

BATCH_ROWS = 1 << 14
"""Rows of the kernels table made at a time by :meth:`KernelRows.batches` (a few MB of columns and Arrow rows)."""


class KernelRows:
    """The rows of the ``kernels`` store table over a whole run, made batch by batch (:meth:`batch`).

    Only what needs the whole run is computed at once, as one integer per row: the launch order (correlation id,
    then device start), each row's instance id, its rank among the records sharing its correlation id, and a
    kernel's ordinal within its instance.  Every other column is gathered from the raw columns (which may be the
    collector's compact ones) for the rows of one batch, so building the table never holds all its columns.
    """

    def __init__(self, raw: Raw, run_id: str) -> None:
        self.run_id = run_id
        self.sources: list[tuple[str, RawColumns, int]] = []  # (family, raw columns, first row index)
        first = 0
        for family in ("kernel", "memcpy", "memset"):
            cols = raw.get(family, {})
            if count(cols):
                self.sources.append((family, cols, first))
                first += count(cols)
        self.n = first
        self.kernels = count(raw.get("kernel", {}))
        # rows in launch order: correlation id, then device start; already so when one family's correlation ids
        # increase (one thread's launches on one stream): then no order array, no sort, the ids in their own width
        alone = np.asarray(self.sources[0][1]["correlation_id"]) if len(self.sources) == 1 else None
        self.order: np.ndarray | None = None  # None: the joined rows are in launch order already
        if alone is not None and _increasing(alone):
            corr = alone
        else:
            corr = self._joined("correlation_id")
            order = np.lexsort((self._joined("start"), corr))
            corr = corr[order]
            self.order = order.astype(np.int32) if self.n < 2**31 else order  # 4 bytes a row kept while written
            del order
        instance = instance_of(raw.get("external", empty_family("external")), corr)
        same: np.ndarray = np.broadcast_to(np.int32(0), (self.n,))  # n-th record sharing (context, correlation)
        if self.n > 1 and self.order is not None:  # strictly increasing ids: every record its own launch
            context = self._joined("context_id")[self.order]
            grp = np.ones(self.n, dtype=bool)
            grp[1:] = (corr[1:] != corr[:-1]) | (context[1:] != context[:-1])
            del context
            if not grp.all():  # some launches made several records (graph kernels)
                same = (np.arange(self.n) - _group_start(grp)).astype(np.int32)
        del corr, alone
        self.same = same
        self.ordinal = np.full(self.n, -1, dtype=np.int32)
        self._instances, self._instance_codes = _instance_codes(instance)  # 4 bytes a row when in order
        if self.kernels:
            is_k = None if self.order is None else self.order < self.kernels  # kernels come first in the rows
            inst = instance if is_k is None else instance[is_k]
            # rank within instance in launch order (rows are already in launch order)
            ordered = bool(np.all(inst[1:] >= inst[:-1]))  # instances one after another: no sort needed
            if ordered:
                first_of = np.ones(len(inst), dtype=bool)
                first_of[1:] = inst[1:] != inst[:-1]
                starts = np.flatnonzero(first_of).astype(np.int32)
                del first_of
                rank = np.arange(len(inst), dtype=np.int32)
                rank -= np.repeat(starts, np.diff(np.append(starts, len(inst))))
            else:
                o = np.argsort(inst, kind="stable")
                si = inst[o]
                first_of = np.ones(len(si), dtype=bool)
                first_of[1:] = si[1:] != si[:-1]
                del si
                rank = np.empty(len(o), dtype=np.int32)
                rank[o] = np.arange(len(o)) - _group_start(first_of)
            del inst
            if is_k is None:
                self.ordinal = rank
            else:
                self.ordinal[is_k] = rank
        del instance
        self._api = raw.get("api", empty_family("api"))
        self._api_keys, self._api_rows = _launch_calls(self._api)
        self._names = raw.get(NAMES, {}).get("name", np.zeros(0, dtype=object))  # when names are codes

    def instance_ids(self, lo: int, hi: int) -> np.ndarray:
        """The instance id of rows ``lo:hi`` (0 = none), as int64."""
        if self._instance_codes is None:
            return self._instances[lo:hi]
        return self._instances[self._instance_codes[lo:hi]]

    def arrays(self) -> dict[str, np.ndarray]:
        """The run-wide arrays the rows are made from (the raw columns aside), by what each is."""
        empty = np.zeros(0, dtype=np.int32)
        return {
            "launch order": empty if self.order is None else self.order,
            "instance": self._instances if self._instance_codes is None else self._instance_codes,
            "rank in launch": self.same,
            "ordinal": self.ordinal,
            "launch call keys": self._api_keys,
            "launch call rows": empty if self._api_rows is None else self._api_rows,
        }

    def _joined(self, field: str) -> np.ndarray:
        """One raw field over every source, as int64 (kernels, then copies, then sets)."""
        parts = [cols[field].astype(np.int64) for _, cols, _ in self.sources]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return self.n

    def batch(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Rows ``lo:hi`` of the table (in launch order), columns as :data:`KERNEL_COLUMNS`."""
        idx = np.arange(lo, hi) if self.order is None else self.order[lo:hi]
        m = len(idx)
        ints = {c: np.zeros(m, dtype=np.int64) for c in (*_SHARED_FIELDS, *_KERNEL_FIELDS, "bytes")}
        kind = np.empty(m, dtype=object)
        name = np.empty(m, dtype=object)
        for family, cols, first in self.sources:
            sel = (idx >= first) & (idx < first + count(cols))
            if not sel.any():
                continue
            at = idx[sel] - first
            kind[sel] = family
            for c in _SHARED_FIELDS:
                ints[c][sel] = cols[c][at]
            if family == "kernel":
                for c, field in _KERNEL_FIELDS.items():
                    ints[c][sel] = cols[field][at]
                codes = cols["name"][at]
                name[sel] = codes if codes.dtype == object else self._names[codes]
                continue
            ints["bytes"][sel] = cols["bytes"][at]
            if family == "memcpy":
                copy = cols["copy_kind"][at].astype(np.int64)
                uniq, inv = np.unique(copy, return_inverse=True)
                text = np.asarray([f"memcpy {COPY_KINDS.get(c, str(c))}" for c in uniq.tolist()], dtype=object)
                name[sel] = text[inv.ravel()]
            else:
                name[sel] = "memset"
        corr = ints["correlation_id"]
        same = self.same[lo:hi].astype(np.int64)
        api = _launch_values(self._api, self._api_keys, self._api_rows, corr)
        return {
            "run_id": np.full(m, self.run_id, dtype=object),
            "kind": kind,
            "kernel_key": _joined_keys((ints["device_id"], ints["context_id"], corr, same)),
            "correlation_id": corr,
            "instance_id": self.instance_ids(lo, hi),
            "ordinal": self.ordinal[lo:hi].astype(np.int64),
            "name": name,
            "start_ns": ints["start"],
            "end_ns": ints["end"],
            **{c: ints[c] for c in ("device_id", "context_id", "stream_id", *_KERNEL_FIELDS)},
            "graph_id": ints["graph_id"],
            "graph_node_id": ints["graph_node_id"],
            "bytes": ints["bytes"],
            "thread_id": api["thread_id"],
            "api_start_ns": api["start"],
            "api_end_ns": api["end"],
            "api_kind": api["kind"],
        }

    def batches(self, rows: int | None = None) -> Iterator[dict[str, np.ndarray]]:
        """Every row, ``rows`` at a time (:data:`BATCH_ROWS` unless given)."""
        rows = rows or BATCH_ROWS
        for lo in range(0, self.n, rows):
            yield self.batch(lo, min(lo + rows, self.n))

    def summary(self) -> dict[str, int]:
        """:func:`summarize` of the whole table, without making its rows."""
        sizes = {family: count(cols) for family, cols, _ in self.sources}
        if self._instance_codes is None:
            carried = int(np.count_nonzero(self._instances != 0))
        else:
            carried = int(np.count_nonzero((self._instances != 0)[self._instance_codes]))
        return {
            "kernels": sizes.get("kernel", 0),
            "memcpy": sizes.get("memcpy", 0),
            "memset": sizes.get("memset", 0),
            "carried_instance_id": carried,
            "no_instance_id": self.n - carried,
        }


def _instance_codes(instance: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Each row's instance id as (the distinct ids, each row's int32 code into them) when the rows' instances come
    one after another (a thread's launches in order): 4 bytes a row instead of 8; else (the ids, ``None``)."""
    n = len(instance)
    if n < 2 or n >= 2**31 or not bool(np.all(instance[1:] >= instance[:-1])):
        return instance, None
    first = np.ones(n, dtype=bool)
    first[1:] = instance[1:] != instance[:-1]
    codes = np.cumsum(first, dtype=np.int32)
    codes -= 1
    return instance[first], codes


def _group_start(first: np.ndarray) -> np.ndarray:
    """For each row, the index of the first row of its group (``first`` marks where each group begins)."""
    return np.flatnonzero(first)[np.cumsum(first) - 1]


def _launch_calls(api: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
    """The launching call of each correlation id among API records: (sorted correlation ids, their record's index;
    ``None`` when the records are those ids in order, each its own row).

    With both runtime and driver tracing on, a runtime launch and its inner driver call may share a correlation
    id; the longest record (the outer call) wins."""
    if count(api) == 0:
        return np.zeros(0, dtype=np.int64), None
    corr = np.asarray(api["correlation_id"])
    if corr.dtype.kind in "iu" and _increasing(corr):  # one record a launch, in order (the native launch path's)
        return corr, None  # the ids in their own width, each key its own row: nothing made
    corr = corr.astype(np.int64, copy=False)
    dur = np.asarray(api["end"]).astype(np.int64) - np.asarray(api["start"]).astype(np.int64, copy=False)
    np.negative(dur, out=dur)
    order = np.lexsort((dur, corr))  # by correlation id, longest first
    del dur
    corr_s = corr[order]
    keep = np.ones(len(corr_s), dtype=bool)
    keep[1:] = corr_s[1:] != corr_s[:-1]
    rows = order[keep]
    return corr_s[keep], rows.astype(np.int32) if len(corr) < 2**31 else rows


def _launch_values(
    api: Mapping[str, np.ndarray], keys: np.ndarray, rows: np.ndarray | None, correlation_ids: np.ndarray
) -> dict[str, np.ndarray]:
    """Start, end, thread id and kind of the launching call of each correlation id (0 where absent)."""
    n = len(correlation_ids)
    out = {c: np.zeros(n, dtype=np.int64) for c in ("start", "end", "thread_id", "kind")}
    if len(keys) == 0 or n == 0:
        return out
    keys, q = _comparable(keys, correlation_ids)
    pos = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
    hit = keys[pos] == q
    at = pos[hit] if rows is None else rows[pos[hit]]
    for c in out:
        out[c][hit] = api[c][at].astype(np.int64)
    return out


def launch_api(api: Mapping[str, np.ndarray], correlation_ids: np.ndarray) -> dict[str, np.ndarray]:
    """The launching API call of each correlation id: start, end, thread id and kind (0 where absent).

    With both runtime and driver tracing on, a runtime launch and its inner driver call may share a
    correlation id; the longest record (the outer call) wins.
    """
    keys, rows = _launch_calls(api)
    return _launch_values(api, keys, rows, correlation_ids)


def kernel_table(raw: Raw, run_id: str) -> dict[str, np.ndarray]:
    """Rows of the ``kernels`` store table: kernels, memcpy and memset operations (``kind`` column).

    ``instance_id`` is the innermost region instance whose external id the launch carried (0 = none);
    ``ordinal`` numbers a kernel within its instance in launch order (correlation id, then start: the order
    Nsight Compute replays them in), -1 for copies and sets.  ``kernel_key`` is
    ``<device>/<context>/<correlation>/<n>`` where ``n`` separates graph kernels sharing one launch.
    All rows at once: :class:`KernelRows` makes them batch by batch.
    """
    rows = KernelRows(raw, run_id)
    if len(rows) == 0:
        return {
            c: np.zeros(0, dtype=_TEXT if c == "kernel_key" else object if c in _OBJECT_COLUMNS else np.int64)
            for c in KERNEL_COLUMNS
        }
    return rows.batch(0, len(rows))


def widen_thread_ids(kernels: dict[str, np.ndarray], instance_threads: Sequence[int]) -> dict[str, np.ndarray]:
    """Replace CUPTI's 32-bit thread ids by the full ``threading.get_ident()`` of the region threads they match.

    CUPTI reports the launching thread as ``pthread_self()`` truncated to 32 bits; region instances carry the
    full value.  Threads that opened no region (autograd workers) keep CUPTI's value.
    """
    full = {int(t) & 0xFFFFFFFF: int(t) for t in instance_threads}
    tid = np.asarray(kernels["thread_id"]).astype(np.uint64)
    out = dict(kernels)
    uniq, inv = np.unique(tid, return_inverse=True)  # a few launching threads: map each once
    mapped = np.asarray([full.get(int(t) & 0xFFFFFFFF, int(t)) for t in uniq.tolist()], dtype=np.uint64)
    out["thread_id"] = mapped[inv.ravel()] if len(tid) else tid
    return out


def store_kernels(kernels: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """The kernel table's columns for :meth:`argus_lab.store.Store.write`, as the numpy arrays they are (instance 0
    becomes NULL through an Arrow mask): never a Python object per value, so a run of millions of kernels costs
    its records' bytes, not a few kilobytes each (docs/benchmarks.md, "memory per kernel record")."""
    import pyarrow as pa

    out: dict[str, Any] = {}
    for key, col in kernels.items():
        if key == "api_kind":
            continue
        if key == "instance_id":
            iid = np.asarray(col, dtype=np.int64)
            out[key] = pa.array(iid, type=pa.int64(), mask=iid == 0)
        else:
            out[key] = col
    return out


def summarize(kernels: Mapping[str, np.ndarray]) -> dict[str, int]:
    """Counts for provenance and messages: records by kind and how many carried a region instance id."""
    kind = np.asarray(kernels["kind"], dtype=object)
    iid = np.asarray(kernels["instance_id"], dtype=np.int64)
    return {
        "kernels": int(np.count_nonzero(kind == "kernel")),
        "memcpy": int(np.count_nonzero(kind == "memcpy")),
        "memset": int(np.count_nonzero(kind == "memset")),
        "carried_instance_id": int(np.count_nonzero(iid != 0)),
        "no_instance_id": int(np.count_nonzero(iid == 0)),
    }
