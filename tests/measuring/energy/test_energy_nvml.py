"""GPU energy through NVML: a fake pynvml for the arithmetic, the real one where it exists."""
import sys
import types

import pytest
import torch

from sbprof.measuring.energy.meter import EnergyMeter
from sbprof.measuring.energy.nvml import NvmlCounter
from sbprof.base.errors import BackendUnavailable


class FakeNvml(types.ModuleType):
    """Just the pynvml calls sbprof makes, with counters the test sets."""

    class NVMLError(Exception):
        pass

    def __init__(self, energy_mj, supported=True):
        super().__init__("pynvml")
        self.energy_mj = list(energy_mj)
        self.supported = supported
        self.live = 0

    def nvmlInit(self):
        self.live += 1

    def nvmlShutdown(self):
        self.live -= 1

    def nvmlDeviceGetCount(self):
        return len(self.energy_mj)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.supported:
            raise self.NVMLError("Not Supported")
        return self.energy_mj[handle]


def test_window_energy_from_counter_differences(monkeypatch):
    fake = FakeNvml([10_000, 7_000_000])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    meter = EnergyMeter(cpu=False)
    meter.start()
    fake.energy_mj[0] += 2_500       # 2.5 J
    fake.energy_mj[1] += 1_234_567   # 1234.567 J
    result = meter.stop()
    assert result.joules == {"gpu:0": 2.5, "gpu:1": 1234.567}
    assert result.sources == {"gpu:0": "nvml", "gpu:1": "nvml"} and result.unavailable == {}
    assert fake.live == 0  # NVML released


def test_selected_gpu_and_bad_index(monkeypatch):
    fake = FakeNvml([1, 2])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert list(NvmlCounter([1]).read_mj()) == ["gpu:1"]
    with pytest.raises(BackendUnavailable, match="out of range"):
        NvmlCounter([2])


def test_gpu_without_energy_counter_is_not_measurable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([0], supported=False))
    with EnergyMeter(cpu=False) as meter:
        pass
    assert not meter.result.measurable
    assert "Volta" in meter.result.unavailable["nvml"]


def test_without_nvidia_ml_py(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    with pytest.raises(BackendUnavailable, match="nvidia-ml-py is not installed"):
        NvmlCounter()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has an NVIDIA GPU")
def test_no_driver_here_is_reported_cleanly():
    pytest.importorskip("pynvml")
    with EnergyMeter(cpu=False) as meter:
        pass
    assert not meter.result.measurable
    assert meter.result.unavailable["nvml"].startswith("NVML unavailable:")


@pytest.mark.cuda
def test_real_gpu_energy_of_a_busy_second():
    pytest.importorskip("pynvml")
    a = torch.randn(4096, 4096, device="cuda")
    with EnergyMeter(cpu=False, gpu_indices=[torch.cuda.current_device()]) as meter:
        end = torch.cuda.Event()
        for _ in range(200):
            a = torch.tanh(a @ a)
        end.record()
        end.synchronize()
    result = meter.result
    (domain,) = result.joules
    # A GPU doing dense matmuls for this long draws tens to hundreds of watts, never nothing.
    assert result.joules[domain] > 0 and 10 < result.watts()[domain] < 2000
