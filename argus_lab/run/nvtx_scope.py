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
"""

from __future__ import annotations

import os
import threading

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

    def __call__(self, path: str, repetition: int) -> bool:
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
            t = threading.current_thread()
            if not {t.name, str(threading.get_ident())} & set(s.threads):
                return False
        return True


def gate_from_env(warmup: int) -> ScopeGate | None:
    """The gate of an ncu run (``ARGUS_NVTX_SCOPE`` holds the request's scope), ``None`` in other runs."""
    text = os.environ.get(NVTX_SCOPE_ENV)
    if text is None:
        return None
    return ScopeGate(Scope.parse(text), warmup)


__all__ = ["ScopeGate", "gate_from_env"]
