"""How a workload runs the clean or the instrumented variant of its kernels: one call before each launch.

A kernel with device markers takes a ``probe`` argument.  The workload asks for it right before the launch::

    probe = argus_lab.device.probe(persistent_gemm, programs=grid, events=events_per_cta, regions=PHASES)
    persistent_gemm[(grid,)](..., probe, ...)

* Outside an instrumented run (no measurement, or a run of the clean variant: ``gpu.time``, ``ncu`` ...) it returns
  ``None``: the kernel compiles its markers to nothing and runs exactly as without them.
* Inside an instrumented run (the planner's run for ``dev.*`` signals) the run's device backend hands out a fresh
  probe buffer for this launch and remembers which host region instance, thread and kernel asked for it, so that
  the join can nest the launch's device regions under its kernel record and that instance.

:func:`instrumented` says which of the two the calling process runs now (e.g. to pick a launcher or a config).

This module is part of the markers stage: it imports neither Triton nor torch nor any backend; the device backend
(:mod:`argus_lab.backends.device.collector`) installs itself as the probe source while its run records.
"""

from __future__ import annotations

from typing import Any, Protocol

from argus_lab.device.declarations import DeviceRegions
from argus_lab.errors import RegionMisuseError

__all__ = ["ProbeSource", "install", "instrumented", "kernel_name", "probe", "uninstall"]


class ProbeSource(Protocol):
    """What hands out probe buffers while an instrumented run records (the device backend's collector)."""

    def probe(self, kernel: str, programs: int, events: int, regions: DeviceRegions, device: Any) -> Any:
        """A zeroed probe buffer (a GPU tensor) for the next launch of ``kernel``."""


_SOURCE: list[ProbeSource | None] = [None]


def install(source: ProbeSource) -> None:
    """Make ``source`` the process's probe source (called by the device backend when its run starts)."""
    if _SOURCE[0] is not None and _SOURCE[0] is not source:
        msg = (
            "an instrumented run is already recording in this process; device probes come from one run at a time "
            "(finish that measurement first)"
        )
        raise RegionMisuseError(msg)
    _SOURCE[0] = source


def uninstall(source: ProbeSource) -> None:
    """Stop handing out probes from ``source`` (called when its run stops)."""
    if _SOURCE[0] is source:
        _SOURCE[0] = None


def instrumented() -> bool:
    """Whether the calling process runs the instrumented variant now (an instrumented run is recording)."""
    return _SOURCE[0] is not None


def kernel_name(kernel: Any) -> str:
    """The name the CUDA kernel of ``kernel`` has in CUPTI's records: a ``@triton.jit`` function's own name."""
    if isinstance(kernel, str):
        name = kernel
    else:
        fn = getattr(kernel, "fn", kernel)
        name = getattr(fn, "__name__", "") or getattr(kernel, "__name__", "")
    if not isinstance(name, str) or not name.strip():
        msg = (
            f"cannot tell the kernel name of {kernel!r}; pass the @triton.jit function or its name, "
            "e.g. `argus_lab.device.probe(my_kernel, programs=grid, events=n, regions=PHASES)`"
        )
        raise RegionMisuseError(msg)
    return name


def probe(kernel: Any, *, programs: int, events: int, regions: DeviceRegions, device: Any = None) -> Any:
    """The probe to pass to the next launch of ``kernel``: ``None`` (clean variant) or a buffer (instrumented).

    Parameters
    ----------
    kernel
        The ``@triton.jit`` function about to be launched (or its name): the launch that follows on this thread is
        the one whose kernel record the probe's device regions nest under.
    programs
        Programs (CTAs) of the launch grid: one buffer slot each.
    events
        The most marker calls (``enter`` + ``exit``) one program makes; more are counted and dropped, and the
        decoder names the size that would have held them.
    regions
        The kernel's declared device regions (:func:`argus_lab.device.regions`).
    device
        The CUDA device of the launch (default: the current one).
    """
    given: object = regions  # checked at run time: callers need not be typed
    if not isinstance(given, DeviceRegions):
        msg = f"regions must be the kernel's declaration from argus_lab.device.regions(...), got {type(given).__name__}"
        raise RegionMisuseError(msg)
    name = kernel_name(kernel)
    source = _SOURCE[0]
    if source is None:
        return None
    return source.probe(name, programs, events, regions, device)
