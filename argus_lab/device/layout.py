"""The per-launch device-region buffer: one layout shared by the kernel markers and the decoder.

The buffer is one ``int64`` array in GPU memory, allocated by the host for one launch and passed to the kernel as
an ordinary pointer argument (so any launcher works: Triton's, Inductor's static launcher, a CUDA graph).

::

    words 0..7          launch header, written by the host before the launch
                        [MAGIC, VERSION, n_slots, events_per_slot, slot_words, 0, 0, 0]
    slot s (s < n_slots) SLOT_HEADER_WORDS + 2 * events_per_slot words, written by program (CTA) s
        header          [pid + 1, smid, t_begin, t_end, clk_begin, clk_end, n_events, n_warps]
        events          per event two words: [globaltimer ns, (clock & 0xFFFFFFFF) << 32 | region_id << 1 | is_exit]

``t_*`` are ``%globaltimer`` readings (ns, one clock for the whole GPU: comparable across SMs); ``clk_*`` are
``%clock64`` readings (cycles of the SM the program ran on: fine-grained, not comparable across SMs). A slot whose
first word is 0 was never written (its program did not run the markers). ``n_events`` counts every event the
program tried to record; events past ``events_per_slot`` are dropped, never written out of bounds, and the decoder
reports them. A program whose linear id is ``>= n_slots`` records nothing and sets header word 5 to 1.
"""

from __future__ import annotations

MAGIC = 0x41524755  # "ARGU"
VERSION = 1
LAUNCH_HEADER_WORDS = 8
SLOT_HEADER_WORDS = 8
WORDS_PER_EVENT = 2

# launch header words
H_MAGIC, H_VERSION, H_N_SLOTS, H_EVENTS_PER_SLOT, H_SLOT_WORDS, H_GRID_OVERFLOW = 0, 1, 2, 3, 4, 5
# slot header words
S_PID1, S_SMID, S_T_BEGIN, S_T_END, S_CLK_BEGIN, S_CLK_END, S_N_EVENTS, S_N_WARPS = range(8)

REGION_ID_BITS = 31


def slot_words(events_per_slot: int) -> int:
    """Words one program's slot takes for ``events_per_slot`` events."""
    return SLOT_HEADER_WORDS + WORDS_PER_EVENT * events_per_slot


def buffer_words(n_slots: int, events_per_slot: int) -> int:
    """Words of a whole launch buffer."""
    return LAUNCH_HEADER_WORDS + n_slots * slot_words(events_per_slot)


def launch_header(n_slots: int, events_per_slot: int) -> list[int]:
    """The eight header words the host writes before the launch."""
    return [MAGIC, VERSION, n_slots, events_per_slot, slot_words(events_per_slot), 0, 0, 0]
