"""A store table that travels from a run to the store in batches of rows, never all of its columns at once.

The kernel records of a long timing run are the one table large enough for this to matter (millions of rows): the
CUPTI collector hands it as :class:`TableBatches`, and the store's writer (:meth:`argus_lab.store.Store.write`) and a
child run's shard writer (:mod:`argus_lab.run.shards`) each consume it batch by batch, so the measured process holds
its compact decoded records plus one batch of Arrow rows (docs/benchmarks.md, "memory per kernel record").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class TableBatches:
    """``num_rows`` rows made by ``make`` as Arrow record batches; every call of ``make`` starts over (the table can
    be read more than once, e.g. by a writer that failed and is tried again)."""

    num_rows: int
    make: Callable[[], Iterator[pa.RecordBatch]]

    def __len__(self) -> int:
        return self.num_rows

    def reader(self) -> pa.RecordBatchReader:
        """The batches as one Arrow stream (each later batch cast to the first one's schema)."""
        import pyarrow as pa

        it = self.make()
        first = next(it, None)
        if first is None:
            msg = "internal: a TableBatches of rows made no batch"
            raise ValueError(msg)
        schema = first.schema

        def rest() -> Iterator[pa.RecordBatch]:
            yield first
            for batch in it:
                yield batch if batch.schema == schema else batch.cast(schema)

        return pa.RecordBatchReader.from_batches(schema, rest())

    def to_table(self) -> pa.Table:
        """All rows as one Arrow table (for small tables and tests: it holds every row at once)."""
        return self.reader().read_all()


BATCH_ROWS = 65_536
"""Rows of one batch of :func:`in_batches`."""


def in_batches(columns: Mapping[str, Sized], rows_per_batch: int = BATCH_ROWS) -> TableBatches:
    """Columns (numpy or Arrow arrays: a run's region instances and host values) as :class:`TableBatches`, so that the
    store writes them as a stream under its bounded DuckDB memory (an Arrow table over the arrays is made without a
    copy, then sliced)."""

    def make() -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from argus_lab.model.columns import jsonable_columns

        yield from pa.table(jsonable_columns(columns)).to_batches(max_chunksize=rows_per_batch)  # type: ignore[arg-type]

    return TableBatches(rows(columns), make)


def rows(table: Mapping[str, Sized] | TableBatches) -> int:
    """Rows of a table given as columns (the longest column) or as :class:`TableBatches`."""
    if isinstance(table, TableBatches):
        return table.num_rows
    return max((len(v) for v in table.values()), default=0)


def as_arrow(table: Mapping[str, Sized] | TableBatches | pa.Table) -> pa.Table:
    """The whole table as one Arrow table, however it travels (:class:`TableBatches`, columns, or a table already):
    for readers that want every row at once (tests, the benchmarks' counts, small runs)."""
    import pyarrow as pa

    if isinstance(table, TableBatches):
        return table.to_table()
    if isinstance(table, pa.Table):
        return table
    return pa.table(dict(table))


__all__ = ["BATCH_ROWS", "TableBatches", "as_arrow", "in_batches", "rows"]
