"""The DuckDB evidence store: schema, locking and bulk writes (``db``), and the queries reports use."""

from argus_lab.store.db import Store, default_store_path
from argus_lab.store.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "Store", "default_store_path"]
