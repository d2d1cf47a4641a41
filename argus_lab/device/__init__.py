"""Device regions: named phases inside a GPU kernel (host side: names, identity, static checks).

A device region is marked inside ``@triton.jit`` code with the markers of :mod:`argus_lab.device.markers`::

    from argus_lab.device import markers as dm

    @triton.jit
    def kernel(..., probe):
        c = dm.begin(probe)
        for tile in range(...):
            c = dm.enter(probe, c, "load")
            ...
            c = dm.exit(probe, c, "load")
        dm.end(probe, c)

With ``probe=None`` (the clean variant) every marker compiles to nothing; with a probe buffer (the instrumented
variant, :mod:`argus_lab.backends.device`) each marker records a timestamp into that launch's buffer.  The workload
gets the probe of each launch from :func:`probe` (``None`` unless an instrumented run records; see
:mod:`argus_lab.device.variant`).

The host side (:mod:`~argus_lab.device.declarations`) imports neither Triton nor torch: the table of declared
names (:func:`regions`), the small integer code a name has inside the buffer (:func:`region_code`), and a static
check of a kernel's markers against the table (:meth:`DeviceRegions.check_kernel`).
"""

from __future__ import annotations

from argus_lab.device.declarations import DeviceRegions, region_code, regions
from argus_lab.device.variant import instrumented, probe

__all__ = ["DeviceRegions", "instrumented", "probe", "region_code", "regions"]
