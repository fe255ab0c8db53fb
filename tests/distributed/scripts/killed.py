"""Run under torchrun (gloo): rank 1 kills itself with SIGKILL before step KILL_AT; rank 0 is left alone."""
import os
import signal
import time

import torch
import torch.distributed as dist

from sbprof import profile_optimiser

KILL_AT = int(os.environ["TEST_KILL_AT"])

dist.init_process_group("gloo")
rank = dist.get_rank()
grad = torch.randn(100_000)


@profile_optimiser(wait=0, warmup=1, active=20)
def train_step():
    dist.all_reduce(grad)
    time.sleep(0.02)


for step in range(KILL_AT + 5):
    if rank == 1 and step == KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)
    train_step()
