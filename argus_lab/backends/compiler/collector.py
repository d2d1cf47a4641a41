"""Compiler facts backend: facts of the Triton kernels the run loaded (static; shares any run).

At stop it collects every Triton ``CompiledKernel`` alive in the process (the JIT caches keep them) and reads
``n_regs``, ``n_spills`` (local memory in 4-byte words, which includes local arrays, not only spills),
``metadata`` (shared, num_warps, num_stages, hash) and the SASS of the cubin (Triton runs its bundled
``cuobjdump``).  Facts join launched kernels by name (CUPTI reports Triton kernels under their plain name)
and binary hash.  Non-Triton kernels get facts from the activity records
(:func:`argus_lab.backends.compiler.facts.activity_facts`).
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from argus_lab.backends.compiler import facts as cf
from argus_lab.plan.backends import BACKENDS
from argus_lab.regions import BoundaryHook
from argus_lab.run.protocols import Columns, Evidence, RunContext


def compiled_kernels() -> list[Any]:
    """Every Triton ``CompiledKernel`` alive in this process (none when Triton was never imported)."""
    mod = sys.modules.get("triton.compiler.compiler")
    if mod is None:
        return []
    cls = getattr(mod, "CompiledKernel", None)
    if cls is None:
        return []
    with warnings.catch_warnings():  # isinstance() on some torch module objects warns about deprecations
        warnings.simplefilter("ignore")
        return [o for o in gc.get_objects() if isinstance(o, cls)]


def cuobjdump_path() -> str | None:
    """``cuobjdump``: $TRITON_CUOBJDUMP_PATH, Triton's bundled copy, PATH, or the CUDA toolkit's."""
    cands = [os.environ.get("TRITON_CUOBJDUMP_PATH")]
    tfile = getattr(sys.modules.get("triton"), "__file__", None)
    if isinstance(tfile, str):
        cands.append(os.path.join(os.path.dirname(tfile), "backends", "nvidia", "bin", "cuobjdump"))
    cands += [shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump"]
    return next((c for c in cands if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


def cuobjdump_sass(cubin: bytes) -> str | None:
    """``cuobjdump -sass`` of a cubin (None when the tool is missing or fails)."""
    tool = cuobjdump_path()
    if tool is None:
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(cubin)
        fh.flush()
        try:
            res = subprocess.run([tool, "-sass", fh.name], capture_output=True, text=True, check=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
    return res.stdout


def cuobjdump_res_usage(cubin: bytes) -> list[cf.ResourceUsage]:
    """``cuobjdump -res-usage`` of a cubin: registers, local memory, stack and static shared memory per function.

    Needs no GPU (the compile pool of an optimisation loop reads it before anything is launched); ``[]`` when the
    tool is missing or fails.
    """
    tool = cuobjdump_path()
    if tool is None:
        return []
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(cubin)
        fh.flush()
        try:
            res = subprocess.run([tool, "-res-usage", fh.name], capture_output=True, text=True, check=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return []
    return cf.parse_res_usage(res.stdout)


def sass_of(kernel: Any) -> str | None:
    """SASS text of a compiled kernel: ``cuobjdump -sass`` on its cubin, else Triton's ``asm['sass']``."""
    asm = getattr(kernel, "asm", {})
    cubin = asm.get("cubin") if hasattr(asm, "get") else None
    if cubin:
        text = cuobjdump_sass(bytes(cubin))
        if text:
            return text
    try:
        text = asm["sass"]
    except (KeyError, RuntimeError, OSError, subprocess.SubprocessError):
        return None
    return str(text) if text else None


def facts_of(kernel: Any, *, sass: bool = True) -> tuple[cf.KernelFacts, str | None]:
    """The facts of one Triton ``CompiledKernel`` and its SASS text (``sass=False``: not disassembled)."""
    try:
        kernel._init_handles()
    except (AttributeError, RuntimeError):
        pass
    md = kernel.metadata
    meta = md._asdict() if hasattr(md, "_asdict") else dict(vars(md)) if hasattr(md, "__dict__") else dict(md)
    name = str(meta.get("name") or getattr(kernel, "name", ""))
    text = sass_of(kernel) if sass else None
    facts = cf.triton_facts(name, meta, getattr(kernel, "n_regs", None), getattr(kernel, "n_spills", None), text)
    if not sass:
        facts = replace(facts, unavailable="SASS: not disassembled (compiler setting sass=false)")
    return facts, text


class CompilerCollector:
    """Collects compiled-kernel facts at the end of a run.

    Setting ``sass`` (default true): disassemble each kernel's cubin for the SASS instruction mix. ``cuobjdump -sass``
    takes about a second per kernel; a loop that measures many variants sets it false and keeps registers, local
    memory, shared memory, warps and stages.
    """

    info = BACKENDS["compiler"]

    def __init__(self) -> None:
        self._ctx: RunContext | None = None
        self.facts: list[cf.KernelFacts] = []
        self.sass: dict[str, str] = {}
        self._disassemble = True

    def hooks(self) -> Sequence[BoundaryHook]:
        return ()

    def start(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._disassemble = bool(ctx.settings.get("sass", True))

    def stop(self) -> None:
        facts = []
        for k in compiled_kernels():
            try:
                f, sass = facts_of(k, sass=self._disassemble)
            except (AttributeError, KeyError, TypeError, RuntimeError):
                continue
            facts.append(f)
            if sass:
                self.sass[f.key] = sass
        uniq = {f.key: f for f in facts}
        self.facts = list(uniq.values())

    def evidence(self, instances: Columns) -> Evidence:
        run_id = self._ctx.run_id if self._ctx is not None else ""
        prov_id = f"{run_id}:compiler"
        ev: Evidence = {
            "kernel_facts": cf.fact_rows(self.facts, run_id),
            "metrics": cf.metric_rows(self.facts, run_id, prov_id),
            "provenance": {
                "provenance_id": [prov_id],
                "run_id": [run_id],
                "backend": ["compiler"],
                "backend_version": [_triton_version()],
                "settings": [
                    {
                        "kernels": len(self.facts),
                        "sass": "cuobjdump -sass (Triton bundled)" if self._disassemble else "not disassembled",
                    }
                ],
                "clocks": [{}],
                "timestamps": ["none (static facts)"],
            },
        }
        if self._ctx is not None and self.sass:
            folder = Path(self._ctx.out_dir) / "sass"
            folder.mkdir(parents=True, exist_ok=True)
            paths = []
            for i, (key, text) in enumerate(sorted(self.sass.items())):
                p = folder / f"kernel{i}.sass"
                p.write_text(text)
                paths.append((key, p))
            ev["artifacts"] = {
                "run_id": [run_id] * len(paths),
                "kind": ["sass"] * len(paths),
                "path": [str(p) for _, p in paths],
                "sha256": [""] * len(paths),
                "bytes": [p.stat().st_size for _, p in paths],
                "note": [key for key, _ in paths],
            }
        return ev


def _triton_version() -> str:
    mod = sys.modules.get("triton")
    return f"triton {getattr(mod, '__version__', '?')}" if mod is not None else "triton not loaded"


def make() -> CompilerCollector:
    """The backend object (see :func:`argus_lab.run.loader.load_backend`)."""
    return CompilerCollector()
