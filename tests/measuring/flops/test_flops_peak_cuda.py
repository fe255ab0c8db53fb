"""CUDA ground truth of achieved FLOP/s and the share of peak: one large product in fp32, tf32, bf16 and fp16. sbprof
counts its FLOPs (the counter's formula, and the precision the product ran in) and times it (``measure`` on CUDA);
the test divides the analytic 2 n^3 by its own CUDA events around the same product. The share of peak must use this
GPU's datasheet peak for the precision the counter saw, which must be the precision the test chose."""
from __future__ import annotations

import statistics

import pytest
import torch

from benchmarks.gpu_truths import check, share_of_peak
from helpers.cuda import event_seconds, warm_cuda
from sbprof.measuring.flops import count_flops, gpu_peak
from sbprof.measuring.flops.peak import datasheet_peak, dominant_precision
from sbprof.measuring.timing import measure

pytestmark = pytest.mark.cuda

N = 8192  # 1.1 TFLOP a product: 2 ms (bf16) to 20 ms (fp32) on an H200, far above a launch's microseconds
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class Product(torch.nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16"])
def test_achieved_flops_of_a_large_product_and_its_share_of_this_precisions_peak(precision):
    name = torch.cuda.get_device_name()
    if datasheet_peak(name, precision)[0] is None:
        pytest.skip(datasheet_peak(name, precision)[1])
    warm_cuda()
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(N, N, device="cuda", generator=g).to(DTYPES[precision])
    b = torch.randn(N, N, device="cuda", generator=g).to(DTYPES[precision])
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        counted = count_flops(Product(), a, b)
        m = measure(lambda: torch.mm(a, b), warmup=3, repeats=10, device="cuda", track_memory=False)
        events = [event_seconds(lambda: torch.mm(a, b))[1] for _ in range(10)]
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    assert counted.flops == 2 * N ** 3  # the counter's formula is the analytic count
    work = dominant_precision(counted.macs_by_precision)
    peak = gpu_peak("cuda", work)
    check(share_of_peak(f"achieved FLOP/s, {N}^3 product in {precision} (share of peak)",
                        counted.flops / statistics.median(m.cuda_s), 2 * N ** 3 / statistics.median(events),
                        peak.flops_per_s, peak.precision, precision, 0.05))
