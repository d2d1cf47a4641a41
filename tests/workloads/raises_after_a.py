"""Test workload: region `a` finishes, then the script raises (in its first repetition, a warm-up one)."""

import argus_lab

with argus_lab.region("a"):
    total = sum(range(1000))
raise RuntimeError("oops")
