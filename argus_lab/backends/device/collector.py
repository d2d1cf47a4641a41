"""Probe buffers for instrumented launches, and reading them back after the run.

The instrumented variant of a kernel takes one probe buffer per launch (an ordinary pointer argument: it works
with Triton's launcher, Inductor's static launcher and CUDA graphs alike). :class:`DeviceRegionCollector` makes
the buffers, remembers which launch each belongs to, and after the run copies them all to the host with one
synchronisation and decodes them in bulk. torch is imported only when a buffer is made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from argus_lab.backends.device.decode import DecodedLaunch, decode
from argus_lab.device import DeviceRegions
from argus_lab.device.layout import LAUNCH_HEADER_WORDS, buffer_words, launch_header
from argus_lab.errors import RegionMisuseError

MAX_BUFFER_BYTES = 4 << 30


@dataclass(frozen=True)
class ProbeBuffer:
    """One launch's probe: the int64 GPU tensor to pass as the kernel's ``probe`` argument, and its shape."""

    tensor: Any
    n_slots: int
    events_per_slot: int
    launch: int = 0
    kernel: str = ""

    @staticmethod
    def allocate(
        n_slots: int, events_per_slot: int, *, device: Any = "cuda", launch: int = 0, kernel: str = ""
    ) -> ProbeBuffer:
        """A zeroed buffer with its header written: one slot per program of the launch grid."""
        if not isinstance(n_slots, int) or n_slots < 1:
            msg = f"n_slots must be the number of programs the launch runs (>= 1), got {n_slots!r}"
            raise RegionMisuseError(msg)
        if not isinstance(events_per_slot, int) or events_per_slot < 1:
            msg = (
                f"events_per_slot must be >= 1, got {events_per_slot!r}: give the largest number of marker calls "
                "(enter + exit) one program makes"
            )
            raise RegionMisuseError(msg)
        words = buffer_words(n_slots, events_per_slot)
        if words * 8 > MAX_BUFFER_BYTES:
            msg = (
                f"a probe of {n_slots} slots x {events_per_slot} events needs {words * 8 / 2**30:.1f} GiB "
                f"(limit {MAX_BUFFER_BYTES >> 30} GiB): mark fewer, coarser regions (e.g. per tile, not per k-step) "
                "or instrument fewer launches"
            )
            raise RegionMisuseError(msg)
        import torch

        t = torch.zeros(words, dtype=torch.int64, device=device)
        t[:LAUNCH_HEADER_WORDS] = torch.tensor(launch_header(n_slots, events_per_slot), dtype=torch.int64)
        return ProbeBuffer(t, n_slots, events_per_slot, launch, kernel)

    def host(self) -> np.ndarray:
        """The buffer copied to the host (synchronises with the buffer's stream)."""
        return np.asarray(self.tensor.cpu().numpy(), dtype=np.int64)


@dataclass
class DeviceRegionCollector:
    """Makes the probe buffers of a run and decodes them afterwards.

    ``probe(...)`` returns the tensor to pass to the kernel; ``collect()`` (after the run) returns one
    :class:`DecodedLaunch` per probe, in launch order, keeping every problem the decoder found.
    """

    regions: DeviceRegions
    device: Any = "cuda"
    buffers: list[ProbeBuffer] = field(default_factory=list)

    def probe(self, n_slots: int, events_per_slot: int, *, kernel: str = "") -> Any:
        """A new probe buffer for the next launch (returns the tensor to pass as ``probe``)."""
        buf = ProbeBuffer.allocate(
            n_slots, events_per_slot, device=self.device, launch=len(self.buffers), kernel=kernel
        )
        self.buffers.append(buf)
        return buf.tensor

    def raw(self) -> list[np.ndarray]:
        """Every buffer on the host, in launch order."""
        return [b.host() for b in self.buffers]

    def collect(self, *, strict: bool = False) -> list[DecodedLaunch]:
        """Decode every buffer; with ``strict`` the first malformed buffer raises."""
        pairs = zip(self.buffers, self.raw(), strict=True)
        return [decode(h, self.regions, launch=b.launch, strict=strict) for b, h in pairs]
