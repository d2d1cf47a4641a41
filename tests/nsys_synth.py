"""SYNTHETIC Nsight Systems SQLite exports for the import tests, in the documented schema's tables and columns.

Only the tables the importer reads are created (``StringIds``, ``NVTX_EVENTS``, ``CUPTI_ACTIVITY_KIND_KERNEL``,
``..._MEMCPY``, ``..._RUNTIME``, ``TARGET_INFO_SESSION_START_TIME``), with the column names of Nsight Systems'
"SQLite Export Schema Reference".  Times are session-relative integer ns.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path


def global_tid(pid: int, tid: int) -> int:
    """Nsight Systems' serialized thread id."""
    return (pid << 24) | tid


@dataclass
class NsysExport:
    """An export under construction."""

    epoch_ns: int = 1_795_938_194_000_000_000
    pid: int = 4242
    strings: dict[str, int] = field(default_factory=dict)
    nvtx: list[tuple[int, int | None, int, int, int | None, int, int | None]] = field(default_factory=list)
    kernels: list[tuple[int, int, int, int, int, int, int]] = field(default_factory=list)
    runtime: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    _corr: int = 0

    def sid(self, text: str) -> int:
        """The StringIds id of ``text``."""
        return self.strings.setdefault(text, len(self.strings) + 1)

    def domain(self, name: str, domain_id: int) -> None:
        """An NvtxDomainCreate event."""
        self.nvtx.append((0, None, 75, global_tid(self.pid, 1), None, domain_id, None))
        self.nvtx[-1] = (0, None, 75, global_tid(self.pid, 1), self.sid(name), domain_id, None)

    def range(self, name: str, t0: int, t1: int, tid: int = 1, domain_id: int = 0, payload: int | None = None) -> None:
        """An NVTX push/pop range (eventType 59)."""
        self.nvtx.append((t0, t1, 59, global_tid(self.pid, tid), self.sid(name), domain_id, payload))

    def launch(self, name: str, t_launch: int, t0: int, t1: int, tid: int = 1, stream: int = 7) -> int:
        """A cudaLaunchKernel runtime call and its kernel."""
        self._corr += 1
        c = self._corr
        self.runtime.append((t_launch, t_launch + 2_000, global_tid(self.pid, tid), c, self.sid("cudaLaunchKernel")))
        self.kernels.append((t0, t1, 0, 1, stream, c, self.sid(name)))
        return c

    def write(self, path: Path) -> Path:
        """Write the SQLite file."""
        path.unlink(missing_ok=True)
        con = sqlite3.connect(path)
        con.executescript(
            """
            CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INT, utcTime TEXT, localTime TEXT);
            CREATE TABLE NVTX_EVENTS (start INT NOT NULL, end INT, eventType INT NOT NULL, rangeId INT, category INT,
                color INT, text TEXT, globalTid INT, endGlobalTid INT, textId INT, domainId INT, uint64Value INT,
                int64Value INT, doubleValue REAL, uint32Value INT, int32Value INT, floatValue REAL, jsonTextId INT,
                jsonText TEXT);
            CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL,
                contextId INT NOT NULL, streamId INT NOT NULL, correlationId INT, globalPid INT, demangledName INT,
                shortName INT, mangledName INT, launchType INT, cacheConfig INT, registersPerThread INT, gridX INT,
                gridY INT, gridZ INT, blockX INT, blockY INT, blockZ INT, staticSharedMemory INT,
                dynamicSharedMemory INT, localMemoryPerThread INT, localMemoryTotal INT, gridId INT,
                sharedMemoryExecuted INT, graphNodeId INT, sharedMemoryLimitConfig INT);
            CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT NOT NULL, end INT NOT NULL, eventClass INT,
                globalTid INT, correlationId INT, nameId INT, returnValue INT, callchainId INT);
            """
        )
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in self.strings.items()])
        con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '', '')", [self.epoch_ns])
        con.executemany(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId, domainId, uint64Value) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            self.nvtx,
        )
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, "
            "demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 32, 4, 1, 1, 128, 1, 1)",
            [(*k, k[6]) for k in self.kernels],
        )
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, globalTid, correlationId, nameId) "
            "VALUES (?, ?, ?, ?, ?)",
            self.runtime,
        )
        con.commit()
        con.close()
        return path
