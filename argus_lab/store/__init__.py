"""The DuckDB evidence store: schema, locking and bulk writes (``db``), the queries that pick runs (``queries``),
and the store's side of a run (``sink``: what the runtime hands its evidence to)."""

from argus_lab.store.db import Store, default_store_path
from argus_lab.store.schema import SCHEMA_VERSION
from argus_lab.store.sink import StoreSink

__all__ = ["SCHEMA_VERSION", "Store", "StoreSink", "default_store_path"]
