"""Compiled-kernel facts: SASS parsing and fact rows (pure; tested in CI on SASS text recorded on the H200).

Triton kernels carry their own facts (registers, local memory, shared memory, warps, stages, binary hash, the
configuration they were compiled for, SASS from the cubin).  For other kernels (cuBLAS, PyTorch's own) the CUPTI
activity records give registers per thread and static/dynamic shared memory; local memory words and the
instruction mix are stated as not available, because their binaries are inside libraries (``cuobjdump`` could
list a library's cubins, but they are not tied to a launch by name alone; not done).

Each fact row describes one *binary* (name + hash).  The join links every launched kernel to the binary that ran
by the launch record's own facts: the name, and registers per thread, dynamic shared memory and threads per block
where the binary states them, so that the several configurations an autotuner compiled are told apart.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from argus_lab.backends.rows import empty_metrics
from argus_lab.model.facts import COMPILE_FACTS
from argus_lab.plan import catalog

_FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")
# an instruction line: `/*0040*/  @!P0 LDG.E.128 R4, [R2.64] ;` (cuobjdump/nvdisasm) or
# `--:-:2:-:1\t@!P1 LDG.E.128 R16, desc[UR4][R20.64];` (Triton's own disassembly: control codes first)
_INSN = re.compile(
    r"^\s*(?:/\*[0-9a-fA-F]{4,}\*/|[-0-9a-fA-F]{2}:[-0-9]:[-0-9]:[-Y]:[0-9a-fA-F])\s+"
    r"(?:\{\s*)?(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\b"
)

CATEGORIES: dict[str, tuple[str, ...]] = {
    "global_memory": (
        "LDG",
        "STG",
        "LD",
        "ST",
        "ATOMG",
        "RED",
        "ATOM",
        "LDGSTS",
        "LDGDEPBAR",
        "UBLKCP",
        "UTMALDG",
        "UTMASTG",
    ),
    "shared_memory": ("LDS", "STS", "LDSM", "ATOMS", "STSM"),
    "local_memory": ("LDL", "STL"),
    "tensor_core": ("HMMA", "IMMA", "HGMMA", "IGMMA", "QGMMA", "BMMA", "DMMA", "WARPGROUP"),
    "fp32": ("FADD", "FMUL", "FFMA", "FMNMX", "FSETP", "FSEL", "FCHK", "MUFU", "FSET"),
    "fp16": ("HADD2", "HMUL2", "HFMA2", "HMNMX2", "HSETP2"),
    "integer": (
        "IADD3",
        "IMAD",
        "ISETP",
        "LEA",
        "LOP3",
        "SHF",
        "IABS",
        "IMNMX",
        "SEL",
        "PRMT",
        "POPC",
        "FLO",
        "VIADD",
        "IADD",
    ),
    "conversion": ("F2F", "F2I", "I2F", "F2FP", "I2FP", "FRND"),
    "control": ("BRA", "EXIT", "RET", "CALL", "BSYNC", "BSSY", "WARPSYNC", "BAR", "NOP", "YIELD", "JMP", "BPT"),
}
_CAT_OF = {op: cat for cat, ops in CATEGORIES.items() for op in ops}


@dataclass(frozen=True)
class SassFunction:
    """The static instruction mix of one function in a SASS listing."""

    name: str
    instructions: int
    opcodes: dict[str, int] = field(default_factory=dict)

    @property
    def categories(self) -> dict[str, int]:
        """Instruction counts grouped into coarse categories (``other`` for the rest)."""
        out: Counter[str] = Counter()
        for op, n in self.opcodes.items():
            out[_CAT_OF.get(op, "other")] += n
        return dict(out)


def parse_sass(text: str) -> list[SassFunction]:
    """Parse ``cuobjdump -sass``/``nvdisasm`` text into per-function opcode counts (base opcode, no modifiers)."""
    funcs: list[SassFunction] = []
    name: str | None = None
    ops: Counter[str] = Counter()

    def close() -> None:
        if name is not None:
            funcs.append(SassFunction(name, sum(ops.values()), dict(sorted(ops.items()))))

    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            close()
            name, ops = m.group(1), Counter()
            continue
        if name is None:
            continue
        im = _INSN.match(line)
        if im:
            ops[im.group(1).split(".", 1)[0]] += 1
    close()
    return funcs


@dataclass(frozen=True)
class KernelFacts:
    """What is known about one compiled kernel."""

    name: str
    binary_hash: str
    source: str  # 'triton' or 'activity'
    registers: int | None
    local_words: int | None
    shared_bytes: int | None
    num_warps: int | None = None
    num_stages: int | None = None
    sass_instructions: int | None = None
    sass_mix: dict[str, int] | None = None
    unavailable: str = ""
    threads: int | None = None
    """Threads per block the binary is launched with (Triton: num_warps x warp size)."""
    static_shared: int | None = None
    """Static shared memory of the binary (cuobjdump -res-usage); Triton's ``shared`` is dynamic, at launch."""
    config: dict[str, Any] | None = None
    """What the binary was compiled for: constexpr arguments (block sizes ...), num_warps, num_stages."""
    origin: str = ""
    """How it was found: ``triton jit``, ``inductor static launcher``, ``triton load hook``, ``cache``."""
    binary_path: str = ""

    @property
    def key(self) -> str:
        """``bin:<name>:<hash>`` (hash empty when unknown): the kernel_key of its metric rows."""
        return f"bin:{self.name}:{self.binary_hash}"


def triton_facts(
    name: str,
    metadata: Mapping[str, Any],
    n_regs: int | None,
    n_spills: int | None,
    sass: str | None,
    *,
    config: Mapping[str, Any] | None = None,
    origin: str = "",
    static_shared: int | None = None,
    binary_path: str = "",
) -> KernelFacts:
    """Facts of a Triton kernel binary (its metadata as a mapping; ``n_spills`` is local memory in 4-byte words, as
    Triton's driver reports it: spills and local arrays)."""
    funcs = parse_sass(sass) if sass else []
    fn = next((f for f in funcs if f.name == name), funcs[0] if funcs else None)
    warps = _int(metadata.get("num_warps"))
    warp_size = _int(metadata.get("warp_size")) or 32
    cfg = dict(config or {})
    for key in ("num_warps", "num_stages"):
        if key not in cfg and metadata.get(key) is not None:
            cfg[key] = metadata.get(key)
    missing = [] if fn else ["SASS: cuobjdump output not available"]
    if n_regs is None:
        missing.append("registers: the binary was neither loaded here nor readable by cuobjdump")
    return KernelFacts(
        name=name,
        binary_hash=str(metadata.get("hash", "")),
        source="triton",
        registers=None if n_regs is None else int(n_regs),
        local_words=None if n_spills is None else int(n_spills),
        shared_bytes=_int(metadata.get("shared")),
        num_warps=_int(metadata.get("num_warps")),
        num_stages=_int(metadata.get("num_stages")),
        sass_instructions=fn.instructions if fn else None,
        sass_mix=fn.categories if fn else None,
        unavailable="; ".join(missing),
        threads=None if warps is None else warps * warp_size,
        static_shared=static_shared,
        config=cfg or None,
        origin=origin,
        binary_path=binary_path,
    )


def activity_facts(kernels: Mapping[str, Sequence[Any]], known: Iterable[str] = ()) -> list[KernelFacts]:
    """Facts of non-Triton kernels from CUPTI kernel rows (columns of the ``kernels`` table).

    One entry per distinct (name, registers, shared memory); names in ``known`` (Triton kernels with full
    facts) are skipped.
    """
    skip = set(known)
    seen: dict[tuple[str, int, int], KernelFacts] = {}
    kinds = kernels.get("kind")
    if kinds is None or len(kinds) == 0:
        kinds = ["kernel"] * len(kernels["name"])
    for kind, name, regs, ssm, dsm, lmem in zip(
        kinds,
        kernels["name"],
        kernels["registers"],
        kernels["static_smem"],
        kernels["dynamic_smem"],
        kernels["local_mem"],
        strict=True,
    ):
        if kind != "kernel" or name in skip:
            continue
        key = (str(name), int(regs), int(ssm))
        if key in seen:
            continue
        seen[key] = KernelFacts(
            name=str(name),
            binary_hash="",
            source="activity",
            registers=int(regs),
            local_words=int(lmem) // 4 if lmem is not None else None,
            shared_bytes=int(ssm),
            unavailable=(
                "num_warps/num_stages: not a Triton kernel; SASS mix and binary hash: binary not available "
                f"(dynamic shared memory at launch: {int(dsm)} B)"
            ),
        )
    return list(seen.values())


def fact_rows(facts: Sequence[KernelFacts], run_id: str) -> dict[str, list[Any]]:
    """Rows of the ``kernel_facts`` table (its columns are the fields of :class:`KernelFacts`, in order)."""
    cols = [f.name for f in fields(KernelFacts)]
    out: dict[str, list[Any]] = {"run_id": [run_id] * len(facts)}
    for c in cols:
        out[c] = [getattr(f, c) for f in facts]
    out["sass_mix"] = [None if m is None else dict(m) for m in out["sass_mix"]]
    out["config"] = [None if m is None else dict(m) for m in out["config"]]
    return out


_SIGNALS = tuple((signal, column, catalog.unit(signal)) for signal, column in COMPILE_FACTS)


def metric_rows(facts: Sequence[KernelFacts], run_id: str, provenance_id: str = "") -> dict[str, list[Any]]:
    """Rows of the ``metrics`` table for the known numbers (``kernel_key`` = ``bin:<name>:<hash>``)."""
    out: dict[str, list[Any]] = empty_metrics()
    for f in facts:
        for sig, attr, unit in _SIGNALS:
            v = getattr(f, attr)
            if v is None:
                continue
            out["run_id"].append(run_id)
            out["instance_id"].append(None)
            out["kernel_key"].append(f.key)
            out["signal"].append(sig)
            out["value"].append(float(v))
            out["unit"].append(unit)
            out["backend"].append("compiler")
            out["provenance_id"].append(provenance_id)
    return out


def _int(v: Any) -> int | None:
    try:
        return None if v is None else int(v)
    except (TypeError, ValueError):
        return None
