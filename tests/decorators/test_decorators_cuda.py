"""CUDA ground truths of the decorators: a real Brain's fit_batch on the GPU, timed by the decorators' step clock,
against CUDA events the Brain records around the same call (median within 2 %; the decorator's clock encloses the
call, so it never reads less); ``report_time``'s CUDA figure against events around known GPU work in the profiled
call."""
from __future__ import annotations

import pytest
import speechbrain as sb
import torch

from benchmarks.gpu_truths import check, medians, relative
from helpers.cuda import GpuBusy, event_seconds, warm_cuda
from sbprof import profile, profile_optimiser, report_time

pytestmark = pytest.mark.cuda

GPU_S = 0.040  # known GPU work per step: 2 % of it (0.8 ms) is far above what the clocks' own calls cost


class EventBrain(sb.Brain):
    """A regressor whose model keeps the GPU busy ``GPU_S`` a step; its fit_batch times itself with CUDA events."""

    def compute_forward(self, batch, stage):
        return self.modules.model(batch[0].to(self.device))

    def compute_objectives(self, predictions, batch, stage):
        return torch.nn.functional.mse_loss(predictions, batch[1].to(self.device))

    def fit_batch(self, batch):
        loss, seconds = event_seconds(lambda: super(EventBrain, self).fit_batch(batch))
        self.__dict__.setdefault("event_s", []).append(seconds)
        return loss


def make_event_brain():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 4), GpuBusy(GPU_S))
    return EventBrain({"model": model}, lambda p: torch.optim.SGD(p, lr=0.1),
                      run_opts={"device": "cuda:0", "noprogressbar": True})


def batches(n):
    g = torch.Generator().manual_seed(1)
    return [[torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)] for _ in range(n)]


@pytest.mark.parametrize("decorate", [lambda b: profile(b, activities=()), profile_optimiser],
                         ids=["profile(activities=())", "profile_optimiser"])
def test_fit_batch_step_time_against_cuda_events_around_the_same_call(decorate):
    warm_cuda()
    brain = decorate(make_event_brain())
    brain.fit(range(1), batches(10))
    ours = brain.profiler.measurement("train").wall_s
    theirs = brain.event_s
    assert len(ours) == len(theirs) == 10
    name = "profile(activities=())" if brain.profiler.timing_only else "profile_optimiser"
    check(medians(f"{name}: Brain.fit_batch step time on CUDA", ours[2:], theirs[2:], 0.02, "s", one_sided=True))


def test_report_time_cuda_figure_against_events_around_known_gpu_work():
    warm_cuda()
    spans = []

    @profile
    def work():  # three kernels enqueued back to back: the GPU never idles between the two events but to start
        _, seconds = event_seconds(lambda: [torch.cuda._sleep(20_000_000) for _ in range(3)])
        spans.append(seconds)

    prof = work()
    cuda_s = report_time(prof).cuda_us / 1e6
    # the kernels run back to back between the two events: their busy time is the events' span, less the gaps
    assert spans[0] > 0.025  # 60 M cycles: 30 ms at 2 GHz, more at a lower clock
    check(relative("report_time: CUDA kernel time of 3 sleep kernels (one profiled call)", cuda_s, spans[0], 0.03,
                   "s"))
