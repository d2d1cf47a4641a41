"""``argus-lab doctor`` and ``%argus doctor``: what this machine can measure, one line per part, each ``ok`` or the fix.

The checks read the machine as it is (nothing is mocked or assumed): the package and its data, the GPU and driver
(NVML, the CUDA driver API), the CUDA runtime torch was built for, CUPTI (cupti-python, the libcupti beside it, the
versions they and torch require of each other, whether another tool holds CUPTI in this process or the GPU's counters
on this machine), Nsight Compute (found, version, counter permission: ERR_NVGPUCTRPERM; the ``ncu_report`` reader
against it), NVML sampling, PM sampling, torch and Triton, the native launch extension (built, or why not), the
notebook extras, and the pass model the planner uses.  Each check answers ``ok``, ``warn`` (works, with a caveat and
its fix), ``FAIL`` (does not work here, with the fix) or ``--`` (does not apply, with why).

Long steps run in subprocesses with timeouts (``ncu --version``, the CUPTI profiler host worker); the native
extension is built into its per-user cache when it is not there yet (what a first timing run would do).
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from argus_lab.run.dists import pins_on, pip_install, requirement_on, satisfies, unmet_requirements, version_tuple
from argus_lab.run.machine import package_version

OK, WARN, FAIL, NA = "ok", "warn", "FAIL", "--"
PROFILING_PROCESSES = ("ncu", "nsys", "nv-hostengine", "dcgmi", "ncu-ui", "nsys-ui")
"""Processes that may hold the GPU's performance counters (Nsight tools, DCGM's profiling module)."""


@dataclass(frozen=True)
class Check:
    """One line of the doctor's answer."""

    name: str
    status: str
    detail: str
    fix: str = ""

    def line(self, width: int = 22) -> str:
        text = f"{self.status:<5} {self.name:<{width}} {self.detail}"
        if self.fix:
            text += "\n" + " " * (6 + width + 1) + f"fix: {self.fix}"
        return text


@dataclass(frozen=True)
class Facts:
    """What the checks learned that later checks need."""

    driver_cuda: tuple[int, int] | None = None  # the CUDA version the driver supports
    gpus: tuple[str, ...] = ()


# -- version rules (pure; the metadata readers are argus_lab.run.dists) -------------------------------------------
def cupti_mismatches(
    cupti_python: str, cupti_needs: str, libcupti: str, torch_pin: str, cuda_runtime: str, torch_via: str = ""
) -> list[tuple[str, str]]:
    """(problem, fix) for cupti-python against the libcupti wheel, torch's pin and the CUDA runtime in use.

    ``cupti_python``: the cupti-python version; ``cupti_needs``: its requirement on nvidia-cuda-cupti; ``libcupti``:
    the installed nvidia-cuda-cupti version; ``torch_pin``: torch's requirement on it (torch 2.11 places it through
    ``cuda-toolkit[cupti]``, named by ``torch_via``); ``cuda_runtime``: the CUDA version torch was built for
    (``torch.version.cuda``).  Empty strings mean unknown and are not judged.
    """
    out: list[tuple[str, str]] = []
    runtime = version_tuple(cuda_runtime)[:2]
    if cupti_python and runtime and version_tuple(cupti_python)[:1] != runtime[:1]:
        out.append(
            (
                f"cupti-python {cupti_python} is for CUDA {version_tuple(cupti_python)[0]}, but torch runs CUDA "
                f"{cuda_runtime}",
                f'pip install "cupti-python=={runtime[0]}.{runtime[1]}.*"',
            )
        )
    if cupti_python and cupti_needs and libcupti and satisfies(libcupti, cupti_needs) is False:
        out.append(
            (
                f"cupti-python {cupti_python} needs nvidia-cuda-cupti {cupti_needs}, but {libcupti} is installed",
                f'pip install "cupti-python=={".".join(map(str, version_tuple(libcupti)[:2]))}.*"',
            )
        )
    if torch_pin and libcupti and satisfies(libcupti, torch_pin) is False:
        pinned = version_tuple(torch_pin.lstrip("=<>~! "))
        out.append(
            (
                f"torch pins nvidia-cuda-cupti {torch_pin}{f' (through {torch_via})' if torch_via else ''} but "
                f"{libcupti} is installed (pip upgraded it for cupti-python {cupti_python or '?'}), so torch's "
                "profiler and argus_lab load a libcupti torch was not built with",
                f'pip install "nvidia-cuda-cupti{torch_pin}" "cupti-python=={pinned[0]}.{pinned[1]}.*" (PM sampling '
                f"needs cupti-python>=13.3: install it apart, see docs/gpu-backends.md)"
                if len(pinned) >= 2
                else f'pip install "nvidia-cuda-cupti{torch_pin}"',
            )
        )
    return out


def ncu_report_mismatch(reader: str, ncu: str) -> tuple[str, str] | None:
    """(problem, fix) when the ``ncu_report`` reader's version differs from the installed ncu's (year.minor.patch)."""
    r, n = version_tuple(reader)[:3], version_tuple(ncu)[:3]
    if not r or not n or r == n:
        return None
    want = ".".join(map(str, n))
    return (
        f"the ncu_report reader is {reader} but ncu is {ncu}",
        f'pip install "ncu-report=={want}" (or `pip uninstall ncu-report` to use the reader ncu ships in '
        "extras/python)",
    )


# -- the checks ----------------------------------------------------------------------------------------------------
def check_package() -> list[Check]:
    from argus_lab.plan.passes import DATA, TABLE_NAME

    where = Path(__file__).resolve().parents[1]  # the argus_lab package folder
    version = package_version("argus_lab") or "(not installed as a distribution)"
    out = [Check("argus_lab", OK, f"{version} at {where} (Python {sys.version.split()[0]}, {sys.executable})")]
    tables = sorted(p.name for p in DATA.glob("ncu_passes_*.json"))
    if TABLE_NAME in tables:
        out.append(Check("package data", OK, f"recorded pass tables: {', '.join(tables)} in {DATA}"))
    else:
        out.append(
            Check(
                "package data",
                FAIL,
                f"{DATA / TABLE_NAME} is missing: plans without a GPU fall back to an assumed pass count",
                "reinstall argus_lab from its wheel (the table ships as package data)",
            )
        )
    missing = [m for m in ("polars", "plotly", "ipywidgets", "IPython", "jupyterlab") if not _importable(m)]
    if missing:
        out.append(
            Check(
                "notebook extras",
                WARN,
                f"not installed: {', '.join(missing)} (the command line and the store work; notebook views, the "
                "panel and JupyterLab need them)",
                'pip install "argus_lab[jupyter]"',
            )
        )
    else:
        out.append(Check("notebook extras", OK, "polars, plotly, ipywidgets, IPython, jupyterlab"))
    return out


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _nvml() -> Any:
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def check_gpu() -> tuple[list[Check], Facts]:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return [
            Check(
                "GPU and driver",
                FAIL,
                f"no NVIDIA driver: libcuda.so.1 cannot be loaded ({exc})",
                "run on a machine with an NVIDIA GPU and driver; here host.* signals work and GPU runs are skipped "
                "with the reason",
            )
        ], Facts()
    version = ctypes.c_int(0)
    count = ctypes.c_int(0)
    init = cuda.cuInit(0)
    cuda.cuDriverGetVersion(ctypes.byref(version))
    driver_cuda = (version.value // 1000, version.value % 1000 // 10)
    if init != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return [
            Check(
                "GPU and driver",
                FAIL,
                f"the CUDA driver (CUDA {driver_cuda[0]}.{driver_cuda[1]}) sees no usable GPU (cuInit returned {init})",
                "check `nvidia-smi`, CUDA_VISIBLE_DEVICES and the container's GPU access (--gpus)",
            )
        ], Facts(driver_cuda)
    names: list[str] = []
    driver = ""
    try:
        nv = _nvml()
        driver = _text(nv.nvmlSystemGetDriverVersion())
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            major, minor = nv.nvmlDeviceGetCudaComputeCapability(h)
            names.append(f"{_text(nv.nvmlDeviceGetName(h))} (sm_{major}{minor})")
    except Exception:  # NVML is checked on its own line
        for i in range(count.value):
            buf = ctypes.create_string_buffer(256)
            dev = ctypes.c_int(0)
            cuda.cuDeviceGet(ctypes.byref(dev), i)
            cuda.cuDeviceGetName(buf, 256, dev)
            names.append(buf.value.decode(errors="replace"))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    shown = ", ".join(names) or f"{count.value} device(s)"
    detail = f"{shown}; driver {driver or '?'} (CUDA {driver_cuda[0]}.{driver_cuda[1]})"
    if visible is not None:
        detail += f"; CUDA_VISIBLE_DEVICES={visible}"
    return [Check("GPU and driver", OK, detail)], Facts(driver_cuda, tuple(names))


def _torch() -> Any:
    try:
        return importlib.import_module("torch")
    except Exception:  # a broken torch install is reported, not raised
        return None


def check_cuda_runtime(facts: Facts) -> list[Check]:
    torch = _torch()
    if torch is None:
        return [
            Check(
                "CUDA runtime",
                NA,
                "torch is not installed; argus_lab measures any CUDA program, torch is only needed by torch workloads",
            )
        ]
    built = getattr(torch.version, "cuda", None) or ""
    if not built:
        return [
            Check(
                "CUDA runtime",
                WARN if facts.driver_cuda else NA,
                f"torch {torch.__version__} is a CPU build (no CUDA runtime)",
                "install a CUDA build of torch (e.g. the cu130 wheels)" if facts.driver_cuda else "",
            )
        ]
    runtime = version_tuple(built)[:2]
    detail = f"torch {torch.__version__} built for CUDA {built}"
    rt_pkg = package_version("nvidia-cuda-runtime")
    if rt_pkg:
        detail += f" (nvidia-cuda-runtime {rt_pkg})"
    if facts.driver_cuda is None:
        return [Check("CUDA runtime", NA, f"{detail}; no driver to run it on here")]
    drv = facts.driver_cuda
    if runtime[:1] > drv[:1]:
        return [
            Check(
                "CUDA runtime",
                FAIL,
                f"{detail}, but the driver supports only CUDA {drv[0]}.{drv[1]}",
                f"upgrade the NVIDIA driver to one for CUDA {built}, or install torch built for CUDA {drv[0]}.x",
            )
        ]
    if runtime > drv:
        return [
            Check(
                "CUDA runtime",
                WARN,
                f"{detail}, newer than the driver's CUDA {drv[0]}.{drv[1]} (minor-version compatibility: PTX JIT "
                "and the newest features may fail)",
                f"upgrade the NVIDIA driver to one for CUDA {built}",
            )
        ]
    ok = torch.cuda.is_available()
    return [Check("CUDA runtime", OK if ok else FAIL, f"{detail}; torch.cuda.is_available() = {ok}")]


def _profiler_host(chip: str | None, sets: Sequence[str] = (), timeout: float = 60.0) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "argus_lab.backends.cupti.profiler_host", *(["--chip", chip] if chip else []), *sets]
    env = {k: v for k, v in os.environ.items() if k != "CUDA_INJECTION64_PATH"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"the CUPTI profiler host worker did not answer within {timeout:.0f} s"}
    try:
        out: dict[str, Any] = json.loads(proc.stdout)
    except ValueError:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        return {"ok": False, "error": f"the CUPTI profiler host worker ended with status {proc.returncode}: {tail}"}
    return out


def _holders() -> list[str]:
    """Other processes on this machine that may hold the GPU's performance counters."""
    out = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if comm in PROFILING_PROCESSES:
            out.append(f"{comm} (pid {entry.name})")
    return sorted(out)


def check_cupti_versions(facts: Facts) -> list[Check]:
    """cupti-python against what it requires (installed here?), the libcupti wheel, torch's pin on it (read from the
    installed metadata, through ``cuda-toolkit[cupti]`` where torch places it) and torch's CUDA; and whether
    ``import cupti`` works."""
    cp = package_version("cupti-python")
    lib = package_version("nvidia-cuda-cupti")
    versions = f"cupti-python {cp or 'not installed'}, nvidia-cuda-cupti {lib or 'not installed'}"
    if not cp:
        return [
            Check(
                "CUPTI",
                FAIL if facts.driver_cuda else NA,
                f"{versions}: gpu.* timing signals need cupti-python",
                'pip install "cupti-python==13.0.*" (match the CUDA major.minor of the nvidia-cuda-cupti torch pins)',
            )
        ]
    torch = _torch() if "torch" in sys.modules or _importable("torch") else None
    runtime = (getattr(torch.version, "cuda", None) or "") if torch is not None else ""
    pins = pins_on("torch", "nvidia-cuda-cupti")
    pin = pins[0] if pins else None
    problems = cupti_mismatches(
        cp,
        requirement_on("cupti-python", "nvidia-cuda-cupti"),
        lib,
        pin.spec if pin else "",
        runtime,
        ", ".join(pin.via) if pin else "",
    )
    unmet = [u for u in unmet_requirements("cupti-python") if u.name.lower().replace("_", "-") != "nvidia-cuda-cupti"]
    out = [Check("CUPTI versions", FAIL, problem, fix) for problem, fix in problems]
    error = _import_error("cupti")
    if unmet:
        detail = f"cupti-python {cp} requires {', '.join(u.text() for u in unmet)}"
        out.append(
            Check(
                "CUPTI versions",
                FAIL,
                detail + (f": `import cupti` fails ({error})" if error else ""),
                pip_install([u.requirement for u in unmet], "cupti-python"),
            )
        )
    elif error:
        out.append(
            Check(
                "CUPTI versions",
                FAIL,
                f"`import cupti` (cupti-python {cp}) fails: {error}",
                f'pip install --force-reinstall "cupti-python=={cp}" (with its dependencies)',
            )
        )
    if not out:
        said = f"; {pin.text('nvidia-cuda-cupti')}" if pin else ""
        out.append(Check("CUPTI versions", OK, versions + said + (f"; torch's CUDA {runtime}" if runtime else "")))
    return out


def _import_error(module: str) -> str:
    """``""`` when ``module`` imports, else the error's type and text (a GPU-less import is not an error here)."""
    try:
        importlib.import_module(module)
    except (ImportError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    except Exception:  # e.g. cupti's NotSupportedError without a driver: the package itself is complete
        return ""
    return ""


def check_cupti(facts: Facts) -> list[Check]:
    from argus_lab.backends.cupti.collector import check_cupti_free, mapped_libcupti
    from argus_lab.errors import CollectorBusyError
    from argus_lab.plan.live_passes import cupti_version_text

    out: list[Check] = []
    answer = _profiler_host(None) if facts.driver_cuda else {}
    if facts.driver_cuda is None:
        out.append(Check("libcupti", NA, "no driver: the libcupti and chip of a GPU are checked on a GPU host"))
    elif answer.get("ok"):
        out.append(
            Check(
                "libcupti",
                OK,
                f"{answer['library']} (CUPTI {cupti_version_text(int(answer['cupti_version']))}) answers the "
                f"profiler host API; chip {answer['chip']} of device 0 ({answer.get('device') or '?'}, via "
                f"{answer.get('chip_from')})",
            )
        )
    else:
        out.append(
            Check(
                "libcupti",
                FAIL,
                str(answer.get("error")),
                "install nvidia-cuda-cupti (a dependency of cupti-python) or point ARGUS_LIBCUPTI at libcupti.so",
            )
        )
    try:
        check_cupti_free()
        mapped = mapped_libcupti()
        held = "CUPTI is free in this process" + (f" ({mapped} is loaded)" if mapped else "")
        status = OK
        fix = ""
    except CollectorBusyError as exc:
        held, status, fix = str(exc).split("; ")[0], FAIL, str(exc).split("; ", 1)[-1]
    others = _holders()
    if others:
        held += f"; other processes that may hold the GPU counters: {', '.join(others)}"
        if status == OK:
            status = WARN
            fix = "ncu and PM sampling need the counters: wait for those tools to end (or stop DCGM profiling)"
    out.append(Check("CUPTI in use", status, held, fix))
    return out


def check_ncu(facts: Facts) -> list[Check]:
    from argus_lab.backends.ncu.launcher import find_ncu
    from argus_lab.errors import BackendUnavailableError

    out: list[Check] = []
    try:
        ncu = find_ncu()
    except BackendUnavailableError as exc:
        return [Check("ncu", FAIL if facts.driver_cuda else NA, "Nsight Compute (ncu) not found", str(exc))]
    try:
        text = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [Check("ncu", FAIL, f"{ncu} does not run ({exc})", "reinstall Nsight Compute or set ARGUS_NCU")]
    version = next((ln.split()[1] for ln in text.splitlines() if ln.startswith("Version")), text.strip()[:40])
    out.append(Check("ncu", OK, f"{ncu} {version}"))
    out.append(counter_permission(facts))
    reader, where = ncu_report_version(ncu)
    mismatch = ncu_report_mismatch(reader, version) if reader else None
    if not reader:
        out.append(
            Check("ncu_report", FAIL, where, 'pip install "ncu-report==' + ".".join(version.split(".")[:3]) + '"')
        )
    elif mismatch:
        out.append(Check("ncu_report", WARN, f"{mismatch[0]} ({where})", mismatch[1]))
    else:
        out.append(Check("ncu_report", OK, f"{reader} ({where}) matches ncu"))
    return out


def ncu_report_version(ncu: str) -> tuple[str, str]:
    """(version, where) of the ncu_report reader argus_lab would use, in the order
    :func:`argus_lab.backends.ncu.parse.import_ncu_report` tries: the pip package, else the newest reader an Nsight
    Compute install ships (``<root>/<version>/extras/python``)."""
    from argus_lab.backends.ncu.parse import NCU_ROOTS

    pip = package_version("ncu-report")
    if pip:
        return pip, "pip package ncu-report"
    for root in NCU_ROOTS:
        if not os.path.isdir(root):
            continue
        for ver in sorted(os.listdir(root), reverse=True):
            extras = Path(root, ver, "extras", "python")
            if (extras / "ncu_report.py").is_file():
                m = re.search(r"(\d{4}\.\d+\.\d+)", ver)
                return (m.group(1) if m else ver), f"shipped with Nsight Compute in {extras}"
    return "", f"no ncu_report reader: neither the pip package ncu-report nor {' or '.join(NCU_ROOTS)}/*/extras/python"


def counter_permission(facts: Facts) -> Check:
    """ERR_NVGPUCTRPERM: whether this user may read the GPU's performance counters."""
    params = Path("/proc/driver/nvidia/params")
    if facts.driver_cuda is None or not params.exists():
        return Check("counter permission", NA, "no NVIDIA driver here (nothing to read counters from)")
    try:
        text = params.read_text()
    except OSError as exc:
        return Check("counter permission", WARN, f"cannot read {params} ({exc})", "")
    m = re.search(r"RmProfilingAdminOnly:\s*(\d+)", text)
    admin_only = bool(m and m.group(1) == "1")
    if not admin_only:
        return Check("counter permission", OK, "GPU performance counters are open to all users")
    if os.geteuid() == 0:
        return Check("counter permission", OK, "counters are restricted to admin users, and this process is root")
    return Check(
        "counter permission",
        FAIL,
        "ERR_NVGPUCTRPERM: GPU performance counters are restricted to admin users (RmProfilingAdminOnly: 1) and "
        "this user is not root: ncu and PM sampling will fail",
        "run as root, or allow all users: `options nvidia NVreg_RestrictProfilingToAdminUsers=0` in "
        "/etc/modprobe.d/ and reload the driver (https://developer.nvidia.com/ERR_NVGPUCTRPERM)",
    )


def check_nvml(facts: Facts) -> list[Check]:
    version = package_version("nvidia-ml-py")
    if not version:
        return [
            Check(
                "NVML", FAIL if facts.driver_cuda else NA, "nvidia-ml-py is not installed", "pip install nvidia-ml-py"
            )
        ]
    try:
        nv = _nvml()
        h = nv.nvmlDeviceGetHandleByIndex(0)
        sm = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
        power = nv.nvmlDeviceGetPowerUsage(h) / 1000.0
    except Exception as exc:
        if facts.driver_cuda is None:
            return [Check("NVML", NA, f"nvidia-ml-py {version}; no driver to sample ({type(exc).__name__}: {exc})")]
        return [Check("NVML", FAIL, f"nvidia-ml-py {version}: {type(exc).__name__}: {exc}", "check the NVIDIA driver")]
    return [Check("NVML", OK, f"nvidia-ml-py {version}; device 0 now: SM clock {sm} MHz, power {power:.0f} W")]


def check_pm(facts: Facts) -> list[Check]:
    """PM sampling (``pm:*``): whether ``cupti.pm_sampling`` imports, and if not, why (cupti-python missing, one
    without the module, or the import's own error) with the fix."""
    from argus_lab.backends.pm import NEEDED, pm_sampling_status

    status = pm_sampling_status()
    cp = package_version("cupti-python") or "not installed"
    if status.module is not None:
        if facts.driver_cuda is None:
            return [Check("PM sampling", NA, f"no driver here (cupti.pm_sampling of cupti-python {cp} imports)")]
        return [Check("PM sampling", OK, f"cupti.pm_sampling of cupti-python {cp}")]
    if status.reason == "import failed":  # the module is there and broken: say what broke, whatever the machine
        return [Check("PM sampling", FAIL, f"pm:* signals unavailable: {status.problem}", status.fix)]
    if facts.driver_cuda is None:
        return [Check("PM sampling", NA, f"no driver here; {status.problem}")]
    return [
        Check(
            "PM sampling",
            WARN,
            f"pm:* signals unavailable: {status.problem}" + ("" if NEEDED in status.problem else f" (needs {NEEDED})"),
            f"{status.fix}; or use hw:* signals (ncu)",
        )
    ]


def check_frameworks() -> list[Check]:
    out = []
    tv, trv = package_version("torch"), package_version("triton")
    out.append(Check("torch", OK if tv else NA, tv or "not installed (needed only by torch workloads)"))
    if trv:
        proton = _importable("triton.profiler")
        out.append(Check("Triton", OK, f"{trv}" + (" (with Proton)" if proton else "")))
    else:
        out.append(Check("Triton", NA, "not installed (compile.* facts of Triton kernels need it)"))
    return out


def check_native() -> list[Check]:
    from argus_lab.backends.cupti import native

    built = native.build()
    if built.module is None:
        return [
            Check(
                "native launch path",
                WARN,
                f"{built.note}; timing runs push region ids from Python (slower per launch)",
                "install a C compiler and the Python headers (e.g. `apt install gcc python3-dev`), or set CC",
            )
        ]
    return [Check("native launch path", OK, built.note)]


def check_passes(facts: Facts) -> list[Check]:
    from argus_lab.plan.passes import default_pass_model

    model = default_pass_model()
    source = model.source
    close = getattr(model, "close", None)
    example = ["gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "dram__bytes_read.sum"]
    try:
        n = model.passes(example)
    finally:
        if close is not None:
            close()
    detail = f"{source}; e.g. {n} passes for {', '.join(example)}"
    if source.startswith("live"):
        return [Check("pass model", OK, detail)]
    if source.startswith("live count unavailable"):
        return [Check("pass model", WARN, detail, "see the libcupti line above; set ARGUS_LIBCUPTI or ARGUS_GPU_CHIP")]
    answer = _profiler_host("GH100")
    if answer.get("ok"):
        extra = (
            f" (CUPTI's host API answers here without a GPU: ARGUS_GPU_CHIP=<chip> plans with live counts for a chip,"
            f" via {answer['library']})"
        )
    else:
        extra = f" (live counts for a named chip unavailable here: {answer.get('error')})"
    status = NA if facts.driver_cuda is None else WARN
    fix = "" if facts.driver_cuda is None else "set ARGUS_LIVE_PASSES=1 to ask CUPTI (see the libcupti line)"
    return [Check("pass model", status, detail + extra, fix)]


CHECKS: tuple[tuple[str, Callable[[Facts], list[Check]]], ...] = (
    ("CUDA runtime", check_cuda_runtime),
    ("CUPTI versions", check_cupti_versions),
    ("CUPTI", check_cupti),
    ("ncu", check_ncu),
    ("NVML", check_nvml),
    ("PM sampling", check_pm),
    ("torch", lambda _f: check_frameworks()),
    ("native", lambda _f: check_native()),
    ("passes", check_passes),
)


def diagnose() -> list[Check]:
    """Every check, in order (a check that raises becomes a ``FAIL`` line naming the error)."""
    checks = check_package()
    gpu, facts = check_gpu()
    checks += gpu
    for name, fn in CHECKS:
        try:
            checks += fn(facts)
        except Exception as exc:  # a doctor never dies of what it examines
            checks.append(Check(name, FAIL, f"the check itself failed: {type(exc).__name__}: {exc}", "report this"))
    return checks


def render(checks: Sequence[Check]) -> str:
    """The doctor's text: one line per check (and a ``fix:`` line under each that is not ok), then a summary."""
    width = max(len(c.name) for c in checks)
    lines = [c.line(width) for c in checks]
    bad = [c for c in checks if c.status == FAIL]
    warn = [c for c in checks if c.status == WARN]
    lines.append(
        f"{len(checks)} checks: {sum(c.status == OK for c in checks)} ok, {len(warn)} warn, {len(bad)} FAIL, "
        f"{sum(c.status == NA for c in checks)} not applicable"
    )
    return "\n".join(lines)


def to_json(checks: Sequence[Check]) -> str:
    """The checks as a JSON list of ``{name, status, detail, fix}``."""
    return json.dumps([asdict(c) for c in checks], indent=1)


def main(as_json: bool = False, save: str | None = None) -> int:
    """Print the doctor's answer (and write it as JSON to ``save``); the exit status is 1 when a check failed."""
    checks = diagnose()
    print(to_json(checks) if as_json else render(checks))
    if save:
        Path(save).write_text(to_json(checks) + "\n")
    return 1 if any(c.status == FAIL for c in checks) else 0


__all__ = [
    "Check",
    "cupti_mismatches",
    "diagnose",
    "main",
    "ncu_report_mismatch",
    "render",
    "requirement_on",
    "satisfies",
    "to_json",
    "version_tuple",
]
