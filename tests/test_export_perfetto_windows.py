"""The Perfetto export read in windows of time (issue 35, deliverable 6): DuckDB sorts and joins one window of at most
``trace_rows.WINDOW_ROWS`` rows at a time, so a store of millions of kernels exports within the first read limit
instead of growing the read's memory limit until the whole sorted join fits (1.8 GB at 3 M kernels).

The events written are those of the single sorted query the export ran before (its SQL kept here as the
reference), on recorded H200 stores and on a SYNTHETIC store with many tracks, overlapping kernels, samples that
share a timestamp and windows of a few rows; and the windows hold at most their bound of rows whatever the store's
size (the memory figures, 3 M kernels read back: bench/scale_bench.py, docs/benchmarks.md).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_pgo_recorded import unpacked

from argus_lab import join
from argus_lab.report import trace_rows
from argus_lab.store import Store
from argus_lab.views import perfetto
from argus_lab.views.perfetto import write_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from join_bench import generate

GPU = Path(__file__).resolve().parent / "data" / "gpu"

# The export's queries before the windows (main at 4f58172): each run's rows in one sorted join.
OLD_INSTANCES = """
SELECT i.instance_id, i.path, i.instance_index, i.repetition, coalesce(i.pid, 0) AS pid, coalesce(i.rank, 0) AS rank,
       coalesce(i.thread_id, 0) AS tid, i.start_ns, i.end_ns, coalesce(i.error, '') AS error,
       coalesce(i.thread_name, '') AS thread_name, regexp_extract(i.path, '[^/]*$') AS name,
       v.vals
FROM region_instances i
LEFT JOIN (SELECT instance_id, map(list(signal), list(inclusive)) AS vals FROM instance_values
           WHERE run_id = $1 GROUP BY instance_id) v ON v.instance_id = i.instance_id
WHERE i.run_id = $1 AND i.start_ns IS NOT NULL AND i.end_ns IS NOT NULL
ORDER BY i.start_ns, i.end_ns DESC
"""
OLD_KERNELS = """
WITH a AS (
    SELECT evidence_id, arg_max(class, weight) AS class, max(weight) AS weight, count(*) AS candidates,
           arg_max(instance_id, weight) AS instance_id, arg_max(reason, weight) AS reason
    FROM attributions WHERE run_id = $1 AND evidence IN ('kernel', 'memcpy', 'memset') GROUP BY evidence_id
)
SELECT coalesce(k.kind, 'kernel') AS kind, k.name, k.kernel_key, k.correlation_id, coalesce(k.device_id, 0) AS device,
       coalesce(k.stream_id, 0) AS stream, k.start_ns, k.end_ns, k.thread_id, k.api_start_ns, k.api_end_ns,
       coalesce(k.rank, 0) AS rank, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.bytes,
       coalesce(a.class, 'unattributed') AS class, a.weight, a.candidates, a.reason, i.path
FROM kernels k
LEFT JOIN a ON a.evidence_id = k.kernel_key
LEFT JOIN region_instances i ON i.run_id = k.run_id AND i.instance_id = a.instance_id
WHERE k.run_id = $1 AND k.start_ns IS NOT NULL
ORDER BY k.start_ns, k.end_ns DESC
"""
OLD_SAMPLES = """
SELECT coalesce(device_id, 0) AS device, signal, unit, t_ns, value FROM samples
WHERE run_id = $1 AND value IS NOT NULL ORDER BY t_ns
"""
OLD = {trace_rows.INSTANCES: OLD_INSTANCES, trace_rows.KERNELS: OLD_KERNELS, trace_rows.SAMPLES: OLD_SAMPLES}


def _one_query(con: Any, sql: str, run_id: str, ranges: Any, batch: int = 65_536) -> Iterator[dict[str, Any]]:
    """The rows as the export read them before: the run's whole sorted join, windows ignored."""
    res = con.execute(OLD[sql], [run_id])
    names = [d[0] for d in res.description]
    while chunk := res.fetchmany(batch):
        for row in chunk:
            yield dict(zip(names, row, strict=True))


def _export(st: Store, run: str, folder: Path, monkeypatch: pytest.MonkeyPatch, *, old: bool, per: int) -> Path:
    """``run`` exported to ``folder/trace.json`` (the trace names its file: the same name for each way)."""
    folder.mkdir(parents=True)
    out = folder / "trace.json"
    with monkeypatch.context() as m:
        m.setattr(trace_rows, "WINDOW_ROWS", per)
        if old:
            m.setattr(perfetto, "stream_rows", _one_query)
        write_trace(st, run, out)
    return out


def _assert_same_events(old: Path, new: Path) -> None:
    """The same header and the same events; on each track the same slices and flows in the same order (Perfetto
    nests and binds by that order).  Counters of different signals at one timestamp may come in either order, as
    they did from one query."""
    a, b = json.loads(old.read_text()), json.loads(new.read_text())
    assert {k: v for k, v in a.items() if k != "traceEvents"} == {k: v for k, v in b.items() if k != "traceEvents"}
    key = lambda e: json.dumps(e, sort_keys=True)  # noqa: E731
    assert Counter(map(key, a["traceEvents"])) == Counter(map(key, b["traceEvents"]))

    def per_track(doc: dict[str, Any]) -> dict[tuple[int, int], list[str]]:
        tracks = defaultdict(list)
        for e in doc["traceEvents"]:
            if e["ph"] in ("X", "s", "f"):
                tracks[(e["pid"], e["tid"])].append(key(e))
        return tracks

    assert per_track(a) == per_track(b)


def _copied(name: str, tmp_path: Path) -> Store:
    path = GPU / name
    if not path.exists():
        pytest.skip(f"{name} is not in this checkout")
    shutil.copy(path, tmp_path / path.name)
    return Store(tmp_path / path.name)


@pytest.mark.parametrize(
    "name", ["two_ranks/ddp_train_2r.duckdb", "nccl/nccl_h200.duckdb", "e2e_nested_h200.duckdb", "ddp-m-b25"]
)
def test_windows_of_a_few_rows_write_the_events_of_the_single_query_on_recorded_stores(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded on the H200s: two ranks of DDP training (4 streams), NCCL collectives, nested regions, and the
    overlap study's run whose split-K kernels start before the GEMM before them ends (overlap lanes)."""
    st = Store(unpacked(name, tmp_path)) if name == "ddp-m-b25" else _copied(name, tmp_path)
    for (run,) in st.rows("SELECT run_id FROM kernels GROUP BY run_id ORDER BY count(*) DESC, run_id LIMIT 1"):
        old = _export(st, run, tmp_path / run / "old", monkeypatch, old=True, per=trace_rows.WINDOW_ROWS)
        new = _export(st, run, tmp_path / run / "new", monkeypatch, old=False, per=500)
        _assert_same_events(old, new)
        one = _export(st, run, tmp_path / run / "one", monkeypatch, old=False, per=trace_rows.WINDOW_ROWS)
        assert one.read_bytes() == old.read_bytes()  # a run under the bound: one window, byte for byte


def _synthetic(path: Path, kernels: int) -> Store:
    """SYNTHETIC: ``kernels`` kernel records of join_bench's decode-like run, spread over 3 devices and 13 streams
    (39 tracks); every 5th kernel moved to start 3 us before the one before it ends (on one stream: an overlap
    lane), every 7th to start with the one before it and end 1 us after it (a shared start); NVML-like power and
    clock samples at the same instants."""
    st = Store(path)
    generate(st, kernels, max(1, kernels // 100), 1, 0.02, 0.01, samples=True)
    with st.connect(write=True) as con:
        con.execute(
            "UPDATE kernels SET device_id = (correlation_id // 2) % 3, "
            "stream_id = 7 + (correlation_id // 6) % 13, "
            "start_ns = start_ns - CASE WHEN correlation_id % 5 = 0 THEN 3000 ELSE 0 END"
        )
        con.execute(
            "UPDATE kernels k SET start_ns = p.start_ns, end_ns = p.end_ns + 1000 FROM kernels p "
            "WHERE k.correlation_id % 7 = 0 AND p.correlation_id = k.correlation_id - 1"
        )
        con.execute(
            "INSERT INTO samples (run_id, device_id, signal, t_ns, value, unit) "
            "SELECT run_id, device_id, 'sys.sm_clock', t_ns, 1980, 'MHz' FROM samples "
            "WHERE signal = 'sys.power'"
        )
    join.attribute_request(st, ["r-bench"])
    return st


def test_windows_write_the_events_of_the_single_query_on_a_synthetic_store_of_many_tracks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = _synthetic(tmp_path / "s.duckdb", 3_000)
    old = _export(st, "r-bench", tmp_path / "old", monkeypatch, old=True, per=trace_rows.WINDOW_ROWS)
    new = _export(st, "r-bench", tmp_path / "new", monkeypatch, old=False, per=64)
    _assert_same_events(old, new)
    doc = json.loads(new.read_text())
    gpu_tracks = {(e["pid"], e["tid"]) for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] >= perfetto.GPU_PID}
    lanes = {t for t in gpu_tracks if t[1] >= perfetto.LANE_TID_STEP}
    assert len(gpu_tracks) > 39 and lanes  # the store does hold many tracks and overlaps


def _window_sizes(st: Store, monkeypatch: pytest.MonkeyPatch, out: Path, per: int) -> dict[str, list[int]]:
    """The rows each window of each query of an export brought, counted as the export reads them."""
    real = trace_rows.stream_rows
    sizes: dict[str, list[int]] = defaultdict(list)
    which = {trace_rows.INSTANCES: "instances", trace_rows.KERNELS: "kernels", trace_rows.SAMPLES: "samples"}

    def counted(con: Any, sql: str, run_id: str, ranges: Any, batch: int = 65_536) -> Iterator[dict[str, Any]]:
        for r in ranges:
            n = 0
            for row in real(con, sql, run_id, [r], batch):
                n += 1
                yield row
            sizes[which[sql]].append(n)

    with monkeypatch.context() as m:
        m.setattr(trace_rows, "WINDOW_ROWS", per)
        m.setattr(perfetto, "stream_rows", counted)
        write_trace(st, "r-bench", out)
    return sizes


def test_no_window_brings_more_than_its_bound_of_rows_whatever_the_store_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SYNTHETIC stores of N and 4N kernels: 4x the windows, each window at most ``WINDOW_ROWS`` rows (the rows
    DuckDB sorts and joins at once), every row in exactly one window."""
    small = _window_sizes(_synthetic(tmp_path / "n.duckdb", 2_000), monkeypatch, tmp_path / "n.json", 500)
    large = _window_sizes(_synthetic(tmp_path / "4n.duckdb", 8_000), monkeypatch, tmp_path / "4n.json", 500)
    for sizes, kernels in ((small, 2_000), (large, 8_000)):
        assert sum(sizes["kernels"]) == kernels
        assert max(sizes["kernels"]) <= 500 and max(sizes["instances"]) <= 500 and max(sizes["samples"]) <= 500
    assert len(large["kernels"]) >= 3 * len(small["kernels"]) >= 12
