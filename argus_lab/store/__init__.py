"""The DuckDB evidence store: locking, migrations run and bulk writes (``db``), the store's side of a run (``sink``:
what the runtime hands its evidence to; ``handoff``: a long run's evidence stored by a fresh process), ``compact`` and
``trim``.  It imports only the evidence model
(:mod:`argus_lab.model`); the queries that read it live in :mod:`argus_lab.report`."""

from argus_lab.model.schema import SCHEMA_VERSION
from argus_lab.store.db import Store, default_store_path
from argus_lab.store.sink import StoreSink

__all__ = ["SCHEMA_VERSION", "Store", "StoreSink", "default_store_path"]
