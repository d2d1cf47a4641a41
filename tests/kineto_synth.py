"""SYNTHETIC torch.profiler (Kineto) traces for the import tests and benchmarks, written as Kineto writes them.

Times are integer nanoseconds here and are written the way ``libkineto/src/output_json.cpp`` formats them:
microseconds with exactly three decimals (``f"{ns // 1000}.{ns % 1000:03d}"``), relative to
``baseTimeNanoseconds`` (or since the epoch with ``relative=False``, as older Kineto versions wrote).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def us(ns: int) -> str:
    """Kineto's decimal microseconds of a non-negative ns value."""
    return f"{ns // 1000}.{ns % 1000:03d}"


@dataclass
class KinetoTrace:
    """A trace under construction; ``write`` renders it.  Times passed in are absolute ns."""

    base_ns: int = 1_795_938_194_000_000_000
    relative: bool = True
    rank: int | None = None
    pid: int = 4242
    events: list[str] = field(default_factory=list)
    _corr: int = 0

    def _ts(self, ns: int) -> str:
        return us(ns - self.base_ns) if self.relative else us(ns)

    def _x(self, cat: str, name: str, pid: int, tid: int, t: int, d: int, args: dict[str, Any] | None = None) -> None:
        a = f', "args": {json.dumps(args)}' if args else ""
        self.events.append(
            f'{{"ph": "X", "cat": "{cat}", "name": {json.dumps(name)}, "pid": {pid}, "tid": {tid}, '
            f'"ts": {self._ts(t)}, "dur": {us(d)}{a}}}'
        )

    def annotation(self, name: str, t0: int, t1: int, tid: int = 1) -> None:
        """A ``record_function`` range on CPU thread ``tid``."""
        self._x("user_annotation", name, self.pid, tid, t0, t1 - t0, {"External id": len(self.events) + 1})

    def gpu_annotation(self, name: str, t0: int, t1: int, device: int = 0, stream: int = 7) -> None:
        """Kineto's GPU-side copy of an annotation (1 ns earlier, 2 ns longer, as Kineto writes it)."""
        self._x("gpu_user_annotation", name, device, stream, t0 - 1, t1 - t0 + 2)

    def launch(
        self,
        name: str,
        t_launch: int,
        t0: int,
        t1: int,
        *,
        tid: int = 1,
        device: int = 0,
        stream: int = 7,
        cat: str = "kernel",
        launch_dur: int = 2_000,
        runtime: bool = True,
        nbytes: int | None = None,
    ) -> int:
        """A ``cudaLaunchKernel`` on thread ``tid`` at ``t_launch`` and its GPU record [t0, t1]; returns the
        correlation id.  ``runtime=False`` leaves the runtime event out (a dropped launch)."""
        self._corr += 1
        c = self._corr
        if runtime:
            api = "cudaLaunchKernel" if cat == "kernel" else "cudaMemcpyAsync"
            self._x("cuda_runtime", api, self.pid, tid, t_launch, launch_dur, {"cbid": 211, "correlation": c})
        args: dict[str, Any] = {"queued": 0, "device": device, "context": 1, "stream": stream, "correlation": c}
        if cat == "kernel":
            args.update({"registers per thread": 32, "shared memory": 0, "grid": [4, 1, 1], "block": [128, 1, 1]})
        if nbytes is not None:
            args["bytes"] = nbytes
        self._x(cat, name, device, stream, t0, t1 - t0, args)
        return c

    def thread_name(self, tid: int, name: str) -> None:
        """A ``thread_name`` metadata event."""
        self.events.append(
            f'{{"name": "thread_name", "ph": "M", "ts": {self._ts(self.base_ns)}, "pid": {self.pid}, "tid": {tid}, '
            f'"args": {{"name": {json.dumps(name)}}}}}'
        )

    def text(self) -> str:
        """The whole trace as Kineto lays it out: header keys, the events, then the trailer keys."""
        head = ['{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "SYNTHETIC GPU"}],']
        if self.relative:
            head.append(f'  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": {self.base_ns},')
        head.append('  "traceEvents": [\n  ')
        tail = "\n  ],"
        if self.rank is not None:
            tail += f'\n  "distributedInfo": {{"backend": "nccl", "rank": {self.rank}, "world_size": 2}},'
        tail += '\n  "traceName": "synthetic.json"\n}'
        return "\n".join(head) + ",\n  ".join(self.events) + tail

    def write(self, path: Path) -> Path:
        """Write the trace (gzip when ``path`` ends with ``.gz``)."""
        data = self.text().encode()
        if path.name.endswith(".gz"):
            path.write_bytes(gzip.compress(data))
        else:
            path.write_bytes(data)
        return path
