"""Activity buffers decoded as CUPTI completes them (the collector's pool), and the kernels table made and stored in
batches: on the activity buffers recorded on the H200 (tests/data/gpu/cases/*/buffers, see README), cut into several
buffers at record boundaries as CUPTI would have completed them, and on SYNTHETIC buffers."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from recorded_cases import CASES

from argus_lab.backends.cupti import decode as dec
from argus_lab.backends.cupti.buffer_pool import DecodingPool
from argus_lab.backends.cupti.collector import kernel_evidence
from argus_lab.model.batches import TableBatches, as_arrow
from argus_lab.run import shards
from argus_lab.store import Store
from argus_lab.store import db as store_db

ALL = ("nested", "triton", "two_streams", "graph", "backward", "edge")


def recorded(case: str) -> tuple[list[np.ndarray], dict[int, np.dtype], dict[int, str]]:
    cupti = pytest.importorskip("cupti.cupti")
    folder = CASES / case / "buffers"
    meta = json.loads((folder / "layouts.json").read_text())
    layouts = {int(k): getattr(cupti, name) for k, name in meta["layouts"].items()}
    names = {int(k): v for k, v in meta["kernel_names"].items()}
    return [np.fromfile(p, dtype=np.uint8) for p in sorted(folder.glob("buffer*.bin"))], layouts, names


def pieces(buf: np.ndarray, layouts: dict[int, np.dtype], records: int) -> list[np.ndarray]:
    """``buf`` cut at record boundaries into buffers of at most ``records`` records (as CUPTI completes them)."""
    _, offs = dec.walk_records(buf, {k: d.itemsize for k, d in layouts.items()})
    cuts = [*offs[::records].tolist(), len(buf)]
    return [buf[a:b] for a, b in itertools.pairwise(cuts) if b > a]


def through_pool(buffers: list[np.ndarray], layouts: dict[int, np.dtype], names: dict[int, str]) -> DecodingPool:
    size = max(len(b) for b in buffers)
    pool = DecodingPool(size, layouts, names.__getitem__, spare=2)
    for b in buffers:
        arr, off = pool.take()
        arr[off : off + len(b)] = b
        pool.completed(arr, off, len(b))
    return pool


@pytest.mark.parametrize("case", ALL)
def test_buffers_decoded_as_they_complete_give_the_columns_decoded_at_stop(case: str) -> None:
    buffers, layouts, names = recorded(case)
    cut = [p for b in buffers for p in pieces(b, layouts, 5)]
    assert len(cut) > len(buffers)  # several completions per recorded buffer
    raw = through_pool(cut, layouts, names).finish()
    at_stop = dec.decode_buffers(buffers, layouts, names.__getitem__)
    as_text = dec.named(raw)  # the pool keeps kernel names as codes into the run's table of names
    for family, cols in at_stop.items():  # the same records (a family's order follows the buffers' cuts)
        assert sorted(rows_of(as_text[family])) == sorted(rows_of(cols)), family
    kernel = raw["kernel"]
    if dec.count(kernel):  # compact: each field keeps CUPTI's own width (start/end 8 bytes, ids 4)
        assert kernel["correlation_id"].itemsize == 4
        assert kernel["start"].itemsize == 8
    assert dec.kernel_table(raw, "r").keys() == dec.kernel_table(at_stop, "r").keys()
    for column, values in dec.kernel_table(at_stop, "r").items():
        assert list(dec.kernel_table(raw, "r")[column]) == list(values), column


def rows_of(cols: dec.RawColumns) -> list[tuple[object, ...]]:
    keys = sorted(cols)
    return list(zip(*(cols[k].tolist() for k in keys), strict=True))


def synthetic_kernels(n: int, first: int) -> np.ndarray:
    """SYNTHETIC kernel records (kind 10) in a minimal layout: kind, correlation id, start, end, name pointer."""
    layout = np.dtype([("kind", "<u4"), ("correlation_id", "<u4"), ("start", "<u8"), ("end", "<u8"), ("name", "<u8")])
    r = np.zeros(n, dtype=layout)
    r["kind"] = 10
    r["correlation_id"] = np.arange(first, first + n)
    r["start"] = 1000 * r["correlation_id"]
    r["end"] = r["start"] + 500
    r["name"] = 7
    return r.view(np.uint8)


SYNTHETIC_LAYOUT = {10: np.dtype([("kind", "<u4"), ("correlation_id", "<u4"), ("start", "<u8"), ("end", "<u8"),
                                  ("name", "<u8")])}  # fmt: skip


def test_the_pool_hands_the_same_few_buffers_out_again_synthetic() -> None:
    per = 1000
    pool = DecodingPool(per * 32, SYNTHETIC_LAYOUT, {7: "k"}.__getitem__, spare=2)
    for i in range(40):
        arr, off = pool.take()
        b = synthetic_kernels(per, 1 + i * per)
        arr[off : off + len(b)] = b
        pool.completed(arr, off, len(b))
        pool.wait_decoded()
    raw = pool.finish()
    assert pool.allocated == 1  # 40 buffers completed, one made
    assert raw["kernel"]["correlation_id"].tolist() == list(range(1, 40 * per + 1))
    assert set(dec.named(raw)["kernel"]["name"].tolist()) == {"k"}
    assert raw["kernel"]["name"].strides == (0,)  # one kernel throughout: its name's code, no byte a record


def test_a_buffer_that_cannot_be_decoded_is_reported_and_the_others_kept_synthetic() -> None:
    pool = DecodingPool(1 << 16, SYNTHETIC_LAYOUT, {7: "k"}.__getitem__)
    good = synthetic_kernels(10, 1)
    bad = good.copy()
    bad[32:36] = 99  # the second record claims a kind the layouts do not know
    for b in (good, bad, synthetic_kernels(5, 11)):
        arr, off = pool.take()
        arr[off : off + len(b)] = b
        pool.completed(arr, off, len(b))
    raw = pool.finish()
    assert raw["kernel"]["correlation_id"].tolist() == list(range(1, 16))
    assert len(pool.errors) == 1
    assert "could not be decoded" in pool.errors[0]


def test_kernel_rows_made_in_batches_are_the_rows_made_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = dec.load_raw(CASES / "backward" / "cupti")
    whole = dec.kernel_table(raw, "r")
    monkeypatch.setattr(dec, "BATCH_ROWS", 7)
    parts = list(dec.KernelRows(raw, "r").batches())
    assert len(parts) > 3
    for column, values in whole.items():
        assert list(np.concatenate([p[column] for p in parts])) == list(values), column
    assert dec.KernelRows(raw, "r").summary() == dec.summarize(whole)


def stored_kernels(store: Store) -> pa.Table:
    return store.arrow("SELECT * FROM kernels ORDER BY kernel_key")


@pytest.mark.parametrize("limit", ["64MB", "1KB"])  # 1KB: DuckDB runs out of memory, the write is made again
def test_streamed_kernels_store_the_rows_of_the_columns_written_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: str
) -> None:
    raw = dec.load_raw(CASES / "graph" / "cupti")
    threads = [2**40 + 5]
    at_once = dec.store_kernels(dec.widen_thread_ids(dec.kernel_table(raw, "r"), threads))
    at_once["rank"] = np.zeros(len(at_once["name"]), dtype=np.int64)
    monkeypatch.setattr(dec, "BATCH_ROWS", 5)
    monkeypatch.setattr(store_db, "WRITE_MEMORY_LIMIT", limit)
    streamed = kernel_evidence(dec.KernelRows(raw, "r"), threads, 0)
    assert isinstance(streamed, TableBatches)
    assert len(list(streamed.make())) > 2
    a, b = Store(tmp_path / "a.duckdb"), Store(tmp_path / "b.duckdb")
    a.write({"kernels": at_once})
    b.write({"kernels": streamed})
    assert stored_kernels(b).num_rows == dec.count(raw["kernel"])
    assert stored_kernels(a).equals(stored_kernels(b))
    shards.write_table(tmp_path / "ev-kernels.parquet", streamed)  # a child run's shard, batch by batch
    assert pq.read_table(tmp_path / "ev-kernels.parquet").equals(streamed.to_table())


def test_as_arrow_reads_the_kernels_however_they_travel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU tests and the benchmarks read a run's kernels whole through ``as_arrow``: batches, columns and an
    Arrow table give the same rows (recorded H200 buffers of the graph case)."""
    raw = dec.load_raw(CASES / "graph" / "cupti")
    monkeypatch.setattr(dec, "BATCH_ROWS", 5)
    streamed = kernel_evidence(dec.KernelRows(raw, "r"), [2**40 + 5], 0)
    whole = as_arrow(streamed)
    assert whole.num_rows == dec.count(raw["kernel"]) == len(streamed)
    assert as_arrow(whole) is whole
    assert as_arrow(whole.to_pydict()).to_pylist() == whole.to_pylist()  # columns: the same rows


def test_buffers_cupti_asks_for_through_ctypes_come_from_the_pool_and_go_back_to_it() -> None:
    """The collector's ctypes callbacks (``RawBuffers``, as libcupti calls them) with the pool: each buffer CUPTI asks
    for is a pool buffer, each completed one is decoded and handed out again (libcupti itself needs a GPU: its two
    registration entry points are the only stand-ins here)."""
    import ctypes
    from types import SimpleNamespace

    from argus_lab.backends.cupti.collector import RawBuffers

    buffers, layouts, names = recorded("graph")
    cut = [p for b in buffers for p in pieces(b, layouts, 4)]
    size = max(len(b) for b in cut)
    entry = ("cuptiActivityRegisterCallbacks", "cuptiActivityFlushAll", "cuptiActivityGetNextRecord")
    lib = SimpleNamespace(**{name: SimpleNamespace() for name in entry})
    raw_buffers = RawBuffers(lib, size)
    raw_buffers.pool = pool = DecodingPool(size, layouts, names.__getitem__, spare=2)
    addresses = set()
    for b in cut:
        buf_p, size_p, max_p = (ctypes.c_void_p * 1)(), (ctypes.c_size_t * 1)(), (ctypes.c_size_t * 1)()
        raw_buffers._requested(buf_p, size_p, max_p)  # CUPTI asks for a buffer ...
        assert size_p[0] == size and buf_p[0] % 8 == 0
        addresses.add(buf_p[0])
        ctypes.memmove(buf_p[0], b.ctypes.data, len(b))  # ... fills it ...
        raw_buffers._completed(None, 0, buf_p[0], size, len(b))  # ... and gives it back
        pool.wait_decoded()
    raw = pool.finish()
    assert len(cut) > 3 and pool.allocated == 1 and len(addresses) == 1  # one buffer, handed out again each time
    assert raw_buffers.errors == [] and raw_buffers.filled == []
    at_stop = dec.decode_buffers(buffers, layouts, names.__getitem__)
    for family, cols in at_stop.items():
        assert sorted(rows_of(dec.named(raw)[family])) == sorted(rows_of(cols)), family
