"""Compacting a store: the same tables rewritten into a file with small DuckDB blocks.

DuckDB's default block (256 KiB) makes even an empty store of this schema about 5 MB, and rows deleted by a
second join stay in the file.  :func:`compact` copies every table into a new file with ``block_size`` blocks
under the store's write lock and puts it in place of the old one; with ``drop_shards`` the run folder
(``<store>.runs``) goes too, once every run in the store finished ``ok`` or ``partial`` (its Parquet shards are
then all in the store).  Used for recorded evidence that travels (``tests/data``, the GPU scripts' outputs).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from argus_lab.store.db import Store

FINISHED = ("ok", "partial")
"""Run statuses whose shards are all in the store."""


@dataclass(frozen=True)
class Compacted:
    """Sizes before and after, and whether the shard folder was removed."""

    bytes_before: int
    bytes: int
    shards_dropped: bool


def compact(store: Store | str | Path, block_size: int = 16_384, drop_shards: bool = False) -> Compacted:
    """Rewrite ``store`` with ``block_size``-byte blocks (a power of two, at least 16 KiB)."""
    st = store if isinstance(store, Store) else Store(store)
    path = st.path
    if not path.exists():
        msg = f"no store at {str(path)!r} to compact; give the path of an existing .duckdb file"
        raise FileNotFoundError(msg)
    tmp = path.with_name(path.name + ".compact")
    tmp.unlink(missing_ok=True)
    before = path.stat().st_size
    with st.connect(write=True) as con:  # under the write lock: no writer changes the store meanwhile
        src = con.execute("SELECT current_database()").fetchone()
        assert src is not None
        quoted = str(tmp).replace("'", "''")  # ATTACH takes no bound parameter
        con.execute(f"ATTACH '{quoted}' AS _compact_dst (BLOCK_SIZE {int(block_size)})")
        try:
            con.execute(f'COPY FROM DATABASE "{src[0]}" TO _compact_dst')
        finally:
            con.execute("DETACH _compact_dst")
        statuses = [r[0] for r in con.execute("SELECT status FROM runs").fetchall()]
    tmp.replace(path)
    shards = Path(str(path) + ".runs")
    dropped = drop_shards and bool(statuses) and all(s in FINISHED for s in statuses) and shards.is_dir()
    if dropped:
        shutil.rmtree(shards)
    return Compacted(before, path.stat().st_size, dropped)


__all__ = ["FINISHED", "Compacted", "compact"]
