"""Peak FLOP/s: the datasheet table, the matmul probe against an independent timing, achieved shares."""
from __future__ import annotations

import time

import pytest
import torch

from sbprof.base.errors import BackendUnavailable, ConfigError
from sbprof.measuring.flops import Peak, achieved, gpu_peak, measure_cpu_peak
from sbprof.measuring.flops.peak import datasheet_peak, dominant_precision


def test_achieved_is_flops_over_time_and_share_of_peak():
    peak = Peak(4e12, "cpu", "fp32", "matmul probe", "")
    a = achieved(3 * 10 ** 9, 0.0015, peak)
    assert (a.flops_per_s, a.share_of_peak) == (2e12, 0.5)
    assert achieved(10, 2.0).share_of_peak is None
    with pytest.raises(ConfigError, match="time_s"):
        achieved(10, 0.0)


@pytest.mark.parametrize("name,precision,tflops", [
    # names as torch.cuda.get_device_name returns them
    ("NVIDIA H200", "fp32", 67.0), ("NVIDIA H200", "tf32", 494.5), ("NVIDIA H200", "bf16", 989.5),
    ("NVIDIA H200", "fp16", 989.5), ("NVIDIA H200 NVL", "bf16", 835.5),
    ("NVIDIA H100 80GB HBM3", "bf16", 989.5), ("NVIDIA H100 PCIe", "fp32", 51.0), ("NVIDIA H100 PCIe", "bf16", 756.5),
    ("NVIDIA H100 NVL", "tf32", 417.5),
    ("NVIDIA A100-SXM4-80GB", "tf32", 156.0), ("NVIDIA A100-SXM4-40GB", "fp16", 312.0),
    ("NVIDIA A100-PCIE-40GB", "fp32", 19.5), ("NVIDIA A100 80GB PCIe", "bf16", 312.0),
    ("NVIDIA L40S", "fp32", 91.6), ("NVIDIA L40S", "bf16", 362.05), ("NVIDIA L4", "bf16", 121.0),
    ("NVIDIA A10", "tf32", 62.5), ("NVIDIA A10", "fp16", 125.0),
    ("Tesla T4", "fp16", 65.0), ("Tesla T4", "fp32", 8.1), ("Tesla T4", "tf32", 8.1), ("Tesla T4", "bf16", None),
    ("NVIDIA GeForce RTX 4090", "fp16", 165.2), ("NVIDIA GeForce RTX 4090", "tf32", 82.6),
    ("NVIDIA GeForce RTX 3090", "bf16", 71.0), ("NVIDIA GeForce RTX 3090", "fp32", 35.6),
    ("Tesla V100-SXM2-16GB", "fp32", 15.7), ("Tesla V100-PCIE-32GB", "fp16", 112.0),
    # not in the table, or another part of a family: no figure rather than a neighbour's
    ("NVIDIA A10G", "fp32", None), ("NVIDIA L40", "fp32", None), ("NVIDIA GH200 480GB", "bf16", None),
    ("NVIDIA GeForce RTX 4090 D", "fp16", None), ("NVIDIA GeForce RTX 4090 Laptop GPU", "fp16", None),
    ("NVIDIA GeForce RTX 3090 Ti", "fp16", None), ("NVIDIA H800", "bf16", None), ("NVIDIA B200", "bf16", None),
])
def test_datasheet_table(name, precision, tflops):
    rate, detail = datasheet_peak(name, precision)
    assert rate == (None if tflops is None else tflops * 1e12)
    assert detail.startswith("peak unknown") == (tflops is None) and name in detail


def test_the_precision_of_the_work_picks_its_own_peak():
    """The share of peak of bf16 work is read against the bf16 peak, never the fp32 one (which would read 15x)."""
    assert dominant_precision({"fp32": 5, "bf16": 95}) == "bf16"
    assert datasheet_peak("NVIDIA H200", dominant_precision({"tf32": 10}))[0] == 494.5e12
    assert dominant_precision({"fp32": 0}) is None


def test_cpu_probe_agrees_with_an_independent_timing():
    size, threads = 256, 1
    peak = measure_cpu_peak(size=size, num_threads=threads, repeats=5)
    assert "1 threads" in peak.detail and "256x256 float32" in peak.detail
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(size, size), torch.randn(size, size)
        times = []
        for _ in range(7):
            start = time.perf_counter()
            torch.mm(a, b)
            times.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous)
    independent = 2 * size ** 3 / min(times[2:])
    # both are fastest-of-N timings of the same product; a shared machine allows a wide band
    assert independent / 3 < peak.flops_per_s < independent * 3


def test_probe_arguments_are_checked():
    with pytest.raises(ConfigError, match="precision"):
        measure_cpu_peak(precision="tf32")
    with pytest.raises(ConfigError, match="size"):
        measure_cpu_peak(size=0)


def test_gpu_peak_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    with pytest.raises(BackendUnavailable):
        gpu_peak()


@pytest.mark.cuda
def test_gpu_peak_on_the_device():
    """This GPU's datasheet figure when the table has it; otherwise "peak unknown", never a measured stand-in."""
    name = torch.cuda.get_device_name()
    if datasheet_peak(name, "fp32")[0] is None:
        with pytest.raises(BackendUnavailable, match="peak unknown"):
            gpu_peak(precision="fp32")
        return
    peak = gpu_peak(precision="bf16" if datasheet_peak(name, "bf16")[0] else "fp32")
    assert peak.source == "datasheet" and name in peak.device and peak.flops_per_s > 1e12


def test_the_docs_peak_table_is_the_codes():
    """docs/gpu.md copies the datasheet table: each of its all-numeric rows reads what the lookup gives."""
    from pathlib import Path

    names = ["NVIDIA H200", "NVIDIA H200 NVL", "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL",
             "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "NVIDIA L4", "NVIDIA A10", "NVIDIA GeForce RTX 4090",
             "NVIDIA GeForce RTX 3090"]
    text = (Path(__file__).resolve().parents[3] / "docs" / "gpu.md").read_text()
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| NVIDIA") and len(cells) == 6:
            try:
                rows.append([float(c) for c in cells[1:5]])
            except ValueError:
                continue
    assert len(rows) == len(names)
    for name, row in zip(names, rows):
        assert [datasheet_peak(name, p)[0] / 1e12 for p in ("fp32", "tf32", "bf16", "fp16")] == row, name
