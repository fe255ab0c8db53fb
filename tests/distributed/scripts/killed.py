"""Run under torchrun (gloo): rank 1 kills itself with SIGKILL before step KILL_AT, while rank 0 is in a long step
outside any collective, so torchrun stops rank 0 with SIGTERM (its way of stopping the others when one fails)."""
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
def train_step(step):
    time.sleep(30 if rank == 0 and step == KILL_AT else 0.02)
    dist.all_reduce(grad)


for step in range(KILL_AT + 5):
    if rank == 1 and step == KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)
    train_step(step)
