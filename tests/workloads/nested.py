"""Test workload: two levels of regions, a little CPU work."""

import argus_lab

with argus_lab.region("outer"):
    for _ in range(2):
        with argus_lab.region("inner"):
            sum(range(2000))
