"""The device peaks and per-SM limits the roofline and occupancy read: one table, by CUDA device name.

Figures are the vendors' datasheet numbers (dense tensor-core FLOP/s, DRAM bandwidth) and the sm_90 limits of the
CUDA programming guide; a device that is not listed has no roofline (``device_spec`` returns ``None``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceSpec:
    """Peaks and per-SM limits of a GPU (the roofline and occupancy use them)."""

    name: str
    sms: int
    peak_flops: Mapping[str, float]
    """Dense tensor-core FLOP/s by input type (``bf16``, ``fp16``)."""
    dram_bytes_per_s: float
    registers_per_sm: int = 65536
    shared_per_sm: int = 233472
    """Bytes of shared memory an SM can give its CTAs (228 KiB on sm_90)."""
    shared_per_cta: int = 232448
    """The most one CTA may use (227 KiB on sm_90)."""
    reserved_shared_per_cta: int = 1024
    max_warps_per_sm: int = 64
    max_ctas_per_sm: int = 32
    source: str = ""


DEVICES: dict[str, DeviceSpec] = {
    "NVIDIA H200": DeviceSpec(
        name="NVIDIA H200",
        sms=132,
        peak_flops={"bf16": 989.4e12, "fp16": 989.4e12, "fp32": 66.9e12},
        dram_bytes_per_s=4.8e12,
        source="NVIDIA H200 datasheet (SXM): 989 TFLOP/s dense BF16/FP16 tensor, 4.8 TB/s HBM3e; sm_90 limits",
    ),
    "NVIDIA H100 80GB HBM3": DeviceSpec(
        name="NVIDIA H100 80GB HBM3",
        sms=132,
        peak_flops={"bf16": 989.4e12, "fp16": 989.4e12, "fp32": 66.9e12},
        dram_bytes_per_s=3.35e12,
        source="NVIDIA H100 SXM datasheet: 989 TFLOP/s dense BF16/FP16 tensor, 3.35 TB/s HBM3; sm_90 limits",
    ),
}


def device_spec(name: str | None) -> DeviceSpec | None:
    """The spec of a device by its CUDA name (``None`` when unknown)."""
    return DEVICES.get(name or "")


__all__ = ["DEVICES", "DeviceSpec", "device_spec"]
