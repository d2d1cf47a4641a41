"""Device-region measurements without a GPU: the real planner, runtime, device collector, store and join, over
probe buffers recorded on the H200 (phase A, ``tests/data/gpu/device/raw_*.npz``).

What is not real here is labelled SYNTHETIC: :class:`FakeCupti` stands in for CUPTI's kernel records (a record per
launch the workload announces, with made-up durations), and the "kernel" is a copy of a recorded probe buffer into
the probe the run handed out (a CPU tensor).  Everything downstream of the evidence (the store, the join's
attribution and values, the Report, the views) runs as on the H200.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import argus_lab.device
from argus_lab.device import DeviceRegions
from argus_lab.plan.backends import BACKENDS
from argus_lab.regions import current_instance, region
from argus_lab.run.protocols import Columns, Evidence, RunContext

DATA = Path(__file__).resolve().parent / "data" / "gpu" / "device"
PHASES = argus_lab.device.regions("load", "mma", "mainloop", "epilogue", module="examples.gpu.persistent_gemm")
"""The declaration of examples/gpu/persistent_gemm.py (same names and module: the same identities)."""


def raw(name: str) -> np.ndarray:
    """A probe buffer recorded on the H200: ``tail3072_tile``, ``8192_tile`` or ``tail3072_kstep``."""
    return np.load(DATA / f"raw_{name}.npz")["buffer"]


@dataclass
class FakeCupti:
    """SYNTHETIC: the kernel records CUPTI would give for the launches the workload announces with :meth:`launch`.

    Each launch gets a correlation id, the calling thread, the region instance open on it (as the external
    correlation id would carry it), API entry/exit at the call (CLOCK_REALTIME ns) and a device duration.
    """

    info: Any = field(default_factory=lambda: BACKENDS["cupti"])
    rows: list[dict[str, Any]] = field(default_factory=list)
    run_id: str = ""
    _corr: Iterator[int] = field(default_factory=lambda: itertools.count(1000))

    def hooks(self) -> tuple[()]:
        return ()

    def start(self, ctx: RunContext) -> None:
        self.run_id, self.rows = ctx.run_id, []

    def stop(self) -> None:
        return None

    def launch(self, name: str, duration_ns: int) -> None:
        api = time.time_ns()
        self.rows.append(
            {
                "correlation_id": next(self._corr),
                "instance_id": current_instance() or None,
                "name": name,
                "api_start_ns": api,
                "api_end_ns": api + 3_000,
                "start_ns": api + 10_000,
                "end_ns": api + 10_000 + duration_ns,
                "thread_id": threading.get_ident(),
            }
        )

    def evidence(self, instances: Columns) -> Evidence:
        n = len(self.rows)
        cols: dict[str, list[Any]] = {k: [r[k] for r in self.rows] for k in (self.rows[0] if self.rows else {})}
        cols.update(
            run_id=[self.run_id] * n,
            kind=["kernel"] * n,
            device_id=[0] * n,
            context_id=[1] * n,
            stream_id=[7] * n,
            kernel_key=[f"0/1/{r['correlation_id']}/0" for r in self.rows],
            grid_x=[132] * n,
            grid_y=[1] * n,
            grid_z=[1] * n,
            block_x=[256] * n,
            block_y=[1] * n,
            block_z=[1] * n,
        )
        prov = {
            "provenance_id": [f"{self.run_id}:cupti"],
            "run_id": [self.run_id],
            "backend": ["cupti"],
            "backend_version": ["SYNTHETIC stand-in (tests/device_cases.py)"],
            "settings": [{"synthetic": True}],
            "clocks": [{}],
            "timestamps": ["SYNTHETIC"],
        }
        return {"kernels": cols, "provenance": prov}


@dataclass
class GemmStep:
    """The workload: a host region around one launch of the persistent GEMM that asks for its probe first.

    ``clean_ns`` / ``instrumented_ns`` are the SYNTHETIC kernel durations FakeCupti reports for each variant; a
    fill kernel (the probe's zeroing, as torch launches it) precedes the GEMM in instrumented runs.
    """

    cupti: FakeCupti
    buffer: np.ndarray
    clean_ns: int = 345_100
    instrumented_ns: int = 350_600
    events: int = 0
    regions: DeviceRegions = PHASES
    mode: str = "same"
    """``same``: probe and launch in ``gemm_step``; ``elsewhere``: launched in a nested region ``other``;
    ``unlaunched``: the kernel is never launched; ``outside``: probe and launch outside every region."""
    launches: int = 0

    def __call__(self) -> None:
        if self.mode == "outside":
            self._launch()
            return
        with region("gemm_step"):
            if self.mode == "elsewhere":
                probe = self._probe()
                with region("other"):
                    self._launch(probe)
            else:
                self._launch()

    def _probe(self) -> Any:
        events = self.events or int(self.buffer[3])
        return argus_lab.device.probe(
            "persistent_gemm", programs=int(self.buffer[2]), events=events, regions=self.regions, device="cpu"
        )

    def _launch(self, probe: Any = False) -> None:
        import torch

        if probe is False:
            probe = self._probe()
        if probe is not None:
            self.cupti.launch("vectorized_elementwise_kernel", 2_000)  # another kernel between probe and launch
        if self.mode == "unlaunched" and probe is not None:
            return
        self.cupti.launch("persistent_gemm", self.instrumented_ns if probe is not None else self.clean_ns)
        if probe is not None:  # what the GPU would write
            probe.copy_(torch.from_numpy(self.buffer[: probe.numel()]))
        self.launches += 1


@contextmanager
def cpu_backends(cupti: FakeCupti) -> Iterator[None]:
    """Run plans here as on a GPU machine: the CUPTI backend is the SYNTHETIC stand-in; the device backend is
    the real collector embedding it."""
    import pytest

    from argus_lab.backends.device.collector import DeviceCollector
    from argus_lab.run import loader, runtime

    real = loader.load_backend

    def load(name: str) -> Any:
        if name == "cupti":
            return cupti
        if name == "device":
            return DeviceCollector(cupti=cupti)
        return real(name)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runtime, "load_backend", load)
        mp.setattr(runtime, "gpu_available", lambda: True)
        yield


def measure(store: Any, buffer: np.ndarray, *, signals: str = "gpu.time,dev.*", repeat: int = 3, warmup: int = 1,
            step: GemmStep | None = None) -> Any:  # fmt: skip
    """Plan and run ``signals`` on :class:`GemmStep` with :func:`cpu_backends`; returns the Measurement."""
    from argus_lab.app.measure import plan, run_plan
    from argus_lab.run.workload import Workload

    cupti = step.cupti if step is not None else FakeCupti()
    work = step if step is not None else GemmStep(cupti, buffer)
    with cpu_backends(cupti):
        return run_plan(plan(signals, repeat=repeat, warmup=warmup), Workload.from_target(work), store)
