"""Importing Nsight Systems exports (SYNTHETIC SQLite in the documented schema) and Nsight Compute reports
(the .ncu-rep recorded on the H200, tests/data/gpu/ncu/triton_nested.ncu-rep)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nsys_synth import NsysExport

from argus_lab.app.importing import import_trace
from argus_lab.errors import BackendUnavailableError, ImportFormatError
from argus_lab.importers import detect_format, nsys
from argus_lab.store import Store

DATA = Path(__file__).parent / "data"
E = 1_795_938_194_000_000_000


def export() -> NsysExport:
    """SYNTHETIC: argus-domain ranges step > attn, a default-domain range, three launches."""
    x = NsysExport(epoch_ns=E)
    x.domain("argus", 1)
    x.range("step", 1_000, 100_000, domain_id=1)
    x.range("attn", 2_000, 50_000, domain_id=1)
    x.range("torch_range", 2_000, 50_000, domain_id=0)
    x.launch("k0", 3_000, 10_000, 10_001)
    x.launch("k1", 60_000, 70_000, 70_000)
    x.launch("k2", 200_000, 210_000, 210_500)
    return x


def test_nsys_ranges_and_kernels(tmp_path: Path) -> None:
    path = export().write(tmp_path / "r.sqlite")
    assert detect_format(path) == "nsys"
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(path, st)
    inst = st.rows("SELECT path, start_ns, end_ns FROM region_instances WHERE run_id = ? ORDER BY 2", [res.run_id])
    # only the argus domain's ranges; session times shifted to the epoch
    assert inst == [("step", E + 1_000, E + 100_000), ("step/attn", E + 2_000, E + 50_000)]
    got = st.rows(
        "SELECT k.name, k.end_ns - k.start_ns, a.class, i.path FROM kernels k "
        "JOIN attributions a ON a.run_id = k.run_id AND a.evidence_id = k.kernel_key "
        "LEFT JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id "
        "WHERE k.run_id = ? ORDER BY k.start_ns",
        [res.run_id],
    )
    assert got == [("k0", 1, "exact", "step/attn"), ("k1", 0, "exact", "step"), ("k2", 500, "unattributed", None)]


def test_nsys_default_domain(tmp_path: Path) -> None:
    """``domain="default"``: the ranges pushed without a domain (torch.cuda.nvtx), which no event creates."""
    path = export().write(tmp_path / "r.sqlite")
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(path, st, domain="default")
    inst = st.rows("SELECT path, start_ns FROM region_instances WHERE run_id = ?", [res.run_id])
    assert inst == [("torch_range", E + 2_000)]
    got = st.rows(
        "SELECT k.name, a.class FROM kernels k JOIN attributions a ON a.evidence_id = k.kernel_key "
        "WHERE k.run_id = ? ORDER BY k.start_ns",
        [res.run_id],
    )
    assert got == [("k0", "exact"), ("k1", "unattributed"), ("k2", "unattributed")]


def test_nsys_other_domain_and_errors(tmp_path: Path) -> None:
    path = export().write(tmp_path / "r.sqlite")
    with pytest.raises(ImportFormatError, match="no NVTX domain 'nope'"):
        nsys.read(path, "r", domain="nope")
    empty = tmp_path / "x.sqlite"
    import sqlite3

    sqlite3.connect(empty).execute("CREATE TABLE t (a INT)").connection.commit()
    with pytest.raises(ImportFormatError, match="not an Nsight Systems SQLite export"):
        nsys.read(empty, "r")
    rep = tmp_path / "r.nsys-rep"
    rep.write_bytes(b"not really")
    with pytest.raises(BackendUnavailableError, match="nsys"):
        nsys.read(rep, "r", nsys="/nonexistent/nsys")


def test_ncu_rep_recorded_on_h200(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    report = DATA / "gpu" / "ncu" / "triton_nested.ncu-rep"
    expected = json.loads((DATA / "gpu" / "ncu" / "triton_nested.expected.json").read_text())
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(report, st)
    inst = st.rows(
        "SELECT i.path, i.instance_index, p.path FROM region_instances i "
        "LEFT JOIN region_instances p ON p.run_id = i.run_id AND p.instance_id = i.parent_instance_id "
        "WHERE i.run_id = ? ORDER BY i.instance_id",
        [res.run_id],
    )
    assert inst == [("outer", 0, None), ("outer/inner", 0, "outer"), ("outer", 1, None), ("outer/inner", 1, "outer")]
    att = st.rows("SELECT class, count(*) FROM attributions WHERE run_id = ? AND evidence = 'ncu_kernel' GROUP BY 1",
                  [res.run_id])  # fmt: skip
    assert att == [("exact", len(expected))]  # argus ranges carried their instance index as payload
    t = st.rows(
        "SELECT i.path, i.instance_index, v.exclusive FROM instance_values v JOIN region_instances i "
        "USING (run_id, instance_id) WHERE v.run_id = ? AND v.signal = 'hw:gpu__time_duration.sum' ORDER BY 1, 2",
        [res.run_id],
    )
    want: dict[tuple[str, int], float] = {}
    for k in expected:
        key = (k["path"], k["instance_index"])
        want[key] = want.get(key, 0.0) + k["metrics"]["gpu__time_duration.sum"][0]
    assert {(p, i): v for p, i, v in t} == want
