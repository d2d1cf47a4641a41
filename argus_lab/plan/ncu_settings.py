"""The Nsight Compute settings of a replay run, derived from the request (settings and scope)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from argus_lab.regions import NVTX_SCOPE_DOMAIN, NVTX_SCOPE_IN

if TYPE_CHECKING:
    from argus_lab.plan.model import Request


SCOPE_INCLUDE = f"{NVTX_SCOPE_DOMAIN}@{NVTX_SCOPE_IN}/"
"""The one NVTX include filter of every ncu run: kernels launched inside an in-scope instance's scope range."""


def ncu_settings(request: Request, metrics: Sequence[str], passes: int) -> dict[str, Any]:
    """The ``ncu`` settings of a replay run of ``metrics`` (``passes`` replay passes), with the ``args`` they
    become on the command line: the metrics, the replay, clock and cache controls, and the NVTX include filter.

    The filter is always :data:`SCOPE_INCLUDE`: the child's recorder opens an ``argus-scope`` range named ``in``
    around every instance the request's ``scope`` covers (region globs, measured instance ranges, ranks,
    threads; :mod:`argus_lab.run.nvtx_scope`), so ncu replays the kernels of those instances only, whether or not
    the scope names regions.  ``region_filters`` keeps the ``argus@<path>/`` expressions of the scope's globs for
    a plain ncu command line (:meth:`~argus_lab.plan.scope.Scope.nvtx_includes`)."""
    s = request.settings
    includes = [SCOPE_INCLUDE]
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
    args.append("--nvtx")
    for inc in includes:
        args += ["--nvtx-include", inc]
    return {
        "metrics": list(metrics),
        "scope": str(request.scope),
        "region_filters": list(request.scope.nvtx_includes()),
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


__all__ = ["SCOPE_INCLUDE", "metric_of", "ncu_settings"]
