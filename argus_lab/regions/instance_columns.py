"""The recorder's finished instances as columns: numpy arrays for the numbers, Arrow dictionary arrays for the text.

A run of millions of instances is turned into columns once, at its end (or once per repetition in a child run), and
the columns travel to the store or to a shard as they are: no Python object per instance, so the measured process
holds its instances' integers (about 60 bytes an instance) plus one copy as columns (docs/reliability.md, "Memory").
numpy and pyarrow are imported here when the columns are made, never when ``argus_lab.regions`` is imported.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

CHUNK = 65_536
"""Instances named per call of a per-instance lookup (thread names): the Python values of one chunk at a time."""


def field(data: array[int], width: int, k: int, start: int, stop: int) -> np.ndarray:
    """Field ``k`` of rows ``[start, stop)`` of ``data`` (``width`` int64 integers a row) as a new int64 array."""
    import numpy as np

    flat = np.frombuffer(data, dtype=np.int64, count=stop * width) if stop else np.zeros(0, np.int64)
    return flat[start * width + k :: width].copy()


def dictionary(codes: Any, values: Sequence[str]) -> pa.DictionaryArray:
    """Text as an Arrow dictionary array: ``codes`` (one a row) index ``values``; duplicate values are merged, so
    that every consumer (DuckDB, Parquet, a group-by) sees each text once.  The indices are as narrow as the number
    of values allows (int8 up to 127 values), so tables of one run may differ in index width
    (:func:`argus_lab.run.shards.read_folder` reads shards back as plain text)."""
    import numpy as np
    import pyarrow as pa

    first: dict[str, int] = {}
    remap = [first.setdefault(v, len(first)) for v in values]
    width = np.int8 if len(first) < 1 << 7 else np.int16 if len(first) < 1 << 15 else np.int32  # bytes a row
    idx = np.asarray(remap, dtype=width)[np.asarray(codes, dtype=np.int64)] if remap else np.zeros(len(codes), width)
    return pa.DictionaryArray.from_arrays(pa.array(idx), pa.array(list(first) or [""], pa.string()))


def constant(value: str, n: int) -> pa.DictionaryArray:
    """``n`` rows of the same text (a run id)."""
    import numpy as np

    return dictionary(np.zeros(n, np.int32), [value])


def by_node(nodes: np.ndarray, text_of: Callable[[int], str]) -> pa.DictionaryArray:
    """A text column of one value per path-table node (a path, a region id), looked up once per distinct node."""
    import numpy as np

    uniq, inv = np.unique(nodes, return_inverse=True)
    return dictionary(inv.ravel(), [text_of(int(k)) for k in uniq.tolist()])


def sparse_text(ids: np.ndarray, text: Mapping[int, str]) -> pa.DictionaryArray:
    """The text ``text`` holds for some ids (an instance's error), ``""`` for the others."""
    import numpy as np

    if not text:
        return constant("", len(ids))
    keys = np.fromiter(text.keys(), dtype=np.int64, count=len(text))
    hit = np.flatnonzero(np.isin(ids, keys))
    values = ["", *dict.fromkeys(text[int(ids[p])] for p in hit.tolist())]
    where = {v: k for k, v in enumerate(values)}
    codes = np.zeros(len(ids), np.int32)
    codes[hit] = [where[text[int(ids[p])]] for p in hit.tolist()]
    return dictionary(codes, values)


def looked_up(name_of: Callable[[list[int], list[int]], list[str]], a: np.ndarray, b: np.ndarray) -> pa.DictionaryArray:
    """A text column from a per-instance lookup ``name_of(a_values, b_values)`` (a thread's name by its id and the
    instance's start), asked :data:`CHUNK` instances at a time."""
    import numpy as np

    where: dict[str, int] = {}
    codes = np.zeros(len(a), np.int32)
    for lo in range(0, len(a), CHUNK):
        names = name_of(a[lo : lo + CHUNK].tolist(), b[lo : lo + CHUNK].tolist())
        codes[lo : lo + CHUNK] = [where.setdefault(s, len(where)) for s in names]
    return dictionary(codes, list(where))


def repetitions(marks: Sequence[tuple[int, int]], start: int, stop: int) -> np.ndarray:
    """The repetition of rows ``[start, stop)``, from ``(first row, repetition)`` marks in row order."""
    import numpy as np

    out = np.zeros(max(stop - start, 0), np.int32)
    for k, (first, rep) in enumerate(marks):
        end = marks[k + 1][0] if k + 1 < len(marks) else stop
        lo, hi = max(first, start), min(end, stop)
        if hi > lo:
            out[lo - start : hi - start] = rep
    return out


def instance_indices(ids: np.ndarray, codes: np.ndarray, counts: dict[int, int]) -> np.ndarray:
    """The n-th instance of its path (``codes``: one path code a row), in order of instance id (entry order),
    counting on from ``counts`` (instances of each path code seen before; updated).  Done with two sorts, never a
    Python object per instance, and few arrays of the rows' length alive at once."""
    import numpy as np

    n = len(ids)
    if n == 0:
        return np.zeros(0, np.int64)
    by_id = np.argsort(ids, kind="stable")
    grouped = codes[by_id]
    by_code = np.argsort(grouped, kind="stable")  # rows grouped by path, in id order within each path
    grouped = grouped[by_code]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    sizes = np.diff(np.r_[starts, n])
    keys = grouped[starts].tolist()
    del grouped
    base = np.asarray([counts.get(int(k), 0) for k in keys], dtype=np.int64)
    rank = np.arange(n, dtype=np.int64)
    rank -= np.repeat(starts - base, sizes)  # position in its path's group, counted on from the path's earlier ones
    by_id = by_id[by_code]
    del by_code
    out = np.empty(n, np.int64)
    out[by_id] = rank
    for k, size, b in zip(keys, sizes.tolist(), base.tolist(), strict=True):
        counts[k] = b + size
    return out


def as_values(column: Iterable[Any]) -> list[Any]:
    """A column as Python values (numpy and Arrow arrays converted, lists as they are)."""
    if hasattr(column, "to_pylist"):
        return list(column.to_pylist())
    if hasattr(column, "tolist"):
        return list(column.tolist())
    return list(column)
