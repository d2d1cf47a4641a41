"""The signal catalog: every measurable argus_lab knows, its unit and the backend that produces it.

Two families are open-ended: ``hw:<metric>`` (any Nsight Compute metric, e.g. ``hw:dram__bytes_read.sum``)
and ``pm:<metric>`` (a metric sampled over time by CUPTI PM sampling).  Every other signal is listed in
:data:`CATALOG`.  Unknown names get the closest known names in the error message.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

from argus_lab.errors import UnknownSignalError
from argus_lab.plan.backends import BACKENDS

Per = Literal["instance", "kernel", "sample", "binary", "run", "device_region", "launch"]

Aggregation = Literal["sum", "mean", "max", "min", "fact", "span"]
"""How a signal's values combine, over the kernels (or samples) of an instance and over instances -- the one rule
the join (inclusive and exclusive values) and every view (repetition totals, region summaries, tables) use:

* ``sum``: times, bytes, counts add up (exclusive = the instance's own part, never above inclusive);
* ``mean``: rates, averages, percentages and levels: the duration-weighted mean over an instance's kernels (the
  time-weighted mean over samples), and the mean over instances; never above its largest part, so a percentage
  stays a percentage;
* ``max`` / ``min``: the largest / smallest part;
* ``fact``: a launch attribute of each kernel (registers per thread, grid size, a compiler fact): a per-kernel
  fact, shown per kernel and as a range; an instance's value is its largest kernel's;
* ``span``: first start to last end (``gpu.span``): inclusive only, and the mean over instances.
"""

AGGREGATION_TEXT: dict[str, str] = {
    "sum": "sum",
    "mean": "mean (weighted by time)",
    "max": "max",
    "min": "min",
    "fact": "largest per kernel",
    "span": "span",
}
"""How each rule reads in a table's column."""


@dataclass(frozen=True)
class Signal:
    """One measurable.

    Attributes
    ----------
    name
        The catalog name, e.g. ``gpu.time``.
    unit
        Unit of stored values (``ns``, ``byte``, ``count``, ``MHz``, ``W``, ``C``, ``%``, ...).
    backend
        Name of the backend that produces it (see :data:`argus_lab.plan.backends.BACKENDS`).
    description
        One sentence for humans.
    per
        What one value describes: a region ``instance``, a ``kernel``, a time ``sample``, a ``binary``, a device
        region in one instrumented launch (``device_region``), or one instrumented ``launch``.
    agg
        How its values combine (:data:`Aggregation`).
    """

    name: str
    unit: str
    backend: str
    description: str
    per: Per = "instance"
    agg: Aggregation = "sum"

    @property
    def needs_gpu(self) -> bool:
        """Whether collecting it needs a GPU (from its backend's declaration)."""
        return BACKENDS[self.backend].needs_gpu

    @property
    def perturbation(self) -> str:
        """The perturbation class of its backend."""
        return BACKENDS[self.backend].perturbation


def _s(name: str, unit: str, backend: str, description: str, per: Per = "instance", agg: Aggregation = "sum") -> Signal:
    return Signal(name, unit, backend, description, per, agg)


CATALOG: dict[str, Signal] = {
    s.name: s
    for s in (
        _s("host.wall", "ns", "host", "wall-clock time from region entry to exit on the host"),
        _s("host.cpu", "ns", "host", "CPU time the region's thread spent inside the region"),
        # derived by the join from the host clocks of multi-rank runs (free with any host run under torchrun)
        _s(
            "rank.start_lag", "ns", "host", "how much later this rank entered the region than the first rank", agg="max"
        ),
        _s("rank.end_lag", "ns", "host", "how much later this rank left the region than the first rank", agg="max"),
        _s("gpu.time", "ns", "cupti", "sum of the durations of the kernels the region launched"),
        _s("gpu.span", "ns", "cupti", "first kernel start to last kernel end of the region's kernels", agg="span"),
        _s("gpu.kernels", "count", "cupti", "number of kernels the region launched"),
        _s("gpu.launch_overhead", "ns", "cupti", "host launch API time of the region's kernels"),
        _s("gpu.memcpy_bytes", "byte", "cupti", "bytes copied by the region's memcpy operations"),
        _s("gpu.memcpy_time", "ns", "cupti", "device time of the region's memcpy operations"),
        _s("gpu.memset_bytes", "byte", "cupti", "bytes set by the region's memset operations"),
        _s("gpu.kernel_time", "ns", "cupti", "duration of one kernel", "kernel"),
        _s("comm.time", "ns", "cupti", "sum of the durations of the region's communication (NCCL) kernels"),
        _s("comm.kernels", "count", "cupti", "number of communication (NCCL) kernels the region launched"),
        _s(
            "comm.overlap",
            "ns",
            "cupti",
            "time the region's communication kernels ran while compute kernels ran on the same device",
        ),
        _s(
            "comm.exposed",
            "ns",
            "cupti",
            "time the region's communication kernels ran with no compute kernel on the device",
        ),
        # device regions (instrumented variant): per device region and launch, and per launch
        _s(
            "dev.time",
            "ns",
            "device",
            "a device region's time per CTA in one launch (median, p10, p90)",
            "device_region",
            "mean",
        ),
        _s("dev.count", "count", "device", "occurrences of a device region in one launch (all CTAs)", "device_region"),
        _s(
            "dev.sm_busy",
            "ns",
            "device",
            "per SM, the time its CTAs ran in one launch (median over SMs)",
            "launch",
            "mean",
        ),
        _s(
            "dev.tail",
            "ns",
            "device",
            "tail imbalance of a launch: the last SM's end minus the median SM's end",
            "launch",
        ),
        _s(
            "dev.span",
            "ns",
            "device",
            "first CTA begin to last CTA end of an instrumented launch, on the GPU",
            "launch",
        ),
        _s(
            "dev.unmarked",
            "ns",
            "device",
            "a CTA's time outside every top-level device region in one launch (median over CTAs)",
            "launch",
            "mean",
        ),
        _s("compile.registers", "register/thread", "compiler", "registers per thread of a kernel", "binary", "fact"),
        _s(
            "compile.spills",
            "word/thread",
            "compiler",
            "local memory per thread in 4-byte words (register spills and local arrays)",
            "binary",
            "fact",
        ),
        _s("compile.shared", "byte", "compiler", "static shared memory of a kernel", "binary", "fact"),
        _s(
            "compile.num_warps",
            "count",
            "compiler",
            "warps per block chosen at compile time (Triton)",
            "binary",
            "fact",
        ),
        _s("compile.num_stages", "count", "compiler", "software pipelining stages (Triton)", "binary", "fact"),
        _s(
            "compile.sass_instructions", "count", "compiler", "static SASS instructions in the kernel", "binary", "fact"
        ),
        _s("sys.sm_clock", "MHz", "nvml", "SM clock sampled during the run", "sample", "mean"),
        _s("sys.mem_clock", "MHz", "nvml", "memory clock sampled during the run", "sample", "mean"),
        _s("sys.power", "W", "nvml", "board power draw sampled during the run", "sample", "mean"),
        _s("sys.temperature", "C", "nvml", "GPU temperature sampled during the run", "sample", "mean"),
        _s("sys.gpu_util", "%", "nvml", "NVML GPU utilization sampled during the run", "sample", "mean"),
        _s("sys.mem_util", "%", "nvml", "NVML memory-controller utilization sampled during the run", "sample", "mean"),
    )
}

FAMILIES: dict[str, tuple[str, str]] = {
    "hw:": ("ncu", "a hardware counter collected per kernel by Nsight Compute replay"),
    "pm:": ("pm", "a hardware counter sampled over time by CUPTI PM sampling"),
}

_METRIC = re.compile(r"^[a-z][a-z0-9_]*__[a-z0-9_]+(\.[a-z0-9_]+)*$")


def lookup(name: str) -> Signal:
    """The catalog entry for ``name``; family signals (``hw:...``, ``pm:...``) are built on demand."""
    sig = CATALOG.get(name)
    if sig is not None:
        return sig
    for prefix, (backend, description) in FAMILIES.items():
        if name.startswith(prefix):
            metric = name[len(prefix) :]
            if not _METRIC.match(metric):
                msg = (
                    f"{name!r} is not a valid {prefix} signal: {metric!r} is not an Nsight/PerfWorks metric name; "
                    f"use the form `{prefix}dram__bytes_read.sum` (unit__counter.rollup)"
                )
                raise UnknownSignalError(msg)
            per: Per = "kernel" if prefix == "hw:" else "sample"
            return Signal(name, "", backend, f"{description}: {metric}", per, metric_aggregation(metric))
    close = difflib.get_close_matches(name, [*CATALOG, *(p + "..." for p in FAMILIES)], n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
    msg = (
        f"unknown signal {name!r}; {hint}list every signal with `argus-lab signals` "
        "(hardware counters are written `hw:<ncu metric>`, sampled counters `pm:<metric>`)"
    )
    raise UnknownSignalError(msg)


def metric_aggregation(metric: str) -> Aggregation:
    """How a PerfWorks metric (``unit__counter.rollup[.submetric]``) combines, by what its name says, the way ncu's
    rollups are defined: ``.sum`` adds; ``.max`` / ``.min`` as such; launch attributes (``launch__*``: registers per
    thread, grid and block size, shared memory) are per-kernel facts; everything else (``.avg``, ``.pct_of_peak_*``,
    ``.per_second``, ``.ratio``, ``.pct``) is a duration-weighted mean."""
    if metric.startswith("launch__"):
        return "fact"
    parts = metric.split(".")
    rollup = parts[1] if len(parts) > 1 else ""
    if rollup == "sum" and len(parts) == 2:  # dram__bytes_read.sum; .sum.per_second is a rate, .sum.pct_of_* a share
        return "sum"
    if rollup == "max" and len(parts) == 2:
        return "max"
    if rollup == "min" and len(parts) == 2:
        return "min"
    return "mean"


NON_ADDITIVE: tuple[str, ...] = tuple(name for name, sig in CATALOG.items() if sig.agg != "sum")
"""The catalog's signals that do not add up (their aggregation rule, :func:`aggregation`, is not ``sum``):
spans, lags, levels, per-kernel facts.  The open families (``hw:``, ``pm:``) follow their metric's rollup."""


def unit(name: str) -> str:
    """The unit of a catalog signal (the one place a signal's unit is declared; the join reads it here)."""
    return CATALOG[name].unit


def aggregation(name: str) -> Aggregation:
    """The aggregation rule of signal ``name`` (:data:`Aggregation`); a name the catalog does not know adds up."""
    sig = CATALOG.get(name)
    if sig is not None:
        return sig.agg
    for prefix in FAMILIES:
        if name.startswith(prefix):
            return metric_aggregation(name[len(prefix) :])
    return "sum"


def resolve(names: str | list[str] | tuple[str, ...]) -> tuple[Signal, ...]:
    """Resolve a comma-separated string or a list of names, keeping order and dropping repeats.

    A bare family prefix such as ``gpu.*`` expands to every catalog signal under it.
    """
    items = [n.strip() for n in names.split(",")] if isinstance(names, str) else [n.strip() for n in names]
    out: dict[str, Signal] = {}
    for item in items:
        if not item:
            continue
        if item.endswith(".*"):
            stem = item[:-1]
            matched = [s for n, s in CATALOG.items() if n.startswith(stem)]
            if not matched:
                lookup(item[:-2])  # raises with suggestions
            for s in matched:
                out.setdefault(s.name, s)
            continue
        sig = lookup(item)
        out.setdefault(sig.name, sig)
    if not out:
        msg = "no signals were requested; pass e.g. `--signals host.wall,gpu.time`"
        raise UnknownSignalError(msg)
    return tuple(out.values())
