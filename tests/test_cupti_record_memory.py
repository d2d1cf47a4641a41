"""What a timing run holds per kernel record, and that holding less changed no stored value.

The stored ``kernels`` rows of the activity buffers recorded on the H200 (tests/data/gpu/cases/*/buffers), decoded
through the collector's pool, are compared with the rows the tree stored before the narrower columns
(tests/data/gpu/kernel_columns/<case>.json, written by ``python tests/test_cupti_record_memory.py`` at 703d109): once with
the recorded API and external-correlation records (the Python launch path), once with native launch records made
from them (the native launch path: the extension's export, untimed launches inside regions).  The bytes the decoded
columns hold per record are counted from the arrays' own sizes (deterministic, never timed).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from recorded_cases import CASES  # noqa: E402

from argus_lab.backends.cupti import decode as dec  # noqa: E402
from argus_lab.backends.cupti import native as nat  # noqa: E402
from argus_lab.backends.cupti.buffer_pool import DecodingPool  # noqa: E402
from argus_lab.backends.cupti.collector import kernel_evidence  # noqa: E402
from argus_lab.store import Store  # noqa: E402

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
        cut += [buf[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]
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
        np.asarray(ext["correlation_id"], dtype=np.int64)[sel], np.asarray(ext["external_id"])[sel].astype(np.int64), corr
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
