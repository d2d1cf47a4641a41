"""A host region to optimise on any machine: a blocked matrix product in NumPy (measured for real by host.wall).

The candidates vary the block size (a real tuning parameter of the loop) and a ``variant`` that the tests use to
make a candidate fail on purpose: ``wrong`` returns a result off by one (``wrong_result``), ``unbuildable`` fails
in ``prepare`` (``compile_failed``), ``crash`` raises at launch (``launch_failed``).  Those three variants are
SYNTHETIC failures of a real target; ``ok`` is the target itself.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from argus_lab.optimize import Candidate, CandidateError, Model, Space, StaticFacts, Work

AXES = {"block": (8, 16, 32), "variant": ("ok", "wrong", "unbuildable", "crash")}


class Blocked:
    """A prepared candidate: the blocked product with one block size."""

    facts: StaticFacts | None = None

    def __init__(self, a: np.ndarray, b: np.ndarray, block: int, variant: str) -> None:
        self.a, self.b, self.block, self.variant = a, b, block, variant

    def launch(self) -> Any:
        if self.variant == "crash":
            msg = "SYNTHETIC launch failure"
            raise RuntimeError(msg)
        n, bs = self.a.shape[0], self.block
        out = np.zeros((n, self.b.shape[1]))
        for i in range(0, n, bs):
            for k in range(0, n, bs):
                out[i : i + bs] += self.a[i : i + bs, k : k + bs] @ self.b[k : k + bs]
        return out + (1.0 if self.variant == "wrong" else 0.0)

    def timer(self) -> None:
        return None

    def close(self) -> None:
        return None


class BlockedMatmul:
    """The target (``argus_lab.optimize.Target``)."""

    region = "blocked_matmul"
    module = "tests.optimize_cpu"
    kernel = "blocked_matmul"
    phase_roles: ClassVar[dict[str, str]] = {}
    device = None

    def __init__(self, n: int = 64) -> None:
        self.name = f"blocked matmul {n}"
        rng = np.random.default_rng(0)
        self.a, self.b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
        self.ref = self.a @ self.b
        self.prepared = 0

    def default(self) -> Candidate:
        return Candidate.of({"block": 8, "variant": "ok"})

    def space(self) -> Space:
        return Space.of(AXES, {"tile_m": "block"})

    def work(self) -> Work | None:
        return None

    def model(self, c: Candidate) -> Model | None:
        return None

    def prepare(self, c: Candidate) -> Blocked:
        self.prepared += 1
        if c.get("variant") == "unbuildable":
            raise CandidateError("compile", "SYNTHETIC compile failure: this variant cannot be built")
        return Blocked(self.a, self.b, int(c.get("block") or 8), str(c.get("variant")))

    def specs(self, c: Candidate) -> tuple[()]:
        """Nothing to compile (the benchmark driver's host demo asks)."""
        return ()

    def check(self, output: Any) -> str | None:
        err = float(np.abs(output - self.ref).max())
        return None if err < 1e-9 else f"max |C - A@B| = {err:.3g}"
