"""The Nsight Compute settings of a replay run, derived from the request (settings and scope)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from argus_lab.plan.model import Request


def ncu_settings(request: Request, metrics: Sequence[str], passes: int) -> dict[str, Any]:
    """The ``ncu`` settings of a replay run of ``metrics`` (``passes`` replay passes), with the ``args`` they
    become on the command line: the metrics, the replay, clock and cache controls, and the NVTX include filters
    derived from the request's scope."""
    s = request.settings
    includes = list(request.scope.nvtx_includes())
    args = [
        "--metrics",
        ",".join(metrics),
        "--replay-mode",
        s.replay_mode,
        "--clock-control",
        s.clock_control,
        "--cache-control",
        s.cache_control,
    ]
    if includes:
        args.append("--nvtx")
        for inc in includes:
            args += ["--nvtx-include", inc]
    return {
        "metrics": list(metrics),
        "replay_mode": s.replay_mode,
        "clock_control": s.clock_control,
        "cache_control": s.cache_control,
        "nvtx_include": includes,
        "passes": passes,
        "args": args,
    }


def metric_of(signal: str) -> str:
    """The metric a counter signal names (``hw:dram__bytes_read.sum`` -> ``dram__bytes_read.sum``)."""
    return signal.split(":", 1)[1] if ":" in signal else signal


__all__ = ["metric_of", "ncu_settings"]
