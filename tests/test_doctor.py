"""``argus-lab doctor`` on this CPU machine, for real: it has no NVIDIA driver, so the GPU lines must say so with the
fix, the host-side lines (package, data, native extension, CUPTI versions, pass model) must still answer, and a
profiling tool injected into the process must be named as holding CUPTI.  The version rules are also checked on
SYNTHETIC version strings (the mismatches this machine does not have)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from argus_lab.faces import doctor
from argus_lab.faces.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
NO_DRIVER = not os.path.exists("/dev/nvidiactl")


def _doctor(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache"), **(env or {})}
    full.pop("ARGUS_GPU_CHIP", None)
    proc = subprocess.run(
        [sys.executable, "-m", "argus_lab.faces.cli", "doctor", *args],
        cwd=tmp_path,  # an unrelated folder, as a user runs it
        capture_output=True,
        text=True,
        timeout=240,
        env=full,
        check=False,
    )
    return proc.returncode, proc.stdout


def _by_name(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in checks}


@pytest.mark.skipif(not NO_DRIVER, reason="this machine has an NVIDIA driver")
def test_doctor_answers_a_machine_without_a_gpu(tmp_path: Path) -> None:
    code, out = _doctor(tmp_path, "--json", "--save", str(tmp_path / "saved.json"))
    checks = json.loads(out)
    assert json.loads((tmp_path / "saved.json").read_text()) == checks
    got = _by_name(checks)
    assert code == 1  # the GPU line fails
    gpu = got["GPU and driver"]
    assert gpu["status"] == "FAIL"
    assert "libcuda.so.1 cannot be loaded" in gpu["detail"]
    assert "NVIDIA GPU and driver" in gpu["fix"]
    assert "host.* signals work" in gpu["fix"]
    # what needs the driver does not apply, and says why
    for name in ("libcupti", "NVML", "PM sampling"):
        assert got[name]["status"] == "--", got[name]
        assert "driver" in got[name]["detail"]
    # host-side answers still come
    assert got["argus_lab"]["status"] == "ok"
    assert got["package data"]["status"] == "ok"
    assert "ncu_passes_gh100.json" in got["package data"]["detail"]
    passes = got["pass model"]
    assert passes["detail"].startswith("table recorded on NVIDIA H200 (GH100)")
    assert "e.g. 9 passes for gpu__time_duration.sum" in passes["detail"]
    assert "ARGUS_GPU_CHIP" in passes["detail"]
    native = got["native launch path"]
    assert native["status"] in ("ok", "warn")
    assert native["status"] == "ok" or native["fix"]
    assert got["CUPTI in use"]["status"] in ("ok", "warn")
    if got["ncu"]["status"] != "ok":
        assert "ARGUS_NCU" in got["ncu"]["fix"]


@pytest.mark.skipif(not NO_DRIVER, reason="this machine has an NVIDIA driver")
def test_doctor_text_puts_a_fix_under_every_line_that_is_not_ok(tmp_path: Path) -> None:
    code, out = _doctor(tmp_path)
    lines = out.splitlines()
    assert lines[-1].endswith("not applicable")
    for i, line in enumerate(lines[:-1]):
        if line.startswith(("FAIL", "warn")):
            assert lines[i + 1].strip().startswith("fix: "), line
    assert any(line.startswith("FAIL  GPU and driver") for line in lines)
    assert code == 1


def test_doctor_names_an_injected_profiler_as_holding_cupti(tmp_path: Path) -> None:
    _, out = _doctor(tmp_path, "--json", env={"CUDA_INJECTION64_PATH": "/opt/tool/libinjection.so"})
    held = _by_name(json.loads(out))["CUPTI in use"]
    assert held["status"] == "FAIL"
    assert "CUDA_INJECTION64_PATH='/opt/tool/libinjection.so'" in held["detail"]
    assert "unset CUDA_INJECTION64_PATH" in held["fix"]


def test_cupti_version_rules_on_synthetic_versions() -> None:
    # SYNTHETIC version strings: the mismatches pip produces next to torch 2.11+cu130
    newest = doctor.cupti_mismatches("13.4.0", "~=13.4", "13.0.85", "==13.0.85", "13.0")
    assert newest == [
        (
            "cupti-python 13.4.0 needs nvidia-cuda-cupti ~=13.4, but 13.0.85 is installed",
            'pip install "cupti-python==13.0.*"',
        )
    ]
    upgraded = doctor.cupti_mismatches("13.4.0", "~=13.4", "13.4.92", "==13.0.85", "13.0")
    assert len(upgraded) == 1
    assert upgraded[0][0].startswith("torch pins nvidia-cuda-cupti ==13.0.85 but 13.4.92 is installed")
    assert upgraded[0][1].startswith('pip install "nvidia-cuda-cupti==13.0.85" "cupti-python==13.0.*"')
    other_major = doctor.cupti_mismatches("12.9.0", "~=12.9", "12.9.79", "", "13.0")
    assert other_major[0] == (
        "cupti-python 12.9.0 is for CUDA 12, but torch runs CUDA 13.0",
        'pip install "cupti-python==13.0.*"',
    )
    assert doctor.cupti_mismatches("13.0.1", "~=13.0", "13.0.85", "==13.0.85", "13.0") == []
    assert doctor.cupti_mismatches("", "", "", "", "") == []


def test_requirements_are_read_from_installed_metadata() -> None:
    from argus_lab.run.machine import package_version

    if not package_version("cupti-python"):
        pytest.skip("cupti-python is not installed here")
    spec = doctor.requirement_on("cupti-python", "nvidia-cuda-cupti")
    assert spec.startswith(("~=", "==", ">="))
    assert doctor.requirement_on("cupti-python", "no-such-dist") == ""
    assert doctor.requirement_on("no-such-dist", "numpy") == ""


def test_ncu_report_against_ncu() -> None:
    problem = doctor.ncu_report_mismatch("2026.3.1", "2025.3.1.0")
    assert problem is not None
    assert problem[0] == "the ncu_report reader is 2026.3.1 but ncu is 2025.3.1.0"
    assert problem[1].startswith('pip install "ncu-report==2025.3.1"')
    assert doctor.ncu_report_mismatch("2025.3.1", "2025.3.1.0") is None
    assert doctor.version_tuple("2.11.0+cu130") == (2, 11, 0)
    assert doctor.satisfies("13.0.85", "==13.0.85") is True
    assert doctor.satisfies("13.4.92", "~=13.0") is True
    assert doctor.satisfies("13.4.92", "==13.0.85") is False


def test_cli_offers_the_doctor() -> None:
    # %argus doctor: tests/test_magics.py::test_argus_doctor_prints_the_checks (it owns the IPython shell)
    args = build_parser().parse_args(["doctor", "--json", "--save", "d.json"])
    assert args.command == "doctor"
    assert args.json
    assert args.save == "d.json"


def test_a_command_that_needs_the_notebook_extras_names_them(tmp_path: Path) -> None:
    # plotly made unimportable in the child (None in sys.modules), as in a plain `pip install argus_lab`
    code = (
        "import sys; sys.modules['plotly'] = None; sys.modules['plotly.offline'] = None\n"
        "from argus_lab.faces.cli import main\n"
        f"store = {str(tmp_path / 's.duckdb')!r}\n"
        f"assert main(['run', {str(ROOT / 'examples' / 'nested.py')!r}, '-s', 'host.wall', '-n', '1', '-w', '0', "
        "'--store', store]) == 0  # measuring needs no extra\n"
        f"sys.exit(main(['export', '--store', store, {str(tmp_path / 'r.html')!r}]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert 'pip install "argus_lab[jupyter]"' in proc.stderr


def test_the_pass_table_is_package_data() -> None:
    tomllib = pytest.importorskip("tomllib")

    from argus_lab.plan.passes import DATA, TABLE_NAME

    assert DATA.parent.name == "argus_lab"
    assert (DATA / TABLE_NAME).is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["argus_lab"]
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(DATA / TABLE_NAME)], cwd=ROOT, capture_output=True, check=False
    )
    assert ignored.returncode == 1  # not ignored: hatch puts it into the wheel
    deps = config["project"]["dependencies"]
    assert not [d for d in deps if d.split(">")[0].split("=")[0] in ("polars", "plotly", "jupyterlab")]
    wheels = sorted((ROOT / "dist").glob("argus_lab-*.whl"))
    if wheels:  # built here for the GPU check: it must hold what a user needs
        import zipfile

        names = set(zipfile.ZipFile(wheels[-1]).namelist())
        assert f"argus_lab/data/{TABLE_NAME}" in names
        assert "argus_lab/backends/cupti/profiler_host.py" in names
        assert any(n.endswith("share/jupyter/labextensions/argus-lab/package.json") for n in names)
