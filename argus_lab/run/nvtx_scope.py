"""Which region instances an ncu run replays: the scope gate of the recorder's NVTX scope ranges.

Under ncu, every region range in the ``argus`` NVTX domain is paired with a range in the ``argus-scope`` domain,
named ``in`` when the request's scope covers the instance and ``out`` otherwise (:mod:`argus_lab.regions`); the
ncu command carries ``--nvtx-include argus-scope@in/``, so ncu replays exactly the kernels launched inside an
in-scope instance (or nested in one) and nothing else: not the model construction before the first region, not the
autotuner's benchmark launches in an instance the scope skips, not warm-up repetitions.

:class:`ScopeGate` decides at region entry, in entry order, the way the report applies the scope afterwards
(:mod:`argus_lab.report.scope_sql`): the region globs on the path, ``instances=`` over the path's *measured*
instances (warm-up repetitions are never in scope and are not counted), ``ranks=`` against this process's rank,
``threads=`` against the entering thread.  ``devices=`` and ``streams=`` cannot be known at entry (an instance
launches on streams later): they are applied when the evidence is attributed, so ncu replays a superset there.

The scope reaches the child through the run's spec (its ``ncu`` settings, read by the driver, which switches the
scope ranges on before the workload is loaded); ``ARGUS_NVTX_SCOPE`` is the fallback for processes without the spec.
The driver writes what the gate saw (:data:`STATE_FILE`: NVTX on or off, scope ranges opened ``in`` and ``out``) into
the run folder, so that an ncu run that profiled nothing says why.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from argus_lab.plan.scope import Scope
from argus_lab.regions import NVTX_SCOPE_ENV, env_rank


class ScopeGate:
    """``gate(path, repetition)``: whether the instance of ``path`` entered now is in ``scope``."""

    def __init__(self, scope: Scope, warmup: int = 0, rank: int | None = None) -> None:
        self.scope = scope
        self.warmup = int(warmup)
        self.rank = env_rank() if rank is None else rank
        self._measured: dict[str, int] = {}  # path -> measured instances entered so far
        self._paths: dict[str, bool] = {}  # path -> covered by the globs (paths are few)
        self.source = ""  # where the scope came from (run settings, environment)
        self.opened = [0, 0]  # scope ranges opened: [out, in] (diagnostics of an ncu run that profiled nothing)

    def __call__(self, path: str, repetition: int) -> bool:
        inside = self._decide(path, repetition)
        self.opened[inside] += 1
        return inside

    def decide(self, path: str, repetition: int, thread: tuple[str, ...] | None = None) -> bool:
        """Whether the instance of ``path`` entered now is in scope; ``thread``: the entering thread's name and id
        (as text) when it is not the calling thread (an instance read back from a run's evidence)."""
        return self._decide(path, repetition, thread)

    def _decide(self, path: str, repetition: int, thread: tuple[str, ...] | None = None) -> bool:
        if repetition < self.warmup:  # warm-up repetitions are never measured, so never replayed
            return False
        index = self._measured.get(path, 0)
        self._measured[path] = index + 1
        covered = self._paths.get(path)
        if covered is None:
            covered = self._paths[path] = self.scope.matches_path(path)
        if not covered:
            return False
        s = self.scope
        if s.instances is not None and index not in s.instances:
            return False
        if s.ranks is not None and self.rank not in s.ranks:
            return False
        if s.threads:
            if thread is None:
                thread = (threading.current_thread().name, str(threading.get_ident()))
            if not set(thread) & set(s.threads):
                return False
        return True


STATE_FILE = "nvtx-scope.json"
"""What the gate of an ncu run's child saw, in the run folder (read by the ncu launcher)."""

EVERY_REGION = "**"
"""The scope text the ncu launcher passes for a request without a scope (never an empty value: an environment
variable set to nothing may not reach the workload through the tool)."""


def gate_from_env(warmup: int) -> ScopeGate | None:
    """The gate of an ncu run (``ARGUS_NVTX_SCOPE`` holds the request's scope), ``None`` in other runs."""
    text = os.environ.get(NVTX_SCOPE_ENV)
    if text is None:
        return None
    return ScopeGate(Scope.parse(text), warmup)


def scope_of_run(settings: Mapping[str, Mapping[str, Any]]) -> tuple[str, str] | None:
    """(scope text, where it came from) of an ncu run: the run's own ``ncu`` settings (the spec the child reads;
    every plan's ncu run has a ``scope`` setting, ``""`` for everything), else ``ARGUS_NVTX_SCOPE``; ``None`` when
    the run is no ncu run."""
    ncu = settings.get("ncu")
    if isinstance(ncu, Mapping) and isinstance(ncu.get("scope"), str):
        return str(ncu["scope"]), "run settings"
    text = os.environ.get(NVTX_SCOPE_ENV)
    if text is not None:
        return text, f"${NVTX_SCOPE_ENV}"
    return None


def gate_of_run(settings: Mapping[str, Mapping[str, Any]], warmup: int) -> ScopeGate | None:
    """The gate of an ncu run from :func:`scope_of_run` (``None`` in other runs)."""
    found = scope_of_run(settings)
    if found is None:
        return None
    gate = ScopeGate(Scope.parse(found[0]), warmup)
    gate.source = found[1]
    return gate


__all__ = ["EVERY_REGION", "STATE_FILE", "ScopeGate", "gate_from_env", "gate_of_run", "scope_of_run"]
