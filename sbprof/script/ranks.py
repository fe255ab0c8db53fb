"""Under torchrun, each rank's measured steps also go to its rank file, and rank 0 merges the run.

The rank files and the merge are the distributed decorators' own
(:mod:`sbprof.distributed.recorder`, :mod:`sbprof.distributed.ranklog`): a section named after the script, one
record per stage, closed with :func:`~sbprof.distributed.ranklog.finish`
(records, end line, barrier; rank 0 runs ``sbprof merge`` on the run's folder).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional


class RankSteps:
    """This rank's section of the run (``None`` from :func:`rank_steps` outside torchrun)."""

    def __init__(self, section: Any):
        from sbprof.decorators.step_profiler import StepProfiler

        self.section = section
        self.profiler = StepProfiler(activities=())  # timing only: what the section reads of a profiler
        section.attach(self.profiler)

    def step(self, stage: str, start: float, wall_s: float, cpu_s: float) -> None:
        """A measured step of ``stage`` ended (``start``: its perf_counter start)."""
        self.section.step_ended(self.profiler, stage, start, wall_s, cpu_s)

    def close(self, reason: str) -> Optional[int]:
        """Write this rank's records and end line, pass the end barrier; on rank 0, the merge's exit code."""
        from sbprof.distributed.ranklog import finish

        return finish(reason)


def rank_steps(name: str, folder: Path) -> Optional[RankSteps]:
    """This rank's :class:`RankSteps` under torchrun (rank files under ``folder``), else ``None``.

    Example
    -------
    >>> import os
    >>> rank_steps("train.py", Path("ranks")) is None or os.environ.get("RANK") is not None
    True
    """
    from sbprof.distributed.recorder import new_section

    section = new_section(name, str(folder))
    return None if section is None else RankSteps(section)
