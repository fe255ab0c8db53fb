"""Two ranks (env RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), gloo: sbprof's communication clock against the
profiler's events, on the same DDP steps; and the gradients it leaves against DDP's built-in all-reduce.

A DDP model built before the clock is installed trains with DDP's built-in all-reduce; one built after it, from the
same weights and batches, with the clock's default hook. Then, under torch.profiler, each step of the clocked model
is marked with record_function: the clock's communication per step against the events' (sbprof.distributed.comm,
the decorators' reading), both written to ``OUT/clock<rank>.json``. Rank 1 sleeps 20 ms before each backward, so
rank 0 waits in its all-reduce.
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

from sbprof.distributed.comm import comm_per_window
from sbprof.distributed.comm_clock import CommClock

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()


def model():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                              torch.nn.Linear(1024, 8))
    return torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=1)  # several buckets a step


def train(ddp, steps, mark=False):
    g = torch.Generator().manual_seed(rank)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    windows = []
    for _ in range(steps):
        x, y = torch.randn(32, 64, generator=g), torch.randn(32, 8, generator=g)
        start = time.perf_counter()
        with torch.profiler.record_function("step") if mark else torch.autograd.profiler.record_function("x"):
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            if rank == 1:
                time.sleep(0.02)
            opt.zero_grad()
            loss.backward()
            opt.step()
        windows.append((start, time.perf_counter()))
    return windows


plain = model()
train(plain, 4)
clock = CommClock().install()
clocked = model()
train(clocked, 4)
same = all(torch.equal(a, b) for a, b in zip(plain.parameters(), clocked.parameters()))
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    windows = train(clocked, 8, mark=True)
events = list(prof.events())
marks = sorted((e.time_range.start, e.time_range.end) for e in events if e.name == "step")
with open(os.path.join(sys.argv[1], f"clock{rank}.json"), "w") as f:
    json.dump({"same_gradients": same, "clock_s": [clock.window(a, b) for a, b in windows],
               "events_s": comm_per_window(events, marks), "hooked": clocked._comm_hooks != []}, f)
clock.remove()
dist.destroy_process_group()
