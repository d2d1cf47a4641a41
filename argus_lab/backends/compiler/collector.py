"""Compiler facts backend: facts of every Triton kernel binary the run's process holds (static; shares any run).

Triton kernels reach a process in several ways, and each leaves something to read at the end of the run:

* Triton's JIT and its autotuner keep a ``CompiledKernel`` per compiled configuration (also for a cache hit from
  an earlier process): its metadata, its cubin, the registers and local memory the driver reported at load
  (``n_regs``, ``n_spills`` = local memory in 4-byte words: spills and local arrays) and the constexpr arguments it
  was compiled for (``src.constants``: the configuration, e.g. ``BLOCK_M``);
* Inductor's own launcher (``StaticallyLaunchedCudaKernel``) keeps name, hash, ``n_regs``, ``n_spills``,
  ``num_warps`` and ``shared`` but drops the cubin after loading it: the cubin and the metadata are read back
  from the cache folder named after the hash (:mod:`argus_lab.backends.compiler.artifacts`);
* Triton's ``knobs.runtime.kernel_load_end_hook`` names (name, hash, the cache files) of every kernel loaded while
  the run's collector is active, in case its object is gone by the end.

Every binary found gets one fact row (name + hash): registers, local memory words, shared memory, threads per
block, warps, stages, configuration, SASS instruction mix (``cuobjdump -sass``), how it was found and where.  The
join links each launched kernel to the binary that ran by the launch record's own facts (name, registers,
dynamic shared memory, threads per block), never by the name alone.  Non-Triton kernels (cuBLAS, PyTorch's own)
get what their launch records say, in the report (:data:`argus_lab.report.sql.COMPILER`).
"""

from __future__ import annotations

import functools
import gc
import sys
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from argus_lab.backends.compiler import artifacts as art
from argus_lab.backends.compiler import facts as cf
from argus_lab.plan.backends import BACKENDS
from argus_lab.regions import BoundaryHook
from argus_lab.run.protocols import Columns, Evidence, RunContext

cuobjdump_path = art.cuobjdump_path  # kept for callers of the earlier module layout


@dataclass
class KernelScan:
    """What one pass over the garbage collector's objects found: Triton ``CompiledKernel`` objects, Inductor's
    ``StaticallyLaunched*Kernel`` objects, and how many objects could not be looked at (dead weak proxies, objects
    whose attributes raise): never kernels the run loses, but said in the provenance."""

    compiled: list[Any] = field(default_factory=list)
    launchers: list[Any] = field(default_factory=list)
    skipped: int = 0
    errors: list[str] = field(default_factory=list)  # a few examples of what was skipped and why

    def skip(self, what: str, exc: BaseException) -> None:
        self.skipped += 1
        if len(self.errors) < 5:
            self.errors.append(f"{what}: {type(exc).__name__}: {exc}")


_PROXIES = (weakref.ProxyType, weakref.CallableProxyType)


def scan_objects() -> KernelScan:
    """Triton ``CompiledKernel`` objects and Inductor's ``StaticallyLaunched*Kernel`` objects alive in this process,
    found in one pass over the garbage collector's objects (none when neither Triton nor Inductor was loaded).

    Only ``type(o)`` is looked at first, which never runs the object's code: ``isinstance`` would ask a weak proxy
    for its ``__class__``, and a proxy whose object is gone raises ``ReferenceError`` (the torch.compile'd run on the
    H200 failed at stop that way).  An object that raises anyway is skipped and counted, never fatal."""
    out = KernelScan()
    mod = sys.modules.get("triton.compiler.compiler")
    cls = getattr(mod, "CompiledKernel", None) if mod is not None else None
    if not isinstance(cls, type):
        cls = None
    if cls is None and "torch" not in sys.modules:
        return out
    for o in gc.get_objects():
        t = type(o)
        if t in _PROXIES:  # a weak proxy is never a kernel; a dead one raises on every attribute
            continue
        try:
            if cls is not None and issubclass(t, cls):
                out.compiled.append(o)
            elif (  # Inductor's launchers, whatever module defines them
                t.__name__.startswith("StaticallyLaunched")
                and isinstance(getattr(o, "hash", None), str)
                and isinstance(getattr(o, "name", None), str)
            ):
                out.launchers.append(o)
        except Exception as exc:  # an object whose attributes raise is not read; the others are
            out.skip(t.__name__, exc)
    return out


def kernel_objects() -> tuple[list[Any], list[Any]]:
    """(Triton ``CompiledKernel`` objects, Inductor's ``StaticallyLaunched*Kernel`` objects) alive in this process
    (:func:`scan_objects`)."""
    scan = scan_objects()
    return scan.compiled, scan.launchers


def compiled_kernels() -> list[Any]:
    """Every Triton ``CompiledKernel`` alive in this process (none when Triton was never imported)."""
    return kernel_objects()[0]


def static_launchers() -> list[Any]:
    """Inductor's statically launched Triton kernels alive in this process (``StaticallyLaunched*Kernel``)."""
    return kernel_objects()[1]


def _plain(v: Any) -> Any:
    return v if isinstance(v, bool | int | float | str) or v is None else str(v)


def config_of(kernel: Any) -> dict[str, Any]:
    """The configuration a ``CompiledKernel`` was compiled for: its constexpr arguments by name, warps, stages."""
    out: dict[str, Any] = {}
    src = getattr(kernel, "src", None)
    consts = getattr(src, "constants", None)
    names = getattr(getattr(src, "fn", None), "arg_names", None)
    if isinstance(consts, dict):
        for key, value in consts.items():
            idx = key[0] if isinstance(key, tuple) and len(key) == 1 else key
            name = names[idx] if isinstance(idx, int) and names is not None and idx < len(names) else str(idx)
            out[str(name)] = _plain(value)
    md = getattr(kernel, "metadata", None)
    for key in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
        v = getattr(md, key, None)
        if v is not None and not (key == "num_ctas" and v == 1):
            out[key] = _plain(v)
    return out


def _metadata(kernel: Any) -> dict[str, Any]:
    md = kernel.metadata
    if hasattr(md, "_asdict"):
        return dict(md._asdict())
    if hasattr(md, "__dict__"):
        return dict(vars(md))
    return dict(md)


def _usage(cubin: bytes | Path | None, name: str) -> art.ResourceUsage | None:
    if not cubin:
        return None
    usage = art.resource_usage(cubin)
    return usage.get(name) or (next(iter(usage.values())) if len(usage) == 1 else None)


def facts_of(kernel: Any, sass: bool = True) -> tuple[cf.KernelFacts, str | None]:
    """The facts of one Triton ``CompiledKernel`` and its SASS text."""
    meta = _metadata(kernel)
    name = str(meta.get("name") or getattr(kernel, "name", ""))
    n_regs, n_spills = getattr(kernel, "n_regs", None), getattr(kernel, "n_spills", None)
    asm = getattr(kernel, "asm", {})
    cubin = asm.get("cubin") if hasattr(asm, "get") else None
    cubin_bytes = bytes(cubin) if cubin else None
    usage = _usage(cubin_bytes, name)
    if n_regs is None and usage is not None:  # never loaded here (or no GPU): the cubin says the same
        n_regs, n_spills = usage.registers, usage.local // 4
    text = art.sass(cubin_bytes) if cubin_bytes and sass else None
    if not text and sass:
        try:
            text = str(asm["sass"]) or None
        except Exception:  # Triton disassembles with its bundled tools; any failure means no SASS
            text = None
    paths = getattr(kernel, "metadata_group", None) or {}
    binary_path = str(paths.get(f"{name}.cubin", "")) if isinstance(paths, dict) else ""
    facts = cf.triton_facts(
        name,
        meta,
        n_regs,
        n_spills,
        text,
        config=config_of(kernel),
        origin="triton jit",
        static_shared=usage.shared if usage is not None else None,
        binary_path=binary_path,
    )
    return facts, text


def facts_of_launcher(
    obj: Any, dirs: Sequence[Path] | None = None, sass: bool = True
) -> tuple[cf.KernelFacts, str | None]:
    """The facts of one of Inductor's ``StaticallyLaunchedCudaKernel`` objects (cubin and metadata from the cache)."""
    name, hex_hash = str(obj.name), str(obj.hash)
    binary = art.find_binary(name, hex_hash, dirs)
    meta: dict[str, Any] = dict(binary.metadata) if binary is not None else {}
    meta.setdefault("name", name)
    meta.setdefault("hash", hex_hash)
    for key in ("num_warps", "shared"):
        if getattr(obj, key, None) is not None:
            meta[key] = getattr(obj, key)
    cubin = binary.cubin if binary is not None else None
    usage = _usage(cubin, name)
    n_regs, n_spills = getattr(obj, "n_regs", None), getattr(obj, "n_spills", None)
    if n_regs is None and usage is not None:
        n_regs, n_spills = usage.registers, usage.local // 4
    text = art.sass(cubin) if cubin is not None and sass else None
    config = {k: meta[k] for k in ("num_warps", "num_stages") if meta.get(k) is not None}
    facts = cf.triton_facts(
        name,
        meta,
        n_regs,
        n_spills,
        text,
        config=config,
        origin="inductor static launcher",
        static_shared=usage.shared if usage is not None else None,
        binary_path=str(cubin) if cubin is not None else "",
    )
    if binary is None:
        note = "SASS, stages: the cubin was not found in the Triton/Inductor caches (cleared after the run?)"
        facts = cf.KernelFacts(**{**facts.__dict__, "unavailable": note})
    return facts, text


def facts_of_binary(binary: art.Binary, origin: str, sass: bool = True) -> tuple[cf.KernelFacts, str | None]:
    """The facts of a cached binary alone (its metadata, and registers/local memory from ``cuobjdump``)."""
    usage = _usage(binary.cubin, binary.name)
    text = art.sass(binary.cubin) if binary.cubin is not None and sass else None
    config = {k: binary.metadata[k] for k in ("num_warps", "num_stages") if binary.metadata.get(k) is not None}
    facts = cf.triton_facts(
        binary.name,
        {**binary.metadata, "hash": binary.hash},
        usage.registers if usage else None,
        usage.local // 4 if usage else None,
        text,
        config=config,
        origin=origin,
        static_shared=usage.shared if usage else None,
        binary_path=str(binary.cubin) if binary.cubin else "",
    )
    return facts, text


class _LoadHook:
    """``triton.knobs.runtime.kernel_load_end_hook``: (name, hash, cache files) of each kernel loaded."""

    def __init__(self) -> None:
        self.loaded: dict[tuple[str, str], dict[str, str]] = {}
        self.chain: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        # Triton calls it as (module, function, name, metadata_group, hash)
        vals = (
            list(args) + [kwargs.get(k) for k in ("module", "function", "name", "metadata_group", "hash")][len(args) :]
        )
        if len(vals) < 5:
            return
        name, group, hex_hash = vals[2], vals[3], vals[4]
        if isinstance(name, str) and isinstance(hex_hash, str):
            self.loaded[(name, hex_hash)] = dict(group) if isinstance(group, dict) else {}

    def install(self) -> None:
        knobs = getattr(sys.modules.get("triton"), "knobs", None)
        chain = getattr(getattr(knobs, "runtime", None), "kernel_load_end_hook", None)
        if chain is not None and hasattr(chain, "add"):
            try:
                chain.add(self)
                self.chain = chain
            except Exception:  # a Triton without hook chains: the objects are still found at the end
                self.chain = None

    def remove(self) -> None:
        if self.chain is not None:
            try:
                self.chain.remove(self)
            except Exception:  # already removed by someone else
                pass
            self.chain = None


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
        self._hook = _LoadHook()
        self._disassemble = True
        self.skipped_objects = 0  # live objects the scan could not look at (dead weak proxies, raising attributes)
        self.failed_kernels = 0  # kernel objects or binaries whose facts could not be read
        self.problems: list[str] = []  # a few examples of both, for the provenance

    def hooks(self) -> Sequence[BoundaryHook]:
        return ()

    def start(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._disassemble = bool(ctx.settings.get("sass", True))  # sass=false: no disassembly (optimisation loops)
        if "triton" in sys.modules:  # never import Triton only to install a hook
            self._hook.install()

    def stop(self) -> None:
        """Read the facts of every kernel binary found.  Nothing here fails the run: an object or a binary that
        cannot be read is skipped and said in the provenance (``skipped``), the others keep their facts."""
        self._hook.remove()
        self.problems = []
        jobs: list[tuple[str, Callable[[], tuple[cf.KernelFacts, str | None]]]] = []
        seen: set[tuple[str, str]] = set()
        try:
            scan = scan_objects()
        except Exception as exc:  # the scan itself failed: the load hook's records still give facts
            scan = KernelScan()
            scan.skip("the scan of live objects", exc)
        self.skipped_objects = scan.skipped
        self.problems += scan.errors
        for k in scan.compiled:
            try:
                key = (str(getattr(k, "name", "")), str(getattr(k, "hash", "")))
            except Exception as exc:
                self._problem("a Triton CompiledKernel", exc)
                continue
            if key not in seen:
                seen.add(key)
                jobs.append((f"{key[0]} ({key[1][:12]})", functools.partial(facts_of, k, sass=self._disassemble)))
        dirs = art.cache_dirs()
        for o in scan.launchers:
            try:
                key = (str(o.name), str(o.hash))
            except Exception as exc:
                self._problem("an Inductor launcher", exc)
                continue
            if key not in seen:
                seen.add(key)
                job = functools.partial(facts_of_launcher, o, dirs, sass=self._disassemble)
                jobs.append((f"{key[0]} ({key[1][:12]})", job))
        for (name, hex_hash), group in self._hook.loaded.items():
            if (name, hex_hash) in seen:
                continue
            seen.add((name, hex_hash))
            try:
                binary = _binary_of_group(name, hex_hash, group) or art.find_binary(name, hex_hash, dirs)
            except Exception as exc:
                self._problem(f"{name} ({hex_hash[:12]})", exc)
                continue
            if binary is not None:
                job = functools.partial(facts_of_binary, binary, "triton load hook", sass=self._disassemble)
                jobs.append((f"{name} ({hex_hash[:12]})", job))
        facts: list[cf.KernelFacts] = []
        with ThreadPoolExecutor(max_workers=8) as pool:  # cuobjdump runs in subprocesses: overlap them
            for (what, _), res in zip(jobs, pool.map(_safe, [job for _, job in jobs]), strict=True):
                if isinstance(res, BaseException):  # one unreadable kernel never costs the facts of the others
                    self._problem(what, res)
                    continue
                f, text = res
                facts.append(f)
                if text:
                    self.sass[f.key] = text
        self.facts = list({f.key: f for f in facts}.values())

    def _problem(self, what: str, exc: BaseException) -> None:
        if len(self.problems) < 10:
            self.problems.append(f"{what}: {type(exc).__name__}: {exc}")
        self.failed_kernels += 1

    def evidence(self, instances: Columns) -> Evidence:
        run_id = self._ctx.run_id if self._ctx is not None else ""
        prov_id = f"{run_id}:compiler"
        origins: dict[str, int] = {}
        for f in self.facts:
            origins[f.origin] = origins.get(f.origin, 0) + 1
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
                        "found_by": origins,
                        "sass": f"cuobjdump -sass ({art.cuobjdump_path() or 'not found'})"
                        if self._disassemble
                        else "not disassembled (setting sass=false)",
                        "caches": [str(d) for d in art.cache_dirs()],
                        "skipped": {
                            "objects": self.skipped_objects,
                            "kernels": self.failed_kernels,
                            "examples": self.problems,
                        },
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


def _binary_of_group(name: str, hex_hash: str, group: dict[str, str]) -> art.Binary | None:
    meta, cubin = group.get(f"{name}.json"), group.get(f"{name}.cubin")
    if not meta:
        return None
    import json

    try:
        metadata = json.loads(Path(meta).read_text())
    except (OSError, ValueError):
        return None
    return art.Binary(name, hex_hash, Path(meta).parent, metadata, Path(cubin) if cubin else None)


def _safe(
    job: Callable[[], tuple[cf.KernelFacts, str | None]],
) -> tuple[cf.KernelFacts, str | None] | BaseException:
    try:
        return job()
    except Exception as exc:  # one unreadable kernel object never costs the facts of the others
        return exc


def _triton_version() -> str:
    mod = sys.modules.get("triton")
    return f"triton {getattr(mod, '__version__', '?')}" if mod is not None else "triton not loaded"


def make() -> CompilerCollector:
    """The backend object (see :func:`argus_lab.run.loader.load_backend`)."""
    return CompilerCollector()


__all__ = [
    "CompilerCollector",
    "KernelScan",
    "compiled_kernels",
    "config_of",
    "facts_of",
    "facts_of_binary",
    "facts_of_launcher",
    "kernel_objects",
    "make",
    "scan_objects",
    "static_launchers",
]
