"""Run under torchrun (gloo): ``@sbprof.profile`` without a schedule, 20 calls, 5 ms of "data loading" between
calls; the script's own clock of each gap between a call's return and the next call."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import sbprof

dist.init_process_group("gloo")
rank = dist.get_rank()
grad = torch.randn(100_000)


@sbprof.profile
def train_step(x):
    (x @ x).sum()
    dist.all_reduce(grad)


x = torch.randn(64, 64)
gaps, last = [], None
for _ in range(20):
    start = time.perf_counter()
    if last is not None:
        gaps.append(start - last)
    train_step(x)
    last = time.perf_counter()
    time.sleep(0.005)
with open(os.path.join(sys.argv[1], f"gaps{rank}.json"), "w") as f:
    json.dump(gaps, f)
