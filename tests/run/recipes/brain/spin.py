"""A module that busy-waits a known CPU time in forward (the tests' known cost)."""
import time

import torch


class Spin(torch.nn.Module):
    """Busy-waits ``ms`` milliseconds of this process's CPU time, then returns its input (it cannot end early)."""

    def __init__(self, ms: float = 0.0):
        super().__init__()
        self.ms = ms

    def forward(self, x):
        end = time.process_time() + self.ms / 1e3
        while time.process_time() < end:
            pass
        return x


class Nap(torch.nn.Module):
    """Sleeps ``ms`` milliseconds in forward, then returns its input (a known wall time that load cannot stretch)."""

    def __init__(self, ms: float = 0.0):
        super().__init__()
        self.ms = ms

    def forward(self, x):
        time.sleep(self.ms / 1e3)
        return x
