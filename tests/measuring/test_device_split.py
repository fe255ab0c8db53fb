"""Host-busy and GPU-busy time of a profiled call: synthetic kineto-like events, and a real GPU when present."""
import pytest
import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent

from sbprof.measuring.device_split import measure_device_split, split_of


def _ev(i, name, start, end, kind, device=DeviceType.CPU):
    return FunctionEvent(id=i, name=name, thread=1, start_us=start, end_us=end, device_type=device, activity_type=kind)


def test_launch_bound_call():
    # the host launches 10 tiny kernels back to back, each 5 us on the GPU, then waits 2 us
    events = [_ev(i, "cudaLaunchKernel", 10 * i, 10 * i + 9, "cuda_runtime") for i in range(10)]
    events += [_ev(100 + i, "k", 10 * i + 9, 10 * i + 14, "kernel", DeviceType.CUDA) for i in range(10)]
    events += [_ev(200, "cudaDeviceSynchronize", 100, 102, "cuda_runtime")]
    split = split_of(events, (0, 102))
    assert split.wall_s == pytest.approx(102e-6)
    assert split.host_busy_s == pytest.approx(100e-6)  # the host never waited long: launch-bound
    assert split.gpu_busy_s == pytest.approx(50e-6)


def test_gpu_bound_call_with_overlapping_waits_counted_once():
    events = [_ev(1, "cudaLaunchKernel", 0, 5, "cuda_runtime"),
              _ev(2, "gemm", 5, 905, "kernel", DeviceType.CUDA),
              _ev(3, "cudaMemcpyAsync", 6, 900, "cuda_runtime"),     # a device-to-host copy waits for the gemm
              _ev(4, "cudaStreamSynchronize", 850, 910, "cuda_runtime"),  # overlaps the copy's wait
              _ev(5, "cudaEventSynchronize", 990, 1200, "cuda_runtime")]  # runs past the window: clipped
    split = split_of(events, (0, 1000))
    assert split.host_busy_s == pytest.approx((1000 - (910 - 6) - (1000 - 990)) * 1e-6)
    assert split.gpu_busy_s == pytest.approx(900e-6)


@pytest.mark.cuda
def test_real_gpu_matmuls_are_gpu_bound():
    # 8192^3 products: a few ms each even on an H200's tensor cores, so the ten launches (µs each) are small beside
    # them (4096^3 ones took 0.34 ms each there, near the host's launch and profiling cost).
    x = torch.randn(8192, 8192, device="cuda")
    work = lambda: [x @ x for _ in range(10)]  # noqa: E731
    work()  # the first product creates cuBLAS's handle on the host (tens of ms): not what this call measures
    torch.cuda.synchronize()
    split = measure_device_split(work)
    assert 0.5 * split.wall_s < split.gpu_busy_s <= split.wall_s
    assert split.host_busy_s < 0.5 * split.wall_s
