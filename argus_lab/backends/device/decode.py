"""Decoding one launch's probe buffer into raw device-region rows (numpy, vectorised; no torch, no Triton).

A row is one occurrence of a device region in one program (CTA): where it ran (SM), when it started and ended
on the GPU-wide ``%globaltimer`` (ns) and on the SM's ``%clock64`` (cycles), and its duration. Events are paired
enter-to-exit by nesting level with one stable sort, so a million events decode in well under a second.

Misuse of the markers (an exit without its enter, an enter never exited, regions closed out of order, a name
that was not declared, a buffer too small for the events or the grid) becomes a *problem*: a sentence naming the
fix. ``decode(..., strict=True)`` raises them together; ``strict=False`` keeps every well-formed row and returns
the problems with them, so nothing measured is lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from argus_lab.device import DeviceRegions
from argus_lab.device.layout import (
    H_EVENTS_PER_SLOT,
    H_GRID_OVERFLOW,
    H_MAGIC,
    H_N_SLOTS,
    H_SLOT_WORDS,
    H_VERSION,
    LAUNCH_HEADER_WORDS,
    MAGIC,
    S_CLK_BEGIN,
    S_CLK_END,
    S_N_EVENTS,
    S_N_WARPS,
    S_PID1,
    S_SMID,
    S_T_BEGIN,
    S_T_END,
    SLOT_HEADER_WORDS,
    VERSION,
    WORDS_PER_EVENT,
    slot_words,
)
from argus_lab.errors import DeviceBufferError

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

_MAX_PROBLEMS_PER_KIND = 5


@dataclass(frozen=True)
class Programs:
    """One entry per program (CTA) that ran ``dm.begin``: columns of equal length."""

    cta: I64
    sm: I64
    t_begin: I64
    t_end: I64
    clk_begin: I64
    clk_end: I64
    n_events: I64
    dropped: I64
    n_warps: I64

    @property
    def cycles_per_ns(self) -> F64:
        """Each program's SM clock rate over its own span (cycles per ns); NaN where the span is empty."""
        span = (self.t_end - self.t_begin).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = (self.clk_end - self.clk_begin).astype(np.float64) / span
        rate[~(span > 0)] = np.nan
        return rate


@dataclass(frozen=True)
class Intervals:
    """One entry per region occurrence (enter paired with its exit) in one program: columns of equal length.

    ``t_start``/``t_end`` are ``%globaltimer`` ns (comparable across SMs); ``clk_start``/``clk_end`` are the SM's
    cycles (64-bit, unwrapped); ``dur_ns`` is the cycle count divided by the program's clock rate (finer than the
    global timer's ticks). ``seq`` numbers the occurrences of one region within one program, from 0.
    """

    code: I64
    cta: I64
    warp: I64
    sm: I64
    depth: I64
    seq: I64
    t_start: I64
    t_end: I64
    clk_start: I64
    clk_end: I64
    dur_ns: F64

    def __len__(self) -> int:
        return len(self.code)


@dataclass(frozen=True)
class DecodedLaunch:
    """What one launch's probe buffer holds, decoded."""

    launch: int
    names: dict[int, str]
    programs: Programs
    intervals: Intervals
    n_slots: int
    events_per_slot: int
    problems: tuple[str, ...] = field(default=())

    def region_names(self) -> list[str]:
        """The name of each interval's region (``?<code>`` for an undeclared code)."""
        return [self.names.get(int(c), f"?{int(c):#x}") for c in self.intervals.code]

    def columns(self) -> dict[str, np.ndarray]:
        """The intervals as named columns (with ``launch`` and ``region``): ready for Arrow, Parquet or npz."""
        iv = self.intervals
        return {
            "launch": np.full(len(iv), self.launch, dtype=np.int64),
            "region": np.array(self.region_names(), dtype=object),
            "code": iv.code,
            "cta": iv.cta,
            "warp": iv.warp,
            "sm": iv.sm,
            "depth": iv.depth,
            "seq": iv.seq,
            "t_start_ns": iv.t_start,
            "t_end_ns": iv.t_end,
            "clk_start": iv.clk_start,
            "clk_end": iv.clk_end,
            "dur_ns": iv.dur_ns,
        }


def _empty_i64() -> I64:
    return np.zeros(0, dtype=np.int64)


def _check_header(buf: I64) -> tuple[int, int, int]:
    if buf.ndim != 1 or buf.size < LAUNCH_HEADER_WORDS:
        msg = (
            f"a probe buffer is a 1-D int64 array of at least {LAUNCH_HEADER_WORDS} words, got shape {buf.shape}; "
            "pass the tensor that ProbeBuffer.allocate made, copied to the host"
        )
        raise DeviceBufferError(msg)
    if int(buf[H_MAGIC]) != MAGIC or int(buf[H_VERSION]) != VERSION:
        msg = (
            f"this array is not an argus probe buffer of version {VERSION} (header {buf[:2].tolist()}); "
            "allocate probes with argus_lab.backends.device.collector.ProbeBuffer.allocate"
        )
        raise DeviceBufferError(msg)
    n_slots, cap, words = int(buf[H_N_SLOTS]), int(buf[H_EVENTS_PER_SLOT]), int(buf[H_SLOT_WORDS])
    if words != slot_words(cap) or buf.size < LAUNCH_HEADER_WORDS + n_slots * words:
        msg = (
            f"probe buffer header says {n_slots} slots of {cap} events but the array has {buf.size} words; "
            "copy the whole buffer back (buffer.cpu().numpy()), not a slice"
        )
        raise DeviceBufferError(msg)
    return n_slots, cap, words


def _unwrap_clock(k32: I64, t: I64, group_start: npt.NDArray[np.bool_], clk_begin: I64, t_begin: I64, rate: F64) -> I64:
    """Full 64-bit cycles from the low 32 bits, per program.

    Between consecutive events of a program the low word advances by the true cycle count modulo 2**32; the
    ``%globaltimer`` gap times the program's clock rate says how many whole wraps to add (none unless two
    markers are more than about two seconds apart).
    """
    prev = np.empty_like(k32)
    prev[1:] = k32[:-1]
    prev[group_start] = clk_begin[group_start] & 0xFFFFFFFF
    t_prev = np.empty_like(t)
    t_prev[1:] = t[:-1]
    t_prev[group_start] = t_begin[group_start]
    delta = (k32 - prev) & 0xFFFFFFFF
    expected = (t - t_prev).astype(np.float64) * np.where(np.isfinite(rate), rate, 0.0)
    wraps = np.maximum(np.rint((expected - delta) / 2.0**32), 0).astype(np.int64)
    delta = delta + (wraps << 32)
    # cumulative sum restarted at each program's first event, added to that program's clk_begin
    csum = np.cumsum(delta)
    starts = np.flatnonzero(group_start)
    seg = np.cumsum(group_start) - 1
    before = np.where(starts > 0, csum[starts - 1], 0)
    return clk_begin[starts][seg] + (csum - before[seg])


def decode(buf: I64, regions: DeviceRegions, *, launch: int = 0, strict: bool = True) -> DecodedLaunch:
    """Decode one launch's probe buffer (a host copy of the whole int64 array).

    Raises :class:`DeviceBufferError` when the array is not a probe buffer, and, with ``strict``, when the
    buffer shows marker misuse or dropped events (every problem in one message, each with its fix).
    """
    buf = np.ascontiguousarray(buf, dtype=np.int64)
    n_slots, cap, words = _check_header(buf)
    problems: list[str] = []
    if int(buf[H_GRID_OVERFLOW]):
        problems.append(
            f"the launch ran more programs than the probe has slots ({n_slots}); programs past slot {n_slots - 1} "
            "recorded nothing: allocate the probe with one slot per program of the launch grid"
        )
    slots = buf[LAUNCH_HEADER_WORDS : LAUNCH_HEADER_WORDS + n_slots * words].reshape(n_slots, words)
    used = slots[:, S_PID1] > 0
    hdr = slots[used, :SLOT_HEADER_WORDS]
    cta = hdr[:, S_PID1] - 1
    n_events = hdr[:, S_N_EVENTS]
    unfinished = hdr[:, S_T_END] == 0
    for c in cta[unfinished][:_MAX_PROBLEMS_PER_KIND]:
        problems.append(
            f"CTA {int(c)} called dm.begin but never dm.end: call `dm.end(probe, c)` on every path before the "
            "kernel returns (its events are decoded up to what the slot shows)"
        )
    ev = slots[used, SLOT_HEADER_WORDS:].reshape(int(used.sum()), cap, WORDS_PER_EVENT)
    # an unfinished program never wrote its count: take its events up to the first never-written one (time 0)
    written = np.where((ev[:, :, 0] == 0).any(axis=1), (ev[:, :, 0] == 0).argmax(axis=1), cap)
    kept = np.where(unfinished, written, np.minimum(n_events, cap))
    dropped = np.where(unfinished, 0, np.maximum(n_events - cap, 0))
    if dropped.any():
        worst = int(n_events.max())
        problems.append(
            f"{int((dropped > 0).sum())} CTA(s) recorded more events than their slot holds ({cap}); "
            f"{int(dropped.sum())} events were dropped: allocate the probe with events_per_cta >= {worst}"
        )
    programs = Programs(
        cta=cta,
        sm=hdr[:, S_SMID],
        t_begin=hdr[:, S_T_BEGIN],
        t_end=hdr[:, S_T_END],
        clk_begin=hdr[:, S_CLK_BEGIN],
        clk_end=hdr[:, S_CLK_END],
        n_events=n_events,
        dropped=dropped,
        n_warps=hdr[:, S_N_WARPS],
    )
    # events of every used slot, flattened in (program, record order)
    valid = np.arange(cap)[None, :] < kept[:, None]
    prog = np.broadcast_to(np.arange(len(cta))[:, None], valid.shape)[valid]
    t = ev[:, :, 0][valid]
    tag = ev[:, :, 1][valid]
    code = (tag & 0xFFFFFFFF) >> 1
    is_exit = (tag & 1).astype(bool)
    k32 = (tag >> 32) & 0xFFFFFFFF
    first = np.ones(len(prog), dtype=bool)
    first[1:] = prog[1:] != prog[:-1]
    rate = programs.cycles_per_ns[prog]
    clk = _unwrap_clock(k32, t, first, programs.clk_begin[prog], programs.t_begin[prog], rate) if len(prog) else t

    names = regions.codes()
    unknown = np.setdiff1d(np.unique(code), np.fromiter(names, dtype=np.int64, count=len(names)))
    for u in unknown[:_MAX_PROBLEMS_PER_KIND]:
        problems.append(
            f"the buffer holds region code {int(u):#x}, which no declared device region has "
            f"(declared: {', '.join(regions.names)}); add the kernel's region names to argus_lab.device.regions(...)"
        )
    iv, pair_problems = _pair(prog, code, is_exit, t, clk, programs, dropped, names)
    problems.extend(pair_problems)
    if strict and problems:
        raise DeviceBufferError(f"probe buffer of launch {launch}: " + "; ".join(problems))
    return DecodedLaunch(
        launch=launch,
        names=names,
        programs=programs,
        intervals=iv,
        n_slots=n_slots,
        events_per_slot=cap,
        problems=tuple(problems),
    )


def _pair(
    prog: I64,
    code: I64,
    is_exit: npt.NDArray[np.bool_],
    t: I64,
    clk: I64,
    programs: Programs,
    dropped: I64,
    names: dict[int, str],
) -> tuple[Intervals, list[str]]:
    """Pair each enter with its exit by (program, nesting level): after one stable sort they alternate."""
    problems: list[str] = []
    step = np.where(is_exit, -1, 1)
    # depth after each event, restarted per program
    csum = np.cumsum(step)
    first_idx = np.flatnonzero(np.r_[True, prog[1:] != prog[:-1]]) if len(prog) else _empty_i64()
    seg = np.searchsorted(first_idx, np.arange(len(prog)), side="right") - 1
    base = np.where(first_idx > 0, csum[first_idx - 1], 0) if len(first_idx) else _empty_i64()
    depth_after = csum - (base[seg] if len(prog) else 0)
    level = np.where(is_exit, depth_after + 1, depth_after)
    bad_prog = np.zeros(len(programs.cta), dtype=bool)
    neg = depth_after < 0
    if neg.any():
        bad_prog[np.unique(prog[neg])] = True
    # end depth per program: open regions left at the end
    if len(prog):
        last_idx = np.r_[first_idx[1:] - 1, len(prog) - 1]
        end_depth = np.zeros(len(programs.cta), dtype=np.int64)
        end_depth[prog[last_idx]] = depth_after[last_idx]
    else:
        end_depth = np.zeros(len(programs.cta), dtype=np.int64)
    truncated = dropped > 0
    order = np.lexsort((np.arange(len(prog)), level, prog))
    sp, sl, sc, sx = prog[order], level[order], code[order], is_exit[order]
    # within a (program, level) run, events must alternate enter, exit with the same code
    n = len(order)
    is_enter_pos = ~sx[:-1] if n else np.zeros(0, dtype=bool)
    nxt_same = (sp[1:] == sp[:-1]) & (sl[1:] == sl[:-1]) if n else np.zeros(0, dtype=bool)
    pair_at = np.flatnonzero(is_enter_pos & sx[1:] & nxt_same) if n else _empty_i64()
    mismatched = pair_at[sc[pair_at] != sc[pair_at + 1]]
    if mismatched.size:
        bad_prog[np.unique(sp[mismatched])] = True
    # programs whose events do not all pair up
    paired = np.zeros(n, dtype=bool)
    paired[pair_at] = True
    paired[pair_at + 1] = True
    unpaired_prog = np.unique(sp[~paired])
    for p in unpaired_prog:
        if not truncated[p] and not bad_prog[p] and end_depth[p] == 0:
            bad_prog[p] = True
    problems.extend(_explain(np.flatnonzero(bad_prog), prog, code, is_exit, programs, names))
    open_end = np.flatnonzero((end_depth > 0) & ~truncated & ~bad_prog)
    for p in open_end[:_MAX_PROBLEMS_PER_KIND]:
        problems.append(
            f"CTA {int(programs.cta[p])}: {int(end_depth[p])} region(s) were entered and never exited; every "
            "`dm.enter(probe, c, name)` needs a `dm.exit(probe, c, name)` on every path (mind early loop exits)"
        )
    good = pair_at[(sc[pair_at] == sc[pair_at + 1]) & ~bad_prog[sp[pair_at]]]
    ei, xi = order[good], order[good + 1]
    pp = prog[ei]
    rate = programs.cycles_per_ns[pp]
    dclk = clk[xi] - clk[ei]
    dur = np.where(np.isfinite(rate), dclk / np.where(np.isfinite(rate), rate, 1.0), (t[xi] - t[ei]).astype(float))
    # occurrence number of each region within its program, in time order
    o = np.lexsort((ei, code[ei], pp))
    key_p, key_c = pp[o], code[ei][o]
    new = np.r_[True, (key_p[1:] != key_p[:-1]) | (key_c[1:] != key_c[:-1])] if len(o) else np.zeros(0, dtype=bool)
    run_start = np.maximum.accumulate(np.where(new, np.arange(len(o)), 0)) if len(o) else _empty_i64()
    seq = np.empty(len(o), dtype=np.int64)
    seq[o] = np.arange(len(o)) - run_start
    back = np.argsort(ei, kind="stable")  # rows in record order
    iv = Intervals(
        code=code[ei][back],
        cta=programs.cta[pp][back],
        warp=np.zeros(len(ei), dtype=np.int64),
        sm=programs.sm[pp][back],
        depth=level[ei][back] - 1,
        seq=seq[back],
        t_start=t[ei][back],
        t_end=t[xi][back],
        clk_start=clk[ei][back],
        clk_end=clk[xi][back],
        dur_ns=dur.astype(np.float64)[back],
    )
    return iv, problems


def _explain(
    bad: I64, prog: I64, code: I64, is_exit: npt.NDArray[np.bool_], programs: Programs, names: dict[int, str]
) -> list[str]:
    """Walk the events of malformed programs with a stack and say what went wrong first (a few programs)."""
    out: list[str] = []
    for p in bad[:_MAX_PROBLEMS_PER_KIND]:
        idx = np.flatnonzero(prog == p)
        stack: list[tuple[int, int]] = []
        cta = int(programs.cta[p])
        for i, j in enumerate(idx):
            c, name = int(code[j]), names.get(int(code[j]), f"?{int(code[j]):#x}")
            if not is_exit[j]:
                stack.append((c, i))
                continue
            if not stack:
                out.append(
                    f"CTA {cta}: exit({name!r}) at event {i} has no open region; put `dm.enter(probe, c, {name!r})` "
                    "before it on the same path"
                )
                break
            top, at = stack.pop()
            if top != c:
                top_name = names.get(top, f"?{top:#x}")
                out.append(
                    f"CTA {cta}: exit({name!r}) at event {i} closes {top_name!r} (entered at event {at}); "
                    f"exit regions in the reverse order of entering: exit {top_name!r} first"
                )
                break
        else:
            if stack:
                c, at = stack[-1]
                out.append(
                    f"CTA {cta}: region {names.get(c, hex(c))!r} entered at event {at} was never exited; add "
                    "`dm.exit(probe, c, name)` on every path"
                )
    if len(bad) > _MAX_PROBLEMS_PER_KIND:
        out.append(f"... and {len(bad) - _MAX_PROBLEMS_PER_KIND} more CTA(s) with malformed events")
    return out
