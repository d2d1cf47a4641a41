"""Plain-text rendering of the Report's tables (what the command line prints).

Text that came from a measured program (region names, causes, kernel names) reaches a terminal only through
:func:`escape`: control characters are shown as escapes (``\\x1b``, ``\\n``), never interpreted, and
:func:`table` elides long cells at a width and prints at most :data:`MAX_ROWS` rows of a table, saying how many
more there are, so that no stored value can set a terminal's title, clear its screen, break a table row or make
``argus-lab show`` print megabytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from argus_lab.plan.catalog import AGGREGATION_TEXT
from argus_lab.report.kernel_summary import KernelSummary
from argus_lab.report.rows import (
    AttributionRow,
    ClockOffsetRow,
    ClockRow,
    CompilerRow,
    CounterRow,
    RankRow,
    RegionRow,
    describe,
)
from argus_lab.units import fmt

CELL_WIDTH = 60
"""Widest cell of a table column (longer text is elided in the middle); the last column gets :data:`LAST_WIDTH`."""
LAST_WIDTH = 240
MAX_ROWS = 200
"""Most rows a text table prints; the rest are counted ("... N more rows")."""
LINE_WIDTH = 400
"""Widest line of free text (a coverage sentence) after escaping."""

# C0 and C1 controls, DEL, and the Unicode format characters that reorder or hide text (bidi overrides, zero-width)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _shown(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def escape(text: str) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\n``, ``\\u202e``): safe to print."""
    return _CONTROL.sub(_shown, text) if _CONTROL.search(text) else text


def elide(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters by dropping its middle (the start and the end say most)."""
    if len(text) <= width:
        return text
    head = (width - 3) // 2
    return text[:head] + "..." + text[len(text) - (width - 3 - head) :]


def elide_path(path: str, width: int = CELL_WIDTH) -> str:
    """A region path cut to about ``width`` characters at whole segments, saying how many levels were left out
    (``decode/layer/.../3 more/.../attn``)."""
    path = escape(path)
    if len(path) <= width:
        return path
    segs = path.split("/")
    head, tail = [segs[0]], [segs[-1]] if len(segs) > 1 else []
    lo, hi = 1, len(segs) - 1
    budget = width - len(head[0]) - (len(tail[0]) if tail else 0) - 16
    while lo < hi and budget > 0:
        nxt = segs[hi - 1] if len(tail) <= len(head) else segs[lo]
        if len(nxt) + 1 > budget:
            break
        if len(tail) <= len(head):
            tail.insert(0, nxt)
            hi -= 1
        else:
            head.append(nxt)
            lo += 1
        budget -= len(nxt) + 1
    left = hi - lo
    if left <= 0:
        return elide(path, width)
    out = "/".join([*head, f"...{left} more...", *tail])
    return out if len(out) <= width + 16 else elide(path, width)


def line(text: str, width: int = LINE_WIDTH) -> str:
    """One line of free text, escaped and elided: for sentences that quote stored values."""
    return elide(escape(text), width)


def wrapped(text: str, width: int = LINE_WIDTH) -> list[str]:
    """A sentence escaped and wrapped at ``width`` (nothing elided): for warnings that must be read whole."""
    import textwrap

    return textwrap.wrap(escape(text), width, subsequent_indent="  ", break_on_hyphens=False) or [""]


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, max_rows: int = MAX_ROWS, what: str = "") -> str:
    """A left-aligned text table with a dashed rule under the header.

    Cells are escaped (:func:`escape`) and elided at :data:`CELL_WIDTH` (the last column at :data:`LAST_WIDTH`);
    past ``max_rows`` rows the table ends with a line saying how many more there are (and ``what`` tells where
    to see them).
    """
    last = len(header) - 1
    shown = [
        [elide(escape(c), LAST_WIDTH if i == last else CELL_WIDTH) for i, c in enumerate(r)] for r in rows[:max_rows]
    ]
    widths = [max(len(h), *(len(r[i]) for r in shown)) if shown else len(h) for i, h in enumerate(header)]

    def cells(row: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()

    out = [cells(header), cells(["-" * w for w in widths]), *(cells(r) for r in shown)]
    if len(rows) > max_rows:
        out.append(f"... {len(rows) - max_rows} more rows" + (f" ({what})" if what else ""))
    return "\n".join(out)


def value_range(lo: float, hi: float, unit: str) -> str:
    """``lo..hi`` with the unit once (one value when both are equal)."""
    if lo == hi:
        return fmt(hi, unit)
    if unit in ("ns", "byte"):  # scaled units print their own scale on each side
        return f"{fmt(lo, unit)}..{fmt(hi, unit)}"
    return f"{fmt(lo, '')}..{fmt(hi, unit)}"


def _short(name: str, width: int = 60) -> str:
    return elide(escape(name), width)


def regions(rows: Sequence[RegionRow], warmup: Mapping[str, int] | None = None) -> str:
    """Path, signal (with how it combines when it does not add up), instances, warm-up instances (``warmup``: per
    path, kept apart: not in the statistics), median (inclusive), IQR, spread, exclusive median, attribution, origin
    run."""
    warm = warmup or {}
    header = (
        "region",
        "signal",
        "instances",
        "warm-up (apart)",
        "median",
        "p25..p75",
        "spread",
        "exclusive",
        "attribution",
        "origin run",
    )
    body = [
        (
            elide_path(r.path),
            r.signal if r.agg in ("sum", "span") else f"{r.signal} ({AGGREGATION_TEXT.get(r.agg, r.agg)})",
            str(r.instances),
            str(warm.get(r.path, 0)),
            fmt(r.median, r.unit),
            value_range(r.p25, r.p75, r.unit),
            f"{100 * r.spread:.1f}%",
            fmt(r.exclusive_median, r.unit),
            r.attribution,
            r.runs,
        )
        for r in rows
    ]
    more = "see them all with Report.to_polars('regions') or an HTML export"
    if not body:
        return "(no region instances were recorded)"
    return table(header, body, what=more) + warmup_line(warm)


def warmup_line(warmup: Mapping[str, int], *, launches: bool = False) -> str:
    """``(warm-up: 56 instance(s) of 4 region path(s) ran before the measured repetitions, kept apart: warm-up is not
    in the statistics)``, or nothing without warm-up; ``launches``: said of a kernel table (their launches)."""
    n = sum(warmup.values())
    if not n:
        return ""
    paths = sum(1 for w in warmup.values() if w)
    kept = "their kernel launches are not in this table" if launches else "warm-up is not in the statistics"
    return (
        f"\n(warm-up: {n} instance(s) of {paths} region path(s) ran before the measured repetitions, kept apart: "
        f"{kept})"
    )


def finished(rows: Sequence[tuple[str, int, int, float, int]]) -> str:
    """Instances that finished although no measured repetition did (warm-up, or the run failed early)."""
    header = ("region", "finished instances", "of them warm-up", "median wall", "raised")
    body = [(p, str(n), str(w), fmt(wall, "ns"), str(raised)) for p, n, w, wall, raised in rows]
    note = (
        "(no measured repetition finished: the region table is empty; these instances finished during the warm-up "
        "or before the workload failed, and stay in the store)"
    )
    return note + "\n" + table(header, body)


def kernels(summary: KernelSummary, limit: int = 40, warmup: Mapping[str, int] | None = None) -> str:
    """Per-kernel launches: place, name, launches, median duration, IQR, counters matched by ordinal (the first
    ``limit`` rows of the summary).  Launches of instances outside their path's main kernel-sequence group are
    collapsed into one line per path; the launches of warm-up instances (``warmup``: per path) are not in the table, a
    line says so."""
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
        for r in summary.rows[:limit]
    ]
    left = summary.main_rows - limit
    more = f"\n({left} more kernel rows; see Report.to_polars('kernels'))" if left > 0 else ""
    for path, (launches, names) in summary.other_groups.items():
        more += (
            f"\n({escape(path)}: {launches} launch(es) of {names} kernel(s) in instances of "
            "another kernel-sequence group, collapsed; see Report.groups and Report.kernels)"
        )
    return table(header, body) + more + warmup_line(warmup or {}, launches=True)


def counters(rows: Sequence[CounterRow]) -> str:
    """Counters per region: how they combine over kernels, median inclusive/exclusive (for a per-kernel fact: its
    range over the region's kernels), attribution, the settings they were read under."""
    header = ("region", "counter", "combined as", "instances", "median", "exclusive", "attribution", "measured with")
    body = [
        (
            elide_path(r.path),
            r.signal,
            AGGREGATION_TEXT.get(r.agg, r.agg),
            str(r.instances),
            fmt(r.median, r.unit) if r.kernel_range is None else f"{value_range(*r.kernel_range, r.unit)} per kernel",
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
