"""Launch identity on the H200 (tests/data/gpu/threads, recorded by scripts/gpu/record_thread_cases.py): each store is
joined again here and held to torch.profiler's truth for the same step, recorded in a separate process.

* ``side_thread``: the main thread's region launches its kernels while a thread with no region launches 50 on its
  own stream: the region counts its own kernels only (``exact``); the side thread's are ``unattributed``, never
  ``exact`` and never in the main thread's region;
* ``train_step``: a 4-layer Llama with backward and AdamW: autograd's thread launches the backward kernels, which go
  to ``train_step/backward`` (the region of the thread in ``backward()``) as ``temporal`` with that reason; the main
  thread's forward and optimizer kernels are ``exact``;
* ``two_threads`` / ``per_step_threads``: two threads in their own regions at once: integral counts, every kernel
  ``exact``, each instance named after its own thread even when Python reuses thread ids;
* the ``probes`` launch identity on the same cases: it cannot tell the launching thread, so nothing it places is
  ``exact`` (and two threads at once are ``ambiguous``): why the callbacks are the default;
* ``profiler_before``: torch.profiler ran first in the process: the run says so (provenance and report) and shows
  no ``gpu.launch_overhead``, which was not asked; the same GEMM measured with ``isolate=True``;
* ``device_gemm``: the persistent GEMM with ``dev.*``: every device launch ``exact``, the overhead computed.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from argus_lab import join
from argus_lab.app.measure import plan
from argus_lab.report import Report
from argus_lab.store import Store

THREADS = Path(__file__).parent / "data" / "gpu" / "threads"
CASES = json.loads((THREADS / "thread-cases.json").read_text())


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Store]:
    """Every recorded store, gunzipped and joined again with today's rules."""
    folder = tmp_path_factory.mktemp("threads")
    out: dict[str, Store] = {}
    for gz in sorted(THREADS.glob("*.duckdb.gz")):
        path = folder / gz.name.removesuffix(".gz")
        with gzip.open(gz) as src, path.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        st = Store(path)
        ids = [r[0] for r in st.rows("SELECT run_id FROM runs ORDER BY started_ns")]
        join.attribute_request(st, ids)
        out[path.name.removesuffix(".duckdb")] = st
    return out


def classes(st: Store, measured: bool = False) -> dict[tuple[str, str], float]:
    """(region path or '', class) -> kernels (weights summed) of the store's timing run, warm-up included unless
    ``measured`` (then only kernels of measured instances)."""
    rows = st.rows(
        "SELECT coalesce(i.path, ''), a.class, sum(a.weight) FROM attributions a "
        "LEFT JOIN region_instances i ON i.run_id = a.target_run_id AND i.instance_id = a.instance_id "
        "WHERE a.evidence = 'kernel' AND (NOT ? OR NOT coalesce(i.warmup, true)) GROUP BY ALL",
        [measured],
    )
    return {(p, c): float(w) for p, c, w in rows}


def per_instance(st: Store, path: str) -> list[float]:
    """gpu.kernels of each measured instance of ``path`` (warm-up left out), in order."""
    rows = st.rows(
        "SELECT v.inclusive FROM instance_values v JOIN region_instances i USING (run_id, instance_id) "
        "WHERE v.signal = 'gpu.kernels' AND i.path = ? AND NOT i.warmup ORDER BY i.start_ns",
        [path],
    )
    return [float(r[0]) for r in rows]


def truth(case: str) -> dict[str, int]:
    return dict(CASES["cases"][case]["truth"]["kernels_per_thread"])


def instances(st: Store, path: str) -> int:
    """Instances of ``path``, warm-up included."""
    return int(st.rows("SELECT count(*) FROM region_instances WHERE path = ?", [path])[0][0])


def test_the_default_launch_identity_is_the_launch_callback() -> None:
    (run,) = plan("gpu.time,gpu.kernels").runs
    assert run.settings["cupti"]["launch_identity"] == "callbacks"
    for case in ("side_thread", "train_step", "two_threads", "per_step_threads"):
        assert CASES["cases"][case]["default"]["launch_path"] == "native"


def test_a_side_thread_without_a_region_is_never_counted_in_another_threads_region(stores: dict[str, Store]) -> None:
    st = stores["side_thread"]
    n = instances(st, "main_work")
    got = classes(st)
    own, side = got[("main_work", "exact")] / n, got[("", "unattributed")] / n
    assert sorted(truth("side_thread").values()) == sorted([own, side]) == [50, 100]
    assert per_instance(st, "main_work") == [own] * (n - 1)  # integral, the main thread's own kernels only
    assert set(got) == {("main_work", "exact"), ("", "unattributed")}
    (reason,) = {r for (r,) in st.rows("SELECT DISTINCT reason FROM attributions WHERE class = 'unattributed'")}
    assert reason.startswith("launched by side (") and "which had no region open" in reason
    assert "main_work on MainThread" in reason


def test_autograd_kernels_go_to_the_region_of_the_thread_in_backward_as_temporal(stores: dict[str, Store]) -> None:
    st = stores["train_step"]
    n = instances(st, "train_step") - 1  # the measured ones (the warm-up step builds AdamW's state: more kernels)
    got = classes(st, measured=True)
    t = truth("train_step")
    autograd = got[("train_step/backward", "temporal")] / n
    main = sum(w for (p, c), w in got.items() if c == "exact") / n
    assert autograd == t["pt_autograd_0"] == 373
    assert main == sum(v for k, v in t.items() if k != "pt_autograd_0") == 267
    assert per_instance(st, "train_step") == [640.0] * n
    assert per_instance(st, "train_step/backward") == [autograd + 1] * n  # + the main thread's seed gradient
    assert {c for (_, c) in got} == {"exact", "temporal"}
    (reason,) = {r for (r,) in st.rows("SELECT DISTINCT reason FROM attributions WHERE class = 'temporal'")}
    assert "pt_autograd_0" in reason and "autograd's thread, during backward() called on MainThread" in reason
    calls = st.rows("SELECT count(*), count(DISTINCT thread_id) FROM host_calls WHERE call = 'autograd.backward'")
    assert calls == [(n + 1, 1)]  # one backward() call a step, warm-up included, all on the main thread


@pytest.mark.parametrize("case", ["two_threads", "per_step_threads"])
def test_two_threads_with_regions_at_once_are_each_exact_and_named(stores: dict[str, Store], case: str) -> None:
    st = stores[case]
    assert sorted(truth(case).values()) == [30, 45]
    n = instances(st, "t0_work") - 1
    assert per_instance(st, "t0_work") == [30.0] * n and per_instance(st, "t1_work") == [45.0] * n
    assert {c for (_, c) in classes(st)} == {"exact"}
    names = st.rows("SELECT DISTINCT path, thread_name FROM region_instances ORDER BY 1")
    assert names == [("t0_work", "w0"), ("t1_work", "w1")]
    if case == "per_step_threads":  # new threads each step, and Python reused their ids
        ids = st.rows("SELECT count(DISTINCT thread_id), count(*) FROM region_instances")[0]
        assert ids[0] < ids[1]


def test_the_probes_identity_never_says_exact(stores: dict[str, Store]) -> None:
    two = classes(stores["two_threads-probes"])
    assert {c for (_, c) in two} <= {"temporal", "ambiguous"} and any(c == "ambiguous" for (_, c) in two)
    side = classes(stores["side_thread-probes"])
    assert {c for (_, c) in side} == {"temporal"}  # the side thread's kernels land in main_work: probes cannot know
    assert CASES["cases"]["two_threads"]["probes"]["launch_path"] == "native probes"


def test_another_cupti_client_is_said_and_unrequested_signals_are_not_shown(stores: dict[str, Store]) -> None:
    st = stores["profiler_before"]
    (settings,) = [json.loads(s) for (s,) in st.rows("SELECT settings FROM provenance WHERE backend = 'cupti'")]
    assert settings["launch_path"] == "native external correlation"
    assert "torch.profiler's Kineto" in settings["other_cupti_client"] and "--isolate" in settings["other_cupti_client"]
    report = Report(st)
    # said first, whole, with what it did to the numbers and the fix: in the text, the JSON and the HTML bundle
    (warning,) = report.warnings
    assert "2.1x" in warning and "--isolate" in warning
    assert report.text().startswith("warning: run ") and "(2.1x)" in report.text().split("region  ")[0]
    assert report.to_dict()["warnings"] == [warning]
    from argus_lab.views import bundle

    assert bundle.build(report)["summary"]["warnings"] == [warning]  # the HTML report's header shows it
    assert not any("another CUPTI client" in s for s in report.coverage())  # not a gap in coverage
    stored = {s for (s,) in st.rows("SELECT DISTINCT signal FROM instance_values")}
    assert "gpu.launch_overhead" not in stored and "gpu.time" in stored
    # only what the request named is stored and shown (it asked for gpu.time and gpu.kernels, not gpu.span)
    assert {r.signal for r in report.regions} == {"gpu.time", "gpu.kernels"} == stored
    before = CASES["profiler_before"]
    # no lasting slowdown from the measurement: the GEMM's CUDA-event time after it is not above the time before it
    assert before["events_after_argus_us"] <= before["events_after_profiler_us"] * 1.05
    iso = stores["profiler_before_isolated"]
    (settings,) = [json.loads(s) for (s,) in iso.rows("SELECT settings FROM provenance WHERE backend = 'cupti'")]
    assert settings["launch_path"] == "native" and not settings["other_cupti_client"]
    assert CASES["profiler_before_isolated"]["gpu_time_us"] < before["gpu_time_us"]


def test_device_launches_are_exact_and_their_overhead_is_computed(stores: dict[str, Store]) -> None:
    st = stores["device_gemm"]
    launches = dict(st.rows("SELECT class, count(*) FROM attributions WHERE evidence = 'device_launch' GROUP BY 1"))
    assert launches == {"exact": 4}
    (over,) = Report(st).device_overhead
    assert over.launches == 3 and 1.0 < over.ratio_median < 1.5


def test_a_measurement_after_torch_profiler_leaves_the_launch_rate_as_it_was() -> None:
    """scripts/gpu/lasting_slowdown.py on the H200: fresh processes, torch.profiler then two measurements (or, in the
    control, two pauses).  The host's launch rate swings between two speeds in every process, the control's included,
    so each side is read as the faster of its two readings: after the measurements against before them."""
    runs = json.loads((THREADS.parent / "lasting_slowdown" / "lasting_slowdown.json").read_text())

    def ratio(r: dict[str, dict[str, float]]) -> float:
        after = min(r["after_measure_1"]["host_us"], r["after_measure_2"]["host_us"])
        return after / min(r["after_profiler"]["host_us"], r["after_pause"]["host_us"])

    by_variant: dict[str, list[float]] = {}
    for r in runs:
        assert "error" not in r, r.get("error")
        by_variant.setdefault(r["variant"], []).append(ratio(r))
    assert set(by_variant) >= {"none", "default"} and len(by_variant["default"]) >= 2
    assert max(by_variant["default"]) <= 1.05, by_variant  # no lasting slowdown from the default measurement
    assert all(r["threads"] == ["MainThread"] for r in runs if r["variant"] == "default")  # no thread left behind
    assert all(r["sys_profile"] == "None" and r["sys_trace"] == "None" for r in runs)  # no hook left installed
