"""argus_lab: GPU performance measurement around semantic code regions.

Public API::

    import argus_lab
    with argus_lab.region("attn"): ...                 # mark regions
    report = argus_lab.measure(step, signals="host.wall,gpu.time", repeat=5)
    print(argus_lab.plan("host.wall,hw:dram__bytes_read.sum").explain())
    store = argus_lab.open_store("argus.duckdb")

Heavy modules (the store, reports, views) are imported on first use, so that importing argus_lab inside a
measured process stays cheap.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from argus_lab.regions import Region, current_path, region

if TYPE_CHECKING:
    from argus_lab.planner import Plan
    from argus_lab.report import Report
    from argus_lab.runtime import OnError
    from argus_lab.store import Store

__version__ = "0.1.0"
DEFAULT_SIGNALS = "host.wall,host.cpu"


def plan(signals: str | list[str] = DEFAULT_SIGNALS, *, scope: str = "", repeat: int = 5, warmup: int = 1) -> Plan:
    """Plan a measurement of ``signals`` without running it."""
    from argus_lab.planner import Request
    from argus_lab.planner import plan as make_plan

    return make_plan(Request.build(signals, scope=scope, repeat=repeat, warmup=warmup))


def measure(
    target: Any,
    signals: str | list[str] = DEFAULT_SIGNALS,
    *,
    repeat: int = 5,
    warmup: int = 1,
    scope: str = "",
    store: str | Store | None = None,
    args: tuple[str, ...] = (),
    on_error: OnError = "continue",
    launch: str | tuple[str, ...] = (),
) -> Report:
    """Plan and run a measurement of ``target``; return its :class:`Report`.

    Parameters
    ----------
    target
        A callable taking no arguments, a script path, or ``"module:function"``.
    signals
        Signal names, comma-separated or a list (``argus-lab signals`` lists them).
    repeat, warmup
        Measured repetitions, and repetitions run first and marked as warm-up.
    scope
        Which region instances the request covers (see docs/scopes.md).
    store
        The evidence store (default ``./argus.duckdb`` or ``$ARGUS_STORE``).
    on_error
        ``"continue"`` runs the remaining runs after a failed one; ``"stop"`` stops the plan.
    launch
        A multi-process launcher prefix, e.g. ``"torchrun --nproc-per-node 2"``: every rank is measured and
        the ranks' evidence merges into one store with the rank in each region instance.
    """
    from argus_lab.report import Report
    from argus_lab.runtime import execute, terminal_progress
    from argus_lab.store import Store
    from argus_lab.workload import Workload

    workload = Workload.from_target(target, args)
    the_plan = plan(signals, scope=scope, repeat=repeat, warmup=warmup)
    st = store if isinstance(store, Store) else Store(store)
    prefix = tuple(shlex.split(launch)) if isinstance(launch, str) else tuple(launch)
    execution = execute(the_plan, workload, st, on_error=on_error, progress=terminal_progress(), launch=prefix)
    return Report(st, execution.run_ids)


def open_store(path: str | None = None) -> Store:
    """The evidence store at ``path`` (default ``./argus.duckdb`` or ``$ARGUS_STORE``)."""
    from argus_lab.store import Store

    return Store(path)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext argus_lab``: register the argus magics (imported only now)."""
    from argus_lab.magics import load

    load(ipython)


def __getattr__(name: str) -> Any:
    if name == "Report":
        from argus_lab.report import Report

        return Report
    msg = f"module 'argus_lab' has no attribute {name!r}"
    raise AttributeError(msg)


# -- Jupyter integration (kept tiny: the server code is imported only when the server loads it) ------------
def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "argus-lab"}]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "argus_lab"}]


def _load_jupyter_server_extension(server_app: Any) -> None:
    from argus_lab.server.routes import setup_handlers

    setup_handlers(server_app.web_app)
    server_app.log.info("argus_lab: evidence-store REST handlers registered under /argus-lab/")


__all__ = ["DEFAULT_SIGNALS", "Region", "Report", "current_path", "measure", "open_store", "plan", "region"]
