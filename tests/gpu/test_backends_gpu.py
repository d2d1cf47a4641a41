"""GPU tests of the backends (run on the H200 through scripts/gpu-check; deselected elsewhere)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from argus_lab.model.batches import as_arrow
from argus_lab.regions import Recorder, region
from argus_lab.regions.instance_columns import as_values
from argus_lab.run.protocols import RunContext

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]


def _nested(torch: Any, a: Any, b: Any) -> None:
    with region("outer"):
        c = a @ b
        with region("inner"):
            torch.relu(c).add_(a)


def test_cupti_tags_kernels_with_their_region_instance(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from argus_lab.backends.cupti.collector import CuptiCollector

    a = torch.randn(1024, 1024, device="cuda")
    b = torch.randn(1024, 1024, device="cuda")
    _nested(torch, a, b)
    torch.cuda.synchronize()
    coll = CuptiCollector()
    coll.start(RunContext("t", ("gpu.time",), {}, tmp_path))
    rec = Recorder("t", coll.hooks())
    with rec:
        for _ in range(3):
            _nested(torch, a, b)
    coll.stop()
    inst = {k: as_values(v) for k, v in rec.columns().items()}  # Python values: the columns are arrays
    ev = coll.evidence(inst)
    k = as_arrow(ev["kernels"])  # the collector hands its kernels as batches
    path_of = dict(zip(inst["instance_id"], inst["path"], strict=True))
    ids = k["instance_id"].to_pylist()  # an Arrow column: NULL where a kernel carried no instance id
    inner = [i for i in ids if i and path_of[i] == "outer/inner"]
    assert len(inner) == 2 * 3  # relu + add per instance
    outer_only = [i for i in ids if i and path_of[i] == "outer"]
    assert len(outer_only) >= 3  # the matmul kernel(s)
    assert coll.layouts, f"raw activity buffers were not used: {coll.notes}"
    assert coll.dropped == 0
    assert coll.completed_during_run == 0
    assert "metrics" not in ev and "attributions" not in ev  # raw evidence only: the join makes the values
    from argus_lab import join
    from argus_lab.store import Store

    store = Store(tmp_path / "joined.duckdb")
    runs = {"run_id": ["t"], "plan_index": [0], "backends": [["cupti"]], "status": ["ok"]}
    store.write({"runs": runs, "region_instances": {**inst, "run_id": ["t"] * len(inst["instance_id"])}, **ev})
    join.attribute_request(store, ["t"])
    n_outer = [
        v
        for (v,) in store.rows(
            "SELECT v.inclusive FROM instance_values v JOIN region_instances i USING (run_id, instance_id) "
            "WHERE i.path = 'outer' AND v.signal = 'gpu.kernels'"
        )
    ]
    assert len(n_outer) == 3
    assert all(v == len(outer_only) / 3 + 2 for v in n_outer)
    starts, ends = k["start_ns"].to_pylist(), k["end_ns"].to_pylist()
    assert all(s < e for s, e in zip(starts, ends, strict=True))
    regs, kinds = k["registers"].to_pylist(), k["kind"].to_pylist()
    assert all(r > 0 for r, kind in zip(regs, kinds, strict=True) if kind == "kernel")


def test_cupti_refuses_a_second_collector(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from argus_lab.backends.cupti.collector import CuptiCollector
    from argus_lab.errors import CollectorBusyError

    first = CuptiCollector()
    first.start(RunContext("a", (), {}, tmp_path))
    try:
        with pytest.raises(CollectorBusyError, match="already active"):
            CuptiCollector().start(RunContext("b", (), {}, tmp_path))
    finally:
        first.stop()


def test_cupti_says_torch_profiler_holds_cupti(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import torch
        from pathlib import Path
        from argus_lab.run.protocols import RunContext
        from argus_lab.backends.cupti.collector import CuptiCollector
        from argus_lab.errors import CollectorBusyError
        x = torch.ones(8, device="cuda")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
            try:
                CuptiCollector().start(RunContext("p", (), {}, Path(".")))
            except CollectorBusyError as exc:
                print("BUSY:", exc)
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT)
    assert "BUSY:" in res.stdout, res.stdout + res.stderr
    assert "torch.profiler" in res.stdout


def test_nvml_samples_every_signal(tmp_path: Path) -> None:
    from argus_lab.backends.nvml import SIGNALS, NvmlSampler

    s = NvmlSampler()
    s.start(RunContext("n", (), {"interval_s": 0.01}, tmp_path))
    t0 = time.time_ns()
    time.sleep(0.2)
    t1 = time.time_ns()
    s.stop()
    ev = s.evidence({"instance_id": [1], "start_ns": [t0], "end_ns": [t1]})
    assert set(ev["samples"]["signal"]) == set(SIGNALS)
    assert len(ev["samples"]["t_ns"]) >= 6 * 5
    assert {"start", "end"} <= set(s.clocks)
    assert "metrics" not in ev  # raw samples only: the join makes the per-instance values


def test_compiler_facts_of_a_triton_kernel(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    sys.path.insert(0, str(ROOT / "examples" / "gpu"))
    import triton_add

    from argus_lab.backends.compiler.collector import CompilerCollector

    state = triton_add.setup(1 << 16)
    k = triton_add.step(state)
    torch.cuda.synchronize()
    c = CompilerCollector()
    c.start(RunContext("c", (), {}, tmp_path))
    c.stop()
    facts = {f.name: f for f in c.facts}
    f = facts["scaled_add_kernel"]
    assert f.registers == k.n_regs
    assert f.binary_hash == k.metadata.hash
    assert f.sass_instructions is not None and f.sass_instructions > 10
    assert f.sass_mix is not None and f.sass_mix.get("global_memory", 0) >= 3


def test_ncu_launcher_profiles_the_regions_kernels(tmp_path: Path) -> None:
    from argus_lab.backends.ncu.launcher import NcuLauncher

    script = tmp_path / "w.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            from argus_lab.regions import Recorder, region
            a = torch.randn(512, 512, device="cuda")
            torch.relu(a)
            with Recorder("w"):
                for _ in range(2):
                    with region("outer"):
                        b = a @ a
                        with region("inner"):
                            torch.relu(b).add_(a)
            torch.cuda.synchronize()
            """
        )
    )
    ctx = RunContext(
        "ncu1",
        ("hw:gpu__time_duration.sum", "hw:launch__registers_per_thread"),
        {"nvtx_include": ["argus@outer/inner/"]},
        tmp_path,
    )
    launcher = NcuLauncher()
    cmd = launcher.command(ctx, [sys.executable, str(script)])
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    ev = launcher.evidence(ctx, {"instance_id": []})
    nk = ev["ncu_kernels"]
    assert nk["path"] == ["outer/inner"] * 4
    assert nk["instance_index"] == [0, 0, 1, 1]
    assert nk["instance_inferred"] == [False] * 4
    assert nk["ordinal"] == [0, 1, 0, 1]
    assert set(ev["metrics"]["signal"]) == {"hw:gpu__time_duration.sum", "hw:launch__registers_per_thread"}


def test_the_inline_idiom_runs_in_c_in_a_timing_run_and_tags_every_kernel(tmp_path: Path) -> None:
    """The README's `with argus_lab.region(...)` in argus_lab.measure: argus_lab.region is the extension's C function
    while the timing run records, and every kernel of a region carries its instance (class exact)."""
    torch = pytest.importorskip("torch")
    import argus_lab
    from argus_lab import regions

    a = torch.randn(1024, 1024, device="cuda")
    b = torch.randn(1024, 1024, device="cuda")
    seen: list[bool] = []

    def step() -> None:
        seen.append(argus_lab.region is not regions.region)
        with argus_lab.region("outer"):
            c = a @ b
            with argus_lab.region("inner"):
                torch.relu(c).add_(a)

    report = argus_lab.measure(step, "gpu.time,gpu.kernels", repeat=3, warmup=1, store=str(tmp_path / "s.duckdb"))
    assert seen and all(seen), "argus_lab.region was the Python function during the timing run"
    assert argus_lab.region is regions.region  # put back when the run stopped
    store = report.store
    rows = store.rows(
        "SELECT v.inclusive, v.w_exact FROM instance_values v JOIN region_instances i USING (run_id, instance_id) "
        "WHERE v.signal = 'gpu.kernels' AND i.path = 'outer/inner'"
    )
    assert len(rows) >= 3 and all(n == w == 2 for n, w in rows), rows  # relu + add, both exact, every instance
    classes = dict(store.rows("SELECT class, count(*) FROM attributions WHERE evidence = 'kernel' GROUP BY class"))
    assert classes.get("exact", 0) >= 3 * 3 and set(classes) <= {"exact", "unattributed"}, classes


def _probe_run(torch: Any, tmp_path: Path, identity: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """One collector run of `_nested` x 3 with the given launch identity, plus a thread with no region that launches
    while the main thread's `outer` is open (it waits on an event the main thread sets inside the region)."""
    import threading

    from argus_lab.backends.cupti.collector import CuptiCollector

    a = torch.randn(1024, 1024, device="cuda")
    b = torch.randn(1024, 1024, device="cuda")
    _nested(torch, a, b)
    torch.cuda.synchronize()
    go, done = threading.Event(), threading.Event()

    def worker() -> None:  # no region on this thread
        go.wait(30)
        torch.sigmoid(a)
        torch.cuda.synchronize()
        done.set()

    coll = CuptiCollector()
    coll.start(RunContext(f"p-{identity}", ("gpu.time",), {"launch_identity": identity}, tmp_path))
    rec = Recorder(f"p-{identity}", coll.hooks())
    t = threading.Thread(target=worker)
    t.start()
    with rec:
        for _ in range(3):
            _nested(torch, a, b)
        with region("shared"):
            go.set()
            done.wait(30)
    t.join()
    coll.stop()
    inst = {k: as_values(v) for k, v in rec.columns().items()}  # Python values: the columns are arrays
    return coll, inst, as_arrow(coll.evidence(inst)["kernels"])


def _joined(tmp_path: Path, name: str, inst: dict[str, Any], kernels: dict[str, Any], threads: Any) -> list[Any]:
    """(path, instance index, class, kernel name) of every kernel record after the join, in launch order."""
    from argus_lab import join
    from argus_lab.run.driver import _columns
    from argus_lab.store import Store

    st = Store(tmp_path / f"{name}.duckdb")
    cols = _columns(dict(inst), name, 0)
    st.write({"runs": {"run_id": [name], "backends": [["cupti"]], "status": ["ok"]}, "region_instances": cols,
              "kernels": kernels, "threads": threads})  # fmt: skip
    join.attribute_request(st, [name])
    return st.rows(
        "SELECT coalesce(i.path, ''), coalesce(i.instance_index, -1), a.class, k.name FROM attributions a "
        "JOIN kernels k ON k.run_id = a.run_id AND k.kernel_key = a.evidence_id "
        "LEFT JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id "
        "WHERE a.run_id = ? AND a.evidence = 'kernel' ORDER BY k.correlation_id, k.start_ns",
        [name],
    )


def test_boundary_probes_and_the_clock_place_kernels_like_the_callback_but_never_exactly(tmp_path: Path) -> None:
    """The launch callback (the default) records each launch on its thread: the main thread's kernels are exact in
    their instances, and the region-less worker's kernel is unattributed (a thread with no region of its own is not
    given another thread's).  The probes and the clock, which cannot tell the launching thread, put the main
    thread's kernels in the same instances but as temporal, and the worker's in the one region open then."""
    torch = pytest.importorskip("torch")
    got = {}
    for identity in ("clock", "probes", "callbacks"):
        coll, inst, k = _probe_run(torch, tmp_path, identity)
        ev = coll.evidence(inst)
        assert identity == "callbacks" or not any(k["instance_id"].to_pylist()), (
            "probes/clock must not carry instance ids"
        )
        got[identity] = (coll, _joined(tmp_path, f"p-{identity}", inst, ev["kernels"], ev["threads"]))
    probes, callbacks, clock = got["probes"], got["callbacks"], got["clock"]
    assert probes[0].launch_path == "native probes", probes[0].notes
    assert callbacks[0].launch_path == "native", callbacks[0].notes
    assert clock[0].launch_path == "native clock", clock[0].notes
    main_c = [(p, i, n) for p, i, c, n in callbacks[1] if "sigmoid" not in n]
    assert {c for _, _, c, n in callbacks[1] if "sigmoid" not in n} == {"exact"}
    assert len([r for r in main_c if r[0] == "outer/inner"]) == 2 * 3
    for other in (probes, clock):
        assert [(p, i, n) for p, i, c, n in other[1] if "sigmoid" not in n] == main_c
        assert {c for _, _, c, n in other[1]} == {"temporal"}, other[1]
        assert [p for p, _, _, n in other[1] if "sigmoid" in n] == ["shared"]
    assert [(p, c) for p, _, c, n in callbacks[1] if "sigmoid" in n] == [("", "unattributed")]
    order = probes[0].launch_order
    assert order["probes"] >= 2 * (3 * 2 + 1), order  # one per boundary (+ the one at start)
    assert order["with regions open on several threads"] == 0, order
    c_order = clock[0].launch_order
    assert c_order["boundary rows"] >= 2 * (3 * 2 + 1) and c_order["without a queued stamp"] == 0, c_order


def test_the_clock_places_graph_replays_through_the_graph_launch_callback(tmp_path: Path) -> None:
    """Kernels of a CUDA graph replay: the clock's graph-launch callback gives each replay's kernels the instance
    open at that replay, `exact`, like any other launch."""
    torch = pytest.importorskip("torch")
    from argus_lab.backends.cupti.collector import CuptiCollector

    a = torch.randn(512, 512, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            torch.relu(a @ a).add_(a)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = torch.relu(a @ a).add_(a)
    torch.cuda.synchronize()
    coll = CuptiCollector()
    coll.start(RunContext("graph-clock", ("gpu.time",), {"launch_identity": "clock"}, tmp_path))
    rec = Recorder("graph-clock", coll.hooks())
    with rec:
        for _ in range(3):
            with region("replay"):
                g.replay()
        with region("eager"):
            torch.relu(a @ a).add_(a)
        torch.cuda.synchronize()
    coll.stop()
    del out
    inst = {k: as_values(v) for k, v in rec.columns().items()}  # Python values: the columns are arrays
    k = as_arrow(coll.evidence(inst)["kernels"])
    assert coll.launch_path == "native clock", coll.notes
    order = coll.launch_order
    path_of = dict(zip(inst["instance_id"], inst["path"], strict=True))
    index_of = dict(zip(inst["instance_id"], inst["instance_index"], strict=True))
    placed = [(path_of.get(i, ""), index_of.get(i, -1)) for i in k["instance_id"].to_pylist()]
    replays = [p for p in placed if p[0] == "replay"]
    print("graph clock:", order, sorted(set(placed)), file=sys.stderr)
    assert order["graph launches"] >= 3 and order["launched by a graph launch"] == len(replays), order
    assert sorted({i for _, i in replays}) == [0, 1, 2] and len(replays) % 3 == 0, placed
    # the eager kernels carry no instance: the clock does not know their thread (the join places them, temporal)
    eager = [p for p in placed if p[0] != "replay"]
    assert eager and set(eager) == {("", -1)}, placed
