"""The store as a notebook's database: ``argus_lab.sql("SELECT ...")``.

Queries go through argus_lab's own access to the store (:meth:`argus_lab.store.Store.sql`): the file is opened
read-only for each query and closed after it, so a notebook can query between its measurements without holding a
connection that would stop the next one from writing.  A DuckDB connection of the user's own to the same file in the
same process is detected when argus_lab opens the file and named in the message, with the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from argus_lab.store import Store


def sql(query: str, params: Sequence[Any] = (), *, store: str | Store | None = None) -> Any:
    """The answer to ``query`` over the evidence store (default ``./argus.duckdb`` or ``$ARGUS_STORE``) as a polars
    DataFrame; ``params`` fill ``?`` placeholders.  E.g.
    ``argus_lab.sql("SELECT path, count(*) FROM region_instances GROUP BY path")``."""
    st = store if isinstance(store, Store) else Store(store)
    return st.sql(query, params)


__all__ = ["sql"]
