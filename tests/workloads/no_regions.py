"""Test workload: marks no region (the whole script is measured as its implicit region, `no_regions`)."""

import time

time.sleep(0.002)
