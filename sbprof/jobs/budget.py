"""A run's wall-clock budget (``time_budget_s``): whether one more batch of workers fits in it."""
from __future__ import annotations

import time
from typing import Optional


class Budget:
    """The run's time budget: whether one more batch fits, from the longest batch so far.

    The first batch of an invocation always starts, however small the budget: otherwise a budget below one
    batch would stop every run before anything was measured, and "run again to resume" would loop for ever.
    Each invocation measures at least one batch, so running it again always goes on.

    Example
    -------
    >>> b = Budget(10.0, start=0.0)
    >>> b.fits(now=50.0)  # nothing timed yet: the first batch starts
    True
    >>> b.took(4.0); b.fits(now=5.0), b.fits(now=7.0)
    (True, False)
    >>> Budget(None).fits()
    True
    """

    def __init__(self, seconds: Optional[float], start: Optional[float] = None):
        self.seconds = seconds
        self.start = time.monotonic() if start is None else start
        self.longest = 0.0
        self.batches = 0

    def took(self, seconds: float) -> None:
        self.longest = max(self.longest, seconds)
        self.batches += 1

    def fits(self, now: Optional[float] = None) -> bool:
        if self.seconds is None or self.batches == 0:
            return True
        elapsed = (time.monotonic() if now is None else now) - self.start
        return elapsed + self.longest <= self.seconds

    def stopped(self, now: Optional[float] = None) -> str:
        elapsed = (time.monotonic() if now is None else now) - self.start
        return (f"time budget: stopped after {elapsed:.0f} s of the {self.seconds:g} s budget (time_budget_s), "
                f"before a batch that would have ended past it (the longest so far took {self.longest:.0f} s); "
                "run again to resume")
