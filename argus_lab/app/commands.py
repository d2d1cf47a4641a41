"""How a command of ``argus-lab`` is written for people to run: the one place that decides whether it needs
``--store`` (used by the command line's messages and by the application's errors that say what to run next)."""

from __future__ import annotations

import shlex
from pathlib import Path

from argus_lab.store.db import DEFAULT_STORE, default_store_path


def command(*words: str | Path, store: Path) -> str:
    """An ``argus-lab`` command line that works as printed: with ``--store`` unless ``store`` is the one a plain
    ``argus-lab`` in this directory opens (``./argus.duckdb``, with no ``$ARGUS_STORE`` pointing elsewhere)."""
    default = Path(DEFAULT_STORE).resolve()
    argv = ["argus-lab", *map(str, words)]
    if not (Path(store).resolve() == default and default_store_path().resolve() == default):
        argv += ["--store", str(store)]
    return shlex.join(argv)
