"""Test workload: the main thread and a thread named `loader` each enter a region (two timeline lanes)."""

import threading
import time

import argus_lab


def load() -> None:
    with argus_lab.region("load"):
        time.sleep(0.002)


worker = threading.Thread(target=load, name="loader")
with argus_lab.region("step"):
    worker.start()
    time.sleep(0.003)
    worker.join()
