"""argus_lab: GPU performance measurement around semantic code regions.

Public API::

    import argus_lab
    with argus_lab.region("attn"): ...                 # mark regions
    report = argus_lab.measure(step, signals="host.wall,gpu.time", repeat=5)
    print(argus_lab.plan("host.wall,hw:dram__bytes_read.sum").explain())
    store = argus_lab.open_store("argus.duckdb")
    argus_lab.sql("SELECT path, count(*) FROM region_instances GROUP BY path")  # a polars DataFrame
    argus_lab.import_trace("trace.json.gz", "argus.duckdb")  # torch.profiler, Nsight Systems, .ncu-rep
    session = argus_lab.optimize.Session(target, budget=argus_lab.optimize.Budget(candidates=8))

Every name is imported on first use (PEP 562), so that ``import argus_lab.regions`` inside a measured process
stays cheap: it loads neither the store nor reports nor views.  The code is laid out by stage, upstream to
downstream (docs/architecture.md): regions -> plan -> run -> backends -> join -> store -> report -> views -> faces.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from argus_lab import optimize as optimize
    from argus_lab import plan as plan
    from argus_lab.app.importing import import_trace as import_trace
    from argus_lab.app.measure import measure as measure
    from argus_lab.app.measure import open_store as open_store
    from argus_lab.app.query import sql as sql
    from argus_lab.plan import DEFAULT_SIGNALS as DEFAULT_SIGNALS
    from argus_lab.regions import Region as Region
    from argus_lab.regions import current_path as current_path
    from argus_lab.regions import region as region
    from argus_lab.regions.modules import mark_modules as mark_modules
    from argus_lab.report import Report as Report

__version__ = "0.1.0"

_PUBLIC: dict[str, tuple[str, str | None]] = {
    "region": ("argus_lab.regions", "region"),
    "Region": ("argus_lab.regions", "Region"),
    "current_path": ("argus_lab.regions", "current_path"),
    "mark_modules": ("argus_lab.regions.modules", "mark_modules"),  # regions around a model's submodules
    "plan": ("argus_lab.plan", None),  # the package, callable: argus_lab.plan("host.wall").explain()
    "DEFAULT_SIGNALS": ("argus_lab.plan", "DEFAULT_SIGNALS"),
    "measure": ("argus_lab.app.measure", "measure"),
    "open_store": ("argus_lab.app.measure", "open_store"),
    "import_trace": ("argus_lab.app.importing", "import_trace"),
    "sql": ("argus_lab.app.query", "sql"),
    "optimize": ("argus_lab.optimize", None),  # the optimisation loop (docs/optimize.md)
    "Report": ("argus_lab.report", "Report"),
}


def __getattr__(name: str) -> Any:
    where = _PUBLIC.get(name)
    if where is None:
        msg = f"module 'argus_lab' has no attribute {name!r}"
        raise AttributeError(msg)
    module = importlib.import_module(where[0])
    value = module if where[1] is None else getattr(module, where[1])
    globals()[name] = value  # resolved once: `argus_lab.region(...)` in a loop is then a plain attribute read
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext argus_lab``: register the argus magics (imported only now)."""
    from argus_lab.faces.magics import load

    load(ipython)


# -- Jupyter integration (kept tiny: the server code is imported only when the server loads it) ------------
def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "argus-lab"}]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "argus_lab"}]


def _load_jupyter_server_extension(server_app: Any) -> None:
    from argus_lab.faces.server.routes import setup_handlers

    setup_handlers(server_app.web_app)
    server_app.log.info("argus_lab: evidence-store REST handlers registered under /argus-lab/")


__all__ = [
    "DEFAULT_SIGNALS",
    "Region",
    "Report",
    "current_path",
    "import_trace",
    "mark_modules",
    "measure",
    "open_store",
    "optimize",
    "plan",
    "region",
]
