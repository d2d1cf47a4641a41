# mypy: disable-error-code="no-untyped-def,untyped-decorator"
# (Triton traces these functions; annotations on their parameters mean constexpr-ness to Triton, not Python types.)
"""Device-region markers for ``@triton.jit`` kernels (kernel side; imports Triton).

Use them with a probe pointer that the kernel takes as an ordinary argument::

    c = dm.begin(probe)                 # once, before the first region
    c = dm.enter(probe, c, "load")      # open a region (the name is a string literal)
    c = dm.exit(probe, c, "load")       # close it
    dm.end(probe, c)                    # once, after the last region

``c`` is the marker state (the probe slot of this program and its event cursor); threading it through the calls
is what lets a marker inside a loop find its place in the buffer without an atomic or a memory round trip.

Clean variant: pass ``probe=None``. Triton specialises a ``None`` argument to a compile-time constant, every
``if probe is not None`` below is decided while the kernel is traced, and no instruction of the markers remains
(``scripts/gpu_probe_device.py`` and ``tests/test_device_markers.py`` compare the compiled SASS with that of the
same kernel without markers).

Instrumented variant: pass the launch's probe buffer (:mod:`argus_lab.backends.device`). Each marker reads
``%globaltimer`` (ns, one time base for the whole GPU) and ``%clock64`` (SM cycles) and stores one 16-byte event
into the program's slot; ``begin``/``end`` record the program's SM id and its first and last timestamps. One event
per marker per program (CTA): the store is made by the program's first thread, so the values are those of warp 0.
The reads are inline assembly with side effects, so the compiler keeps them in order with other memory
operations, but asynchronous work (loads in flight, ``wgmma`` groups) may complete after a marker that follows it
in the source; docs/gpu-backends.md (device) says what this means for a region's time in a pipelined loop.
"""

from __future__ import annotations

import triton
import triton.language as tl

from argus_lab.device.declarations import region_code as _region_code
from argus_lab.device.layout import (
    H_EVENTS_PER_SLOT,
    H_GRID_OVERFLOW,
    H_N_SLOTS,
    H_SLOT_WORDS,
    LAUNCH_HEADER_WORDS,
    S_CLK_BEGIN,
    S_CLK_END,
    S_N_EVENTS,
    S_N_WARPS,
    S_PID1,
    S_SMID,
    S_T_BEGIN,
    S_T_END,
    SLOT_HEADER_WORDS,
)

__all__ = ["begin", "end", "enter", "exit"]

_LAUNCH_HEADER_WORDS: tl.constexpr = tl.constexpr(LAUNCH_HEADER_WORDS)
_SLOT_HEADER_WORDS: tl.constexpr = tl.constexpr(SLOT_HEADER_WORDS)
_H_N_SLOTS: tl.constexpr = tl.constexpr(H_N_SLOTS)
_H_EVENTS: tl.constexpr = tl.constexpr(H_EVENTS_PER_SLOT)
_H_SLOT_WORDS: tl.constexpr = tl.constexpr(H_SLOT_WORDS)
_H_GRID_OVERFLOW: tl.constexpr = tl.constexpr(H_GRID_OVERFLOW)
_S_PID1: tl.constexpr = tl.constexpr(S_PID1)
_S_SMID: tl.constexpr = tl.constexpr(S_SMID)
_S_T_BEGIN: tl.constexpr = tl.constexpr(S_T_BEGIN)
_S_T_END: tl.constexpr = tl.constexpr(S_T_END)
_S_CLK_BEGIN: tl.constexpr = tl.constexpr(S_CLK_BEGIN)
_S_CLK_END: tl.constexpr = tl.constexpr(S_CLK_END)
_S_N_EVENTS: tl.constexpr = tl.constexpr(S_N_EVENTS)
_S_N_WARPS: tl.constexpr = tl.constexpr(S_N_WARPS)


# The region's buffer code, computed while the kernel is traced (a bad name fails the compile with its fix).
_code = triton.constexpr_function(_region_code)


@triton.jit
def _globaltimer():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _clock64():
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _smid():
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _linear_pid():
    p0 = tl.program_id(0).to(tl.int64)
    p1 = tl.program_id(1).to(tl.int64)
    p2 = tl.program_id(2).to(tl.int64)
    n0 = tl.num_programs(0).to(tl.int64)
    n1 = tl.num_programs(1).to(tl.int64)
    return p0 + n0 * (p1 + n1 * p2)


@triton.jit
def begin(probe):
    """Start recording for this program; returns the marker state ``c`` for :func:`enter`/:func:`exit`/:func:`end`."""
    if probe is None:
        return 0
    else:
        pid = _linear_pid()
        n_slots = tl.load(probe + _H_N_SLOTS)
        cap = tl.load(probe + _H_EVENTS)
        slot_words = tl.load(probe + _H_SLOT_WORDS)
        ok = pid < n_slots
        base = tl.where(ok, _LAUNCH_HEADER_WORDS + pid * slot_words, 0)
        cap = tl.where(ok, cap, -1)
        tl.store(probe + _H_GRID_OVERFLOW, 1, mask=pid >= n_slots)
        t0 = _globaltimer()
        k0 = _clock64()
        tl.store(probe + base + _S_PID1, pid + 1, mask=ok)
        tl.store(probe + base + _S_SMID, _smid().to(tl.int64), mask=ok)
        tl.store(probe + base + _S_T_BEGIN, t0, mask=ok)
        tl.store(probe + base + _S_CLK_BEGIN, k0, mask=ok)
        tl.store(probe + base + _S_N_WARPS, tl.extra.cuda.num_warps(), mask=ok)
        return base, cap.to(tl.int32), tl.full((), 0, tl.int32)


@triton.jit
def _record(probe, c, code, is_exit):
    base, cap, n = c
    t = _globaltimer()
    k = _clock64()
    tag = ((k & 0xFFFFFFFF) << 32) | (code << 1) | is_exit
    at = probe + base + _SLOT_HEADER_WORDS + 2 * n.to(tl.int64)
    ok = n < cap
    tl.store(at, t, mask=ok)
    tl.store(at + 1, tag, mask=ok)
    return base, cap, n + 1


@triton.jit
def enter(probe, c, name: tl.constexpr):
    """Open device region ``name`` (a string literal); returns the new marker state."""
    if probe is None:
        return c
    else:
        return _record(probe, c, _code(name), 0)


@triton.jit
def exit(probe, c, name: tl.constexpr):
    """Close device region ``name``; returns the new marker state."""
    if probe is None:
        return c
    else:
        return _record(probe, c, _code(name), 1)


@triton.jit
def end(probe, c):
    """Finish recording for this program: its last timestamps and how many events it tried to record."""
    if probe is not None:
        base, cap, n = c
        ok = cap >= 0
        t1 = _globaltimer()
        k1 = _clock64()
        tl.store(probe + base + _S_T_END, t1, mask=ok)
        tl.store(probe + base + _S_CLK_END, k1, mask=ok)
        tl.store(probe + base + _S_N_EVENTS, n.to(tl.int64), mask=ok)
