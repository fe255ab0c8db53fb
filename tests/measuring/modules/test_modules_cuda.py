"""CUDA ground truth of per-module time: three modules of known, different GPU work (1, 4 and 2 products), attributed
by sbprof's light attribution (CUDA events at module boundaries), against the test's own CUDA events around each
module's forward called alone on the input it sees in the model: the sum within 5 %, the same module on top."""
from __future__ import annotations

import statistics

import pytest
import torch

from benchmarks.gpu_truths import check, sum_and_top
from helpers.cuda import event_seconds, warm_cuda
from sbprof.measuring.modules import ModuleAttribution

pytestmark = pytest.mark.cuda


class Products(torch.nn.Module):
    """``n`` products of a 4096 x 2048 activation by a 2048 x 2048 weight (34 GFLOP each), tanh between."""

    def __init__(self, n: int):
        super().__init__()
        self.n = n
        self.weight = torch.nn.Parameter(torch.randn(2048, 2048) / 2048 ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.n):
            x = torch.tanh(x @ self.weight)
        return x


def test_per_module_cuda_time_against_events_around_each_modules_forward():
    warm_cuda()
    torch.manual_seed(0)
    model = torch.nn.Sequential(Products(1), Products(4), Products(2)).cuda()
    x = torch.randn(4096, 2048, device="cuda")
    names = ["0", "1", "2"]
    attribution = ModuleAttribution(model, modules=names)
    reference = {name: [] for name in names}
    with torch.no_grad():
        inputs, h = [], x  # what each module sees inside the model
        for module in model:
            inputs.append(h)
            h = module(h)
        with attribution:
            # Rounds of one attributed step, then each module alone between the test's events: both clocks see the
            # GPU at the same clock speed, whatever it does over the test.
            for _ in range(6):
                with attribution.step("s"):
                    model(x)
                for i, name in enumerate(names):
                    reference[name].append(1e3 * event_seconds(lambda: model[i](inputs[i]))[1])
    breakdown = attribution.breakdown("s", skip_first=1)
    ours = {r.label: r.cuda_forward_ms for r in breakdown.rows if r.label in names}
    theirs = {name: statistics.median(times[1:]) for name, times in reference.items()}
    check(sum_and_top("per-module CUDA forward time (3 modules, ms per step)", ours, theirs, 0.05))
