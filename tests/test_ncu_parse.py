"""Nsight Compute backend without a GPU: the command line, and the report recorded on the H200 (tests/data/gpu/ncu)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from argus_lab.backends.ncu import launcher as ncu_backend
from argus_lab.backends.ncu import parse as ncu_parse
from argus_lab.errors import BackendUnavailableError, WorkloadError
from argus_lab.run.protocols import RunContext

DATA = Path(__file__).parent / "data" / "gpu" / "ncu"
REPORT = DATA / "triton_nested.ncu-rep"
METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "smsp__inst_executed.sum", "launch__grid_size"]


# ncu_report crashes (SIGSEGV) in a process that has also imported cupti-python (seen on the H200 and on the CPU
# machine), and the test session imports it elsewhere: read the report in a fresh process, as the backend does.
@pytest.fixture(scope="module")
def kernels() -> list[ncu_parse.NcuKernel]:
    pytest.importorskip("ncu_report")
    return ncu_parse.read_report_isolated(REPORT, METRICS)


def test_report_kernels_carry_region_path_instance_and_ordinal(kernels: list[ncu_parse.NcuKernel]) -> None:
    got = [(k.path, k.instance_index, k.ordinal, k.name) for k in kernels]
    assert got == [
        ("outer", 0, 0, "scale_kernel"),
        ("outer/inner", 0, 0, "exp_add_kernel"),
        ("outer/inner", 0, 1, "scale_kernel"),
        ("outer", 1, 0, "scale_kernel"),
        ("outer/inner", 1, 0, "exp_add_kernel"),
        ("outer/inner", 1, 1, "scale_kernel"),
    ]
    assert not any(k.instance_inferred for k in kernels)  # the NVTX payload carried the instance index
    assert {k.mangled for k in kernels} == {"scale_kernel", "exp_add_kernel"}  # Triton names are not mangled


def test_report_values_match_what_was_read_on_the_h200(kernels: list[ncu_parse.NcuKernel]) -> None:
    expected = json.loads((DATA / "triton_nested.expected.json").read_text())
    assert ncu_parse.to_json(kernels) == expected
    for k in kernels:
        assert k.metrics["launch__grid_size"] == (1024.0, "")
        time_ns, unit = k.metrics["gpu__time_duration.sum"]
        assert unit == "ns"
        assert isinstance(time_ns, float)
        assert 1_000 < time_ns < 100_000
    # exp_add reads two 4 MiB inputs, scale one (cache flushed before each pass: --cache-control all)
    reads = {k.name: k.metrics["dram__bytes_read.sum"][0] for k in kernels if k.path == "outer/inner"}
    assert reads["exp_add_kernel"] == pytest.approx(2 * 4 * 2**20, rel=0.02)
    assert reads["scale_kernel"] == pytest.approx(4 * 2**20, rel=0.02)


def test_json_round_trip(kernels: list[ncu_parse.NcuKernel]) -> None:
    assert ncu_parse.from_json(ncu_parse.to_json(kernels)) == kernels


def test_unreadable_report_is_an_error_not_a_crash(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(b"not a report")
    with pytest.raises(BackendUnavailableError, match="reading the Nsight Compute report"):
        ncu_parse.read_report_isolated(bad)


def test_metric_rows_are_ordinal_keyed(kernels: list[ncu_parse.NcuKernel]) -> None:
    rows = ncu_parse.metric_rows(kernels, "r1", "r1:ncu")
    assert len(rows["signal"]) == len(kernels) * len(METRICS)
    assert set(rows["signal"]) == {f"hw:{m}" for m in METRICS}
    assert "attribution" not in rows  # raw evidence: the join attributes ncu kernels (ordinal, exact, mismatch)
    assert rows["instance_id"] == [None] * len(rows["signal"])
    assert "ncu/outer/inner/1/1/scale_kernel" in rows["kernel_key"]
    table = ncu_parse.kernel_rows(kernels, "r1")
    assert table["kernel_key"][2] == "ncu/outer/inner/0/1/scale_kernel"


def test_all_metrics_when_none_requested(kernels: list[ncu_parse.NcuKernel]) -> None:
    every = ncu_parse.read_report_isolated(REPORT)
    assert len(every[0].metrics) > 100  # ncu always adds device, launch and profiler metrics
    assert every[0].metrics["gpu__time_duration.sum"] == kernels[0].metrics["gpu__time_duration.sum"]


def fake_ncu(tmp_path: Path) -> str:
    exe = tmp_path / "ncu"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)


def test_command_carries_metrics_replay_filters_and_controls(tmp_path: Path) -> None:
    launcher = ncu_backend.NcuLauncher(ncu=fake_ncu(tmp_path))
    settings = {
        "metrics": ["dram__bytes_read.sum", "smsp__inst_executed.sum"],
        "replay_mode": "application",
        "clock_control": "none",
        "cache_control": "all",
        "nvtx_include": ["argus@outer/inner/"],
    }
    ctx = RunContext("r", ("hw:dram__bytes_read.sum",), settings, tmp_path)
    cmd = launcher.command(ctx, ["python", "-m", "argus_lab.run.child", "spec.json"])
    assert cmd[:2] == ["env", "ARGUS_NVTX_PAYLOAD=1"]
    assert cmd[cmd.index("--metrics") + 1] == "dram__bytes_read.sum,smsp__inst_executed.sum"
    assert cmd[cmd.index("--replay-mode") + 1] == "application"
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--cache-control") + 1] == "all"
    assert cmd[cmd.index("--nvtx-include") + 1] == "argus@outer/inner/"
    assert "--nvtx" in cmd
    assert cmd[cmd.index("--export") + 1] == str(tmp_path / "report.ncu-rep")
    assert cmd[-4:] == ["python", "-m", "argus_lab.run.child", "spec.json"]


def test_command_defaults_and_region_filters(tmp_path: Path) -> None:
    launcher = ncu_backend.NcuLauncher(ncu=fake_ncu(tmp_path))
    ctx = RunContext("r", ("gpu.time", "hw:gpu__time_duration.sum"), {"regions": ["decode/attn"]}, tmp_path)
    cmd = launcher.command(ctx, ["w"])
    assert cmd[cmd.index("--metrics") + 1] == "gpu__time_duration.sum"
    assert cmd[cmd.index("--clock-control") + 1] == "base"  # explicit even when it is ncu's default
    assert cmd[cmd.index("--nvtx-include") + 1] == "argus@decode/attn/"
    with pytest.raises(ValueError, match="replay mode"):
        launcher.command(RunContext("r", ("hw:a__b.sum",), {"replay_mode": "warp"}, tmp_path), ["w"])
    with pytest.raises(ValueError, match="at least one hw:"):
        launcher.command(RunContext("r", ("gpu.time",), {}, tmp_path), ["w"])


def test_missing_ncu_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ncu_backend, "NCU_CANDIDATES", ())
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("ARGUS_NCU", raising=False)
    with pytest.raises(BackendUnavailableError, match="install Nsight Compute"):
        ncu_backend.find_ncu()


def test_recorded_failure_logs_give_clear_errors(tmp_path: Path) -> None:
    missing = tmp_path / "report.ncu-rep"
    failing = (DATA / "failing_workload.ncu.log").read_text()
    with pytest.raises(WorkloadError, match="failed under ncu") as err:
        ncu_backend.check_log(failing, missing, returncode=3)
    assert "returned an error code (3)" in str(err.value)
    with pytest.raises(WorkloadError, match="profiled no kernel"):
        ncu_backend.check_log((DATA / "no_kernels.ncu.log").read_text(), missing)
    ncu_backend.check_log((DATA / "triton_nested.ncu.log").read_text(), REPORT)  # a good run passes


def test_counter_permission_error_synthetic(tmp_path: Path) -> None:
    # SYNTHETIC: the line ncu prints without counter permission (the H200 runs as root, so it never printed it)
    log = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
    with pytest.raises(BackendUnavailableError, match="NVreg_RestrictProfilingToAdminUsers"):
        ncu_backend.check_log(log, tmp_path / "none.ncu-rep")


def test_evidence_from_a_run_folder(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    (tmp_path / "report.ncu-rep").write_bytes(REPORT.read_bytes())
    (tmp_path / "ncu.log").write_text((DATA / "triton_nested.ncu.log").read_text())
    launcher = ncu_backend.NcuLauncher(ncu=fake_ncu(tmp_path))
    ctx = RunContext("r9", tuple(f"hw:{m}" for m in METRICS), {"nvtx_include": ["argus@outer/"]}, tmp_path)
    ev = launcher.evidence(ctx, {"instance_id": []})
    assert len(ev["ncu_kernels"]["path"]) == 6
    assert ev["artifacts"]["kind"] == ["ncu-rep"]
    assert ev["artifacts"]["bytes"] == [os.path.getsize(REPORT)]
    settings = ev["provenance"]["settings"][0]
    assert settings["clock_control"] == "base"
    assert settings["cache_control"] == "all"
    assert settings["nvtx_include"] == ["argus@outer/"]
