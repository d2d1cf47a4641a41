"""Every environment variable argus_lab reads, with its default and meaning: the one place to look them up.

Values are read when asked for, never cached at import (a launcher sets some for the process it starts, tests set
them per test).  Usable from every stage, measured processes included: it imports only :mod:`os`.

    from argus_lab import config
    config.get(config.ARGUS_NVTX)          # the value, or the default when unset
    config.value(config.ARGUS_STORE)       # the value, or None when unset
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, the value used when it is unset and what it does."""

    name: str
    default: str
    meaning: str


VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        Variable("ARGUS_STORE", "argus.duckdb", "the evidence store of every face when none is given"),
        Variable("ARGUS_READ_MEMORY", "", "DuckDB's memory limit of a read (default: the stepped limits of store.db)"),
        Variable("ARGUS_ASSUME_NO_GPU", "", "1: behave as on a machine without a GPU (GPU runs are skipped)"),
        Variable("ARGUS_FORCE_CHILD", "", "1: every run that can runs in a child process (as --isolate)"),
        Variable("ARGUS_CHILD", "", "set to 1 in a child-process run (by the runtime and the child itself)"),
        Variable("ARGUS_RUN_ID", "", "the run id of a child-process run (set by the runtime)"),
        Variable(
            "ARGUS_REGION_SPOOL",
            "",
            "while a run records: where processes it starts write their region instances (set by the driver)",
        ),
        Variable("ARGUS_NVTX", "1", "0: region markers open no NVTX ranges even when a tool is attached"),
        Variable("ARGUS_NVTX_PAYLOAD", "0", "1: NVTX ranges carry the instance index (set by the ncu launcher)"),
        Variable("ARGUS_NVTX_SCOPE", "", "the request's scope: open the argus-scope ranges (set by the ncu launcher)"),
        Variable("ARGUS_CLOCK_SYNC", "1", "0: no clock-offset estimate between ranks"),
        Variable("ARGUS_CLOCK_SYNC_TIMEOUT_S", "", "seconds the clock-offset ping-pong may take (default 10)"),
        Variable("ARGUS_GPU_CHIP", "", "the chip the pass model plans for (e.g. GH100) when not this machine's"),
        Variable("ARGUS_LIVE_PASSES", "", "0: never ask CUPTI for pass counts, 1: always (default: on a GPU host)"),
        Variable("ARGUS_NCU_PASS_TABLE", "", "a recorded pass table (JSON) to plan ncu runs with"),
        Variable("ARGUS_CACHE_DIR", "", "the cache folder (default $XDG_CACHE_HOME/argus_lab)"),
        Variable("ARGUS_LIBCUPTI", "", "the libcupti the live pass count and the doctor load"),
        Variable("ARGUS_NATIVE", "1", "0: never build or use the CUPTI backend's C extension"),
        Variable("ARGUS_NATIVE_CACHE", "", "where the C extension is built (default: a per-user cache folder)"),
        Variable("ARGUS_NCU", "", "the ncu executable (default: PATH, then the usual install folders)"),
        Variable("ARGUS_NSYS", "", "the nsys executable the Nsight Systems importer runs (default: PATH)"),
    )
}
"""Every ``ARGUS_*`` variable argus_lab reads (``tests/test_config.py`` checks no other is read anywhere)."""

ARGUS_STORE = "ARGUS_STORE"
ARGUS_READ_MEMORY = "ARGUS_READ_MEMORY"
ARGUS_ASSUME_NO_GPU = "ARGUS_ASSUME_NO_GPU"
ARGUS_FORCE_CHILD = "ARGUS_FORCE_CHILD"
ARGUS_CHILD = "ARGUS_CHILD"
ARGUS_RUN_ID = "ARGUS_RUN_ID"
ARGUS_REGION_SPOOL = "ARGUS_REGION_SPOOL"
ARGUS_NVTX = "ARGUS_NVTX"
ARGUS_NVTX_PAYLOAD = "ARGUS_NVTX_PAYLOAD"
ARGUS_NVTX_SCOPE = "ARGUS_NVTX_SCOPE"
ARGUS_CLOCK_SYNC = "ARGUS_CLOCK_SYNC"
ARGUS_CLOCK_SYNC_TIMEOUT_S = "ARGUS_CLOCK_SYNC_TIMEOUT_S"
ARGUS_GPU_CHIP = "ARGUS_GPU_CHIP"
ARGUS_LIVE_PASSES = "ARGUS_LIVE_PASSES"
ARGUS_NCU_PASS_TABLE = "ARGUS_NCU_PASS_TABLE"
ARGUS_CACHE_DIR = "ARGUS_CACHE_DIR"
ARGUS_LIBCUPTI = "ARGUS_LIBCUPTI"
ARGUS_NATIVE = "ARGUS_NATIVE"
ARGUS_NATIVE_CACHE = "ARGUS_NATIVE_CACHE"
ARGUS_NCU = "ARGUS_NCU"
ARGUS_NSYS = "ARGUS_NSYS"


# -- the defaults of a request (one place; each face states which it uses) ------------------------------------
REPEAT = 5
"""Measured repetitions when the caller names none: ``argus_lab.measure``, ``argus_lab.plan``, ``argus-lab run``."""
WARMUP = 1
"""Warm-up repetitions (run first, left out of summaries) when the caller names none, in every face."""
CELL_REPEAT = 3
"""Measured repetitions of a ``%%argus`` cell and the panel's cell code when ``-n`` is not given (a cell re-runs
the user's code: fewer than a script)."""
OPTIMIZE_REPEAT = 10
"""Launches of a candidate's timing run in the optimisation loop (``argus_lab.optimize.Session``)."""


def value(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The value of ``name`` in ``env`` (default: this process's environment), ``None`` when it is unset."""
    _known(name)
    return (os.environ if env is None else env).get(name)


def get(name: str, env: Mapping[str, str] | None = None) -> str:
    """The value of ``name`` in ``env`` (default: this process's environment), its default when unset."""
    got = value(name, env)
    return VARIABLES[name].default if got is None else got


def _known(name: str) -> None:
    if name not in VARIABLES:
        msg = f"{name} is not an argus_lab environment variable; declare it in argus_lab/config.py (VARIABLES)"
        raise KeyError(msg)


__all__ = ["CELL_REPEAT", "OPTIMIZE_REPEAT", "REPEAT", "VARIABLES", "WARMUP", "Variable", "get", "value"]
