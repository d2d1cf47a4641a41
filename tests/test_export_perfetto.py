"""Export of a run as a Perfetto-readable trace (Chrome JSON) and as Parquet, on evidence recorded on the H200.

Perfetto's own processor (PyPI ``perfetto``) downloads ``trace_processor_shell`` on first use, which a machine
without network access cannot do (``tests/test_perfetto_processor.py`` runs a binary built from source where one is
given, and otherwise compares with what it read of recorded exports); here the structure is validated against the
Trace Event Format with a JSON schema, the trace is replayed through the rules of Perfetto's JSON importer
(``perfetto_rules``: how it orders, nests and drops slices and binds flows), and the round trip through argus_lab's
Kineto importer checks every value.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow.parquet as pq
import pytest
from perfetto_facts import ZERO_LENGTH_TRACE
from perfetto_rules import replay
from test_join_recorded import CASES, load_case
from test_pgo_recorded import unpacked

from argus_lab import join
from argus_lab.app.importing import import_trace
from argus_lab.store import Store
from argus_lab.views.perfetto import GPU_PID, LANE_TID_STEP, Lanes, _Writer, write_parquet, write_trace

NUM = {"type": "number", "minimum": 0}
EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["ph", "pid", "tid"],
    "properties": {"ph": {"enum": ["X", "s", "f", "C", "M"]}, "pid": {"type": "integer"}, "tid": {"type": "integer"}},
    "allOf": [
        {"if": {"properties": {"ph": {"const": "X"}}},
         "then": {"required": ["name", "cat", "ts", "dur", "args"], "properties": {"ts": NUM, "dur": NUM}}},
        {"if": {"properties": {"ph": {"enum": ["s", "f"]}}},
         "then": {"required": ["id", "ts", "cat", "name"], "properties": {"ts": NUM}}},
        {"if": {"properties": {"ph": {"const": "C"}}},
         "then": {"required": ["name", "ts", "args"],
                  "properties": {"args": {"type": "object", "additionalProperties": {"type": "number"}}}}},
        {"if": {"properties": {"ph": {"const": "M"}}},
         "then": {"properties": {"name": {"enum": ["process_name", "thread_name"]},
                                 "args": {"required": ["name"]}}}},
    ],
}  # fmt: skip
TRACE_SCHEMA = {
    "type": "object",
    "required": ["traceEvents", "baseTimeNanoseconds", "displayTimeUnit"],
    "properties": {"traceEvents": {"type": "array", "items": EVENT_SCHEMA}},
}

KERNELS = (
    "SELECT k.name, k.start_ns, k.end_ns, k.stream_id, a.class, i.path FROM kernels k "
    "JOIN attributions a ON a.run_id = k.run_id AND a.evidence_id = k.kernel_key "
    "LEFT JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id "
    "WHERE k.run_id = ? ORDER BY k.start_ns, k.name"
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Store:
    st = Store(tmp_path_factory.mktemp("exp") / "rec.duckdb")
    for case in ("nested", "two_streams", "backward"):
        load_case(st, CASES / case, case)
    join.attribute_request(st, ["nested", "two_streams", "backward"])
    return st


@pytest.mark.parametrize("case", ["nested", "two_streams", "backward"])
def test_export_is_a_valid_trace_with_tracks_flows_and_classes(recorded: Store, tmp_path: Path, case: str) -> None:
    out = tmp_path / f"{case}.json"
    counts = write_trace(recorded, case, out)
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, TRACE_SCHEMA)
    ev = doc["traceEvents"]
    n_k = recorded.rows("SELECT count(*) FROM kernels WHERE run_id = ?", [case])[0][0]
    gpu = [e for e in ev if e["ph"] == "X" and e["pid"] >= GPU_PID]
    assert len(gpu) == n_k == counts["kernels"]
    assert all(e["args"]["class"] in ("exact", "temporal", "ambiguous", "unattributed") for e in gpu)
    starts = {e["id"] for e in ev if e["ph"] == "s"}
    ends = {e["id"] for e in ev if e["ph"] == "f"}
    assert starts == ends and len(starts) == counts["flows"] > 0  # every flow has both ends
    named = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in ev if e["ph"] == "X"} <= named  # every slice track is named
    n_s = recorded.rows("SELECT count(*) FROM samples WHERE run_id = ? AND value IS NOT NULL", [case])[0][0]
    assert counts["counters"] == n_s == sum(1 for e in ev if e["ph"] == "C")


@pytest.mark.parametrize("case", ["nested", "two_streams", "backward"])
def test_round_trip_through_the_kineto_importer(recorded: Store, tmp_path: Path, case: str) -> None:
    """Import what was exported: same kernels at the same ns, same classes and regions, same instances."""
    out = tmp_path / f"{case}.json"
    write_trace(recorded, case, out)
    st = Store(tmp_path / "back.duckdb")
    res = import_trace(out, st)
    assert st.rows(KERNELS, [res.run_id]) == recorded.rows(KERNELS, [case])
    inst = "SELECT path, start_ns, end_ns FROM region_instances WHERE run_id = ? ORDER BY start_ns, path"
    assert st.rows(inst, [res.run_id]) == recorded.rows(inst, [case])


def test_parquet_of_every_table(recorded: Store, tmp_path: Path) -> None:
    files = write_parquet(recorded, tmp_path / "pq", ["nested"])
    names = {f.stem for f in files}
    assert {"runs", "region_instances", "kernels", "attributions", "instance_values", "samples"} <= names
    assert not names & {"attribution_rows", "value_series", "instance_value_rows"}  # read through their views
    v = pq.read_table(tmp_path / "pq" / "instance_values.parquet")
    assert set(v.column("run_id").to_pylist()) == {"nested"}
    assert v.num_rows == recorded.rows("SELECT count(*) FROM instance_values WHERE run_id = 'nested'")[0][0] > 0
    k = pq.read_table(tmp_path / "pq" / "kernels.parquet")
    assert set(k.column("run_id").to_pylist()) == {"nested"}
    assert k.num_rows == recorded.rows("SELECT count(*) FROM kernels WHERE run_id = 'nested'")[0][0]


def test_unknown_run_is_named(recorded: Store, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no run 'r-nope'.*latest runs"):
        write_trace(recorded, "r-nope", tmp_path / "x.json")


def _flows_link_launch_to_record(doc: dict[str, Any]) -> int:
    """Replay ``doc`` as Perfetto imports it; every slice must be placed and every flow must go from the launching
    call to the GPU record of the same correlation id.  Returns the number of flows."""
    found = replay(doc)
    assert not found.overlapping, found.overlapping[:3]  # Perfetto would drop them or report an import error
    assert not found.unbound_flows and not found.out_of_range_ids
    ev = doc["traceEvents"]
    assert found.flow_start.keys() == found.flow_end.keys()
    for fid, end in found.flow_end.items():
        call, record = ev[found.flow_start[fid]], ev[end]
        assert call["cat"] == "cuda_runtime" and record["cat"] in ("kernel", "gpu_memcpy", "gpu_memset"), fid
        assert call["args"]["correlation"] == record["args"]["correlation"], fid
    return len(found.flow_end)


@pytest.mark.parametrize("case", ["nested", "two_streams", "backward"])
def test_perfetto_places_every_slice_and_binds_every_flow(recorded: Store, tmp_path: Path, case: str) -> None:
    out = tmp_path / f"{case}.json"
    counts = write_trace(recorded, case, out)
    assert _flows_link_launch_to_record(json.loads(out.read_text())) == counts["flows"] > 0


def test_kernels_that_overlap_on_their_stream_go_to_an_overlap_lane(tmp_path: Path) -> None:
    """Recorded on two H200s (the overlap study's ddp-m-b25 store): cuBLASLt's split-K reduce kernel starts about
    130 ns before the GEMM before it on its stream has ended (programmatic dependent launch), twice in rank 1's run.
    On the stream's own track Perfetto would drop it (or spill it with an import error) and its flow would bind to
    the GEMM."""
    st = Store(unpacked("ddp-m-b25", tmp_path))
    run = "r-ead2cad0d1"
    overlapping = st.rows(
        "SELECT count(*) FROM (SELECT start_ns, lag(end_ns) OVER (PARTITION BY device_id, stream_id "
        "ORDER BY start_ns, end_ns DESC) AS prev_end, end_ns FROM kernels WHERE run_id = ?) "
        "WHERE start_ns < prev_end AND end_ns > prev_end",
        [run],
    )[0][0]
    assert overlapping == 2  # the recording does hold the case
    out = tmp_path / "ddp.json"
    counts = write_trace(st, run, out)
    doc = json.loads(out.read_text())
    assert _flows_link_launch_to_record(doc) == counts["flows"]
    laned = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] >= GPU_PID and e["tid"] >= LANE_TID_STEP]
    assert len(laned) == 2 and all("splitKreduce" in e["name"] for e in laned)
    assert all(e["tid"] == LANE_TID_STEP + e["args"]["stream"] for e in laned)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"}
    assert {names[(e["pid"], e["tid"])] for e in laned} == {f"stream {laned[0]['args']['stream']} (overlap lane 1)"}
    back = import_trace(out, Store(tmp_path / "back.duckdb"))  # the lane is a track, not a stream: same kernels
    assert back.imported.counts["kernels"] == st.rows("SELECT count(*) FROM kernels WHERE run_id = ? AND kind = "
                                                      "'kernel'", [run])[0][0]  # fmt: skip


def test_the_flow_of_a_zero_length_kernel_binds_to_it(tmp_path: Path) -> None:
    """Perfetto reads a zero-length slice after the flow events of its timestamp that precede it in the file; the
    flow end is therefore written after the record's slice (written before it, it bound to the kernel before)."""
    src = tmp_path / "zero.json"
    src.write_text(json.dumps(ZERO_LENGTH_TRACE))
    st = Store(tmp_path / "zero.duckdb")
    run = import_trace(src, st).run_id
    out = tmp_path / "out.json"
    write_trace(st, run, out)
    doc = json.loads(out.read_text())
    assert _flows_link_launch_to_record(doc) == 2
    ev = doc["traceEvents"]
    found = replay(doc)
    assert sorted(ev[i]["name"] for i in found.flow_end.values()) == ["empty", "gemm"]


def test_the_replay_reports_what_perfetto_would_drop_or_misbind() -> None:
    """SYNTHETIC: the replay itself finds a partial overlap and a flow end read before its zero-length slice."""
    doc = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "a", "pid": 1, "tid": 2, "ts": 1.0, "dur": 5.0},
        {"ph": "X", "cat": "kernel", "name": "b", "pid": 1, "tid": 2, "ts": 4.0, "dur": 5.0},  # overlaps a's end
        {"ph": "f", "cat": "ac2g", "name": "launch", "id": 1, "pid": 1, "tid": 2, "ts": 7.0, "bp": "e"},
        {"ph": "X", "cat": "kernel", "name": "c", "pid": 1, "tid": 2, "ts": 7.0, "dur": 0.0},
        {"ph": "X", "cat": "kernel", "name": "d", "pid": 1, "tid": 5_000_000_000, "ts": 8.0, "dur": 1.0},
    ]}  # fmt: skip
    found = replay(doc)
    assert [(e["name"], o["name"]) for e, o in found.overlapping] == [("b", "a")]
    assert doc["traceEvents"][found.flow_end[("ac2g", "launch", 1)]]["name"] == "a"  # not c: read before it
    assert [e["name"] for e in found.out_of_range_ids] == ["d"]


def test_lanes_keep_nested_events_together_and_move_partial_overlaps() -> None:
    lanes = Lanes()
    track = (1, 7)
    assert lanes.lane(track, 0, 100) == 0
    assert lanes.lane(track, 10, 20) == 0  # nested inside the first
    assert lanes.lane(track, 90, 30) == 1  # starts inside the first, ends after it: a lane of its own
    assert lanes.lane(track, 95, 5) == 0  # nests in the first (ends with it)
    assert lanes.lane(track, 96, 26) == 2  # outlasts the open slices of lanes 0 and 1
    assert lanes.lane(track, 100, 0) == 0  # lane 0's slices end at its start: closed, as Perfetto closes them
    assert lanes.lane(track, 105, 10) == 0
    assert lanes.lane((1, 8), 95, 50) == 0  # another track has lanes of its own


def test_imported_ranges_that_do_not_nest_go_to_an_overlap_lane(tmp_path: Path) -> None:
    """SYNTHETIC: two annotations of one thread that cross (as NVTX start/end ranges may): the second keeps its
    times on an overlap lane of the thread instead of being dropped by Perfetto."""
    trace = {"baseTimeNanoseconds": 1_000_000_000, "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "load", "pid": 7, "tid": 7, "ts": 1.0, "dur": 9.0, "args": {}},
        {"ph": "X", "cat": "user_annotation", "name": "decode", "pid": 7, "tid": 7, "ts": 5.0, "dur": 10.0,
         "args": {}},
    ]}  # fmt: skip
    src = tmp_path / "cross.json"
    src.write_text(json.dumps(trace))
    st = Store(tmp_path / "cross.duckdb")
    res = import_trace(src, st)
    assert res.imported.settings["annotation_nesting_improper"] == 1
    out = tmp_path / "out.json"
    assert write_trace(st, res.run_id, out)["instances"] == 2
    doc = json.loads(out.read_text())
    assert not replay(doc).overlapping
    slices = {e["name"]: e for e in doc["traceEvents"] if e["ph"] == "X"}
    assert (slices["load"]["tid"], slices["decode"]["tid"]) == (7, 7 + LANE_TID_STEP)
    assert slices["decode"]["args"]["thread"] == 7 and slices["decode"]["dur"] == 10.0
    assert slices["decode"]["ts"] - slices["load"]["ts"] == 4.0  # times as recorded (relative to the first event)


def _strict(text: str) -> dict[str, Any]:
    """Parse as strict JSON (Python's parser would accept NaN and Infinity; Perfetto's does not)."""

    def refuse(word: str) -> None:
        raise ValueError(f"not JSON: {word}")

    doc: dict[str, Any] = json.loads(text, parse_constant=refuse)
    return doc


def test_nan_and_infinite_values_are_left_out_of_the_json(tmp_path: Path) -> None:
    """SYNTHETIC samples added to a recorded run: a NaN and an infinite power reading, and an instance argument
    that is NaN; what is written stays JSON."""
    st = Store(tmp_path / "nan.duckdb")
    load_case(st, CASES / "nested", "nested")
    join.attribute_request(st, ["nested"])
    before = st.rows("SELECT count(*) FROM samples WHERE run_id = 'nested' AND value IS NOT NULL")[0][0]
    t = st.rows("SELECT min(start_ns) FROM region_instances WHERE run_id = 'nested'")[0][0]
    st.write({"samples": {"run_id": ["nested"] * 3, "device_id": [0] * 3, "signal": ["sys.power"] * 3,
                          "t_ns": [t + 1, t + 2, t + 3], "value": [float("nan"), float("inf"), 250.0],
                          "unit": ["W"] * 3}})  # fmt: skip
    out = tmp_path / "nan.json"
    counts = write_trace(st, "nested", out)
    doc = _strict(out.read_text())
    assert counts["counters"] == before + 1 == sum(1 for e in doc["traceEvents"] if e["ph"] == "C")
    buf = StringIO()
    _Writer(buf).complete("user_annotation", "x", 1, 1, 0, 5, {"gpu.time": float("nan"), "path": "x", "n": 3})
    assert _strict("[" + buf.getvalue() + "]")[0]["args"] == {"path": "x", "n": 3}
