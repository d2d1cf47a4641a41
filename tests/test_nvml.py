"""NVML and PM sampling evidence without a GPU: samples recorded on the H200 (tests/data/gpu), time attribution."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from argus_lab.backends import nvml as nvml_backend
from argus_lab.backends import pm as pm_backend
from argus_lab.errors import BackendUnavailableError
from argus_lab.run.protocols import RunContext

DATA = Path(__file__).parent / "data" / "gpu"


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


def test_every_instance_gets_a_windowed_value() -> None:
    s = pq.read_table(DATA / "cases" / "nested" / "samples.parquet").to_pydict()
    inst = pq.read_table(DATA / "cases" / "nested" / "instances.parquet").to_pydict()
    m = nvml_backend.window_metrics(s, inst, "r")
    assert len(m["signal"]) == len(inst["instance_id"]) * len(nvml_backend.SIGNALS)
    assert all(a.startswith("temporal") for a in m["attribution"])
    # the nested regions are shorter than the 5 ms interval: the nearest preceding sample stands in
    assert any("nearest preceding" in a for a in m["attribution"])


def test_window_means_and_nearest_sample_synthetic() -> None:
    # SYNTHETIC: samples at 0, 10, 20, 30 ns; one instance spans 2 samples, one falls between samples
    samples = {"signal": ["sys.power"] * 4, "t_ns": [0, 10, 20, 30], "value": [1.0, 3.0, 5.0, 7.0]}
    inst = {"instance_id": [1, 2, 3], "start_ns": [5, 21, -9], "end_ns": [20, 25, -5]}
    m = nvml_backend.window_metrics(samples, inst, "r")
    got = dict(zip(m["instance_id"], zip(m["value"], m["attribution"], strict=True), strict=True))
    assert got[1] == (4.0, "temporal")
    assert got[2] == (5.0, "temporal (nearest preceding sample)")
    assert 3 not in got  # before the first sample: no value rather than a made-up one


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


def test_pm_samples_recorded_with_cupti_python_13_4() -> None:
    for label in ("single", "triage"):
        s = pq.read_table(DATA / "pm" / f"samples-{label}.parquet").to_pydict()
        inst = pq.read_table(DATA / "pm" / f"instances-{label}.parquet").to_pydict()
        assert all(t > 0 for t in s["t_ns"])  # windows without a start were dropped
        assert all(e > t for t, e in zip(s["t_ns"], s["t_end_ns"], strict=True))
        # PM sample timestamps are on the host's CLOCK_REALTIME: they fall inside the run's instances' span
        assert min(inst["start_ns"]) - 10**9 < min(s["t_ns"]) < max(inst["end_ns"])
        m = nvml_backend.window_metrics(s, inst, "r")
        vals = [v for sig, v in zip(m["signal"], m["value"], strict=True) if sig == "pm:sm__cycles_active.avg"]
        assert len(vals) == 5
        assert all(v > 0 for v in vals)  # the matmuls kept the SMs busy inside every instance


def test_pm_backend_names_the_versions_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    real = importlib.import_module

    def no_pm(name: str, *a: object) -> object:
        if name == "cupti.pm_sampling":
            raise ImportError(name)
        return real(name, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(pm_backend.importlib, "import_module", no_pm)
    with pytest.raises(BackendUnavailableError, match=r"cupti-python>=13\.3") as err:
        pm_backend.PmSampler().start(RunContext("r", ("pm:sm__cycles_active.avg",), {}, Path(".")))
    assert "hw:*" in str(err.value)


def test_pm_sample_columns() -> None:
    cols = pm_backend.sample_columns([(0, 10, 20, "sm__cycles_active.avg", 3.0)], "r")
    assert cols["signal"] == ["pm:sm__cycles_active.avg"]
    assert cols["t_end_ns"] == [20]
