"""CUPTI's profiler host API: how many replay passes a metric set needs on a chip, asked of libcupti itself.

The host API (``cupti_profiler_host.h``: ``cuptiProfilerHostInitialize``, ``...ConfigAddMetrics``,
``...GetConfigImage``, ``...GetNumOfPasses``) schedules a metric set onto a chip's counters and says how many passes
that takes.  It needs no GPU context, only the chip name (``GH100``), so a plan can ask it before anything runs.

It is called here through ``ctypes`` on the libcupti a pip install provides (the ``nvidia-cuda-cupti`` wheel that
torch pins and cupti-python loads), not through cupti-python's ``cupti.profiler_host``: that module exists only from
cupti-python 13.3 on (torch 2.11+cu130 pins libcupti 13.0.85, next to which pip resolves cupti-python 13.0.1) and
its initialization needs the CUDA driver, while libcupti 13.0 exports the same functions and answers without one.
The chip of a GPU is asked of CUPTI too (``cuptiDeviceGetChipName``, which needs the driver; the compute capability
of the few chips it names alone is the fallback).

This module runs as a short worker process (:mod:`argus_lab.plan.live_passes` starts it by name, so the planning
process never loads libcupti: a second libcupti in a process that later records with CUPTI does not mix)::

    python -m argus_lab.backends.cupti.profiler_host --serve [--chip GH100]

It answers one JSON line per request line (``{"metrics": [...]}`` -> ``{"passes": n}`` or ``{"error": ...,
"rejected": [...]}``) until its input closes.  Without ``--serve`` it answers the metric sets on its command line
(each comma-separated) once, as one JSON object: the doctor and the GPU scripts use that form.
Standard library only.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import glob
import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from argus_lab import config

RANGE_PROFILER = 0  # CUpti_ProfilerType CUPTI_PROFILER_TYPE_RANGE_PROFILER (ncu's kind of collection)

CHIP_BY_COMPUTE_CAPABILITY = {(7, 0): "GV100", (8, 0): "GA100", (9, 0): "GH100", (10, 0): "GB100"}
"""The chips a compute capability names alone (used only when CUPTI cannot name the device's chip)."""

_CU_DEVICE_ATTRIBUTE_CC_MAJOR = 75
_CU_DEVICE_ATTRIBUTE_CC_MINOR = 76


class HostApiError(RuntimeError):
    """A CUPTI call failed; ``code`` is CUPTI's result (-1: no call, ``name`` says what is wrong) and ``name`` its
    text."""

    def __init__(self, call: str, code: int, name: str) -> None:
        super().__init__(f"{call} failed: {name} ({code})" if code != -1 else name)
        self.call = call
        self.code = code
        self.name = name


# -- the parameter structs of cupti_profiler_host.h / cupti_target.h (CUPTI 13.0 layout; structSize says which) --
class _Init(ctypes.Structure):
    _fields_ = [
        ("structSize", ctypes.c_size_t),
        ("pPriv", ctypes.c_void_p),
        ("profilerType", ctypes.c_int),
        ("pChipName", ctypes.c_char_p),
        ("pCounterAvailabilityImage", ctypes.c_void_p),
        ("pHostObject", ctypes.c_void_p),
    ]


class _Deinit(ctypes.Structure):
    _fields_ = [("structSize", ctypes.c_size_t), ("pPriv", ctypes.c_void_p), ("pHostObject", ctypes.c_void_p)]


class _Chips(ctypes.Structure):
    _fields_ = [
        ("structSize", ctypes.c_size_t),
        ("pPriv", ctypes.c_void_p),
        ("numChips", ctypes.c_size_t),
        ("ppChipNames", ctypes.POINTER(ctypes.c_char_p)),
    ]


class _AddMetrics(ctypes.Structure):
    _fields_ = [
        ("structSize", ctypes.c_size_t),
        ("pPriv", ctypes.c_void_p),
        ("pHostObject", ctypes.c_void_p),
        ("ppMetricNames", ctypes.POINTER(ctypes.c_char_p)),
        ("numMetrics", ctypes.c_size_t),
    ]


class _ImageSize(ctypes.Structure):
    _fields_ = [
        ("structSize", ctypes.c_size_t),
        ("pPriv", ctypes.c_void_p),
        ("pHostObject", ctypes.c_void_p),
        ("configImageSize", ctypes.c_size_t),
    ]


class _Image(ctypes.Structure):
    _fields_ = [
        ("structSize", ctypes.c_size_t),
        ("pPriv", ctypes.c_void_p),
        ("pHostObject", ctypes.c_void_p),
        ("configImageSize", ctypes.c_size_t),
        ("pConfigImage", ctypes.c_void_p),
    ]


class _NumPasses(ctypes.Structure):
    _fields_ = [
        ("structSize", ctypes.c_size_t),
        ("pPriv", ctypes.c_void_p),
        ("configImageSize", ctypes.c_size_t),
        ("pConfigImage", ctypes.c_void_p),
        ("numOfPasses", ctypes.c_size_t),
    ]


class _ProfilerInit(ctypes.Structure):
    _fields_ = [("structSize", ctypes.c_size_t), ("pPriv", ctypes.c_void_p)]


class _ChipName(ctypes.Structure):
    _fields_ = [
        ("structSize", ctypes.c_size_t),
        ("pPriv", ctypes.c_void_p),
        ("deviceIndex", ctypes.c_size_t),
        ("pChipName", ctypes.c_char_p),
    ]


# -- finding libcupti -------------------------------------------------------------------------------------------
def candidates() -> list[str]:
    """libcupti files to try, in order: ``$ARGUS_LIBCUPTI`` alone when it is set; else the ``nvidia-cuda-cupti``
    wheel on ``sys.path`` (the one torch and cupti-python load), the CUDA toolkit (``$CUDA_HOME``,
    ``/usr/local/cuda``), the loader's search."""
    explicit = config.get(config.ARGUS_LIBCUPTI)
    if explicit:
        return [explicit]
    out: list[str] = []
    for entry in sys.path:
        for rel in ("nvidia/cu13/lib/libcupti.so.13", "nvidia/cuda_cupti/lib/libcupti.so.12"):
            path = os.path.join(entry or ".", rel)
            if os.path.isfile(path):
                out.append(os.path.realpath(path))
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    roots += sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
    for root in filter(None, roots):
        for sub in ("extras/CUPTI/lib64", "lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            for path in sorted(glob.glob(os.path.join(root, sub, "libcupti.so*")), reverse=True):
                out.append(os.path.realpath(path))
    found = ctypes.util.find_library("cupti")
    if found:
        out.append(found)
    unique: list[str] = []
    for p in out:
        if p not in unique:
            unique.append(p)
    return unique


class Cupti:
    """The host API of one loaded libcupti."""

    def __init__(self, path: str) -> None:
        here = os.path.dirname(path)
        for helper in ("libnvperf_host.so", "libnvperf_target.so"):  # CUPTI dlopens these by name
            full = os.path.join(here, helper)
            if here and os.path.isfile(full):
                try:
                    ctypes.CDLL(full, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    pass
        self.lib = ctypes.CDLL(path)
        self.path = path
        if not hasattr(self.lib, "cuptiProfilerHostInitialize"):
            msg = f"{path} has no profiler host API (cuptiProfilerHostInitialize); it needs CUPTI 12.6 or newer"
            raise HostApiError(msg, -1, "missing symbol")

    def _check(self, call: str, result: int) -> None:
        if result == 0:
            return
        text = ctypes.c_char_p()
        try:
            self.lib.cuptiGetResultString(result, ctypes.byref(text))
        except AttributeError:
            pass
        raise HostApiError(call, result, (text.value or b"CUPTI_ERROR_UNKNOWN").decode())

    @property
    def version(self) -> int:
        """``cuptiGetVersion``: the CUPTI API version (130001 for CUDA 13.0)."""
        v = ctypes.c_uint32(0)
        self._check("cuptiGetVersion", self.lib.cuptiGetVersion(ctypes.byref(v)))
        return int(v.value)

    def supported_chips(self) -> list[str]:
        """The chips this libcupti's host API knows."""
        p = _Chips(ctypes.sizeof(_Chips))
        self._check("cuptiProfilerHostGetSupportedChips", self.lib.cuptiProfilerHostGetSupportedChips(ctypes.byref(p)))
        return [(p.ppChipNames[i] or b"").decode() for i in range(p.numChips)]

    def passes(self, chip: str, metrics: Sequence[str]) -> int:
        """Passes the range profiler needs to collect ``metrics`` together on ``chip``."""
        init = _Init(ctypes.sizeof(_Init), None, RANGE_PROFILER, chip.encode(), None, None)
        self._check("cuptiProfilerHostInitialize", self.lib.cuptiProfilerHostInitialize(ctypes.byref(init)))
        host = init.pHostObject
        try:
            names = (ctypes.c_char_p * len(metrics))(*[m.encode() for m in metrics])
            add = _AddMetrics(ctypes.sizeof(_AddMetrics), None, host, names, len(metrics))
            self._check(
                "cuptiProfilerHostConfigAddMetrics", self.lib.cuptiProfilerHostConfigAddMetrics(ctypes.byref(add))
            )
            size = _ImageSize(ctypes.sizeof(_ImageSize), None, host, 0)
            self._check(
                "cuptiProfilerHostGetConfigImageSize", self.lib.cuptiProfilerHostGetConfigImageSize(ctypes.byref(size))
            )
            buf = (ctypes.c_uint8 * max(1, size.configImageSize))()
            image = _Image(ctypes.sizeof(_Image), None, host, size.configImageSize, ctypes.cast(buf, ctypes.c_void_p))
            self._check(
                "cuptiProfilerHostGetConfigImage", self.lib.cuptiProfilerHostGetConfigImage(ctypes.byref(image))
            )
            n = _NumPasses(ctypes.sizeof(_NumPasses), None, size.configImageSize, ctypes.cast(buf, ctypes.c_void_p), 0)
            self._check("cuptiProfilerHostGetNumOfPasses", self.lib.cuptiProfilerHostGetNumOfPasses(ctypes.byref(n)))
            return int(n.numOfPasses)
        finally:
            self.lib.cuptiProfilerHostDeinitialize(ctypes.byref(_Deinit(ctypes.sizeof(_Deinit), None, host)))

    def rejected(self, chip: str, metrics: Iterable[str]) -> list[str]:
        """The metrics CUPTI refuses alone on ``chip`` (unknown names, or metrics only ncu derives)."""
        out = []
        for m in metrics:
            try:
                self.passes(chip, [m])
            except HostApiError:
                out.append(m)
        return out

    def device_chip(self, index: int = 0, *, ask_cupti: bool = True) -> tuple[str, str]:
        """(chip, how it was found) of CUDA device ``index``; needs the CUDA driver.  ``ask_cupti=False`` skips
        ``cuptiDeviceGetChipName`` and uses the compute capability (the retry after a worker that died asking)."""
        try:
            cuda = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            msg = f"no NVIDIA driver to ask for the GPU's chip ({exc}); name the chip instead (ARGUS_GPU_CHIP=GH100)"
            raise HostApiError("libcuda", -1, msg) from None
        result = cuda.cuInit(0)
        if result != 0:
            msg = (
                f"cuInit failed with CUDA error {result} (no usable GPU); name the chip instead (ARGUS_GPU_CHIP=GH100)"
            )
            raise HostApiError("cuInit", result, msg)
        try:
            if not ask_cupti:
                msg = "cuptiDeviceGetChipName was skipped (the previous worker died in it)"
                raise HostApiError("chip name", -1, msg)
            init = _ProfilerInit(ctypes.sizeof(_ProfilerInit), None)
            self._check("cuptiProfilerInitialize", self.lib.cuptiProfilerInitialize(ctypes.byref(init)))
            p = _ChipName(ctypes.sizeof(_ChipName), None, index, None)
            self._check("cuptiDeviceGetChipName", self.lib.cuptiDeviceGetChipName(ctypes.byref(p)))
            if p.pChipName:
                return p.pChipName.decode(), "cuptiDeviceGetChipName"
        except (HostApiError, AttributeError) as exc:
            why = str(exc)
        else:
            why = "cuptiDeviceGetChipName returned no name"
        dev = ctypes.c_int(0)
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        cuda.cuDeviceGet(ctypes.byref(dev), index)
        cuda.cuDeviceGetAttribute(ctypes.byref(major), _CU_DEVICE_ATTRIBUTE_CC_MAJOR, dev)
        cuda.cuDeviceGetAttribute(ctypes.byref(minor), _CU_DEVICE_ATTRIBUTE_CC_MINOR, dev)
        chip = CHIP_BY_COMPUTE_CAPABILITY.get((major.value, minor.value))
        if chip is None:
            msg = f"{why}; compute capability {major.value}.{minor.value} names no single chip"
            raise HostApiError("chip name", -1, msg)
        return chip, f"compute capability {major.value}.{minor.value} ({why})"


def device_name(index: int = 0) -> str:
    """The CUDA device's name (``NVIDIA H200``), '' when the driver cannot say."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        if cuda.cuInit(0) != 0:
            return ""
        dev = ctypes.c_int(0)
        buf = ctypes.create_string_buffer(256)
        if cuda.cuDeviceGet(ctypes.byref(dev), index) != 0 or cuda.cuDeviceGetName(buf, 256, dev) != 0:
            return ""
        return buf.value.decode(errors="replace")
    except OSError:
        return ""


@dataclass(frozen=True)
class Opened:
    """A libcupti whose host API answered, and the chip the passes are counted for."""

    cupti: Cupti
    chip: str
    chip_from: str
    device: str
    tried: tuple[str, ...]


def open_host(chip: str | None = None, device: int = 0, *, ask_cupti: bool = True) -> Opened:
    """The first libcupti (:func:`candidates`) whose host API answers, and the chip: ``chip`` when given, else the
    chip of CUDA device ``device`` (``ask_cupti``: see :meth:`Cupti.device_chip`).  Raises :class:`HostApiError`
    saying what was tried."""
    tried: list[str] = []
    for path in candidates():
        try:
            cupti = Cupti(path)
            chips = cupti.supported_chips()
        except (OSError, HostApiError) as exc:
            tried.append(f"{path}: {exc}")
            continue
        if chip:
            if chip not in chips:
                msg = f"chip {chip!r} is not known to {path}; it knows {', '.join(chips)}"
                raise HostApiError("chip name", -1, msg)
            return Opened(cupti, chip, "given", "", tuple(tried))
        found, how = cupti.device_chip(device, ask_cupti=ask_cupti)
        return Opened(cupti, found, how, device_name(device), tuple(tried))
    msg = "no libcupti with a working profiler host API: " + ("; ".join(tried) or "none found")
    raise HostApiError("libcupti", -1, msg)


# -- the worker ---------------------------------------------------------------------------------------------------
def hello(opened: Opened) -> dict[str, Any]:
    """The worker's first line: which library and chip it answers for."""
    return {
        "ok": True,
        "chip": opened.chip,
        "chip_from": opened.chip_from,
        "device": opened.device,
        "library": opened.cupti.path,
        "cupti_version": opened.cupti.version,
        "tried": list(opened.tried),
    }


def answer(opened: Opened, metrics: Sequence[str]) -> dict[str, Any]:
    """One request: the passes of ``metrics``, or the error and the metrics CUPTI refuses alone."""
    try:
        return {"passes": opened.cupti.passes(opened.chip, metrics)}
    except HostApiError as exc:
        return {"error": str(exc), "rejected": opened.cupti.rejected(opened.chip, metrics)}


def serve(opened: Opened, inp: IO[str], out: IO[str]) -> None:
    """Answer request lines until the input closes."""
    for line in inp:
        if not line.strip():
            continue
        try:
            metrics = [str(m) for m in json.loads(line)["metrics"]]
        except (ValueError, KeyError, TypeError) as exc:
            reply: dict[str, Any] = {"error": f"bad request {line.strip()!r}: {exc}", "rejected": []}
        else:
            reply = answer(opened, metrics)
        out.write(json.dumps(reply) + "\n")
        out.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m argus_lab.backends.cupti.profiler_host", description=__doc__)
    parser.add_argument("sets", nargs="*", help="metric sets, each comma-separated")
    parser.add_argument("--chip", default=config.get(config.ARGUS_GPU_CHIP), help="chip name, e.g. GH100")
    parser.add_argument("--device", type=int, default=0, help="CUDA device whose chip is used (default 0)")
    parser.add_argument("--serve", action="store_true", help="answer JSON request lines on stdin")
    parser.add_argument(
        "--chip-from-capability", action="store_true", help="find the device's chip by compute capability only"
    )
    args = parser.parse_args(argv)
    # the protocol owns the real stdout; anything a library prints goes to stderr
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        opened = open_host(args.chip or None, args.device, ask_cupti=not args.chip_from_capability)
    except (HostApiError, OSError) as exc:
        proto.write(json.dumps({"ok": False, "error": str(exc)}) + "\n")
        proto.flush()
        return 1
    if args.serve:
        proto.write(json.dumps(hello(opened)) + "\n")
        proto.flush()
        serve(opened, sys.stdin, proto)
        return 0
    result = hello(opened)
    result["sets"] = [{"metrics": s.split(","), **answer(opened, s.split(","))} for s in args.sets]
    proto.write(json.dumps(result, indent=1) + "\n")
    proto.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
