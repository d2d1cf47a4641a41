"""CUPTI decoding on activity records recorded on the H200 (tests/data/gpu/cases, see README), and the join's values
of the decoded records (the backend decodes raw evidence only; every per-instance value comes from the join)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from recorded_cases import CASES, joined_case
from recorded_cases import per_path as joined_per_path

from argus_lab.backends.cupti import decode as dec
from argus_lab.store import Store

ALL = ("nested", "triton", "two_streams", "graph", "backward", "edge")
_STORES: dict[str, Store] = {}


@pytest.fixture(scope="module", autouse=True)
def _joined_stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    folder = tmp_path_factory.mktemp("cases")
    for case in ("nested", "two_streams", "graph", "edge"):
        _STORES[case] = joined_case(folder, case)
    yield
    _STORES.clear()


def instances(case: str) -> dict[str, list[Any]]:
    return pq.read_table(CASES / case / "instances.parquet").to_pydict()


def evidence(case: str) -> tuple[dict[str, np.ndarray], dict[str, list[Any]]]:
    """The decoded kernel rows of a recorded case, and its region instances."""
    raw = dec.load_raw(CASES / case / "cupti")
    return dec.kernel_table(raw, "r"), instances(case)


def per_path(case: str, signal: str) -> dict[str, list[float]]:
    """The join's inclusive values of ``signal`` for the decoded records of ``case``, by region path."""
    return joined_per_path(_STORES[case], case, signal)


def layouts() -> dict[int, np.dtype]:
    cupti = pytest.importorskip("cupti.cupti")
    meta = json.loads((CASES / "nested" / "buffers" / "layouts.json").read_text())
    return {int(k): getattr(cupti, name) for k, name in meta["layouts"].items()}


@pytest.mark.parametrize("case", ALL)
def test_raw_buffers_decode_to_the_recorded_columns(case: str) -> None:
    folder = CASES / case / "buffers"
    meta = json.loads((folder / "layouts.json").read_text())
    names = {int(k): v for k, v in meta["kernel_names"].items()}
    lay = layouts()
    assert {k: d.itemsize for k, d in lay.items()} == {int(k): v for k, v in meta["itemsize"].items()}
    buffers = [np.fromfile(p, dtype=np.uint8) for p in sorted(folder.glob("buffer*.bin"))]
    raw = dec.decode_buffers(buffers, lay, names.__getitem__)
    recorded = dec.load_raw(CASES / case / "cupti")
    for family, cols in recorded.items():
        assert dec.count(raw[family]) == dec.count(cols), family
        for name, col in cols.items():
            got = raw[family][name]
            if name == "name":
                assert list(got) == list(col)
            else:
                assert np.array_equal(got.astype(np.int64), np.asarray(col, dtype=np.int64)), (family, name)


def test_nested_regions_get_their_kernels_exactly() -> None:
    kernels, inst = evidence("nested")
    assert set(kernels["instance_id"].tolist()) == set(inst["instance_id"])  # every kernel is in a region
    k = per_path("nested", "gpu.kernels")
    assert k == {"outer": [3.0] * 4, "outer/inner": [2.0] * 4}  # matmul + (relu, add) in inner, inclusive
    # inclusive time: outer's gpu.time is its own matmul plus its inner instance's two kernels
    dur = kernels["end_ns"] - kernels["start_ns"]
    parent = dict(zip(inst["instance_id"], inst["parent_instance_id"], strict=True))
    times = dict(
        _STORES["nested"].rows(
            "SELECT instance_id, inclusive FROM instance_values WHERE run_id = 'nested' AND signal = 'gpu.time'"
        )
    )
    assert set(times) == set(inst["instance_id"])
    for iid, t in times.items():
        own = {iid} | {c for c, p in parent.items() if p == iid}
        assert t == pytest.approx(float(dur[np.isin(kernels["instance_id"], list(own))].sum()))
    spans = per_path("nested", "gpu.span")
    assert all(s >= t for s, t in zip(spans["outer"], per_path("nested", "gpu.time")["outer"], strict=True))


def test_kernel_launch_metadata_is_kept() -> None:
    kernels, _ = evidence("nested")
    sgemm = kernels["name"] == "_ZN7cutlass7Kernel2I43cutlass_80_simt_sgemm_256x128_8x4_nn_align1EEvNT_6ParamsE"
    assert sgemm.sum() == 4
    assert set(kernels["registers"][sgemm].tolist()) == {202}  # the value gpu-apis.md quotes for this kernel
    assert set(kernels["block_x"][sgemm].tolist()) == {256}
    assert set(kernels["dynamic_smem"][sgemm].tolist()) == {49152}
    assert (kernels["api_start_ns"] > 0).all()
    assert (kernels["api_start_ns"] < kernels["start_ns"]).all()  # launched on the host before it ran


def test_ordinals_number_kernels_within_their_instance_in_launch_order() -> None:
    kernels, inst = evidence("nested")
    path_of = dict(zip(inst["instance_id"], inst["path"], strict=True))
    for iid in inst["instance_id"]:
        sel = kernels["instance_id"] == iid
        assert sorted(kernels["ordinal"][sel].tolist()) == list(range(int(sel.sum())))
        if path_of[iid] == "outer/inner":
            names = kernels["name"][sel][np.argsort(kernels["ordinal"][sel])]
            assert "clamp" in names[0]
            assert "CUDAFunctor_add" in names[1]


def test_two_streams_overlap_so_time_exceeds_span() -> None:
    t = per_path("two_streams", "gpu.time")
    s = per_path("two_streams", "gpu.span")
    assert all(ti > si for ti, si in zip(t["two_streams"], s["two_streams"], strict=True))
    k = per_path("two_streams", "gpu.kernels")
    assert k["two_streams/s1"] == [2.0] * 3
    assert k["two_streams/s2"] == [2.0] * 3
    kernels, _ = evidence("two_streams")
    assert len(set(kernels["stream_id"].tolist())) == 2


def test_graph_replays_inherit_the_region_of_their_launch() -> None:
    kernels, _ = evidence("graph")
    assert per_path("graph", "gpu.kernels") == {"graph": [6.0] * 3}
    assert (kernels["graph_id"] > 0).all()
    # three kernels share each cudaGraphLaunch correlation id; the key tells them apart
    assert len(set(kernels["correlation_id"].tolist())) == 6
    assert len(set(kernels["kernel_key"].tolist())) == 18
    # launch overhead counts each cudaGraphLaunch once, not once per kernel
    lo = per_path("graph", "gpu.launch_overhead")["graph"]
    assert len(lo) == 3
    api = kernels["api_end_ns"] - kernels["api_start_ns"]
    by_corr = {c: a for c, a in zip(kernels["correlation_id"].tolist(), api.tolist(), strict=True)}
    assert sum(lo) == pytest.approx(sum(by_corr.values()))


def test_backward_kernels_from_the_autograd_thread_carry_no_instance_id() -> None:
    """Raw evidence: autograd's thread pushed no external correlation id, so its launches carry none (the join
    then classes them; see test_join_recorded.test_autograd_backward_thread_is_temporal)."""
    kernels, inst = evidence("backward")
    carried = kernels["instance_id"] != 0
    assert int((~carried).sum()) == 45
    main = {t & 0xFFFFFFFF for t in inst["thread_id"]}
    assert {int(t) & 0xFFFFFFFF for t in kernels["thread_id"][~carried].tolist()}.isdisjoint(main)
    assert {int(t) & 0xFFFFFFFF for t in kernels["thread_id"][carried].tolist()} <= main
    assert dec.summarize(kernels)["no_instance_id"] == 45


def test_edge_cases_empty_region_outside_kernel_async_tail_and_copies() -> None:
    kernels, inst = evidence("edge")
    k = per_path("edge", "gpu.kernels")
    assert k["host_only"] == [0.0] * 3
    assert "host_only" not in per_path("edge", "gpu.span")  # no kernel, no span
    outside = [n for n, i in zip(kernels["name"], kernels["instance_id"].tolist(), strict=True) if not i]
    assert len(outside) == 3
    assert all("cos" in n for n in outside)
    path_of = dict(zip(inst["instance_id"], inst["path"], strict=True))
    end_of = dict(zip(inst["instance_id"], inst["end_ns"], strict=True))
    tail_k = [
        (e, end_of[i])
        for i, e in zip(kernels["instance_id"].tolist(), kernels["end_ns"].tolist(), strict=True)
        if i and path_of[i] == "tail"
    ]
    assert all(e > x for e, x in tail_k)
    copied = {p: v for p, v in per_path("edge", "gpu.memcpy_bytes").items() if any(v)}
    assert copied == {"copies": [float(2 * 16 << 20)] * 3}
    set_ = {p: v for p, v in per_path("edge", "gpu.memset_bytes").items() if any(v)}
    assert set_ == {"copies": [float(16 << 20)] * 3}
    kinds = set(kernels["kind"].tolist())
    assert kinds == {"kernel", "memcpy", "memset"}
    names = set(kernels["name"][kernels["kind"] == "memcpy"].tolist())
    assert names == {"memcpy HtoD", "memcpy DtoH"}


def test_kernel_rows_store_and_read_back(tmp_path: Path) -> None:
    kernels, _ = evidence("nested")
    store = Store(tmp_path / "s.duckdb")
    store.write({"kernels": dec.store_kernels(kernels)})
    rows = store.rows("SELECT count(*), count(instance_id), min(ordinal) FROM kernels WHERE kind = 'kernel'")
    assert rows == [(12, 12, 0)]
    tot = store.rows("SELECT sum(end_ns - start_ns) FROM kernels WHERE kind = 'kernel'")[0][0]
    assert tot == int((kernels["end_ns"] - kernels["start_ns"]).sum())


def test_walk_rejects_unknown_kinds_and_overruns_synthetic() -> None:
    # SYNTHETIC: hand-built buffers for the error paths
    buf = np.zeros(24, dtype=np.uint8)
    buf[:4] = np.frombuffer(np.uint32(77).tobytes(), dtype=np.uint8)
    with pytest.raises(ValueError, match="unknown kind"):
        dec.walk_records(buf, {39: 24})
    buf[:4] = np.frombuffer(np.uint32(39).tobytes(), dtype=np.uint8)
    with pytest.raises(ValueError, match="overran"):
        dec.walk_records(buf, {39: 40})
    kinds, offs = dec.walk_records(buf, {39: 24})
    assert kinds.tolist() == [39]
    assert offs.tolist() == [0]


def test_decode_falls_back_to_offsets_when_the_walk_fails_synthetic() -> None:
    # SYNTHETIC: a record of a kind without a layout (CUPTI may add kinds) forces the fallback walk
    lay = layouts()
    rec = np.zeros(1, dtype=lay[39])
    rec["kind"], rec["external_kind"], rec["external_id"], rec["correlation_id"] = 39, 5, 7, 11
    odd = np.zeros(16, dtype=np.uint8)
    odd[:4] = np.frombuffer(np.uint32(99).tobytes(), dtype=np.uint8)
    buf = np.frombuffer(rec.tobytes() + odd.tobytes(), dtype=np.uint8)
    raw = dec.decode_buffers([buf], lay, str, offsets_of=lambda b: np.asarray([0, 24]))
    assert raw["external"]["external_id"].tolist() == [7]
    with pytest.raises(ValueError, match="unknown kind"):
        dec.decode_buffers([buf], lay, str)


def test_empty_run_gives_empty_tables() -> None:
    raw = {f: dec.empty_family(f) for f in dec.FAMILY_FIELDS}
    kernels = dec.kernel_table(raw, "r")
    assert all(len(v) == 0 for v in kernels.values())
    assert set(kernels) >= set(dec.KERNEL_COLUMNS)


def test_thread_ids_widen_to_the_region_threads() -> None:
    kernels, inst = evidence("backward")
    wide = dec.widen_thread_ids(kernels, inst["thread_id"])
    main = set(inst["thread_id"])
    attributed = {int(t) for t, i in zip(wide["thread_id"].tolist(), wide["instance_id"].tolist(), strict=True) if i}
    assert attributed == main  # the full threading.get_ident() of the thread that opened the regions
    others = {int(t) for t, i in zip(wide["thread_id"].tolist(), wide["instance_id"].tolist(), strict=True) if not i}
    assert others
    assert all(t < 2**32 for t in others)  # autograd's thread opened no region: CUPTI's 32-bit value stays
