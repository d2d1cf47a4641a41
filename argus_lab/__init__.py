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
    from argus_lab.planner import Request, plan as make_plan  # noqa: PLC0415

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
    """
    from argus_lab.report import Report  # noqa: PLC0415
    from argus_lab.runtime import execute, terminal_progress  # noqa: PLC0415
    from argus_lab.store import Store  # noqa: PLC0415
    from argus_lab.workload import Workload  # noqa: PLC0415

    workload = Workload.from_target(target, args)
    the_plan = plan(signals, scope=scope, repeat=repeat, warmup=warmup)
    st = store if isinstance(store, Store) else Store(store)
    execution = execute(the_plan, workload, st, on_error=on_error, progress=terminal_progress())
    return Report(st, execution.run_ids)


def open_store(path: str | None = None) -> Store:
    """The evidence store at ``path`` (default ``./argus.duckdb`` or ``$ARGUS_STORE``)."""
    from argus_lab.store import Store  # noqa: PLC0415

    return Store(path)


def __getattr__(name: str) -> Any:
    if name == "Report":
        from argus_lab.report import Report  # noqa: PLC0415

        return Report
    msg = f"module 'argus_lab' has no attribute {name!r}"
    raise AttributeError(msg)


__all__ = ["DEFAULT_SIGNALS", "Region", "Report", "current_path", "measure", "open_store", "plan", "region"]
