"""NVML and PM sampling evidence without a GPU: samples recorded on the H200 (tests/data/gpu), and the join's time
attribution of them (the backends store raw samples only; :mod:`argus_lab.join.windows` makes the values)."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from argus_lab import join
from argus_lab.backends import nvml as nvml_backend
from argus_lab.backends import pm as pm_backend
from argus_lab.errors import BackendUnavailableError
from argus_lab.run.protocols import RunContext
from argus_lab.store import Store

DATA = Path(__file__).parent / "data" / "gpu"


def joined_samples(path: Path, samples: dict[str, list[Any]], instances: dict[str, list[Any]]) -> Store:
    """A store holding ``samples`` and ``instances`` as run ``r``, joined."""
    n = len(instances["instance_id"])
    inst = {
        "path": ["x"] * n,
        "parent_instance_id": [0] * n,
        "thread_id": [1] * n,
        "repetition": list(range(n)),
        **instances,
        "run_id": ["r"] * n,
    }
    store = Store(path)
    store.write(
        {
            "runs": {"run_id": ["r"], "plan_index": [0], "backends": [["nvml", "pm"]], "status": ["ok"]},
            "region_instances": inst,
            "samples": {**samples, "run_id": ["r"] * len(samples["t_ns"])},
        }
    )
    join.attribute_request(store, ["r"])
    return store


def sample_values(store: Store, signal: str) -> dict[int, tuple[float, str]]:
    """{instance id: (inclusive value, backend)} of one sampled signal."""
    rows = store.rows(
        "SELECT instance_id, inclusive, backend FROM instance_values WHERE run_id = 'r' AND signal = ?", [signal]
    )
    return {int(i): (float(v), b) for i, v, b in rows}


def has_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def test_recorded_samples_cover_every_signal_with_sane_values() -> None:
    s = pq.read_table(DATA / "cases" / "nested" / "samples.parquet").to_pydict()
    assert set(s["signal"]) == set(nvml_backend.SIGNALS)
    by = {}
    for sig, v in zip(s["signal"], s["value"], strict=True):
        by.setdefault(sig, []).append(v)
    assert all(345 <= v <= 1980 for v in by["sys.sm_clock"])  # H200 idle .. max SM clock
    assert set(by["sys.mem_clock"]) == {3201.0}
    assert all(50 < v < 700 for v in by["sys.power"])
    inst = pq.read_table(DATA / "cases" / "nested" / "instances.parquet").to_pydict()
    # host timestamps on the instances' clock: sampling began before the first region and ran through the run
    assert min(s["t_ns"]) <= min(inst["start_ns"])
    assert max(s["t_ns"]) >= max(inst["start_ns"]) - 2 * 5_000_000  # within two 5 ms sampling intervals
    assert max(s["t_ns"]) - min(s["t_ns"]) < 10 * 10**9
    assert set(s["unit"]) == {"MHz", "W", "C", "%"}


def test_instances_get_the_samples_their_windows_overlap(tmp_path: Path) -> None:
    s = pq.read_table(DATA / "cases" / "nested" / "samples.parquet").to_pydict()
    inst = pq.read_table(DATA / "cases" / "nested" / "instances.parquet").to_pydict()
    inst.pop("run_id", None)
    s.pop("run_id", None)
    store = joined_samples(tmp_path / "s.duckdb", s, inst)
    # a sample stands for the time up to half way to its neighbours: the last window ends ~2.6 ms after the last
    # sample, before the short instances of repetitions 0..3 after the first one; they get no value (none is made
    # up), while the first `outer` instance, which spans the whole sampling period, gets every signal
    last_window_end = max(s["t_ns"]) + (max(s["t_ns"]) - sorted(s["t_ns"])[-len(nvml_backend.SIGNALS) - 1]) // 2
    covered = {i for i, st in zip(inst["instance_id"], inst["start_ns"], strict=True) if st < last_window_end}
    assert covered == {1}
    for signal in nvml_backend.SIGNALS:
        got = sample_values(store, signal)
        assert set(got) == covered, signal
        assert {b for _, b in got.values()} == {"nvml"}
    classes = store.rows(
        "SELECT DISTINCT class FROM attributions WHERE evidence = 'sample' AND instance_id IS NOT NULL"
    )
    assert {c for (c,) in classes} == {"temporal"}


def test_time_weighted_window_means_synthetic(tmp_path: Path) -> None:
    # SYNTHETIC: samples at 0, 10, 20, 30 ns; each stands for the time nearer to it than to its neighbours
    # ([-5, 5), [5, 15), [15, 25), [25, 35)).  Instance 1 [5, 20] spends 10 ns in the second window and 5 ns in
    # the third; instance 2 [21, 25] lies in the third; instance 3 [-9, -5] ends where the first window begins.
    samples = {
        "signal": ["sys.power"] * 4,
        "t_ns": [0, 10, 20, 30],
        "value": [1.0, 3.0, 5.0, 7.0],
        "unit": ["W"] * 4,
        "device_id": [0] * 4,
    }
    inst = {"instance_id": [1, 2, 3], "start_ns": [5, 21, -9], "end_ns": [20, 25, -5]}
    got = sample_values(joined_samples(tmp_path / "s.duckdb", samples, inst), "sys.power")
    assert got[1] == (pytest.approx((10 * 3.0 + 5 * 5.0) / 15), "nvml")
    assert got[2] == (5.0, "nvml")
    assert 3 not in got  # outside every sample window: no value rather than a made-up one


def test_sample_columns() -> None:
    cols = nvml_backend.sample_columns([(0, 100, "sys.power", 80.5)], "r")
    assert cols == {
        "run_id": ["r"],
        "device_id": [0],
        "signal": ["sys.power"],
        "t_ns": [100],
        "value": [80.5],
        "unit": ["W"],
    }


@pytest.mark.skipif(has_driver(), reason="checks the message on a machine without an NVIDIA driver")
def test_nvml_without_a_gpu_says_so(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailableError, match="sys"):
        nvml_backend.NvmlSampler().start(RunContext("r", ("sys.power",), {}, tmp_path))


def test_pm_samples_recorded_with_cupti_python_13_4(tmp_path: Path) -> None:
    for label in ("single", "triage"):
        s = pq.read_table(DATA / "pm" / f"samples-{label}.parquet").to_pydict()
        inst = pq.read_table(DATA / "pm" / f"instances-{label}.parquet").to_pydict()
        assert all(t > 0 for t in s["t_ns"])  # windows without a start were dropped
        assert all(e > t for t, e in zip(s["t_ns"], s["t_end_ns"], strict=True))
        # PM sample timestamps are on the host's CLOCK_REALTIME: they fall inside the run's instances' span
        assert min(inst["start_ns"]) - 10**9 < min(s["t_ns"]) < max(inst["end_ns"])
        for d in (s, inst):
            d.pop("run_id", None)
        store = joined_samples(tmp_path / f"{label}.duckdb", s, inst)
        got = sample_values(store, "pm:sm__cycles_active.avg")
        assert len(got) == 5
        assert all(v > 0 for v, _ in got.values())  # the matmuls kept the SMs busy inside every instance
        assert {b for _, b in got.values()} == {"pm"}  # PM values are labelled by their own backend


def test_pm_backend_reports_the_import_error_it_met(monkeypatch: pytest.MonkeyPatch) -> None:
    # SYNTHETIC failure (the module is installed here and imports): the import raises as it does without pyelftools;
    # the message must carry that error and its fix, not claim the module is missing (tests/test_doctor.py builds a
    # real environment without pyelftools)
    import importlib

    real = importlib.import_module

    def broken(name: str, *a: object) -> object:
        if name == "cupti.pm_sampling":
            raise ModuleNotFoundError("No module named 'elftools'", name="elftools")
        return real(name, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(pm_backend.importlib, "import_module", broken)
    with pytest.raises(BackendUnavailableError) as err:
        pm_backend.PmSampler().start(RunContext("r", ("pm:sm__cycles_active.avg",), {}, Path(".")))
    msg = str(err.value)
    assert "does not import: ModuleNotFoundError: No module named 'elftools'" in msg
    assert 'pip install "pyelftools"' in msg and "hw:*" in msg
    assert "has no cupti.pm_sampling" not in msg


def test_pm_backend_names_the_versions_it_needs_when_the_module_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    # SYNTHETIC: a cupti package without pm_sampling.py (cupti-python < 13.3)
    monkeypatch.setattr(pm_backend, "_module_file", lambda: None)
    with pytest.raises(BackendUnavailableError, match=r"has no cupti\.pm_sampling \(needs cupti-python>=13\.3") as err:
        pm_backend.PmSampler().start(RunContext("r", ("pm:sm__cycles_active.avg",), {}, Path(".")))
    assert "hw:*" in str(err.value)


def test_pm_sample_columns() -> None:
    cols = pm_backend.sample_columns([(0, 10, 20, "sm__cycles_active.avg", 3.0)], "r")
    assert cols["signal"] == ["pm:sm__cycles_active.avg"]
    assert cols["t_end_ns"] == [20]
