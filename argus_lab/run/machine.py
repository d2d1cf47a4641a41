"""Facts about this machine that decide what can be collected: is there a CUDA driver, which versions run."""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os
import platform
import socket
import sys

from argus_lab import config


@functools.cache
def gpu_available() -> bool:
    """Whether a CUDA driver (``libcuda.so.1``) can be loaded and reports at least one device."""
    if config.value(config.ARGUS_ASSUME_NO_GPU) == "1":
        return False
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return False
    return count.value > 0


def no_gpu_reason() -> str:
    """Why GPU signals cannot be collected here, with what to do."""
    return (
        "no NVIDIA GPU with a CUDA driver on this machine (libcuda.so.1 cannot be loaded); "
        "run the plan on a GPU machine, or drop the GPU signals"
    )


@functools.cache
def package_version(name: str) -> str:
    """The installed version of distribution ``name`` (``""`` when it is not installed): the one version look-up.

    Cached: a process's installed packages do not change while it runs (a run records them at start).
    """
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def versions(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """Versions of Python, argus_lab and the measurement packages that are installed."""
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in (
        "argus_lab",
        "duckdb",
        "pyarrow",
        "nvtx",
        "cupti-python",
        "nvidia-cuda-cupti",
        "torch",
        "triton",
        *extra,
    ):
        version = package_version(name)
        if version:
            out[name] = version
    return out


def hostname() -> str:
    """This machine's name."""
    return socket.gethostname()


ENV_KEYS = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING",
    "OMP_NUM_THREADS",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "NVTX_INJECTION64_PATH",
    "PYTHONHASHSEED",
)


def environment() -> dict[str, str]:
    """The environment variables that can change a measurement (recorded with every run)."""
    env = {k: v for k, v in os.environ.items() if k in ENV_KEYS or k.startswith("ARGUS_")}
    return dict(sorted(env.items()))
