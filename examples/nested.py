"""An example workload with nested regions (host only): `argus-lab run examples/nested.py`."""

import math

import argus_lab


def attention(n: int) -> float:
    with argus_lab.region("attn"):
        return sum(math.sin(i) * math.cos(i) for i in range(n))


@argus_lab.region("mlp")
def mlp(n: int) -> float:
    return sum(math.sqrt(i) for i in range(n))


with argus_lab.region("decode"):
    for _ in range(4):
        with argus_lab.region("layer"):
            attention(20_000)
            mlp(10_000)
