"""Communication time from profiler events: collectives paired with their backend events, NCCL kernels, windows."""
from types import SimpleNamespace as E

import pytest
import torch
import torch.distributed as dist

from sbprof.distributed.comm import collective_spans, comm_per_window, seconds_in
from torchrun_tools import free_port


def ev(name, start, end, device="CPU"):
    return E(name=name, time_range=E(start=start, end=end), device_type=device)


def test_each_collective_spans_from_its_operator_to_the_end_of_its_backend_event():
    events = [  # two DDP buckets issued back to back, finished on gloo's threads; a broadcast; a lone barrier
        ev("c10d::allreduce_", 0, 2), ev("c10d::allreduce_", 5, 6), ev("gloo:all_reduce", 3, 40),
        ev("gloo:all_reduce", 41, 60), ev("c10d::broadcast_", 100, 101), ev("gloo:broadcast", 102, 110),
        ev("c10d::barrier", 200, 230), ev("aten::mm", 0, 300)]
    assert collective_spans(events) == [(0, 40), (5, 60), (100, 110), (200, 230)]
    assert comm_per_window(events, [(0, 150), (150, 300)]) == pytest.approx([70e-6, 30e-6])


def test_nccl_kernels_are_the_communication_on_a_gpu():
    events = [ev("c10d::allreduce_", 0, 1), ev("nccl:all_reduce", 0, 1),
              ev("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 10, 30, device="CUDA"), ev("gemm", 30, 90, "CUDA")]
    assert collective_spans(events) == [(10, 30)]


def test_spans_are_clipped_to_a_window_and_counted_once():
    assert seconds_in([(0, 10), (5, 20), (30, 40)], (8, 35)) == pytest.approx(17e-6)


@pytest.fixture
def world_of_one():
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_this_torch_names_gloo_collectives_as_read(world_of_one):
    x = torch.ones(1000)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        dist.all_reduce(x)
        dist.broadcast(x, 0)
    names = {e.name for e in prof.events()}
    assert {"c10d::allreduce_", "gloo:all_reduce", "c10d::broadcast_", "gloo:broadcast"} <= names
    assert len(collective_spans(prof.events())) == 2
