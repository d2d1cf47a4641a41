"""Files written whole or not at all (to a temporary name beside them, then renamed): a reader (another process,
recovery after a kill) never sees half of one."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from argus_lab.model.batches import TableBatches
from argus_lab.model.columns import jsonable_columns

if TYPE_CHECKING:
    import pyarrow as pa


def write_json(path: Path, value: Mapping[str, Any]) -> None:
    """Write a small JSON file atomically: to a temporary name beside it, flushed to disk, then renamed."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        json.dump(value, f)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def write_parquet(path: Path, data: Mapping[str, Sequence[Any]] | pa.Table | TableBatches) -> None:
    """Write a table (columns by name, an Arrow table, or :class:`TableBatches` batch by batch) to a Parquet file
    atomically: to a temporary name beside it, then renamed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = path.with_name(path.name + ".tmp")
    if isinstance(data, TableBatches):
        reader = data.reader()
        with pq.ParquetWriter(tmp, reader.schema) as out:
            for batch in reader:
                out.write_batch(batch)
    else:
        pq.write_table(data if isinstance(data, pa.Table) else pa.table(jsonable_columns(data)), tmp)
    tmp.replace(path)


__all__ = ["write_json", "write_parquet"]
