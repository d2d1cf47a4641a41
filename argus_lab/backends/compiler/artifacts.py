"""Compiled artefacts on disk: Triton's and Inductor's kernel caches, cubins and what ``cuobjdump`` reads from them.

Every Triton kernel, however it was compiled and launched (Triton's JIT, its autotuner, Inductor's own static
launcher, a cache hit from an earlier process), was written to a Triton cache folder named after its hash: Triton
3.x names the folder with the base32 form of the hex hash (``triton.runtime.cache._base32``), older versions with
the hex hash itself.  The folder holds ``<name>.json`` (the metadata: hash, num_warps, num_stages, shared, ...)
and ``<name>.cubin`` (the binary that was loaded).  Caches looked at, in order: ``$TRITON_CACHE_DIR``, the
running Triton's cache folder, ``~/.triton/cache``, and Inductor's ``$TORCHINDUCTOR_CACHE_DIR`` or
``/tmp/torchinductor_<user>`` (its ``triton/<device>/`` folders).

``cuobjdump -res-usage`` reads a cubin's registers, local memory (bytes per thread: spills and local arrays) and
static shared memory per function without a GPU, the same numbers the driver reports at load.
"""

from __future__ import annotations

import base64
import getpass
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Binary:
    """One compiled kernel found in a cache: its metadata and the cubin that was loaded."""

    name: str
    hash: str
    folder: Path
    metadata: dict[str, Any]
    cubin: Path | None


@dataclass(frozen=True)
class ResourceUsage:
    """What ``cuobjdump -res-usage`` says of one function of a cubin."""

    registers: int
    stack: int
    shared: int
    local: int


def base32(hex_hash: str) -> str:
    """The cache folder name of a Triton hash (Triton 3.x)."""
    try:
        return base64.b32encode(bytes.fromhex(hex_hash)).decode("ascii").rstrip("=")
    except ValueError:
        return hex_hash


def cache_dirs() -> list[Path]:
    """The Triton cache folders of this process, existing ones only, without repeats."""
    cands: list[Path] = []
    env = os.environ.get("TRITON_CACHE_DIR")
    if env:
        cands.append(Path(env))
    knobs = getattr(sys.modules.get("triton"), "knobs", None)
    cache = getattr(knobs, "cache", None)
    try:
        live = getattr(cache, "dir", None)
    except Exception:  # a knob that cannot be read does not stop the scan
        live = None
    if isinstance(live, str) and live:
        cands.append(Path(live))
    cands.append(Path.home() / ".triton" / "cache")
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    inductor = [Path(p) for p in (os.environ.get("TORCHINDUCTOR_CACHE_DIR"),) if p]
    inductor.append(Path(tempfile.gettempdir()) / f"torchinductor_{user}")
    for root in inductor:
        tdir = root / "triton"
        if tdir.is_dir():
            cands += sorted(p for p in tdir.iterdir() if p.is_dir())
    out: list[Path] = []
    for c in cands:
        if c.is_dir() and c not in out:
            out.append(c)
    return out


def _cached(folder: Path, name: str, default_hash: str = "") -> Binary | None:
    """Kernel ``name``'s binary in cache folder ``folder`` (its ``<name>.json`` metadata and ``<name>.cubin`` when
    present); None when the folder has no readable metadata of that name."""
    meta = folder / f"{name}.json"
    if not meta.is_file():
        return None
    try:
        metadata = json.loads(meta.read_text())
    except (OSError, ValueError):
        return None
    cubin = folder / f"{name}.cubin"
    return Binary(name, str(metadata.get("hash", default_hash)), folder, metadata, cubin if cubin.is_file() else None)


def find_binary(name: str, hex_hash: str, dirs: Sequence[Path] | None = None) -> Binary | None:
    """The cached binary of kernel ``name`` with Triton hash ``hex_hash`` (None when no cache holds it)."""
    for d in cache_dirs() if dirs is None else dirs:
        for sub in (base32(hex_hash), hex_hash):
            binary = _cached(d / sub, name, hex_hash)
            if binary is not None and binary.hash == hex_hash:
                return binary
    return None


def binaries_named(names: Iterable[str], dirs: Sequence[Path] | None = None) -> list[Binary]:
    """Every cached binary of the given kernel names (for kernels whose compiled objects are gone)."""
    wanted = set(names)
    out: list[Binary] = []
    for d in cache_dirs() if dirs is None else dirs:
        try:
            folders = [p for p in d.iterdir() if p.is_dir()]
        except OSError:
            continue
        for folder in folders:
            out.extend(b for b in (_cached(folder, name) for name in wanted) if b is not None)
    return out


def cuobjdump_path() -> str | None:
    """``cuobjdump``: $TRITON_CUOBJDUMP_PATH, Triton's bundled copy, PATH, or the CUDA toolkit's."""
    cands = [os.environ.get("TRITON_CUOBJDUMP_PATH")]
    tfile = getattr(sys.modules.get("triton"), "__file__", None)
    if not isinstance(tfile, str):
        try:
            import importlib.util

            spec = importlib.util.find_spec("triton")
            tfile = spec.origin if spec is not None else None
        except (ImportError, ValueError):
            tfile = None
    if isinstance(tfile, str):
        cands.append(os.path.join(os.path.dirname(tfile), "backends", "nvidia", "bin", "cuobjdump"))
    cands += [shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump"]
    return next((c for c in cands if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


def _cuobjdump(flag: str, cubin: bytes | Path) -> str | None:
    tool = cuobjdump_path()
    if tool is None:
        return None
    if isinstance(cubin, Path):
        return _run([tool, flag, str(cubin)])
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(cubin)
        fh.flush()
        return _run([tool, flag, fh.name])


def _run(cmd: list[str]) -> str | None:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout


def sass(cubin: bytes | Path) -> str | None:
    """``cuobjdump -sass`` of a cubin (None when the tool is missing or fails)."""
    return _cuobjdump("-sass", cubin)


_FUNC = re.compile(r"^\s*Function\s+(\S+?):\s*$")
_USAGE = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


def parse_res_usage(text: str) -> dict[str, ResourceUsage]:
    """``{function: ResourceUsage}`` from ``cuobjdump -res-usage`` output."""
    out: dict[str, ResourceUsage] = {}
    name: str | None = None
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            name = m.group(1)
            continue
        u = _USAGE.search(line)
        if u and name is not None:
            out[name] = ResourceUsage(*(int(g) for g in u.groups()))
            name = None
    return out


def resource_usage(cubin: bytes | Path) -> dict[str, ResourceUsage]:
    """Registers, stack, static shared and local memory of each function of a cubin (empty without cuobjdump)."""
    text = _cuobjdump("-res-usage", cubin)
    return parse_res_usage(text) if text else {}


__all__ = [
    "Binary",
    "ResourceUsage",
    "base32",
    "binaries_named",
    "cache_dirs",
    "cuobjdump_path",
    "find_binary",
    "parse_res_usage",
    "resource_usage",
    "sass",
]
