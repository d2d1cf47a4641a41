"""The device backend: per-launch probe buffers of instrumented kernels, read back and decoded (raw evidence only).

``collector.py`` is the backend object (the process's probe source while its run records, with an embedded CUPTI
collector for the run's kernel records); ``decode.py`` turns a buffer into raw rows (one per program, one per region
occurrence per program).  The join (:mod:`argus_lab.join.device`) derives every value from them.
"""
