"""The native per-launch CUPTI path: it builds here, its C callback records what CUPTI would hand it, and its
launch records join exactly like the API + external-correlation records the Python path collects.

No GPU here: the callback is driven through the module's ``simulate()`` entry (SYNTHETIC calls), and the join
equivalence uses the activity records recorded on the H200 (tests/data/gpu/cases), with the launch records the
native callback would have written derived from the recorded API records.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from argus_lab.backends.cupti import decode as dec
from argus_lab.backends.cupti import native
from argus_lab.backends.cupti.collector import boundaries_setting
from argus_lab.errors import BackendUnavailableError

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "gpu" / "cases"
RUNTIME, DRIVER, ENTER, EXIT = 2, 1, 0, 1


@pytest.fixture(scope="module")
def module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    os.environ["ARGUS_NATIVE_CACHE"] = str(tmp_path_factory.mktemp("native-cache"))
    native.build.cache_clear()
    try:
        built = native.build()
        assert built.module is not None, built.note
        yield built.module
    finally:
        del os.environ["ARGUS_NATIVE_CACHE"]
        native.build.cache_clear()


def test_the_c_source_compiles_once_and_is_then_cached(module: ModuleType) -> None:
    first = native.build()
    assert "compiled in" in first.note
    assert Path(first.path).exists()
    assert Path(first.path).name == f"{native.MODULE_NAME}-{native.build_key(native.SOURCE.read_bytes())}.so"
    native.build.cache_clear()
    again = native.build()
    assert again.path == first.path
    assert again.note.endswith("(cached)")


def test_a_missing_compiler_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CC", "no-such-cc")
    with pytest.raises(native.NativeUnavailable, match="no C compiler"):
        native.compile_module(tmp_path / "x.so")


def test_disabled_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARGUS_NATIVE", "0")
    native.build.cache_clear()
    try:
        built = native.build()
    finally:
        native.build.cache_clear()
    assert built.module is None
    assert "ARGUS_NATIVE=0" in built.note


def records_of(module: ModuleType) -> native.LaunchRecords:
    return native.LaunchRecords.from_export(module.export())


def test_each_launch_carries_its_threads_current_instance_synthetic(module: ModuleType) -> None:
    module.allocate(16)
    module.set_current(7)
    module.simulate(RUNTIME, 211, ENTER, 100)  # cudaLaunchKernel ...
    module.simulate(DRIVER, 307, ENTER, 100)  # ... calls cuLaunchKernel inside: not recorded (same kernel)
    module.simulate(DRIVER, 307, EXIT, 100)
    module.simulate(RUNTIME, 211, EXIT, 100)
    seen: dict[str, int] = {}

    def other_thread() -> None:  # a thread with no region open (an autograd worker)
        module.simulate(DRIVER, 307, ENTER, 101)
        module.simulate(DRIVER, 307, EXIT, 101)
        seen["ident"] = threading.get_ident()
        seen["current"] = module.current()

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    module.set_current(0)
    module.simulate(RUNTIME, 211, ENTER, 102)
    module.simulate(RUNTIME, 211, EXIT, 102)
    r = records_of(module)
    assert r.correlation.tolist() == [100, 101, 102]
    assert r.instance.tolist() == [7, 0, 0]
    assert seen["current"] == 0  # the instance id is per thread
    main = threading.get_ident()
    assert r.thread.tolist() == [main, seen["ident"], main]  # the full pthread_self(), like get_ident()
    assert r.domain.tolist() == [RUNTIME, DRIVER, RUNTIME]
    assert r.cbid.tolist() == [211, 307, 211]
    assert (r.end >= r.start).all() and (r.end > 0).all()  # every exit was seen
    assert r.dropped == 0


def test_only_the_outermost_launch_call_of_a_thread_is_recorded_synthetic(module: ModuleType) -> None:
    """A runtime launch calls the driver inside it; the kernel carries the runtime call's correlation id (CUPTI's
    activity API records no such nested driver call either: tests/data/gpu/cases), so the nested call is skipped
    and the outer call's exit time still lands in the outer call's row."""
    module.allocate(16)
    module.set_current(5)
    module.simulate(RUNTIME, 211, ENTER, 200)
    module.simulate(DRIVER, 307, ENTER, 201)
    module.simulate(DRIVER, 307, EXIT, 201)
    module.simulate(RUNTIME, 211, EXIT, 200)
    module.simulate(DRIVER, 307, ENTER, 202)  # a driver launch of its own (Triton, cuBLAS): recorded
    module.simulate(DRIVER, 307, EXIT, 202)
    r = records_of(module)
    assert r.correlation.tolist() == [200, 202]
    assert r.domain.tolist() == [RUNTIME, DRIVER]
    assert (r.end > 0).all()


def test_recorded_kernels_carry_the_correlation_of_the_outermost_launch_call() -> None:
    """What the skip relies on, in the activity records recorded on the H200: every kernel's correlation id is one
    of a recorded API call, and no recorded driver call lies inside a runtime call of the same thread."""
    for case in ("nested", "triton", "two_streams", "graph", "backward", "edge"):
        raw = dec.load_raw(CASES / case / "cupti")
        api, kernel = raw["api"], raw["kernel"]
        assert set(kernel["correlation_id"].tolist()) <= set(api["correlation_id"].tolist()), case
        runtime = api["kind"] == 5
        for i in np.nonzero(~runtime)[0].tolist():
            inside = (
                runtime
                & (api["thread_id"] == api["thread_id"][i])
                & (api["start"] <= api["start"][i])
                & (api["end"] >= api["end"][i])
            )
            assert not inside.any(), (case, i)


def test_start_names_the_modes(module: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"mode must be 1 .* 3 \(empty callbacks\)"):
        module.start("libcupti.so", [], [], 1, 4)


def test_launches_past_the_capacity_are_counted_not_written_synthetic(module: ModuleType) -> None:
    module.allocate(2)
    module.set_current(3)
    for corr in range(5):
        module.simulate(RUNTIME, 211, ENTER, corr)
        module.simulate(RUNTIME, 211, EXIT, corr)
    module.simulate(RUNTIME, 211, EXIT, 99)  # an exit whose entry came before the subscription: ignored
    r = records_of(module)
    assert (len(r), r.dropped) == (2, 3)
    assert r.correlation.tolist() == [0, 1]


def test_set_current_needs_an_integer(module: ModuleType) -> None:
    with pytest.raises(TypeError):
        module.set_current("7")


def test_launch_callback_ids_come_from_cupti_python() -> None:
    cupti = pytest.importorskip("cupti.cupti")
    runtime, driver = native.callback_ids(cupti)
    names_r = {cupti.runtime_api_trace_cbid(v).name for v in runtime}
    names_d = {cupti.driver_api_trace_cbid(v).name for v in driver}
    assert {"cudaLaunchKernel_v7000", "cudaLaunchKernelExC_v11060", "cudaGraphLaunch_v10000"} <= names_r
    assert {"cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cuGraphLaunch"} <= names_d
    assert not any("HostFunc" in n or "Memcpy" in n for n in names_r | names_d)
    runtime2, driver2 = native.callback_ids(cupti, copies=True, sets=True)
    extra = {cupti.runtime_api_trace_cbid(v).name for v in runtime2} - names_r
    assert {"cudaMemcpyAsync_v3020", "cudaMemsetAsync_v3020"} <= extra
    assert any(cupti.driver_api_trace_cbid(v).name.startswith("cuMemcpy") for v in driver2)


def test_start_refuses_a_libcupti_that_is_not_loaded(module: ModuleType, tmp_path: Path) -> None:
    path = native.NativeLaunchPath(native.build())
    with pytest.raises(native.NativeUnavailable, match="not loaded in this process"):
        path.start(str(tmp_path / "libcupti.so.13"), pytest.importorskip("cupti.cupti"), copies=False, sets=False)
    assert path.mode == ""


@pytest.mark.parametrize("identity", ["probes", "clock"])
def test_without_a_driver_cupti_refuses_the_subscriber_and_the_collector_keeps_the_python_path(
    module: ModuleType, identity: str
) -> None:
    pytest.importorskip("cupti.cupti")
    code = """
import ctypes, json, sys
from pathlib import Path
import nvidia.cu13
from cupti import cupti
from argus_lab.backends.cupti import native
lib = str(Path(nvidia.cu13.__path__[0]) / "lib" / "libcupti.so.13")
ctypes.CDLL(lib)  # loaded, as cupti-python would have done; this machine has no CUDA driver
choice = native.choose(cupti, {"launch_identity": sys.argv[1]}, ["gpu.time"], lib)
print(json.dumps({"name": choice.name, "api_records": choice.api_records, "notes": list(choice.notes),
                  "path": choice.path is not None}))
if choice.path is not None:
    choice.path.stop()
"""
    pytest.importorskip("nvidia.cu13")
    env = dict(os.environ, PYTHONPATH=str(ROOT), ARGUS_NATIVE_CACHE=os.environ["ARGUS_NATIVE_CACHE"])
    proc = subprocess.run([sys.executable, "-c", code, identity], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if identity == "clock":  # CUPTI's clock needs a driver too; then the same chain as the probes'
        assert out["notes"].pop(0).startswith("CUPTI's clock unavailable (cuptiGetTimestamp returned CUPTI error ")
    # the boundary probes need libcuda (absent here), then the launch callback needs a driver
    assert out["notes"][0].startswith("boundary probes unavailable (no boundary probe works (cuDriverGetVersion: ")
    assert "libcuda.so.1 is not loaded" in out["notes"][0]
    assert "cuptiSubscribe returned CUPTI error" in out["notes"][1]
    # the fallback that pushes external correlation ids from C needs no subscriber
    assert (out["name"], out["api_records"], out["path"]) == ("native external correlation", True, True)


def test_launch_path_setting_is_checked() -> None:
    with pytest.raises(BackendUnavailableError, match="launch_path must be 'native' or 'python'"):
        native.choose(object(), {"launch_path": "fast"}, [], "")
    assert native.choose(object(), {"launch_path": "python"}, [], "").name == "python"
    assert native.choose(object(), {"kinds": ["CONCURRENT_KERNEL"]}, [], "").name == "python"
    with pytest.raises(BackendUnavailableError, match="native_callback must be 'record' or 'empty'"):
        native.choose(object(), {"native_callback": "none"}, [], "")
    with pytest.raises(BackendUnavailableError, match="callback_domains must be 'both' or 'driver'"):
        native.choose(object(), {"callback_domains": "runtime"}, [], "")
    with pytest.raises(BackendUnavailableError, match="launch_identity must be 'clock', 'probes' or 'callbacks'"):
        native.choose(object(), {"launch_identity": "events"}, [], "")
    assert boundaries_setting({}) == "native" and boundaries_setting({"boundaries": "python"}) == "python"
    with pytest.raises(BackendUnavailableError, match="boundaries must be 'native' or 'python'"):
        boundaries_setting({"boundaries": "c"})


# -- the join does not change -------------------------------------------------------------------------------
def recorded(case: str) -> tuple[dec.Raw, dict[str, list[Any]]]:
    return dec.load_raw(CASES / case / "cupti"), pq.read_table(CASES / case / "instances.parquet").to_pydict()


def native_records_from(raw: dec.Raw, inst: dict[str, list[Any]]) -> native.LaunchRecords:
    """The launch records the native callback would have written for the recorded launches: one per API call,
    with the thread's open instance (what external correlation recorded) and the full thread id."""
    api = raw["api"]
    instance = dec.instance_of(raw["external"], api["correlation_id"].astype(np.int64))
    full = {int(t) & 0xFFFFFFFF: int(t) for t in inst["thread_id"]}
    thread = np.asarray([full.get(int(t) & 0xFFFFFFFF, int(t)) for t in api["thread_id"].tolist()], dtype=np.uint64)
    return native.LaunchRecords(
        correlation=api["correlation_id"].astype(np.int64),
        instance=instance,
        thread=thread,
        start=api["start"].astype(np.int64),
        end=api["end"].astype(np.int64),
        cbid=api["cbid"].astype(np.int64),
        domain=np.where(api["kind"] == 5, 2, 1).astype(np.int64),
    )


@pytest.mark.parametrize("case", ["nested", "triton", "two_streams", "graph", "backward", "edge"])
def test_native_launch_records_join_like_the_recorded_api_and_external_records(case: str) -> None:
    raw, inst = recorded(case)
    before = dec.widen_thread_ids(dec.kernel_table(raw, "r"), inst["thread_id"])
    swapped = dict(raw)
    swapped.update(native.raw_families(native_records_from(raw, inst), 4242))
    after = dec.widen_thread_ids(dec.kernel_table(swapped, "r"), inst["thread_id"])
    for col in ("instance_id", "ordinal", "thread_id", "api_start_ns", "api_end_ns", "correlation_id", "kernel_key"):
        assert after[col].tolist() == before[col].tolist(), col
    assert pa.table(dec.store_kernels(after)).equals(pa.table(dec.store_kernels(before)))  # the rows the join reads


@pytest.mark.parametrize("case", ["nested", "backward"])
def test_untimed_launches_inside_regions_join_to_the_same_instances(case: str) -> None:
    """``launch_clock: outside`` (the default unless a signal times launch calls) reads no clock for a launch made
    inside a region: its kernel must still get the same instance, thread and order, and only its API times go."""
    raw, inst = recorded(case)
    timed = native_records_from(raw, inst)
    inside = timed.instance != 0
    untimed = native.LaunchRecords(
        correlation=timed.correlation,
        instance=timed.instance,
        thread=timed.thread,
        start=np.where(inside, 0, timed.start),
        end=np.zeros_like(timed.end),
        cbid=timed.cbid,
        domain=timed.domain,
    )
    assert inside.any()
    tables = []
    for records in (timed, untimed):
        swapped = dict(raw)
        swapped.update(native.raw_families(records, 4242))
        tables.append(dec.widen_thread_ids(dec.kernel_table(swapped, "r"), inst["thread_id"]))
    before, after = tables
    for col in ("instance_id", "ordinal", "thread_id", "correlation_id", "kernel_key"):
        assert after[col].tolist() == before[col].tolist(), col
    carried = np.asarray([i is not None and i == i and i != 0 for i in after["instance_id"].tolist()])
    api = np.asarray(after["api_start_ns"].tolist(), dtype=float)
    assert (np.nan_to_num(api[carried]) == 0).all()  # kernels of a region: no launch time read
    outside = ~carried & ~np.isnan(api)
    assert (api[outside] > 0).all()  # launches outside every region keep the time the join's rules need


def test_the_callback_reads_the_clock_as_launch_clock_says_synthetic(module: ModuleType) -> None:
    try:
        for reads, expect_start_in, expect_end in ((2, True, True), (1, True, False), (0, False, False)):
            assert module.set_clock_reads(reads) in (-1, 0, 1, 2)
            module.allocate(8)
            module.set_current(7)  # a launch inside a region ...
            module.simulate(DRIVER, 307, ENTER, 100)
            module.simulate(DRIVER, 307, EXIT, 100)
            module.set_current(0)  # ... and one outside every region
            module.simulate(DRIVER, 307, ENTER, 101)
            module.simulate(DRIVER, 307, EXIT, 101)
            r = records_of(module)
            assert r.instance.tolist() == [7, 0]
            assert (r.start[0] > 0) == expect_start_in, reads
            assert r.start[1] > 0, reads  # the join places a launch outside every region by its time
            assert bool((r.end > 0).all()) == expect_end, reads
        with pytest.raises(ValueError, match="clock reads must be -1, 0, 1 or 2"):
            module.set_clock_reads(3)
    finally:
        module.set_clock_reads(2)


def test_launch_clock_setting_is_checked() -> None:
    with pytest.raises(BackendUnavailableError, match="launch_clock must be 'calls', 'entries' or 'outside'"):
        native.choose(object(), {"launch_clock": "never"}, [], "")
    with pytest.raises(BackendUnavailableError, match=r"gpu\.launch_overhead needs; leave launch_clock unset"):
        native.choose(object(), {"launch_clock": "outside"}, ["gpu.time", "gpu.launch_overhead"], "")


def test_raw_families_shapes_synthetic() -> None:
    records = native.LaunchRecords(
        correlation=np.array([5, 5, 6], dtype=np.int64),
        instance=np.array([9, 9, 0], dtype=np.int64),
        thread=np.array([2**45 + 1, 2**45 + 1, 77], dtype=np.uint64),
        start=np.array([100, 110, 200], dtype=np.int64),
        end=np.array([150, 0, 230], dtype=np.int64),  # the driver call's exit was not seen
        cbid=np.array([211, 307, 307], dtype=np.int64),
        domain=np.array([2, 1, 1], dtype=np.int64),
    )
    fam = native.raw_families(records, 31)
    assert set(fam["external"]) == set(dec.FAMILY_FIELDS["external"])
    assert set(fam["api"]) == set(dec.FAMILY_FIELDS["api"])
    assert fam["external"]["external_id"].tolist() == [9, 9]
    assert fam["external"]["correlation_id"].tolist() == [5, 5]
    assert fam["api"]["kind"].tolist() == [5, 4, 4]  # RUNTIME, DRIVER activity kinds
    assert fam["api"]["end"].tolist() == [150, 110, 230]
    assert fam["api"]["thread_id"].tolist() == [2**45 + 1, 2**45 + 1, 77]
    kernel = dec.empty_family("kernel")
    kernel = {k: np.zeros(2, dtype=np.int64) for k in kernel if k != "name"} | {"name": np.array(["a", "b"], object)}
    kernel["correlation_id"] = np.array([5, 6])
    kernel["start"], kernel["end"] = np.array([300, 400]), np.array([350, 420])
    table = dec.kernel_table({"kernel": kernel, **fam}, "r")
    assert table["instance_id"].tolist() == [9, 0]
    assert table["api_start_ns"].tolist() == [100, 200]  # the outer (runtime) call wins
    assert table["api_end_ns"].tolist() == [150, 230]


# -- boundary probes (the default launch identity) ----------------------------------------------------------
def test_each_probe_records_the_threads_new_current_instance_synthetic(module: ModuleType) -> None:
    module.allocate(16)
    module.set_current(4)
    module.probe_simulate(10)  # what the probe a boundary calls records through its callback
    seen: dict[str, int] = {}

    def other_thread() -> None:
        module.set_current(9)
        module.probe_simulate(12)
        seen["ident"] = threading.get_ident()

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    module.set_current(0)
    module.probe_simulate(15)
    r = records_of(module)
    main = threading.get_ident()
    assert r.correlation.tolist() == [10, 12, 15]
    assert r.instance.tolist() == [4, 9, 0]
    assert r.thread.tolist() == [main, seen["ident"], main]
    assert (r.start > 0).all()  # each probe is timed


def probes(rows: list[tuple[int, int, int, int]]) -> native.LaunchRecords:
    """Synthetic probe records: (correlation id, instance, thread, time) per probe."""
    corr, inst, thread, start = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    z = np.zeros(len(rows), dtype=np.int64)
    return native.LaunchRecords(corr, inst, thread.astype(np.uint64), start, z, z, z + 1, probes=True)


def test_a_launch_belongs_to_the_instance_open_when_it_was_numbered_synthetic() -> None:
    # thread 1 opens 7 (corr 10), nests 8 (20), leaves 8 (30) and 7 (40); thread 2 opens 9 (33) and leaves it (50)
    p = probes([(10, 7, 1, 1000), (20, 8, 1, 2000), (30, 7, 1, 3000), (33, 9, 2, 3300), (40, 0, 1, 4000),
                (50, 0, 2, 5000)])  # fmt: skip
    launches = np.array([5, 11, 21, 31, 35, 45, 55])
    placed = native.launch_order(p, launches)
    assert placed.instance.tolist() == [0, 7, 8, 7, 0, 9, 0]
    assert placed.open_threads.tolist() == [0, 1, 1, 1, 2, 1, 0]  # 35: 7 on thread 1 and 9 on thread 2
    assert placed.probe_ns.tolist() == [0, 1000, 2000, 3000, 3300, 4000, 5000]
    assert placed.probe_thread.tolist() == [0, 1, 1, 1, 2, 1, 2]


def test_probe_families_leave_every_launch_to_the_join_never_exact_synthetic() -> None:
    """The probes know which instances were open when a launch was numbered, not which thread launched: every launch
    gets an ``api`` row at the last probe's time on no thread (0), and no ``external`` row (nothing they place is
    ``exact``; the join finds the instances open then)."""
    p = probes([(10, 7, 1, 1000), (30, 9, 2, 3000), (40, 0, 1, 4000), (50, 0, 2, 5000)])
    fam, counts = native.probe_families(p, np.array([11, 11, 31, 45, 55, 3]), 31)  # 11: a graph's two kernels
    assert set(fam["external"]) == set(dec.FAMILY_FIELDS["external"])
    assert set(fam["api"]) == set(dec.FAMILY_FIELDS["api"])
    assert fam["external"]["correlation_id"].tolist() == []
    # 11 (7 open), 31 (7 and 9 open on two threads), 45 (9 open), 55 (nothing open): each at the last probe's time
    assert fam["api"]["correlation_id"].tolist() == [11, 31, 45, 55]
    assert fam["api"]["start"].tolist() == fam["api"]["end"].tolist() == [1000, 3000, 4000, 5000]
    assert fam["api"]["thread_id"].tolist() == [0, 0, 0, 0]
    assert counts == {
        "probes": 4,
        "launches": 5,
        "in one open region": 2,
        "with no region open": 2,
        "with regions open on several threads": 1,
        "before the first probe": 1,
        "after the probe arrays filled": 0,
        "probes dropped": 0,
    }


def joined_classes(
    tmp_path: Path, raw: dec.Raw, inst: dict[str, list[Any]], signals: tuple[str, ...] = ()
) -> dict[int, tuple[int | None, str]]:
    """Correlation id -> (instance, class) of each kernel record after the join, for raw records and instances."""
    import pyarrow as pa

    from argus_lab import join
    from argus_lab.store import Store

    store = Store(tmp_path / "j.duckdb")
    kernels = dec.kernel_table(raw, "r")
    table = pa.table(inst).set_column(list(inst).index("run_id"), "run_id", pa.array(["r"] * len(inst["run_id"])))
    store.write(
        {
            "runs": {"run_id": ["r"], "backends": [["cupti"]], "signals": [list(signals)], "status": ["ok"]},
            "region_instances": table,
            "kernels": dec.store_kernels(kernels),
        }
    )
    join.attribute_request(store, ["r"])
    rows = store.rows(
        "SELECT k.correlation_id, a.instance_id, a.class FROM attributions a JOIN kernels k "
        "ON k.run_id = a.run_id AND k.kernel_key = a.evidence_id WHERE a.run_id = 'r' AND a.evidence = 'kernel' "
        "AND k.kind = 'kernel'"
    )
    return {int(c): (i, str(k)) for c, i, k in rows}


def probes_of_recorded_run(raw: dec.Raw, inst: dict[str, list[Any]]) -> tuple[native.LaunchRecords, dec.Raw]:
    """The probes the boundaries of a recorded run would have made, and its raw records renumbered to fit them.

    Every recorded correlation id c becomes 2c; a boundary at time t gets the odd id after the last API call that
    started before t (CUPTI numbers calls in the order they are made).  Entering an instance makes it current;
    leaving it makes its parent current.  The probes are synthetic; the launches, threads and times are the H200's.
    """
    api = raw["api"]
    order = np.argsort(api["start"], kind="stable")
    starts, corr = api["start"][order], api["correlation_id"][order].astype(np.int64)
    last = np.maximum.accumulate(corr)
    rows = []
    for i, iid in enumerate(inst["instance_id"]):
        for t, current in ((inst["start_ns"][i], iid), (inst["end_ns"][i], inst["parent_instance_id"][i] or 0)):
            k = int(np.searchsorted(starts, t, side="left")) - 1
            rows.append((2 * (int(last[k]) if k >= 0 else 0) + 1, int(current), int(inst["thread_id"][i]), int(t)))
    rows.sort(key=lambda r: r[3])
    renumbered = {f: dict(c) for f, c in raw.items() if f not in ("external", "api")}
    for f in ("kernel", "memcpy", "memset"):
        renumbered[f]["correlation_id"] = raw[f]["correlation_id"].astype(np.int64) * 2
    return probes(rows), renumbered


@pytest.mark.parametrize("case", ["nested", "triton", "two_streams", "graph", "edge", "backward"])
def test_probes_place_recorded_launches_where_the_launch_thread_was_but_never_exactly(
    case: str, tmp_path: Path
) -> None:
    """On the recorded runs, every launch the probes place goes, through the join, to the instance its launching
    thread had open (the per-thread truth of the recorded external correlation ids), as ``temporal``: without the
    launching thread nothing is ``exact``.  Launches of threads with no region (autograd backward) go to the one
    region open then, also ``temporal``."""
    raw, inst = recorded(case)
    if "instance_id" not in inst:
        pytest.skip(f"{case}: its instances table has no instance ids")
    before = dec.kernel_table(raw, "r")
    p, renumbered = probes_of_recorded_run(raw, inst)
    corr = np.concatenate([renumbered[f]["correlation_id"] for f in ("kernel", "memcpy", "memset")])
    fam, counts = native.probe_families(p, corr, 4242)
    assert len(fam["external"]["correlation_id"]) == 0
    got = joined_classes(tmp_path, renumbered | fam, inst)
    kernel = before["kind"] == "kernel"
    truth = dict(zip((before["correlation_id"][kernel] * 2).tolist(), before["instance_id"][kernel].tolist(),
                     strict=False))  # fmt: skip
    assert {c for _, c in got.values()} <= {"temporal", "ambiguous", "unattributed"}
    carried = [c for c, iid in truth.items() if iid != 0]
    assert carried
    assert [got[c] for c in carried] == [(truth[c], "temporal") for c in carried], case
    assert counts["with regions open on several threads"] == 0
    if case == "backward":  # the autograd thread's kernels, launched while the main thread's region was open
        assert sum(1 for c, iid in truth.items() if iid == 0 and got[c][0] is not None) > 0


def test_probes_need_a_loaded_libcuda(module: ModuleType, tmp_path: Path) -> None:
    cupti = pytest.importorskip("cupti.cupti")
    path = native.NativeLaunchPath(native.build())
    with pytest.raises(native.NativeUnavailable, match=r"no boundary probe works \(cuDriverGetVersion: libcupti"):
        path.start_probes(str(tmp_path / "libcupti.so.13"), cupti)
    assert path.mode == ""


def test_the_clock_needs_a_loaded_libcupti_and_says_so(module: ModuleType, tmp_path: Path) -> None:
    cupti = pytest.importorskip("cupti.cupti")
    path = native.NativeLaunchPath(native.build())
    with pytest.raises(native.NativeUnavailable, match=r"libcupti .* is not loaded in this process"):
        path.start_clock(str(tmp_path / "libcupti.so.13"), cupti)
    assert path.mode == ""
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        module.start_clock(str(tmp_path / "libcupti.so.13"), [], [], 0)


def test_launches_after_dropped_probes_get_no_instance_from_them_synthetic() -> None:
    """When the probe arrays filled, what a thread had open after the last recorded probe is unknown: those launches
    get no row from the probes (the join places them by GPU time), and the counts say so."""
    p = probes([(10, 7, 1, 1000), (20, 0, 1, 2000), (30, 8, 1, 3000)])
    full = native.LaunchRecords(p.correlation, p.instance, p.thread, p.start, p.end, p.cbid, p.domain, 5, True)
    fam, counts = native.probe_families(full, np.array([11, 25, 31, 40]), 31)
    assert fam["api"]["correlation_id"].tolist() == [11, 25]
    assert counts["after the probe arrays filled"] == 2 and counts["probes dropped"] == 5
    # the same probes with nothing dropped: 31 and 40 are placed at the last probe (instance 8 open)
    fam, counts = native.probe_families(p, np.array([11, 25, 31, 40]), 31)
    assert fam["api"]["correlation_id"].tolist() == [11, 25, 31, 40]
    assert fam["api"]["start"].tolist() == [1000, 2000, 3000, 3000]
    assert counts["after the probe arrays filled"] == 0


# -- CUPTI's clock (a launch identity asked by the setting) ------------------------------------------------------------
def clock_rows(rows: list[tuple[int, int, int, int]], dropped: int = 0) -> native.LaunchRecords:
    """Synthetic mode-5 rows: (correlation id, instance, thread, CUPTI time); correlation 0 and cbid 0 for a
    boundary row, a graph launch's correlation id with a nonzero cbid (runtime domain) otherwise."""
    corr, inst, thread, start = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    cbid = np.where(corr != 0, 311, 0).astype(np.int64)
    domain = np.where(corr != 0, 2, 0).astype(np.int64)
    return native.LaunchRecords(
        corr, inst, thread.astype(np.uint64), start, start + 5, cbid, domain, dropped, clock=True
    )


def test_the_clock_places_each_kernel_by_its_queued_stamp_synthetic() -> None:
    # thread 1: start row (nothing open) at 100, opens 7 at 1000, nests 8 at 2000, back to 7 at 3000, leaves at 4000;
    # thread 2 opens 9 at 3500 and leaves it at 5000; a graph launch (correlation 60) on thread 1 inside 7 at 2500
    rows = clock_rows([(0, 0, 1, 100), (0, 7, 1, 1000), (0, 8, 1, 2000), (60, 8, 1, 2500), (0, 7, 1, 3000),
                       (0, 9, 2, 3500), (0, 0, 1, 4000), (0, 0, 2, 5000)])  # fmt: skip
    #                 before  in 7  in 8  graph graph in 7+9  in 9  none  no stamp
    corr = np.array([10, 11, 12, 60, 60, 13, 14, 15, 16])
    queued = np.array([50, 1500, 2200, 0, 0, 3700, 4500, 6000, 0])
    fam, counts = native.clock_families(rows, corr, queued, 31)
    assert set(fam["external"]) == set(dec.FAMILY_FIELDS["external"])
    assert set(fam["api"]) == set(dec.FAMILY_FIELDS["api"])
    # only the subscribed graph launch knows its thread: it alone carries its instance (exact)
    ext = dict(zip(fam["external"]["correlation_id"].tolist(), fam["external"]["external_id"].tolist(), strict=True))
    assert ext == {60: 8}
    assert (fam["external"]["external_kind"] == native.CUSTOM2).all()
    api = fam["api"]
    # the graph launch keeps its thread and call times; every stamped kernel sits at its stamp on no thread
    assert api["correlation_id"].tolist() == [60, 11, 12, 13, 14, 15]
    assert api["thread_id"].tolist() == [1, 0, 0, 0, 0, 0]
    assert api["start"].tolist() == [2500, 1500, 2200, 3700, 4500, 6000]
    assert api["end"].tolist() == [2505, 1500, 2200, 3700, 4500, 6000]
    assert counts == {
        "boundary rows": 7,
        "kernels": 9,
        "in one open region": 3,
        "with no region open": 1,
        "with regions open on several threads": 1,
        "before the first boundary row": 1,
        "launched by a graph launch": 2,
        "graph launches": 1,
        "without a queued stamp": 1,
        "after the arrays filled": 0,
        "rows dropped": 0,
    }


def test_kernels_after_dropped_clock_rows_get_no_instance_from_them_synthetic() -> None:
    rows = clock_rows([(0, 0, 1, 100), (0, 7, 1, 1000), (0, 0, 1, 2000), (0, 8, 1, 3000)], dropped=4)
    fam, counts = native.clock_families(rows, np.array([1, 2, 3, 4]), np.array([1500, 2500, 3500, 9000]), 31)
    assert fam["external"]["correlation_id"].tolist() == []
    assert fam["api"]["correlation_id"].tolist() == [1, 2]
    assert counts["after the arrays filled"] == 2 and counts["rows dropped"] == 4


@pytest.mark.parametrize("case", ["nested", "triton", "two_streams", "edge", "backward"])
def test_the_clock_places_recorded_kernels_where_their_launch_thread_was_but_never_exactly(
    case: str, tmp_path: Path
) -> None:
    """On the recorded H200 runs: boundary rows at each instance's start and end (synthetic, from the recorded
    instances) and each kernel stamped at the middle of its recorded launch call (where CUPTI's `queued` lies,
    bench/latency_probe.py): through the join, every kernel launched on a thread with a region open goes to that
    thread's instance, as ``temporal`` (the stamp does not say which thread launched)."""
    raw, inst = recorded(case)
    if "instance_id" not in inst:
        pytest.skip(f"{case}: its instances table has no instance ids")
    before = dec.kernel_table(raw, "r")
    rows = [(0, 0, int(inst["thread_id"][0]), 1)]
    for i, iid in enumerate(inst["instance_id"]):
        rows.append((0, int(iid), int(inst["thread_id"][i]), int(inst["start_ns"][i])))
        rows.append((0, int(inst["parent_instance_id"][i] or 0), int(inst["thread_id"][i]), int(inst["end_ns"][i])))
    rows.sort(key=lambda r: r[3])
    api = raw["api"]
    middle = dict(zip(api["correlation_id"].tolist(), ((api["start"] + api["end"]) // 2).tolist(), strict=False))
    k = raw["kernel"]
    queued = np.array([middle.get(int(c), 0) for c in k["correlation_id"].tolist()], dtype=np.int64)
    assert (queued > 0).all()
    fam, counts = native.clock_families(clock_rows(rows), k["correlation_id"], queued, 4242)
    cleared = {f: c for f, c in raw.items() if f not in ("external", "api", "memcpy", "memset")}
    # copies and sets carry no `queued` stamp (a run that records them takes the probes): kernels only
    got = joined_classes(tmp_path, cleared | fam, inst)
    kernel = before["kind"] == "kernel"
    truth = dict(zip(before["correlation_id"][kernel].tolist(), before["instance_id"][kernel].tolist(), strict=False))
    carried = [c for c, iid in truth.items() if iid != 0]
    assert carried
    assert [got[c] for c in carried] == [(truth[c], "temporal") for c in carried], case
    assert counts["with regions open on several threads"] == 0 and counts["without a queued stamp"] == 0
