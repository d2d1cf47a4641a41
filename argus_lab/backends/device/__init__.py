"""The device-regions backend: per-launch probe buffers of instrumented kernels, read back and decoded.

``collector.py`` allocates one probe buffer per launch and reads them back after the run; ``decode.py`` turns a
buffer into raw rows (one per region occurrence per program); ``summary.py`` derives the per-launch figures
(``dev.time``, ``dev.count``, per-SM busy time, tail imbalance) that the join will own in phase B.
"""
