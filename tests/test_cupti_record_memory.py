"""What a timing run holds per kernel record, and that holding less changed no stored value.

The stored ``kernels`` rows of the activity buffers recorded on the H200 (tests/data/gpu/cases/*/buffers), decoded
through the collector's pool, are compared with the rows the tree stored before the narrower columns
(tests/data/gpu/kernel_columns/<case>-<path>.json, written by ``python tests/test_cupti_record_memory.py`` at
703d109): once with the recorded API and external-correlation records (the Python launch path), once with native
launch records made from them (the native launch path: the extension's export, untimed launches inside regions).
The bytes the decoded columns hold per record are counted from the arrays' own sizes (deterministic, never timed).
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from recorded_cases import CASES

from argus_lab.backends.cupti import decode as dec
from argus_lab.backends.cupti import native as nat
from argus_lab.backends.cupti.buffer_pool import DecodingPool
from argus_lab.backends.cupti.collector import kernel_evidence
from argus_lab.store import Store

ALL = ("nested", "triton", "two_streams", "graph", "backward", "edge")
GOLDEN = CASES.parent / "kernel_columns"
THREADS = [2**40 + 5]
PID = 4242


def recorded_raw(case: str) -> dec.Raw:
    """The case's recorded buffers through the pool (each cut into completions of 5 records)."""
    cupti = pytest.importorskip("cupti.cupti")
    folder = CASES / case / "buffers"
    meta = json.loads((folder / "layouts.json").read_text())
    layouts = {int(k): getattr(cupti, name) for k, name in meta["layouts"].items()}
    names = {int(k): v for k, v in meta["kernel_names"].items()}
    sizes = {k: d.itemsize for k, d in layouts.items()}
    cut: list[np.ndarray] = []
    for p in sorted(folder.glob("buffer*.bin")):
        buf = np.fromfile(p, dtype=np.uint8)
        _, offs = dec.walk_records(buf, sizes)
        edges = [*offs[::5].tolist(), len(buf)]
        cut += [buf[a:b] for a, b in itertools.pairwise(edges) if b > a]
    pool = DecodingPool(max(len(b) for b in cut), layouts, names.__getitem__, spare=2)
    for b in cut:
        arr, off = pool.take()
        arr[off : off + len(b)] = b
        pool.completed(arr, off, len(b))
    return pool.finish()


def native_export(raw: dec.Raw) -> tuple[Any, ...]:
    """The extension's ``export()`` tuple for the launches of the recorded API records: each launch's correlation id,
    the instance its external record carried, its thread, entry time only outside a region (``launch_clock``
    'outside', the default), no exit, its callback id and domain."""
    api, ext = raw["api"], raw["external"]
    corr = np.asarray(api["correlation_id"], dtype=np.int64)
    keep = np.ones(len(corr), dtype=bool)
    order = np.argsort(corr, kind="stable")
    keep[order[1:]] = corr[order[1:]] != corr[order[:-1]]  # one row a launch (the outermost call)
    corr = corr[keep]
    sel = np.asarray(ext["external_kind"]) == dec.CUSTOM2
    inst = dec._lookup(
        np.asarray(ext["correlation_id"], dtype=np.int64)[sel],
        np.asarray(ext["external_id"])[sel].astype(np.int64),
        corr,
    )
    start = np.where(inst == 0, np.asarray(api["start"], dtype=np.int64)[keep], 0)
    domain = np.where(np.asarray(api["kind"])[keep] == 5, 2, 1).astype(np.uint8)
    return (
        len(corr),
        0,
        corr.astype(np.uint32).tobytes(),
        inst.tobytes(),
        np.asarray(api["thread_id"], dtype=np.uint64)[keep].tobytes(),
        start.tobytes(),
        np.zeros(len(corr), dtype=np.int64).tobytes(),
        np.asarray(api["cbid"], dtype=np.uint32)[keep].tobytes(),
        domain.tobytes(),
    )


def case_raw(case: str, path: str) -> dec.Raw:
    raw = recorded_raw(case)
    if path == "native":
        launches = nat.LaunchRecords.from_export(native_export(raw))
        raw.update(nat.raw_families(launches, PID))
    return raw


def stored_rows(case: str, path: str, tmp: Path) -> dict[str, list[Any]]:
    """The case's ``kernels`` rows as the store holds them (columns by name, rows by kernel key)."""
    rows = dec.KernelRows(case_raw(case, path), "r")
    store = Store(tmp / f"{case}-{path}.duckdb")
    store.write({"kernels": kernel_evidence(rows, THREADS, 0)})
    table = store.arrow("SELECT * FROM kernels ORDER BY kernel_key")
    return {c: table.column(c).to_pylist() for c in table.column_names}


@pytest.mark.parametrize("path", ["recorded", "native"])
@pytest.mark.parametrize("case", ALL)
def test_stored_kernels_are_the_rows_stored_before_the_narrow_columns(case: str, path: str, tmp_path: Path) -> None:
    golden = json.loads((GOLDEN / f"{case}-{path}.json").read_text())
    got = stored_rows(case, path, tmp_path)
    assert sorted(got) == sorted(golden)
    for column, values in golden.items():
        assert got[column] == values, column
    assert len(golden["kernel_key"]) > 0


if __name__ == "__main__":  # write the goldens with this tree's code
    import tempfile

    GOLDEN.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        for c in ALL:
            for p in ("recorded", "native"):
                (GOLDEN / f"{c}-{p}.json").write_text(json.dumps(stored_rows(c, p, Path(d))) + os.linesep)


def synthetic_run(n: int, kernels: int, per_instance: int) -> tuple[dec.Raw, dec.KernelRows]:
    """SYNTHETIC: ``n`` kernel records in CUPTI's kernel10 layout (the H200's), ``kernels`` distinct kernels each with
    its own launch configuration, through the pool in buffers of 4,096 records, and as many native launch records
    (one thread, inside regions of ``per_instance`` launches, untimed) as the extension exports them."""
    cupti = pytest.importorskip("cupti.cupti")
    dtype = cupti.activity_kernel10_dtype
    i = np.arange(n, dtype=np.int64)
    k = i % kernels
    r = np.zeros(n, dtype=dtype)
    r["kind"] = 10
    r["start"] = 1_800_000_000_000_000_000 + i * 2000
    r["end"] = r["start"] + 1500
    r["correlation_id"] = i + 1
    r["grid_x"], r["grid_y"], r["grid_z"] = 8 + k % 512, 1 + k % 4, 1
    r["block_x"], r["block_y"], r["block_z"] = 32 * (1 + k % 8), 1 + k % 2, 1
    r["registers_per_thread"], r["static_shared_memory"] = 16 + k % 200, 1024 * (k % 48)
    r["dynamic_shared_memory"], r["local_memory_per_thread"] = 512 * (k % 96), k % 3 * 8
    r["name"] = 4096 + k
    buf = r.view(np.uint8)
    per = 4096 * dtype.itemsize
    pool = DecodingPool(per, {10: dtype}, lambda p: f"_ZN2at6native18elementwise_kernel{p}", spare=1)
    for lo in range(0, len(buf), per):
        arr, off = pool.take()
        b = buf[lo : lo + per]
        arr[off : off + len(b)] = b
        pool.completed(arr, off, len(b))
        pool.wait_decoded()
    raw = pool.finish()
    corr = (i + 1).astype(np.uint32)
    export = (n, 0, corr.tobytes(), (1 + i // per_instance).tobytes(), np.uint64(7).tobytes(), np.int64(0).tobytes())
    export += (np.int64(0).tobytes(), np.uint32(307).tobytes(), np.uint8(1).tobytes())
    raw.update(nat.raw_families(nat.LaunchRecords.from_export(export), PID))
    return raw, dec.KernelRows(raw, "r")


def per_record(raw: dec.Raw, rows: dec.KernelRows) -> dict[str, float]:
    n = dec.count(raw["kernel"])
    held = dec.held_bytes(raw, rows)
    return {f"{family}.{key}": b / n for family, cols in held.items() for key, b in cols.items() if b}


ONE_KERNEL_BOUND = 41
"""Bytes a kernel record holds in a run of one kernel launched over and over (scripts/gpu/kernel_record_memory.py's
step), every raw column and run-wide array of the kernels table counted: start and end (8 each), correlation id (4),
the launch's correlation id (4) and instance (8), the table's instance code (4) and ordinal (4): 40, and the run's
tables of distinct names and instances below one; 89 at 703d109 (its launch records copied in full, a name reference
a record, the order, the launch call keys and rows made)."""
MANY_KERNELS_BOUND = 60
"""The same with 463 kernels, each its own launch configuration (bench/scale_bench.py's records): the launch
configuration's fields, each in the narrowest type that holds its values (1-4 bytes each, 16 in all here), and the
name's code (2) on top: 56.2; 119 at 703d109."""


def test_a_run_of_one_kernel_holds_at_most_its_bound_per_record() -> None:
    raw, rows = synthetic_run(20_000, 1, 1000)
    held = per_record(raw, rows)
    assert sum(held.values()) <= ONE_KERNEL_BOUND, held
    assert "kernel.name" not in held and "kernel.grid_x" not in held  # one value throughout: broadcasts
    assert "api.thread_id" not in held and "api.start" not in held  # one thread, untimed launches


def test_a_run_of_many_kernels_holds_at_most_its_bound_per_record() -> None:
    raw, rows = synthetic_run(20_000, 463, 925)
    held = per_record(raw, rows)
    assert sum(held.values()) <= MANY_KERNELS_BOUND, held
    assert held["kernel.name"] == 2  # a code into the run's names, not a reference a record
    table = dec.kernel_table(raw, "r")  # the names come back as text
    assert table["name"][463] == table["name"][0] == "_ZN2at6native18elementwise_kernel4096"


def test_the_collector_lets_the_launch_instances_go_and_stores_the_same_rows(tmp_path: Path) -> None:
    from argus_lab.backends.cupti.collector import CuptiCollector

    coll = CuptiCollector()
    coll.raw = case_raw("nested", "native")
    assert dec.count(coll.raw["external"]) > 0
    first = coll.evidence({"thread_id": THREADS})
    assert dec.count(coll.raw["external"]) == 0  # joined into the rows' instances, then let go
    again = coll.evidence({"thread_id": THREADS})  # made again: the same rows, from the rows made once
    golden = json.loads((GOLDEN / "nested-native.json").read_text())
    for k, ev in enumerate((first, again)):
        store = Store(tmp_path / f"c{k}.duckdb")
        store.write({"kernels": ev["kernels"]})
        table = store.arrow("SELECT * FROM kernels ORDER BY kernel_key")
        assert table.column("instance_id").to_pylist() == golden["instance_id"]
        assert any(golden["instance_id"])


def test_the_h200_recordings_of_bytes_per_kernel_record_are_under_the_goal_and_what_the_docs_state() -> None:
    """scripts/gpu/kernel_record_memory.py --steps 1000 and --steps 3000 on the H200 (gpu-check part ``memory``,
    2026-12-03 04:15 UTC), with the long run's store write in a fresh process (argus_lab.store.handoff): the growth of
    the measured process's peak over its kernel records, counted after a first short measurement (the libraries'
    load), and the growth from 1,000 to 3,000 steps, are under the issue's 200 B a record; counted from the
    workload's own peak (the first load included) the 1,000-step run is not (223 B); every record kept, none dropped,
    joined in a fresh process."""
    root = Path(__file__).resolve().parents[1]
    folder = root / "tests/data/gpu/kernel_record_memory"
    runs = [json.loads((folder / f"steps-{n}.json").read_text()) for n in (1000, 3000)]
    for rec, kernels in zip(runs, (1_001_000, 3_001_000), strict=True):
        assert rec["kernels"] == kernels and rec["dropped_records"] == 0 and rec["joined_in"] == "fresh process"
        per_record = (rec["peak_after_mib"] - rec["peak_before_mib"]) * 2**20 / rec["kernels"]
        assert round(per_record, 1) == rec["bytes_per_record"] < 200
        from_workload = (rec["peak_after_mib"] - rec["peak_workload_mib"]) * 2**20 / rec["kernels"]
        assert round(from_workload, 1) == rec["bytes_per_record_from_workload"]
        assert sum(rec["held_per_record"].values()) == 32
    short, long = runs
    grew = (long["peak_after_mib"] - long["peak_before_mib"]) - (short["peak_after_mib"] - short["peak_before_mib"])
    marginal = grew * 2**20 / (long["kernels"] - short["kernels"])
    assert round(marginal) == 70
    assert [round(r["bytes_per_record"]) for r in runs] == [82, 74]
    assert [round(r["bytes_per_record_from_workload"]) for r in runs] == [223, 121]
    docs = " ".join((root / "docs" / "benchmarks.md").read_text().split())
    assert "245 B -> 82 B a kernel record (74 B at 3,000 steps; 70 B for each record past the first million)" in docs
