"""The Nsight Compute settings of a replay run, derived from the request (settings and scope)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from argus_lab.regions import NVTX_SCOPE_DOMAIN, NVTX_SCOPE_IN

if TYPE_CHECKING:
    from argus_lab.plan.model import Request
    from argus_lab.plan.scope import Scope


SCOPE_INCLUDE = f"{NVTX_SCOPE_DOMAIN}@{NVTX_SCOPE_IN}/"
"""The one NVTX include filter of every ncu run: kernels launched inside an in-scope instance's scope range."""


@dataclass(frozen=True)
class PathCensus:
    """What one execution of the workload launched under one region path, as a timing run saw it."""

    path: str
    instances: float
    """Measured instances of the path per execution of the workload."""
    kernels: float
    """Kernels per instance launched by the instance itself (its nested instances' kernels are theirs)."""


@dataclass(frozen=True)
class KernelCensus:
    """Kernels per execution of a workload by region path, from an earlier timing run of it (what the planner uses
    to say how many kernels an ncu run replays; :func:`argus_lab.report.census.kernel_census` reads one)."""

    paths: tuple[PathCensus, ...]
    outside: float = 0.0
    """Kernels per execution launched outside every region."""
    source: str = ""
    """Where the numbers come from, e.g. ``timing run r-1234``."""


@dataclass(frozen=True)
class ReplayEstimate:
    """How much of a workload an ncu run replays."""

    kernels: float | None
    """In-scope kernels over the run's executions (None: not known without a census)."""
    total: float | None
    """Every kernel the run's executions launch, warm-up repetitions included (None: not known)."""
    text: str

    @property
    def share(self) -> float:
        """The replayed share of the run's kernels (1 when unknown)."""
        if self.kernels is None or not self.total:
            return 1.0
        return max(0.0, min(1.0, self.kernels / self.total))


def replay_estimate(scope: Scope, repeat: int, warmup: int, census: KernelCensus | None) -> ReplayEstimate:
    """The kernels an ncu run of ``repeat`` measured (+ ``warmup``) executions replays under ``scope``.

    With a census: a path's kernels count when the path or an enclosing path matches the scope's globs, scaled by
    the share of that path's measured instances in ``instances=``; warm-up executions and kernels outside regions
    never count.  Without one: the scope's instance count per covered path, when its ranges are bounded.
    """
    if census is None or not census.paths:
        bounded = scope.instances is not None and all(r.stop is not None for r in scope.instances.ranges)
        if bounded and scope.instances is not None:
            n = len({i for r in scope.instances.ranges for i in range(r.start, r.stop or r.start, r.step)})
            what = f"at most {n} instance(s) of each covered region path"
        else:
            what = "every measured instance of the covered region paths"
        return ReplayEstimate(None, None, f"{what}; how many kernels that is is known after a timing run")
    by_path = {p.path: p for p in census.paths}
    inside = 0.0
    total = census.outside * (repeat + warmup)
    for p in census.paths:
        total += p.kernels * p.instances * (repeat + warmup)
        parts = p.path.split("/")
        owner = next(
            ("/".join(parts[:k]) for k in range(1, len(parts) + 1) if scope.matches_path("/".join(parts[:k]))), None
        )
        if owner is None:
            continue
        top = by_path.get(owner, p)
        n = max(1, round(top.instances * repeat))
        share = 1.0 if scope.instances is None else sum(1 for i in range(n) if i in scope.instances) / n
        inside += p.kernels * p.instances * repeat * share
    text = (
        f"about {inside:,.0f} of the {total:,.0f} kernels its {repeat + warmup} execution(s) launch "
        f"({census.source or 'an earlier timing run'})"
    )
    return ReplayEstimate(inside, total, text)


def ncu_settings(
    request: Request, metrics: Sequence[str], passes: int, census: KernelCensus | None = None
) -> dict[str, Any]:
    """The ``ncu`` settings of a replay run of ``metrics`` (``passes`` replay passes), with the ``args`` they
    become on the command line: the metrics, the replay, clock and cache controls, and the NVTX include filter.

    The filter is always :data:`SCOPE_INCLUDE`: the child's recorder opens an ``argus-scope`` range named ``in``
    around every instance the request's ``scope`` covers (region globs, measured instance ranges, ranks,
    threads; :mod:`argus_lab.run.nvtx_scope`), so ncu replays the kernels of those instances only, whether or not
    the scope names regions.  ``region_filters`` keeps the ``argus@<path>/`` expressions of the scope's globs for
    a plain ncu command line (:meth:`~argus_lab.plan.scope.Scope.nvtx_includes`); ``replays`` says how many
    kernels that is (:func:`replay_estimate`, from ``census`` when an earlier timing run gave one)."""
    s = request.settings
    estimate = replay_estimate(request.scope, request.repeat, request.warmup, census)
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
        "replays": estimate.text,
        "replayed_kernels": None if estimate.kernels is None else round(estimate.kernels, 1),
        "replayed_share": round(estimate.share, 6),
        "args": args,
    }


def metric_of(signal: str) -> str:
    """The metric a counter signal names (``hw:dram__bytes_read.sum`` -> ``dram__bytes_read.sum``)."""
    return signal.split(":", 1)[1] if ":" in signal else signal


__all__ = [
    "SCOPE_INCLUDE",
    "KernelCensus",
    "PathCensus",
    "ReplayEstimate",
    "metric_of",
    "ncu_settings",
    "replay_estimate",
]
