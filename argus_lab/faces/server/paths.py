"""Which evidence stores a request may name: files under the server's root folder, nothing else.

A store path in a request is untrusted text.  It is resolved relative to the server root, symbolic links and
``..`` included, and refused unless the result is an existing regular file inside the root.  The server never
creates a store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from argus_lab import config
from argus_lab.errors import StorePathError

STORE_SUFFIX = ".duckdb"
MAX_DEPTH = 3
MAX_STORES = 200
MAX_FOLDERS = 2000  # folders visited per listing, so that a large root cannot stall the listing
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", ".venv", "venv"})


@dataclass(frozen=True)
class StoreFile:
    """One store file under the server root."""

    path: str  # relative to the root, with ``/``
    abs_path: str
    size: int
    mtime_ns: int

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form."""
        return {"path": self.path, "abs_path": self.abs_path, "size": self.size, "mtime_ns": self.mtime_ns}


def resolve_store(root: str | os.PathLike[str], requested: str) -> Path:
    """The absolute path of the store ``requested`` (relative to ``root``), if it may be read.

    Raises
    ------
    StorePathError
        The path is empty, contains a NUL byte, leaves the root, does not end in ``.duckdb``, or names no file.
    """
    if not isinstance(requested, str) or not requested.strip():
        msg = "no store given; pass `store=<path of a .duckdb file relative to the Jupyter root>`"
        raise StorePathError(msg)
    if "\x00" in requested or len(requested) > 4096:
        msg = "the store path is not a valid file name; pass the relative path of a .duckdb file"
        raise StorePathError(msg)
    base = Path(root).resolve()
    target = (base / requested.lstrip("/")).resolve()
    if target != base and base not in target.parents:
        msg = f"the store {requested!r} is outside the Jupyter root folder; pick a store listed by the panel"
        raise StorePathError(msg)
    if target.suffix != STORE_SUFFIX:
        msg = f"the store {requested!r} is not a {STORE_SUFFIX} file; pick a store listed by the panel"
        raise StorePathError(msg)
    if not target.is_file():
        msg = f"there is no store file {requested!r} under the Jupyter root; run a measurement first"
        raise StorePathError(msg)
    return target


def find_stores(root: str | os.PathLike[str], max_depth: int = MAX_DEPTH) -> list[StoreFile]:
    """The ``*.duckdb`` files under ``root`` (hidden and package folders skipped), newest first."""
    base = Path(root).resolve()
    found: list[StoreFile] = []
    for visited, (folder, dirs, files) in enumerate(os.walk(base)):
        if visited >= MAX_FOLDERS or len(found) >= MAX_STORES:
            break
        rel = Path(folder).relative_to(base)
        depth = len(rel.parts)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS and depth < max_depth)
        for name in sorted(files):
            if not name.endswith(STORE_SUFFIX) or name.startswith("."):
                continue
            full = Path(folder) / name
            try:
                real = full.resolve()
                st = real.stat()
            except OSError:
                continue
            if base not in real.parents or not real.is_file():
                continue
            found.append(StoreFile((rel / name).as_posix(), str(full), st.st_size, st.st_mtime_ns))
    found.sort(key=lambda s: (-s.mtime_ns, s.path))
    return found


@dataclass(frozen=True)
class NotebookStore:
    """The store a notebook's kernel writes unless told otherwise, as the server sees it."""

    abs_path: str
    path: str | None  # relative to the root, with ``/``; None when the store is outside the root
    exists: bool
    source: str  # ``ARGUS_STORE`` (the server's environment, which kernels inherit) or ``default``

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form."""
        return {"abs_path": self.abs_path, "path": self.path, "exists": self.exists, "source": self.source}


def notebook_store(root: str | os.PathLike[str], notebook: str) -> NotebookStore:
    """Where the kernel of ``notebook`` (a path relative to ``root``) writes by default: ``$ARGUS_STORE`` of this
    server (kernels inherit it; a relative value is taken from the notebook's folder, the kernel's working folder),
    else ``argus.duckdb`` in the notebook's folder.  Nothing is created or opened."""
    base = Path(root).resolve()
    folder = (base / notebook.lstrip("/")).parent
    env = config.value(config.ARGUS_STORE)
    target = (folder / os.path.expanduser(env or "argus.duckdb")).resolve()
    inside = target == base or base in target.parents
    rel = target.relative_to(base).as_posix() if inside else None
    return NotebookStore(str(target), rel, target.is_file(), "ARGUS_STORE" if env else "default")
