"""Importing torch.profiler (Kineto) traces: region instances, kernels attributed through correlation ids.

The traces here are SYNTHETIC (tests/kineto_synth.py writes them the way libkineto formats them); the ones recorded
on the H200 are added by scripts/record_traces.py (see tests/data/README.md).
"""

from __future__ import annotations

import gzip
import hashlib
import mmap
from pathlib import Path
from typing import Any

import pytest
from kineto_synth import KinetoTrace

from argus_lab.app.importing import import_trace
from argus_lab.errors import ImportFormatError
from argus_lab.importers import chrome_json, detect_format, kineto
from argus_lab.store import Store

B = 1_795_938_194_000_000_000


def classes(store: Store, run: str) -> list[tuple[Any, ...]]:
    """(kernel name, start, end, class, path) of every GPU record of a run, by start."""
    return store.rows(
        "SELECT k.name, k.start_ns, k.end_ns, a.class, i.path FROM kernels k "
        "JOIN attributions a ON a.run_id = k.run_id AND a.evidence_id = k.kernel_key "
        "LEFT JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id "
        "WHERE k.run_id = ? ORDER BY k.start_ns, k.name",
        [run],
    )


def step_trace(relative: bool = True) -> KinetoTrace:
    """SYNTHETIC: a profiler step with a nested annotation, 1 ns apart kernels, a zero-length and a sub-us kernel,
    one kernel launched outside every annotation and one whose launch the profiler dropped."""
    tr = KinetoTrace(relative=relative)
    tr.thread_name(1, "MainThread")
    tr.annotation("ProfilerStep#7", B + 1_000, B + 100_000)
    tr.annotation("attn/qkv", B + 2_000, B + 50_000)
    tr.launch("k_a", B + 3_000, B + 10_000, B + 10_001)  # 1 ns
    tr.launch("k_zero", B + 3_001, B + 10_001, B + 10_001)  # 0 ns, starts 1 ns after k_a
    tr.launch("k_sub_us", B + 60_000, B + 70_000, B + 70_400)
    tr.launch("k_out", B + 200_000, B + 210_000, B + 210_500)
    tr.launch("k_dropped", B + 200_500, B + 211_000, B + 211_500, runtime=False)
    tr.gpu_annotation("attn/qkv", B + 10_000, B + 10_001)
    return tr


@pytest.mark.parametrize("relative", [True, False], ids=["baseTimeNanoseconds", "epoch-us"])
def test_annotations_become_nested_instances_with_exact_ns(tmp_path: Path, relative: bool) -> None:
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(step_trace(relative).write(tmp_path / "t.json"), st)
    inst = st.rows(
        "SELECT path, instance_index, start_ns, end_ns, parent_instance_id > 0, thread_name FROM region_instances "
        "WHERE run_id = ? ORDER BY start_ns",
        [res.run_id],
    )
    # ProfilerStep#7 is an instance of the region ProfilerStep; '/' inside a name does not split the path
    assert inst == [
        ("ProfilerStep", 0, B + 1_000, B + 100_000, False, "MainThread"),
        ("ProfilerStep/attn\u2215qkv", 0, B + 2_000, B + 50_000, True, "MainThread"),
    ]


def test_kernels_attributed_through_the_launch_with_1ns_resolution(tmp_path: Path) -> None:
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(step_trace().write(tmp_path / "t.json"), st)
    got = classes(st, res.run_id)
    assert got == [
        ("k_a", B + 10_000, B + 10_001, "exact", "ProfilerStep/attn\u2215qkv"),
        ("k_zero", B + 10_001, B + 10_001, "exact", "ProfilerStep/attn\u2215qkv"),
        ("k_sub_us", B + 70_000, B + 70_400, "exact", "ProfilerStep"),
        ("k_out", B + 210_000, B + 210_500, "unattributed", None),
        ("k_dropped", B + 211_000, B + 211_500, "unattributed", None),
    ]
    gpu_time = st.rows(
        "SELECT v.inclusive FROM instance_values v JOIN region_instances i USING (run_id, instance_id) "
        "WHERE v.run_id = ? AND v.signal = 'gpu.time' AND i.path = 'ProfilerStep'",
        [res.run_id],
    )
    assert gpu_time == [(401.0,)]  # 1 + 0 + 400 ns, nothing rounded to whole microseconds
    assert res.imported.settings["gpu_user_annotation_check"] == {"agree": 2, "differ": 0, "unchecked": 3}
    assert any("no cuda_runtime" in n for n in res.imported.notes)


def test_import_is_a_run_with_provenance(tmp_path: Path) -> None:
    st = Store(tmp_path / "s.duckdb")
    path = step_trace().write(tmp_path / "t.json.gz")
    res = import_trace(path, st)
    run = st.rows("SELECT variant, status, command, backends FROM runs WHERE run_id = ?", [res.run_id])[0]
    assert run[0] == "imported" and run[1] == "ok" and "argus-lab import" in run[2] and run[3] == ["cupti"]
    prov = dict(st.rows("SELECT backend, settings FROM provenance WHERE run_id = ?", [res.run_id]))
    assert str(path.resolve()) in prov["import"] and "sha256" in prov["import"]
    art = st.rows("SELECT kind, sha256, bytes FROM artifacts WHERE run_id = ?", [res.run_id])
    assert art[0][0] == "kineto-trace" and art[0][2] == path.stat().st_size
    assert art[0][1] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_file_is_hashed_window_by_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The digest is the file's sha256 when the mapped window moves along the file (a window of one page here, so
    that a trace of some ten kB takes several, the last one partial)."""
    tr = KinetoTrace()
    for i in range(60):
        tr.annotation(f"r{i % 3}", B + i * 10_000, B + i * 10_000 + 9_000)
    path = tr.write(tmp_path / "t.json")
    monkeypatch.setattr(chrome_json, "HASH_WINDOW", mmap.ALLOCATIONGRANULARITY)
    assert path.stat().st_size > 2 * chrome_json.HASH_WINDOW
    with chrome_json.event_parts(path) as src:
        assert (src.sha256, src.bytes) == (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_size)


def test_kernel_of_another_thread_left_to_the_join(tmp_path: Path) -> None:
    """SYNTHETIC autograd-like case: a kernel launched by a thread with no annotation while the main thread is
    inside a region is temporal (the join's rule), not forced into a region."""
    tr = KinetoTrace()
    tr.annotation("step", B + 1_000, B + 100_000, tid=1)
    tr.launch("bwd", B + 5_000, B + 20_000, B + 21_000, tid=2)
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(tr.write(tmp_path / "t.json"), st)
    assert [(c[0], c[3], c[4]) for c in classes(st, res.run_id)] == [("bwd", "temporal", "step")]


def test_parts_cut_at_event_boundaries_read_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The event array cut into several parts (parallel parse) gives the same tables as one part."""
    tr = KinetoTrace()
    for i in range(300):
        tr.annotation(f"r{i % 3}", B + i * 10_000, B + i * 10_000 + 9_000)
        tr.launch(f"k{i}", B + i * 10_000 + 100, B + i * 10_000 + 500, B + i * 10_000 + 501 + i)
    path = tr.write(tmp_path / "t.json")
    monkeypatch.setattr(chrome_json, "MIN_PART_BYTES", 1024)
    with chrome_json.event_parts(path, parts=4) as src:
        assert len(src.parts) == 4
    many = kineto.read(path, "r", threads=4)
    monkeypatch.setattr(chrome_json, "MIN_PART_BYTES", 1 << 40)
    one = kineto.read(path, "r", threads=4)
    for table in ("region_instances", "kernels"):
        a = many.tables[table].sort_by("start_ns")
        b = one.tables[table].sort_by("start_ns")
        assert a.equals(b), table


def test_bare_array_format_without_closing_bracket(tmp_path: Path) -> None:
    text = step_trace(relative=False).text()
    start = text.index("[", text.index('"traceEvents"'))
    body = text[start : text.rindex("]")].rstrip() + ",\n"  # the event array alone, unterminated
    path = tmp_path / "bare.json"
    path.write_text(body)
    res = kineto.read(path, "r")
    assert res.counts["kernels"] == 5 and res.counts["region instances"] == 2


def test_not_a_trace_is_refused_with_the_fix(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text('{"hello": 1}')
    with pytest.raises(ImportFormatError, match="traceEvents"):
        kineto.read(p, "r")
    q = tmp_path / "trunc.json"
    q.write_bytes(gzip.compress(step_trace().text()[:300].encode()))
    with pytest.raises(ImportFormatError, match=r"truncated|traceEvents|could not be read"):
        kineto.read(q, "r")
    with pytest.raises(ImportFormatError, match="no trace file"):
        detect_format(tmp_path / "missing.json")
