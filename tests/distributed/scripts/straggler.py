"""Run under torchrun (gloo): a training step whose all-reduce is timed by this script's own clock, rank 1 slowed
by a known sleep per step, and two more decorated functions (unscheduled with traces, and the analyst preset)."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

from sbprof import export, profile, profile_analyst, profile_optimiser

SLEEP_S = float(os.environ["TEST_SLEEP_S"])
STEPS = int(os.environ["TEST_STEPS"])

dist.init_process_group("gloo")
rank = dist.get_rank()
grad = torch.randn(1_000_000)  # 4 MB: a collective of a few milliseconds on localhost
outside = []


@profile_optimiser(wait=1, warmup=1, active=STEPS - 2)
def train_step(x):
    (x @ x).sum()
    if rank == 1:
        time.sleep(SLEEP_S)  # the straggler
    start = time.perf_counter()
    dist.all_reduce(grad)
    outside.append(time.perf_counter() - start)


@profile(on_trace_ready=export())  # each call one profile, its trace named by rank in the run folder
def evaluate(x):
    dist.all_reduce(x)


@profile_analyst(wait=0, warmup=1, active=1)
def inspect(x):
    (x @ x).sum()
    dist.broadcast(x, 0)


x = torch.randn(64, 64)
for _ in range(STEPS):
    train_step(x)
for _ in range(2):
    evaluate(torch.ones(16))
    inspect(x)
with open(os.path.join(sys.argv[1], f"outside{rank}.json"), "w") as f:
    json.dump({"outside_s": outside}, f)
