"""Plain-text rendering of the Report's tables (what the command line prints)."""

from __future__ import annotations

from collections.abc import Sequence

from argus_lab.report.rows import (
    AttributionRow,
    ClockOffsetRow,
    ClockRow,
    CompilerRow,
    CounterRow,
    KernelRow,
    RankRow,
    RegionRow,
    describe,
)
from argus_lab.units import fmt


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A left-aligned text table with a dashed rule under the header."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def regions(rows: Sequence[RegionRow]) -> str:
    """Path, signal, instances, median (inclusive), IQR, spread, exclusive median, attribution, origin run."""
    header = ("region", "signal", "instances", "median", "p25..p75", "spread", "exclusive", "attribution", "origin run")
    body = [
        (
            r.path,
            r.signal,
            str(r.instances),
            fmt(r.median, r.unit),
            f"{fmt(r.p25, r.unit)}..{fmt(r.p75, r.unit)}",
            f"{100 * r.spread:.1f}%",
            fmt(r.exclusive_median, r.unit),
            r.attribution,
            r.runs,
        )
        for r in rows
    ]
    return table(header, body) if body else "(no region instances were recorded)"


def kernels(rows: Sequence[KernelRow], limit: int = 40) -> str:
    """Per-kernel launches: place, name, launches, median duration, IQR, counters matched by ordinal."""
    header = ("region", "#", "kernel", "launches", "median", "p25..p75", "class", "counters (ncu, by ordinal)")
    body = [
        (
            r.path,
            "-" if r.ordinal is None else str(r.ordinal),
            _short(r.display_name or r.name),
            str(r.launches),
            fmt(r.median_ns, "ns"),
            f"{fmt(r.p25_ns, 'ns')}..{fmt(r.p75_ns, 'ns')}",
            r.classes,
            ", ".join(f"{s[3:]}={fmt(v, u)}" for s, (v, u) in sorted(r.counters.items()))[:80],
        )
        for r in rows[:limit]
    ]
    more = f"\n({len(rows) - limit} more kernel rows; see Report.to_polars('kernels'))" if len(rows) > limit else ""
    return table(header, body) + more


def counters(rows: Sequence[CounterRow]) -> str:
    """Counters per region: median inclusive/exclusive, attribution, the settings they were read under."""
    header = ("region", "counter", "instances", "median", "exclusive", "attribution", "measured with")
    body = [
        (
            r.path,
            r.signal,
            str(r.instances),
            fmt(r.median, r.unit),
            fmt(r.exclusive_median, r.unit),
            describe(r.shares),
            r.settings,
        )
        for r in rows
    ]
    return table(header, body)


def compiler(rows: Sequence[CompilerRow]) -> str:
    """Compiler facts per binary: its configuration, resources, SASS mix, and where it ran."""
    header = (
        "kernel",
        "config",
        "registers",
        "local mem words",
        "shared",
        "warps",
        "stages",
        "SASS (mix)",
        "ran in",
        "found by",
        "not available",
    )
    body = [
        (
            _short(r.display_name or r.name, 50),
            config_text(r.config),
            _int(r.registers),
            _int(r.spill_words),
            fmt(r.shared_bytes, "byte") if r.shared_bytes is not None else "-",
            _int(r.num_warps),
            _int(r.num_stages),
            sass_text(r.sass_instructions, r.sass_mix),
            r.ran_in or r.paths or "-",
            r.origin or r.source,
            r.unavailable or "-",
        )
        for r in rows
    ]
    return table(header, body)


def config_text(config: dict[str, object] | None) -> str:
    """``BLOCK_M=128 BLOCK_N=64 w4 s3`` (constexpr arguments, then warps and stages)."""
    if not config:
        return "-"
    parts = [f"{k}={v}" for k, v in config.items() if k not in ("num_warps", "num_stages")]
    if "num_warps" in config:
        parts.append(f"w{config['num_warps']}")
    if "num_stages" in config:
        parts.append(f"s{config['num_stages']}")
    return " ".join(parts)


SASS_SHORT = {
    "integer": "int",
    "global_memory": "global",
    "shared_memory": "shared",
    "local_memory": "local",
    "tensor_core": "tensor",
    "conversion": "cvt",
    "control": "ctl",
}


def sass_text(instructions: int | None, mix: dict[str, int] | None) -> str:
    """``952 (int 64%, global 12%, other 9%, shared 8%, cvt 3%, ctl 2%, tensor 0.6%)``: static SASS instructions
    and every category of the mix, largest first."""
    if instructions is None:
        return "-"
    if not mix:
        return str(instructions)
    total = sum(mix.values()) or 1
    parts = []
    for k, v in sorted(mix.items(), key=lambda kv: -kv[1]):
        if v <= 0:
            continue
        pct = 100 * v / total
        parts.append(f"{SASS_SHORT.get(k, k)} {pct:.0f}%" if pct >= 1 else f"{SASS_SHORT.get(k, k)} {pct:.1f}%")
    return f"{instructions} (" + ", ".join(parts) + ")"


def attribution(rows: Sequence[AttributionRow]) -> str:
    """Per evidence kind: how much was exact, ordinal, temporal, ambiguous, unattributed, mismatched."""
    header = ("evidence", "signals", "items", "by weight", "by kernel time")
    body = [
        (r.evidence, r.signals, str(r.items), describe(r.shares), describe(r.time_shares) if r.time_shares else "")
        for r in rows
    ]
    return table(header, body)


def clocks(rows: Sequence[ClockRow]) -> str:
    """Clocks seen per run."""
    return "\n".join(
        f"  {r.run_id} {r.signal}: {fmt(r.min, r.unit)}..{fmt(r.max, r.unit)} (median {fmt(r.median, r.unit)}, "
        f"{r.samples} samples)"
        for r in rows
    )


def ranks(rows: Sequence[RankRow], offsets: Sequence[ClockOffsetRow]) -> str:
    """Cross-rank skew per region (median and max over occurrences) and the clock offsets behind it."""
    header = ("region", "ranks", "occurrences", "start skew", "max", "end skew", "max", "last in", "last out")
    body = [
        (
            r.path,
            str(r.ranks),
            str(r.occurrences),
            fmt(r.start_skew_median, r.unit),
            fmt(r.start_skew_max, r.unit),
            fmt(r.end_skew_median, r.unit),
            fmt(r.end_skew_max, r.unit),
            _rank(r.last_to_start),
            _rank(r.last_to_end),
        )
        for r in rows
    ]
    lines = [table(header, body), "clock offsets against rank 0 (rank-0 time = rank time + offset):"]
    for o in offsets:
        if o.status == "estimated":
            what = (
                f"{fmt(o.offset_ns, 'ns')} ± {fmt(o.uncertainty_ns, 'ns')} "
                f"(best round trip {fmt(o.round_trip_ns, 'ns')} of {o.samples} samples)"
            )
        elif o.status == "reference":
            what = "0 (reference)" + (f"; {o.reason}" if o.reason else "")
        else:
            what = f"not estimated: {o.reason}"
        lines.append(f"  {o.run_id} rank {o.rank} {o.phase}: {what}")
    return "\n".join(lines)


def _rank(v: int | None) -> str:
    return "-" if v is None else f"rank {v}"


def _int(v: int | None) -> str:
    return "-" if v is None else str(v)
