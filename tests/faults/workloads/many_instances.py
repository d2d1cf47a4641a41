"""Fault-suite workload: 50,000 region instances (enough evidence to outgrow a small file-size limit)."""

import argus_lab

marker = argus_lab.region("r")
for _ in range(50_000):
    with marker:
        pass
