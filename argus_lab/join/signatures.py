"""Kernel-sequence signatures of region instances (``instance_signatures``), computed over numpy arrays.

An instance's kernel sequence is the names of the kernels exactly attributed to it and to its nested instances, in
launch order: its own kernels and each nested instance's sequence as one block, ordered by their first launch
(correlation id, start, key) -- the launch order whenever nested instances do not interleave with their parent's own
launches.  Its signature is the md5 of those names joined by ``chr(31)`` (``''`` when it launched none) and
``kernels`` their number; the report groups a region's instances by it (instance heterogeneity).

No sequence is spelled out once per instance: from the deepest nesting level up, each instance's sequence is a
list of *parts* (a kernel's name, or the sequence of a nested instance as one part), equal lists are interned to one
sequence id (grouped by a polynomial hash of the parts, then verified part by part, so equal ids mean equal lists),
and only the distinct sequences are joined into strings and hashed.  At a million kernels in a hundred thousand
instances that is a handful of array passes instead of a string aggregation per nesting level.

Run by :mod:`argus_lab.join.attribution` in two steps: :func:`start` takes the instances and their exactly attributed
kernels (read once for these and the kernel values: :mod:`argus_lab.join.kernel_values`) and computes on a second
thread while the join's next statements run; :func:`finish` writes the rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from argus_lab.join.arrays import registered

if TYPE_CHECKING:
    import duckdb

SEPARATOR = b"\x1f"
"""Between two names of a sequence (``chr(31)``, the unit separator)."""

# the keys of some kernels (those whose correlation id and start are equal)
KEYS = "SELECT row, key FROM _j_k WHERE row IN (SELECT unnest(?::BIGINT[]))"

INSERT = """
INSERT INTO instance_signatures (run_id, instance_id, kernels, signature)
SELECT run_id, instance_id, kernels, signature FROM _j_signed
"""

_MUL = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))
"""Odd multipliers of the two polynomial hashes that group candidate-equal part lists."""


@dataclass(frozen=True)
class Levels:
    """The instances' tree: parent number (-1 for none) and nesting depth of each instance."""

    parent: np.ndarray
    depth: np.ndarray

    @classmethod
    def of(cls, parent: np.ndarray) -> Levels:
        """Depths by following the parent links (the join cut every cycle before; the walk stops regardless)."""
        depth = np.zeros(len(parent), dtype=np.int64)
        cur = parent.copy()
        for _ in range(len(parent)):
            up = cur >= 0
            if not up.any():
                break
            depth[up] += 1
            cur[up] = parent[cur[up]]
        return cls(parent, depth)

    def upward(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(instances, their parents) one nesting level at a time from the deepest: adding each level's values to
        its parents makes every instance's value inclusive of its nested instances'."""
        for d in range(int(self.depth.max(initial=0)), 0, -1):
            kids = np.flatnonzero((self.depth == d) & (self.parent >= 0))
            if len(kids):
                yield kids, self.parent[kids]


@dataclass(frozen=True)
class Interned:
    """The parts of each distinct sequence (``parts[starts[s]:starts[s] + lengths[s]]`` of sequence ``s``)."""

    parts: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray


@dataclass(frozen=True)
class Pending:
    """Signatures being computed on a second thread (numpy and hashlib release the GIL) while the join's next
    statements run; :func:`finish` writes them."""

    future: Future[pa.Table] | None


def start(con: duckdb.DuckDBPyConnection, parent: np.ndarray, records: pa.Table, kernels: np.ndarray) -> Pending:
    """Start computing the signatures of the instances (``parent``: the number of each one's parent, -1 for none,
    as ``_j_node`` numbers them) from their exactly attributed records (``idx``, ``c``, ``s``, ``row``, ``name``:
    :data:`argus_lab.join.kernel_values.RECORDS`), of which ``kernels`` marks the kernels."""
    if len(parent) == 0:
        return Pending(None)
    tokens = records.select(["idx", "c", "s", "row", "name"])
    if not kernels.all():
        tokens = tokens.filter(pa.array(kernels))
    order = _launch_order(con, tokens)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="argus-signatures")
    try:
        return Pending(pool.submit(_signed, parent, tokens, order))
    finally:
        pool.shutdown(wait=False)  # the thread ends with its one task


def finish(
    con: duckdb.DuckDBPyConnection, pending: Pending, run_id: pa.Array, instance: np.ndarray, keep: np.ndarray
) -> None:
    """Write the signatures :func:`start` computes (waiting for them) of the instances ``keep`` marks (those of the
    runs that traced kernels); ``run_id`` and ``instance`` name each instance."""
    if pending.future is None:
        return
    signed = pending.future.result()
    at = pa.array(np.flatnonzero(keep), type=pa.int64())
    rows = pa.table(
        {
            "run_id": run_id.take(at),
            "instance_id": pa.array(instance, type=pa.int64()).take(at),
            "kernels": signed.column("kernels").take(at),
            "signature": signed.column("signature").take(at),
        }
    )
    with registered(con, _j_signed=rows):
        con.execute(INSERT)


def _signed(parent: np.ndarray, tokens: pa.Table, order: np.ndarray) -> pa.Table:
    """``idx``, ``kernels`` and ``signature`` of every instance."""
    inst = tokens.column("idx").to_numpy().astype(np.int64, copy=False)[order]
    names = tokens.column("name").combine_chunks().dictionary_encode()
    code = names.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)[order]
    words: list[bytes | None] = [s.encode() for s in names.dictionary.to_pylist()]
    kernels, seq, interned = _sequences(Levels.of(parent), inst, code, len(words))
    digests = _digests(interned, words)
    signature = pa.array(digests, type=pa.string()).take(pa.array(np.where(seq >= 0, seq, len(digests) - 1)))
    return pa.table({"idx": np.arange(len(parent), dtype=np.int64), "kernels": kernels, "signature": signature})


def _launch_order(con: duckdb.DuckDBPyConnection, tokens: pa.Table) -> np.ndarray:
    """The permutation that puts the tokens in launch order: by correlation id, start and key, a missing value
    after every value (as DuckDB orders the struct ``{c, s, k}``).  Only the tokens of one run are ever compared."""
    top = np.iinfo(np.int64).max
    c = tokens.column("c").combine_chunks().fill_null(top).to_numpy(zero_copy_only=False).astype(np.int64)
    s = tokens.column("s").combine_chunks().fill_null(top).to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.lexsort((s, c))
    c, s = c[order], s[order]
    tie = np.flatnonzero((c[1:] == c[:-1]) & (s[1:] == s[:-1]))
    if len(tie):  # equal correlation id and start (rare): the key decides
        starts = tie[np.r_[True, tie[1:] != tie[:-1] + 1]]
        ends = tie[np.r_[tie[1:] != tie[:-1] + 1, True]] + 2
        rows = tokens.column("row").to_numpy()
        key = dict(con.execute(KEYS, [rows[order[np.unique(np.r_[tie, tie + 1])]].tolist()]).fetchall())
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            members = order[a:b].tolist()
            order[a:b] = sorted(members, key=lambda m: (key[rows[m]] is None, key[rows[m]] or ""))
    return order


def _sequences(
    tree: Levels, inst: np.ndarray, code: np.ndarray, n_names: int
) -> tuple[np.ndarray, np.ndarray, Interned]:
    """Per instance: its kernels (with its nested instances') and its sequence id (-1: none); and the sequences.

    ``inst``/``code``: the instance and name code (-1: no name) of each kernel, in launch order.  A part is a name
    code (``0 .. n_names - 1``) or ``n_names + `` the id of a nested instance's sequence."""
    n = len(tree.parent)
    rank = np.arange(len(inst), dtype=np.int64)
    kernels = np.bincount(inst, minlength=n).astype(np.int64)
    first = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, inst, rank)  # tokens come in launch order: an instance's first token is its first launch
    seq = np.full(n, -1, dtype=np.int64)
    depth = tree.depth[inst]
    small = np.int16 if int(tree.depth.max(initial=0)) < np.iinfo(np.int16).max else np.int64
    by_depth = np.argsort(depth.astype(small), kind="stable")  # a radix sort for small integers
    tok_depth = depth[by_depth]
    kids = np.flatnonzero(tree.parent >= 0)
    kids = kids[np.argsort(tree.depth[kids], kind="stable")]
    kid_depth = tree.depth[kids]
    chunks: list[Interned] = []
    offset = 0
    for d in range(int(tree.depth.max()), -1, -1):
        lo, hi = np.searchsorted(tok_depth, [d, d + 1])
        own = by_depth[lo:hi]
        klo, khi = np.searchsorted(kid_depth, [d + 1, d + 2])
        sub = kids[klo:khi]
        sub = sub[kernels[sub] > 0]  # nested instances that launched something, finished at the level below
        up = tree.parent[sub]
        np.add.at(kernels, up, kernels[sub])
        np.minimum.at(first, up, first[sub])
        owner = np.concatenate([inst[own], up])
        if len(owner) == 0:
            continue
        key = np.concatenate([rank[own], first[sub]])
        part = np.concatenate([code[own], n_names + seq[sub]])
        order = np.lexsort((key, owner))
        owner, part = owner[order], part[order]
        ids, level = _intern(owner, part)
        seq[owner[np.r_[True, owner[1:] != owner[:-1]]]] = offset + ids
        chunks.append(level)
        offset += len(level.starts)
    total = 0
    starts: list[np.ndarray] = []
    for c in chunks:
        starts.append(c.starts + total)
        total += len(c.parts)
    interned = Interned(
        np.concatenate([c.parts for c in chunks]) if chunks else np.zeros(0, dtype=np.int64),
        np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64),
        np.concatenate([c.lengths for c in chunks]) if chunks else np.zeros(0, dtype=np.int64),
    )
    return kernels, seq, interned


def _intern(owner: np.ndarray, part: np.ndarray) -> tuple[np.ndarray, Interned]:
    """Sequence ids (``0 ..``) of the part lists of the owners (sorted, each list contiguous), equal lists sharing
    one id; with the distinct lists."""
    bounds = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    lengths = np.diff(np.r_[bounds, len(owner)])
    pos = np.arange(len(owner), dtype=np.int64) - np.repeat(bounds, lengths)
    val = (part + 2).astype(np.uint64)  # -1 (no name) stays distinct from every code
    hashes = []
    for mul in _MUL:
        powers = np.cumprod(np.full(int(lengths.max()), mul, dtype=np.uint64))
        hashes.append(np.add.reduceat(val * powers[pos], bounds))
    order = np.lexsort((hashes[1], hashes[0], lengths))
    k_len, k_h0, k_h1 = lengths[order], hashes[0][order], hashes[1][order]
    new = np.r_[True, (k_len[1:] != k_len[:-1]) | (k_h0[1:] != k_h0[:-1]) | (k_h1[1:] != k_h1[:-1])]
    group = np.empty(len(bounds), dtype=np.int64)
    group[order] = np.cumsum(new) - 1
    _, rep = np.unique(group, return_index=True)  # the first owner of each group stands for it
    same = part == part[np.repeat(bounds[rep[group]], lengths) + pos]
    if not same.all():  # two different lists with equal hashes: intern exactly instead
        return _intern_exact(bounds, lengths, part)
    return group, Interned(part, bounds[rep], lengths[rep])


def _intern_exact(bounds: np.ndarray, lengths: np.ndarray, part: np.ndarray) -> tuple[np.ndarray, Interned]:
    """:func:`_intern` by comparing the lists themselves (the path of a hash collision)."""
    seen: dict[tuple[int, ...], int] = {}
    ids = np.empty(len(bounds), dtype=np.int64)
    reps: list[int] = []
    for j, (b, n) in enumerate(zip(bounds.tolist(), lengths.tolist(), strict=True)):
        k = tuple(part[b : b + n].tolist())
        if k not in seen:
            seen[k] = len(reps)
            reps.append(j)
        ids[j] = seen[k]
    r = np.asarray(reps, dtype=np.int64)
    return ids, Interned(part, bounds[r], lengths[r])


def _digests(seqs: Interned, words: list[bytes | None]) -> list[str]:
    """The md5 (hex) of each distinct sequence's names joined by :data:`SEPARATOR` (``''`` for a sequence without
    a name), and one more ``''`` for instances without a sequence.

    Each sequence is spelled with one C-level gather of its parts (a name, or a nested sequence already spelled) and
    one join; a part without a name (``None``) makes the join fail and is left out on the slow way."""
    spelled: list[bytes | None] = [None, *words]  # part p is spelled[p + 1]: -1 (no name) is None
    shifted = seqs.parts + 1
    for b, n in zip(seqs.starts.tolist(), seqs.lengths.tolist(), strict=True):
        items = shifted[b : b + n].tolist()
        got = itemgetter(*items)(spelled) if n > 1 else (spelled[items[0]],)
        try:
            spelled.append(SEPARATOR.join(got))
        except TypeError:  # a part without a name
            pieces = [w for w in got if w is not None]
            spelled.append(SEPARATOR.join(pieces) if pieces else None)
    out = [hashlib.md5(s).hexdigest() if s is not None else "" for s in spelled[len(words) + 1 :]]
    out.append("")
    return out


__all__ = ["SEPARATOR", "Pending", "finish", "start"]
