"""NVTX push/pop ranges of the markers in the ``argus`` domain (and the ``argus-scope`` ranges of an ncu run), resolved
on first use, after any tool was injected; and this process's rank.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from argus_lab import config
from argus_lab.regions.identity import NVTX_DOMAIN, NVTX_SCOPE_DOMAIN, NVTX_SCOPE_ENV, NVTX_SCOPE_IN, NVTX_SCOPE_OUT


class _Nvtx:
    """NVTX push/pop in the ``argus`` domain, resolved on first use (after any tool was injected).

    ``mode``: 0 not resolved yet, 1 off (no ``nvtx`` package, ``ARGUS_NVTX=0``, or no tool attached: the
    package's no-op domain), 2 on, 3 on with the instance index as payload (``ARGUS_NVTX_PAYLOAD=1``, set by
    the ncu launcher, so the ncu report tells instances of one path apart).  ``gated``: every region range is
    paired with a scope range in the ``argus-scope`` domain (``ARGUS_NVTX_SCOPE`` set, by the ncu launcher).
    """

    __slots__ = ("domain", "gated", "mode", "pop", "scope_attrs", "scope_domain", "want_scope")

    def __init__(self) -> None:
        self.mode = 0
        self.gated = False
        self.want_scope = False  # set by nvtx_scope_on(): open the scope ranges whatever the environment says
        self.domain: Any = None
        self.scope_domain: Any = None
        self.scope_attrs: tuple[Any, Any] = (None, None)  # (out, in)
        self.pop: Callable[[], None] = _noop

    def resolve(self) -> None:
        self.mode = 1
        if config.get(config.ARGUS_NVTX) == "0":
            return
        try:
            import nvtx
        except ImportError:
            return
        domain = nvtx.get_domain(NVTX_DOMAIN)
        if type(domain).__name__ == "DummyDomain":  # no NVTX tool attached: every call would be a no-op
            return
        self.domain = domain
        self.pop = domain.pop_range
        self.mode = 3 if config.get(config.ARGUS_NVTX_PAYLOAD) == "1" else 2
        if self.want_scope or NVTX_SCOPE_ENV in os.environ:
            self.open_scope_domain()

    def open_scope_domain(self) -> None:
        """Pair every region range with a scope range from now on (NVTX resolved and on)."""
        import nvtx

        scope = nvtx.get_domain(NVTX_SCOPE_DOMAIN)
        self.scope_domain = scope
        self.scope_attrs = (
            scope.get_event_attributes(message=NVTX_SCOPE_OUT),
            scope.get_event_attributes(message=NVTX_SCOPE_IN),
        )
        self.gated = True
        self.pop = self._pop_both

    def _pop_both(self) -> None:
        self.scope_domain.pop_range()
        self.domain.pop_range()


def nvtx_scope_on() -> None:
    """Open the ``argus-scope`` ranges (:data:`NVTX_SCOPE_DOMAIN`) around every region range of this process: called
    by the run driver of an ncu run before the workload is loaded (no region is open then).  Without NVTX (no
    ``nvtx`` package, no tool attached, ``ARGUS_NVTX=0``) there is nothing to open."""
    nv = _nvtx
    nv.want_scope = True
    if nv.mode > 1 and not nv.gated:
        nv.open_scope_domain()


def nvtx_state() -> dict[str, Any]:
    """What the NVTX side of the markers does in this process (for an ncu run's diagnostics)."""
    nv = _nvtx
    if nv.mode == 0:
        nv.resolve()
    state = {1: "off", 2: "on", 3: "on, with instance payloads"}.get(nv.mode, "unresolved")
    if nv.mode == 1:
        if config.get(config.ARGUS_NVTX) == "0":
            why = "ARGUS_NVTX=0"
        else:
            try:
                import nvtx  # noqa: F401
            except ImportError:
                why = "the nvtx package is not importable"
            else:
                why = "no NVTX tool is attached to the process"
        state = f"off ({why})"
    return {"nvtx": state, "scope_ranges": nv.gated}


def env_rank() -> int:
    """This process's rank as set by torchrun and similar launchers (``RANK``), 0 when unset."""
    text = os.environ.get("RANK", "0").strip() or "0"
    return int(text) if text.isdigit() else 0


def _noop(*_: object) -> None:
    return None


_nvtx = _Nvtx()
