"""``argus-lab doctor`` on this CPU machine, for real: it has no NVIDIA driver, so the GPU lines must say so with the
fix, the host-side lines (package, data, native extension, CUPTI versions, pass model) must still answer, and a
profiling tool injected into the process must be named as holding CUPTI.  The version rules are also checked on
SYNTHETIC version strings (the mismatches this machine does not have)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from argus_lab.app import doctor
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


# -- the doctor in environments built for the test: real installed packages linked into a --target folder, plus the
#    recorded metadata of distributions this machine lacks (tests/data/dists: torch 2.11.0 as on PyPI, the
#    cuda-toolkit 13.0.2 it requires, cupti-python and nvidia-cuda-cupti as in the wheels of .whl/pm) ---------------
DISTS = ROOT / "tests" / "data" / "dists"
REAL = ("cupti-python", "numpy", "cuda-bindings", "cuda-pathfinder", "pyelftools", "nvidia-cuda-cupti", "packaging")


def _link_installed(target: Path, dist: str) -> None:
    """Put installed distribution ``dist`` (its top-level folders and dist-info, as pip laid them out) into
    ``target`` by symbolic links: the real package, seen from another environment."""
    import importlib.metadata as md

    site = Path(str(md.distribution(dist).locate_file("")))
    for top in sorted({f.parts[0] for f in md.files(dist) or [] if f.parts and f.parts[0] != ".."}):
        if not (target / top).exists() and (site / top).exists():
            (target / top).symlink_to(site / top)


def _recorded(target: Path, name: str) -> None:
    """A dist-info folder holding the recorded METADATA ``tests/data/dists/<name>.METADATA`` (what pip reads)."""
    folder = target / f"{name}.dist-info"
    folder.mkdir()
    (folder / "METADATA").write_text((DISTS / f"{name}.METADATA").read_text())


def _env(tmp_path: Path, real: Sequence[str], recorded: Sequence[str] = ()) -> Path:
    import importlib.metadata as md

    for dist in real:
        try:
            md.distribution(dist)
        except md.PackageNotFoundError:
            pytest.skip(f"{dist} is not installed here to build the test environment from")
    if not md.version("cupti-python").startswith("13.") or int(md.version("cupti-python").split(".")[1]) < 3:
        pytest.skip("the environments need cupti-python 13.3+ (cupti.pm_sampling) installed here")
    target = tmp_path / "site"
    target.mkdir()
    for dist in real:
        _link_installed(target, dist)
    for name in recorded:
        _recorded(target, name)
    return target


def _checks_in(target: Path, call: str) -> dict[str, dict[str, Any]]:
    """``doctor.<call>`` run by a Python that sees only ``target`` and this checkout (``-S``: no site folders)."""
    code = f"import json; from argus_lab.app import doctor as d; print(d.to_json(d.{call}))"
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": f"{target}{os.pathsep}{ROOT}", "HOME": str(target)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    checks = json.loads(proc.stdout)
    names = [c["name"] for c in checks]
    assert len(names) == len(set(names)), checks  # one line per check here: each test's fault is the only one
    return _by_name(checks)


def test_cupti_above_torchs_pin_is_named_with_the_pin_read_from_torchs_metadata(tmp_path: Path) -> None:
    # step 5 on the H200: cupti-python 13.4 + a newer nvidia-cuda-cupti installed over torch 2.11's pin; the doctor
    # said `ok CUPTI versions` (torch pins nvidia-cuda-cupti through cuda-toolkit[cupti], not by itself)
    target = _env(tmp_path, REAL, ["torch-2.11.0", "cuda_toolkit-13.0.2"])
    got = _checks_in(target, "check_cupti_versions(d.Facts((13, 0)))")["CUPTI versions"]
    assert got["status"] == "FAIL", got
    import importlib.metadata as md

    lib = md.version("nvidia-cuda-cupti")  # the installed one linked in (13.5 here; 13.4.92 on the H200)
    assert got["detail"].startswith("torch pins nvidia-cuda-cupti ==13.0.85.* (through cuda-toolkit[")
    assert "cupti," in got["detail"] and "]==13.0.2)" in got["detail"]
    assert f"but {lib} is installed" in got["detail"]
    assert got["fix"].startswith('pip install "nvidia-cuda-cupti==13.0.85.*" "cupti-python==13.0.*"')
    assert "PM sampling needs cupti-python>=13.3" in got["fix"]


def test_a_consistent_cupti_install_says_which_pin_it_checked(tmp_path: Path) -> None:
    # torch 2.11's pin met: the H200's own versions (cupti-python 13.0.1 next to nvidia-cuda-cupti 13.0.85), with
    # real packages for what cupti-python 13.0.1 requires; its `cupti` package is the 13.4 one linked in (imports)
    real = ("cupti-python", "numpy", "cuda-bindings", "cuda-pathfinder", "pyelftools", "packaging")
    target = _env(tmp_path, real, ["torch-2.11.0", "cuda_toolkit-13.0.2", "nvidia_cuda_cupti-13.0.85"])
    for info in target.glob("cupti_python-*.dist-info"):
        info.unlink()  # the link to the installed 13.4.0 metadata: this environment holds 13.0.1
    _recorded(target, "cupti_python-13.0.1")
    got = _checks_in(target, "check_cupti_versions(d.Facts((13, 0)))")["CUPTI versions"]
    assert got["status"] == "ok", got
    assert got["detail"] == (
        "cupti-python 13.0.1, nvidia-cuda-cupti 13.0.85; torch 2.11.0 requires nvidia-cuda-cupti==13.0.85.* (through "
        "cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.2)"
    )


def test_pm_sampling_that_does_not_import_is_reported_with_its_error_and_fix(tmp_path: Path) -> None:
    # cupti-python 13.4 (it has cupti.pm_sampling) installed without one of its requirements, pyelftools, as
    # `pip install --no-deps` leaves it: the doctor said "cupti-python 13.4.0 has no cupti.pm_sampling"
    real = tuple(d for d in REAL if d != "pyelftools")
    target = _env(tmp_path, real)
    got = _checks_in(target, "check_pm(d.Facts((13, 0))) + d.check_cupti_versions(d.Facts((13, 0)))")
    pm = got["PM sampling"]
    assert pm["status"] == "FAIL", pm
    assert "has no cupti.pm_sampling" not in pm["detail"]
    assert "does not import: ModuleNotFoundError: No module named 'elftools'" in pm["detail"]
    assert "cupti-python 13.4.0 requires pyelftools (not installed)" in pm["detail"]
    assert pm["fix"] == f'pip install --no-deps --target {target.resolve()} "pyelftools"'
    versions = got["CUPTI versions"]  # the timing backend's `import cupti` fails the same way: said there too
    assert versions["status"] == "FAIL"
    assert versions["detail"].startswith("cupti-python 13.4.0 requires pyelftools (not installed): `import cupti`")
    assert "No module named 'elftools'" in versions["detail"]
    # the fix, applied (the installed pyelftools put into the same folder): PM sampling imports
    _link_installed(target, "pyelftools")
    fixed = _checks_in(target, "check_pm(d.Facts((13, 0))) + d.check_cupti_versions(d.Facts((13, 0)))")
    assert fixed["PM sampling"]["status"] == "ok", fixed["PM sampling"]
    assert fixed["CUPTI versions"]["status"] == "ok", fixed["CUPTI versions"]


def test_a_cupti_python_without_pm_sampling_gets_the_private_install_with_torchs_pin(tmp_path: Path) -> None:
    # SYNTHETIC `cupti` package (an empty __init__.py: cupti-python 13.0.1 has no pm_sampling.py) with the
    # recorded metadata of cupti-python 13.0.1, torch 2.11.0 and cuda-toolkit 13.0.2
    target = _env(tmp_path, ("packaging",), ["torch-2.11.0", "cuda_toolkit-13.0.2", "cupti_python-13.0.1"])
    (target / "cupti").mkdir()
    (target / "cupti" / "__init__.py").write_text("")
    pm = _checks_in(target, "check_pm(d.Facts((13, 0)))")["PM sampling"]
    assert pm["status"] == "warn"
    assert pm["detail"] == (
        "pm:* signals unavailable: cupti-python 13.0.1 has no cupti.pm_sampling (needs cupti-python>=13.3 with "
        "nvidia-cuda-cupti>=13.3)"
    )
    assert pm["fix"].startswith(
        "torch 2.11.0 requires nvidia-cuda-cupti==13.0.85.* (through cuda-toolkit[cublas,cudart,cufft,cufile,cupti,"
    )
    assert "so install them privately: `pip install --no-deps --target DIR cupti-python==13.4.0" in pm["fix"]
    assert "pyelftools" in pm["fix"] and pm["fix"].endswith("; or use hw:* signals (ncu)")
    assert pm["fix"].count("(") == pm["fix"].count(")") and pm["fix"].count("`") % 2 == 0  # nothing cut off


def test_the_h200_doctor_missed_both_faults(tmp_path: Path) -> None:
    # what the doctor of that day answered after step 5 (tests/data/gpu/wheel/results.json): the lines these tests
    # guard, quoted so that the recorded evidence and the tests stay side by side
    recorded = _by_name(json.loads((ROOT / "tests" / "data" / "gpu" / "wheel" / "results.json").read_text())[
        "mismatch_doctor"])  # fmt: skip
    assert recorded["CUPTI versions"]["status"] == "ok"
    assert recorded["CUPTI versions"]["detail"].startswith("cupti-python 13.4.0, nvidia-cuda-cupti 13.4.92")
    assert "cupti-python 13.4.0 has no cupti.pm_sampling" in recorded["PM sampling"]["detail"]
    assert "Requires-Dist: pyelftools" in (DISTS / "cupti_python-13.4.0.METADATA").read_text()


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


def test_the_readme_explains_each_extra_and_what_it_brings() -> None:
    tomllib = pytest.importorskip("tomllib")

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    readme = (ROOT / "README.md").read_text()
    deps = readme[readme.index("## Dependencies") :].split("\n## ", 1)[0]
    for extra in ("jupyter", "ncu", "all"):
        assert f'pip install "argus_lab[{extra}]"' in deps, extra
    for req in extras["jupyter"] + extras["ncu"]:
        name = req.split(">")[0].split("=")[0].split(";")[0].strip()
        assert f"`{name}" in deps, name
