# mypy: disable-error-code="no-untyped-def,untyped-decorator"
"""Triton kernels of one decode step of a Llama-shaped model (batch 1): phase functions and two drivers.

Every phase is a ``@triton.jit`` device function taking ``(pid, nprog)`` that strides over its work items, so the
same code runs under two drivers:

* :func:`decode_phase`, the PHASED driver: one launch per phase, the grid boundary is the synchronisation. The
  Triton CPU interpreter (``TRITON_INTERPRET=1``) runs it, which is how the phases are tested without a GPU.
* :func:`decode_megakernel`, the PERSISTENT driver: one program per SM (all co-resident), layers
  ``[layer_begin, layer_end)`` and optionally the LM head in one launch, grid-wide barriers between phases. The
  interpreter runs programs one after another, so it cannot run this driver (a barrier would wait forever); it is
  tested on the GPU against the phased driver and ``transformers``.

Phases of one layer (and the waits at the grid barriers that follow them):

==========  ======================================================================================================
norm_attn   ``rstd`` of the residual stream (every program recomputes it: 2048 floats from L2)
qkv         ``[q; k; v] = W_qkv @ (x * rstd * ln1)``                               -> barrier ``wait_qkv``
attention   RoPE on q and the new k, softmax over the cache and the new token, GQA; the program of the first
            query head of a group appends the rotated k and v at ``pos``          -> barrier ``wait_attention``
o_proj      ``x += W_o @ attn``                                                   -> barrier ``wait_o_proj``
norm_mlp    ``rstd`` of the residual stream again
gate_up     ``act = silu(W_g @ xn) * (W_u @ xn)``                                  -> barrier ``wait_gate_up``
down        ``x += W_d @ act``                                                    -> barrier ``wait_down``
==========  ======================================================================================================

then ``norm_final`` and ``lm_head`` (``logits = W_head @ (x * rstd * ln_f)``). The residual stream ``x`` and all
activations are fp32; weights and the KV cache are bf16 (q, k and v are rounded to bf16 as the bf16 model does).
Layer 0 reads the residual stream from the token's row of an fp32 copy of the embedding table.

Buffers written inside a launch are read with ``cache_modifier=".cg"`` (through L2: L1 is not coherent across
SMs). The barrier is one int32 counter: each program adds 1 (release, GPU scope) after a CTA barrier and spins on
an acquire read until the count reaches ``k * nprog`` for the launch's k-th barrier, so the counter only grows
within a launch; the last program to finish resets it for the next launch. A spin that lasts past ``timeout_ns``
since the program began sets the error word and gives up, so a launch whose programs are not all resident ends
(with wrong results and the error set) instead of hanging.

With ``PREFETCH`` 1 each program, once its qkv tiles are done, asks L2 for the lines of its output-projection
weight rows (2: and its gate/up rows) before it waits at the barrier: the weights stream in while most programs
wait for the attention (``prefetch.global.L2``, a hint).

Device regions (``argus_lab.device.markers``): each phase and each barrier wait, compiled in only with a probe;
``probe=None`` compiles every marker to nothing.
"""

from __future__ import annotations

import triton
import triton.language as tl

import argus_lab.device
from argus_lab.device import markers as dm

PHASES = argus_lab.device.regions(
    "norm_attn", "qkv", "wait_qkv", "attention", "wait_attention", "o_proj", "wait_o_proj", "norm_mlp", "gate_up",
    "wait_gate_up", "down", "wait_down", "norm_final", "lm_head", "prefetch",
    module="examples.gpu.decode.kernels",
)  # fmt: skip

EVENTS_PER_LAYER = 26
"""Marker events one program records per layer: 13 regions (7 phases, the L2 prefetch, 5 barrier waits), an enter
and an exit each."""
EVENTS_HEAD = 4
"""Marker events of the final norm and the LM head."""

# sync words (int32): the barrier counter, the count of finished programs, the error flag
SYNC_BARRIER, SYNC_DONE, SYNC_ERROR = 0, 1, 2
SYNC_HEADS = 4
"""First of the per-head counters of finished attention slices (``COMBINE``: the last slice of a head combines)."""
MAX_HEADS = 64
SYNC_WORDS = SYNC_HEADS + MAX_HEADS
_SYNC_HEADS: tl.constexpr = tl.constexpr(SYNC_HEADS)

# phase ids of the phased driver
PH_QKV, PH_ATTENTION, PH_O_PROJ, PH_GATE_UP, PH_DOWN, PH_HEAD, PH_COMBINE = 0, 1, 2, 3, 4, 5, 6


@triton.jit
def _globaltimer():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _prefetch_l2(ptrs):
    """Ask for the 128-byte lines at ``ptrs`` to be brought into L2 (a hint: nothing waits for it)."""
    return tl.inline_asm_elementwise(
        "prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l", [ptrs], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _prefetch_rows(w_ptr, N, pid, nprog, K: tl.constexpr, BN: tl.constexpr):
    """L2 prefetches of every line of this program's row tiles (as :func:`_matvec` strides them) of a bf16 ``N x K``
    matrix: issued before a barrier, they stream the next phase's weights while the program waits."""
    offs = tl.arange(0, K // 64) * 64
    for tile in range(pid, tl.cdiv(N, BN), nprog):
        rows = tl.minimum(tile * BN + tl.arange(0, BN), N - 1)
        _prefetch_l2(w_ptr + rows[:, None] * K + offs[None, :])


@triton.jit
def _rstd(x_ptr, eps, H: tl.constexpr, BK: tl.constexpr):
    """``1 / sqrt(mean(x^2) + eps)`` of the ``H``-vector at ``x_ptr`` (fp32, read through L2)."""
    acc = tl.zeros([BK], dtype=tl.float32)
    for k in range(0, H, BK):
        v = tl.load(x_ptr + k + tl.arange(0, BK), cache_modifier=".cg")
        acc += v * v
    return 1.0 / tl.sqrt(tl.sum(acc, axis=0) / H + eps)


@triton.jit
def _matvec(
    w_ptr, x_ptr, nw_ptr, rstd, res_ptr, out_ptr, N, pid, nprog,
    K: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NORM: tl.constexpr, RES: tl.constexpr,
    STAGES: tl.constexpr, UNROLL: tl.constexpr, ATT: tl.constexpr = 0, NQ: tl.constexpr = 1, D: tl.constexpr = 1,
    SPLITS: tl.constexpr = 1,
):  # fmt: skip
    """``out[n] = sum_k W[n, k] * xn[k] (+ res[n])`` for the row tiles ``pid, pid + nprog, ...``.

    ``STAGES`` > 1 lets Triton pipeline the k-loop's loads (``cp.async`` into shared memory, ``STAGES - 1`` steps
    ahead); ``UNROLL`` unrolls it so that the loads of several steps are in flight together.

    ``W`` is row-major ``N x K`` bf16; ``xn = x * rstd * nw`` with ``NORM`` (an RMSNorm folded into the loads), else
    ``x``; with ``ATT`` the input vector is the attention output combined from its slices at ``x_ptr``
    (:func:`_att_chunk`). ``res`` may alias ``out``: each row is read and written by the one program that owns its
    tile.
    """
    offs_k = tl.arange(0, BK)
    for tile in range(pid, tl.cdiv(N, BN), nprog):
        rows = tile * BN + tl.arange(0, BN)
        rmask = rows < N
        acc = tl.zeros([BN, BK], dtype=tl.float32)
        for k in tl.range(0, K, BK, num_stages=STAGES, loop_unroll_factor=UNROLL):
            if ATT:  # noqa: SIM108 (a constexpr branch: only one of the two is compiled)
                xk = _att_chunk(x_ptr, k, NQ, D, BK, SPLITS)
            else:
                xk = tl.load(x_ptr + k + offs_k, cache_modifier=".cg")
            if NORM:
                xk = xk * rstd * tl.load(nw_ptr + k + offs_k)
            w = tl.load(w_ptr + rows[:, None] * K + (k + offs_k)[None, :], mask=rmask[:, None], other=0.0)
            acc += w.to(tl.float32) * xk[None, :]
        y = tl.sum(acc, axis=1)
        if RES:
            y += tl.load(res_ptr + rows, mask=rmask, other=0.0, cache_modifier=".cg")
        tl.store(out_ptr + rows, y, mask=rmask)


@triton.jit
def _gate_up(
    wg_ptr, wu_ptr, x_ptr, nw_ptr, rstd, out_ptr, pid, nprog,
    FF: tl.constexpr, K: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr,
    UNROLL: tl.constexpr,
):  # fmt: skip
    """``act = silu(W_g @ xn) * (W_u @ xn)`` with ``xn = x * rstd * nw``; ``W_g``, ``W_u`` row-major ``FF x K``."""
    offs_k = tl.arange(0, BK)
    for tile in range(pid, tl.cdiv(FF, BN), nprog):
        rows = tile * BN + tl.arange(0, BN)
        rmask = rows < FF
        acc_g = tl.zeros([BN, BK], dtype=tl.float32)
        acc_u = tl.zeros([BN, BK], dtype=tl.float32)
        for k in tl.range(0, K, BK, num_stages=STAGES, loop_unroll_factor=UNROLL):
            xk = tl.load(x_ptr + k + offs_k, cache_modifier=".cg") * rstd * tl.load(nw_ptr + k + offs_k)
            at = rows[:, None] * K + (k + offs_k)[None, :]
            g = tl.load(wg_ptr + at, mask=rmask[:, None], other=0.0)
            u = tl.load(wu_ptr + at, mask=rmask[:, None], other=0.0)
            acc_g += g.to(tl.float32) * xk[None, :]
            acc_u += u.to(tl.float32) * xk[None, :]
        g = tl.sum(acc_g, axis=1).to(tl.bfloat16).to(tl.float32)
        u = tl.sum(acc_u, axis=1).to(tl.bfloat16).to(tl.float32)
        tl.store(out_ptr + rows, g / (1.0 + tl.exp(-g)) * u, mask=rmask)


@triton.jit
def _rope(a, b, cos, sin):
    """Rotate the halves ``(a, b)`` of a head vector (Llama's ``rotate_half``), rounded to bf16."""
    ra = (a * cos - b * sin).to(tl.bfloat16).to(tl.float32)
    rb = (b * cos + a * sin).to(tl.bfloat16).to(tl.float32)
    return ra, rb


@triton.jit
def _attention(
    qkv_ptr, kc_ptr, vc_ptr, att_ptr, rope_ptr, pos, max_len, sm_scale, pid, nprog,
    NQ: tl.constexpr, NKV: tl.constexpr, D: tl.constexpr, BT: tl.constexpr, SPLITS: tl.constexpr,
    cnt_ptr=None, COMBINE: tl.constexpr = 0,
):  # fmt: skip
    """Work item ``(h, sp)``: query head ``h``, the ``sp``-th of ``SPLITS`` slices of the cache positions ``[0, pos)``
    (flash-decoding). RoPE on q and the new k, then the online softmax over the slice; slice 0 also takes the new
    token (from ``qkv``). Writes the slice's unnormalised output, running maximum and sum (see :func:`_att_chunk`,
    which the output projection combines them with). The item ``(first head of a KV group, 0)`` appends the rotated
    k and v at ``pos`` (no program reads position ``pos`` of the cache in this step). ``kc``/``vc`` point at this
    layer's ``NKV x max_len x D`` bf16 cache; ``rope`` is ``max_len x D`` fp32 (cos of the ``D/2`` frequencies,
    then sin). With ``COMBINE`` (the persistent driver) each item counts itself done on its head's counter at
    ``cnt_ptr`` (release/acquire at GPU scope), and the last of a head's slices combines them into the final
    attention vector (:func:`_att_head`), so the output projection reads a plain vector.
    """
    HALF: tl.constexpr = D // 2
    GROUP: tl.constexpr = NQ // NKV
    offs_h = tl.arange(0, HALF)
    offs_d = tl.arange(0, D)
    offs_t = tl.arange(0, BT)
    cos = tl.load(rope_ptr + pos * D + offs_h)
    sin = tl.load(rope_ptr + pos * D + HALF + offs_h)
    chunk = tl.cdiv(tl.cdiv(pos, SPLITS), BT) * BT
    ml_ptr = att_ptr + NQ * SPLITS * D
    for item in range(pid, NQ * SPLITS, nprog):
        h = item // SPLITS
        sp = item % SPLITS
        g = h // GROUP
        q_at = qkv_ptr + h * D
        k_at = qkv_ptr + (NQ + g) * D
        v_at = qkv_ptr + (NQ + NKV + g) * D
        q1 = tl.load(q_at + offs_h, cache_modifier=".cg").to(tl.bfloat16).to(tl.float32)
        q2 = tl.load(q_at + HALF + offs_h, cache_modifier=".cg").to(tl.bfloat16).to(tl.float32)
        q1, q2 = _rope(q1, q2, cos, sin)
        k1 = tl.load(k_at + offs_h, cache_modifier=".cg").to(tl.bfloat16).to(tl.float32)
        k2 = tl.load(k_at + HALF + offs_h, cache_modifier=".cg").to(tl.bfloat16).to(tl.float32)
        k1, k2 = _rope(k1, k2, cos, sin)
        v = tl.load(v_at + offs_d, cache_modifier=".cg").to(tl.bfloat16).to(tl.float32)
        q1 = q1 * sm_scale
        q2 = q2 * sm_scale
        first = sp == 0
        s_new = tl.sum(q1 * k1, axis=0) + tl.sum(q2 * k2, axis=0)  # the new token's score (slice 0 only)
        m_i = tl.where(first, s_new, -1.0e30)
        l_i = tl.where(first, 1.0, 0.0)
        acc = v * l_i
        kbase = kc_ptr + g * max_len * D
        vbase = vc_ptr + g * max_len * D
        t_lo = sp * chunk
        t_hi = tl.minimum(t_lo + chunk, pos)
        for t0 in range(t_lo, t_hi, BT):
            t = t0 + offs_t
            tmask = t < t_hi
            kk1 = tl.load(kbase + t[:, None] * D + offs_h[None, :], mask=tmask[:, None], other=0.0).to(tl.float32)
            kk2 = tl.load(kbase + t[:, None] * D + HALF + offs_h[None, :], mask=tmask[:, None], other=0.0)
            s = tl.sum(kk1 * q1[None, :], axis=1) + tl.sum(kk2.to(tl.float32) * q2[None, :], axis=1)
            s = tl.where(tmask, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=0))
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(s - m_new)
            l_i = l_i * alpha + tl.sum(p, axis=0)
            vv = tl.load(vbase + t[:, None] * D + offs_d[None, :], mask=tmask[:, None], other=0.0).to(tl.float32)
            acc = acc * alpha + tl.sum(p[:, None] * vv, axis=0)
            m_i = m_new
        tl.store(att_ptr + item * D + offs_d, acc)
        tl.store(ml_ptr + 2 * item, m_i)
        tl.store(ml_ptr + 2 * item + 1, l_i)
        if COMBINE:
            tl.debug_barrier()
            done = tl.atomic_add(cnt_ptr + h, 1, sem="acq_rel", scope="gpu")
            if (done + 1) % SPLITS == 0:  # the head's last slice: every other slice's output is visible now
                final_ptr = att_ptr + NQ * SPLITS * (D + 2)
                tl.store(final_ptr + h * D + offs_d, _att_head(att_ptr, h, NQ, D, SPLITS))
        if (h % GROUP == 0) & first:
            tl.store(kbase + pos * D + offs_h, k1.to(tl.bfloat16))
            tl.store(kbase + pos * D + HALF + offs_h, k2.to(tl.bfloat16))
            tl.store(vbase + pos * D + offs_d, v.to(tl.bfloat16))


@triton.jit
def _att_chunk(att_ptr, k, NQ: tl.constexpr, D: tl.constexpr, BK: tl.constexpr, SPLITS: tl.constexpr):
    """Elements ``[k, k + BK)`` of the attention output (``BK / D`` whole heads): the ``SPLITS`` slices of each head
    combined (rescaled to the largest running maximum, divided by the rescaled sum), rounded to bf16."""
    HB: tl.constexpr = BK // D
    heads = k // D + tl.arange(0, HB)
    idx = heads[:, None] * SPLITS + tl.arange(0, SPLITS)[None, :]  # (HB, SPLITS) work items
    ml_ptr = att_ptr + NQ * SPLITS * D
    m = tl.load(ml_ptr + 2 * idx, cache_modifier=".cg")
    l = tl.load(ml_ptr + 2 * idx + 1, cache_modifier=".cg")  # noqa: E741
    wgt = tl.exp(m - tl.max(m, axis=1)[:, None])
    den = tl.sum(wgt * l, axis=1)
    offs_d = tl.arange(0, D)
    acc = tl.load(att_ptr + idx[:, :, None] * D + offs_d[None, None, :], cache_modifier=".cg")
    out = tl.sum(acc * wgt[:, :, None], axis=1) / den[:, None]
    return tl.reshape(out, [BK]).to(tl.bfloat16).to(tl.float32)


@triton.jit
def _att_head(att_ptr, h, NQ: tl.constexpr, D: tl.constexpr, SPLITS: tl.constexpr):
    """Head ``h``'s attention output: its ``SPLITS`` slices combined (as :func:`_att_chunk` does for several heads),
    rounded to bf16."""
    idx = h * SPLITS + tl.arange(0, SPLITS)
    ml_ptr = att_ptr + NQ * SPLITS * D
    m = tl.load(ml_ptr + 2 * idx, cache_modifier=".cg")
    l = tl.load(ml_ptr + 2 * idx + 1, cache_modifier=".cg")  # noqa: E741
    wgt = tl.exp(m - tl.max(m, axis=0))
    den = tl.sum(wgt * l, axis=0)
    acc = tl.load(att_ptr + idx[:, None] * D + tl.arange(0, D)[None, :], cache_modifier=".cg")
    out = tl.sum(acc * wgt[:, None], axis=0) / den
    return out.to(tl.bfloat16).to(tl.float32)


@triton.jit
def _combine(att_ptr, pid, nprog, NQ: tl.constexpr, D: tl.constexpr, SPLITS: tl.constexpr):
    """Every head's combined output into the final attention vector (the phased driver's COMBINE launch)."""
    final_ptr = att_ptr + NQ * SPLITS * (D + 2)
    for h in range(pid, NQ, nprog):
        tl.store(final_ptr + h * D + tl.arange(0, D), _att_head(att_ptr, h, NQ, D, SPLITS))


@triton.jit
def _grid_sync(sync_ptr, target, t_start, timeout_ns):
    """Wait until every program of the launch has arrived here (the counter reaches ``target``).

    Gives up once ``timeout_ns`` have passed since ``t_start`` (the program's start) and sets the error word.
    """
    tl.debug_barrier()
    tl.atomic_add(sync_ptr + 0, 1, sem="release", scope="gpu")
    seen = tl.atomic_add(sync_ptr + 0, 0, sem="acquire", scope="gpu")
    in_time = (_globaltimer() - t_start) <= timeout_ns
    while (seen < target) & in_time:
        seen = tl.atomic_add(sync_ptr + 0, 0, sem="acquire", scope="gpu")
        in_time = (_globaltimer() - t_start) <= timeout_ns
    if seen < target:
        tl.atomic_xchg(sync_ptr + 2, 1, sem="relaxed", scope="gpu")
    tl.debug_barrier()


@triton.jit
def _layer_pointers(
    li, w_qkv, w_o, w_gate, w_up, w_down, ln_attn, ln_mlp, k_cache, v_cache, max_len,
    H: tl.constexpr, NQ: tl.constexpr, NKV: tl.constexpr, D: tl.constexpr, FF: tl.constexpr,
):  # fmt: skip
    l64 = tl.cast(li, tl.int64)
    return (
        w_qkv + l64 * ((NQ + 2 * NKV) * D * H),
        w_o + l64 * (H * NQ * D),
        w_gate + l64 * (FF * H),
        w_up + l64 * (FF * H),
        w_down + l64 * (H * FF),
        ln_attn + l64 * H,
        ln_mlp + l64 * H,
        k_cache + l64 * NKV * max_len * D,
        v_cache + l64 * NKV * max_len * D,
    )


@triton.jit(do_not_specialize=["pos", "max_len", "layer"])
def decode_phase(
    x_ptr, emb_ptr, tok_ptr, qkv_ptr, att_ptr, act_ptr, logits_ptr,
    w_qkv, w_o, w_gate, w_up, w_down, ln_attn, ln_mlp, ln_final, w_head, k_cache, v_cache, rope_ptr,
    pos, max_len, layer, eps, sm_scale,
    H: tl.constexpr, NQ: tl.constexpr, NKV: tl.constexpr, D: tl.constexpr, FF: tl.constexpr, V: tl.constexpr,
    PHASE: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, BT: tl.constexpr, SPLITS: tl.constexpr,
    COMBINE: tl.constexpr = 0,
):  # fmt: skip
    """The PHASED driver: phase ``PHASE`` of layer ``layer`` (or the LM head); the launch boundary syncs."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    wqkv, wo, wg, wu, wd, n1, n2, kc, vc = _layer_pointers(
        layer, w_qkv, w_o, w_gate, w_up, w_down, ln_attn, ln_mlp, k_cache, v_cache, max_len, H, NQ, NKV, D, FF
    )
    src = tl.where(layer == 0, emb_ptr + tl.load(tok_ptr).to(tl.int64) * H, x_ptr)
    if PHASE == 0:
        rstd = _rstd(src, eps, H, BK)
        _matvec(wqkv, src, n1, rstd, src, qkv_ptr, (NQ + 2 * NKV) * D, pid, nprog, H, BN, BK, True, False, 1, 1)
    elif PHASE == 1:
        _attention(qkv_ptr, kc, vc, att_ptr, rope_ptr, pos, max_len, sm_scale, pid, nprog, NQ, NKV, D, BT, SPLITS)
    elif PHASE == 2:
        if COMBINE:  # the combined vector of the COMBINE launch
            fin = att_ptr + NQ * SPLITS * (D + 2)
            _matvec(wo, fin, n1, 1.0, src, x_ptr, H, pid, nprog, NQ * D, BN, BK, False, True, 1, 1)
        else:
            _matvec(
                wo, att_ptr, n1, 1.0, src, x_ptr, H, pid, nprog, NQ * D, BN, BK, False, True, 1, 1, 1, NQ, D, SPLITS
            )  # fmt: skip
    elif PHASE == 6:
        _combine(att_ptr, pid, nprog, NQ, D, SPLITS)
    elif PHASE == 3:
        rstd = _rstd(x_ptr, eps, H, BK)
        _gate_up(wg, wu, x_ptr, n2, rstd, act_ptr, pid, nprog, FF, H, BN, BK, 1, 1)
    elif PHASE == 4:
        _matvec(wd, act_ptr, n2, 1.0, x_ptr, x_ptr, H, pid, nprog, FF, BN, BK, False, True, 1, 1)
    else:
        rstd = _rstd(x_ptr, eps, H, BK)
        _matvec(w_head, x_ptr, ln_final, rstd, x_ptr, logits_ptr, V, pid, nprog, H, BN, BK, True, False, 1, 1)


@triton.jit(do_not_specialize=["pos", "max_len", "layer_begin", "layer_end", "timeout_ns"])
def decode_megakernel(
    x_ptr, emb_ptr, tok_ptr, qkv_ptr, att_ptr, act_ptr, logits_ptr,
    w_qkv, w_o, w_gate, w_up, w_down, ln_attn, ln_mlp, ln_final, w_head, k_cache, v_cache, rope_ptr,
    sync_ptr, pos, max_len, layer_begin, layer_end, eps, sm_scale, timeout_ns,
    probe,
    H: tl.constexpr, NQ: tl.constexpr, NKV: tl.constexpr, D: tl.constexpr, FF: tl.constexpr, V: tl.constexpr,
    BN_QKV: tl.constexpr, BN_O: tl.constexpr, BN_GU: tl.constexpr, BN_DOWN: tl.constexpr, BN_HEAD: tl.constexpr,
    BK: tl.constexpr, BT: tl.constexpr, HEAD: tl.constexpr, STAGES: tl.constexpr, UNROLL: tl.constexpr,
    SPLITS: tl.constexpr, PREFETCH: tl.constexpr = 0, COMBINE: tl.constexpr = 0,
):  # fmt: skip
    """The PERSISTENT driver: layers ``[layer_begin, layer_end)`` and, with ``HEAD``, the final norm and LM head, in
    one launch of one program per SM, with a grid barrier after each phase of a layer."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    t_start = _globaltimer()
    c = dm.begin(probe)
    emb_row = emb_ptr + tl.load(tok_ptr).to(tl.int64) * H
    n_sync = 0
    for layer in range(layer_begin, layer_end):
        wqkv, wo, wg, wu, wd, n1, n2, kc, vc = _layer_pointers(
            layer, w_qkv, w_o, w_gate, w_up, w_down, ln_attn, ln_mlp, k_cache, v_cache, max_len, H, NQ, NKV, D, FF
        )
        src = tl.where(layer == 0, emb_row, x_ptr)
        c = dm.enter(probe, c, "norm_attn")
        rstd = _rstd(src, eps, H, BK)
        c = dm.exit(probe, c, "norm_attn")
        c = dm.enter(probe, c, "qkv")
        _matvec(
            wqkv,
            src,
            n1,
            rstd,
            src,
            qkv_ptr,
            (NQ + 2 * NKV) * D,
            pid,
            nprog,
            H,
            BN_QKV,
            BK,
            True,
            False,
            STAGES,
            UNROLL,
        )
        c = dm.exit(probe, c, "qkv")
        if PREFETCH > 0:  # the output projection's (and the gate/up) weights, through the wait and the attention
            c = dm.enter(probe, c, "prefetch")
            _prefetch_rows(wo, H, pid, nprog, NQ * D, BN_O)
            if PREFETCH > 1:
                _prefetch_rows(wg, FF, pid, nprog, H, BN_GU)
                _prefetch_rows(wu, FF, pid, nprog, H, BN_GU)
            c = dm.exit(probe, c, "prefetch")
        c = dm.enter(probe, c, "wait_qkv")
        n_sync += 1
        _grid_sync(sync_ptr, n_sync * nprog, t_start, timeout_ns)
        c = dm.exit(probe, c, "wait_qkv")
        c = dm.enter(probe, c, "attention")
        _attention(
            qkv_ptr, kc, vc, att_ptr, rope_ptr, pos, max_len, sm_scale, pid, nprog, NQ, NKV, D, BT, SPLITS,
            sync_ptr + _SYNC_HEADS, COMBINE,
        )  # fmt: skip
        c = dm.exit(probe, c, "attention")
        c = dm.enter(probe, c, "wait_attention")
        n_sync += 1
        _grid_sync(sync_ptr, n_sync * nprog, t_start, timeout_ns)
        c = dm.exit(probe, c, "wait_attention")
        c = dm.enter(probe, c, "o_proj")
        if COMBINE:
            fin = att_ptr + NQ * SPLITS * (D + 2)
            _matvec(wo, fin, n1, 1.0, src, x_ptr, H, pid, nprog, NQ * D, BN_O, BK, False, True, STAGES, UNROLL)
        else:
            _matvec(
                wo, att_ptr, n1, 1.0, src, x_ptr, H, pid, nprog, NQ * D, BN_O, BK, False, True, STAGES, UNROLL, 1,
                NQ, D, SPLITS,
            )  # fmt: skip
        c = dm.exit(probe, c, "o_proj")
        c = dm.enter(probe, c, "wait_o_proj")
        n_sync += 1
        _grid_sync(sync_ptr, n_sync * nprog, t_start, timeout_ns)
        c = dm.exit(probe, c, "wait_o_proj")
        c = dm.enter(probe, c, "norm_mlp")
        rstd = _rstd(x_ptr, eps, H, BK)
        c = dm.exit(probe, c, "norm_mlp")
        c = dm.enter(probe, c, "gate_up")
        _gate_up(wg, wu, x_ptr, n2, rstd, act_ptr, pid, nprog, FF, H, BN_GU, BK, STAGES, UNROLL)
        c = dm.exit(probe, c, "gate_up")
        c = dm.enter(probe, c, "wait_gate_up")
        n_sync += 1
        _grid_sync(sync_ptr, n_sync * nprog, t_start, timeout_ns)
        c = dm.exit(probe, c, "wait_gate_up")
        c = dm.enter(probe, c, "down")
        _matvec(wd, act_ptr, n2, 1.0, x_ptr, x_ptr, H, pid, nprog, FF, BN_DOWN, BK, False, True, STAGES, UNROLL)
        c = dm.exit(probe, c, "down")
        c = dm.enter(probe, c, "wait_down")
        n_sync += 1
        _grid_sync(sync_ptr, n_sync * nprog, t_start, timeout_ns)
        c = dm.exit(probe, c, "wait_down")
    if HEAD:
        c = dm.enter(probe, c, "norm_final")
        rstd = _rstd(x_ptr, eps, H, BK)
        c = dm.exit(probe, c, "norm_final")
        c = dm.enter(probe, c, "lm_head")
        _matvec(
            w_head, x_ptr, ln_final, rstd, x_ptr, logits_ptr, V, pid, nprog, H, BN_HEAD, BK, True, False, STAGES, UNROLL
        )
        c = dm.exit(probe, c, "lm_head")
    dm.end(probe, c)
    # the last program to finish resets the barrier counter for the next launch (every program is past its last
    # barrier once it counts itself done, so no one spins on the counter any more)
    tl.debug_barrier()
    done = tl.atomic_add(sync_ptr + 1, 1, sem="acq_rel", scope="gpu")
    if done == nprog - 1:
        tl.atomic_xchg(sync_ptr + 0, 0, sem="relaxed", scope="gpu")
        tl.atomic_xchg(sync_ptr + 1, 0, sem="relaxed", scope="gpu")
