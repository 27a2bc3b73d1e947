"""The machine description: a run pinned to some GPUs of a host records those, and the host keeps one id."""

from __future__ import annotations

import sys
import types

import pytest

from benchmarks.harness import sysinfo


class _Handle:
    def __init__(self, index: int) -> None:
        self.index = index


def _fake_nvml(count: int) -> types.ModuleType:
    """NVML's calls that sysinfo makes, over `count` GPUs (no NVIDIA driver on the test machine)."""
    nvml = types.ModuleType("pynvml")
    nvml.nvmlInit = lambda: None  # type: ignore[attr-defined]
    nvml.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    nvml.nvmlSystemGetDriverVersion = lambda: "580.159.04"  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCount = lambda: count  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = _Handle  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetName = lambda h: "NVIDIA H100 80GB HBM3"  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=85520809984)  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetUUID = lambda h: f"GPU-{h.index:04d}"  # type: ignore[attr-defined]
    return nvml


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(2))


def test_a_run_pinned_to_one_gpu_records_that_gpu(two_gpus: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert [gpu["uuid"] for gpu in sysinfo.gpus()] == ["GPU-0001"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert [gpu["uuid"] for gpu in sysinfo.gpus()] == ["GPU-0000", "GPU-0001"]


def test_the_host_id_names_the_machine_whichever_gpu_a_run_uses(
    two_gpus: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = set()
    for visible in ("0", "1", ""):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        ids.add(sysinfo.host_id())
    assert len(ids) == 1
