"""The CUPTI collector's checks and messages that need no GPU."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from argus_lab.backends.cupti import collector as cb
from argus_lab.errors import BackendUnavailableError, CollectorBusyError
from argus_lab.run.protocols import RunContext


def has_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(has_driver(), reason="checks the message on a machine without an NVIDIA driver")
def test_no_gpu_message_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailableError, match=r"libcuda\.so\.1.*host\.\* signals"):
        cb.CuptiCollector().start(RunContext("r", ("gpu.time",), {}, tmp_path))
    assert cb._ACTIVE[0] is None


def test_an_injected_tool_holds_cupti(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/nvidia/nsight-compute/libInjection.so")
    with pytest.raises(CollectorBusyError, match="CUDA_INJECTION64_PATH"):
        cb.check_cupti_free()


def test_subscriber_conflicts_are_explained() -> None:
    class Err(RuntimeError):
        status = 39  # CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED

    err = cb._busy_or_unavailable(Err("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"))
    assert isinstance(err, CollectorBusyError)
    assert "torch.profiler" in str(err)
    assert "TEARDOWN_CUPTI=1" in str(err)
    Err.status = 14  # CUPTI_ERROR_NOT_COMPATIBLE
    assert isinstance(cb._busy_or_unavailable(Err("x")), CollectorBusyError)
    Err.status = 1
    assert isinstance(cb._busy_or_unavailable(Err("x")), BackendUnavailableError)


def test_kinds_follow_the_signals() -> None:
    base = ["CONCURRENT_KERNEL", "RUNTIME", "DRIVER", "EXTERNAL_CORRELATION"]
    assert cb.activity_kinds(["gpu.time"], {}) == base
    assert cb.activity_kinds(["gpu.memcpy_bytes", "gpu.memset_bytes"], {}) == [*base, "MEMCPY", "MEMSET"]
    assert cb.activity_kinds([], {"sync": True}) == [*base, "SYNCHRONIZATION"]
    assert cb.activity_kinds([], {"kinds": ["CONCURRENT_KERNEL"]}) == ["CONCURRENT_KERNEL"]


def test_api_filter_keeps_launches_copies_and_syncs() -> None:
    keep = cb._API_KEEP
    for name in (
        "cudaLaunchKernel_v7000",
        "cuLaunchKernel",
        "cudaGraphLaunch_v10000",
        "cudaMemcpyAsync_v3020",
        "cuMemsetD8Async",
        "cudaStreamSynchronize_v3020",
        "cudaStreamWaitEvent_v3020",
    ):
        assert keep.search(name), name
    for name in ("cudaGetDevice_v3020", "cudaStreamIsCapturing_v10000", "cuCtxGetCurrent", "cudaMalloc_v3020"):
        assert not keep.search(name), name


def test_hook_is_inert_until_bound() -> None:
    hook = cb._CorrelationHook()
    hook.enter(1)
    hook.exit(1)
    seen: list[tuple[int, ...]] = []
    hook.bind(lambda kind, iid: seen.append((kind, iid)), lambda kind: seen.append((kind,)))
    hook.enter(7)
    hook.exit(7)
    assert seen == [(5, 7), (5,)]  # CUSTOM2 = 5
