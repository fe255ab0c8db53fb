"""Under torchrun, each rank's steps also go to its rank file, and rank 0 merges the run.

The rank files and the merge are the distributed decorators' own
(:mod:`sbprof.distributed.recorder`, :mod:`sbprof.distributed.ranklog`): a section named after the script, one
record per stage, closed with :func:`~sbprof.distributed.ranklog.finish`
(records, end line, barrier; rank 0 runs ``sbprof merge`` on the run's folder).

Every step of a stage goes there, its warm-up ones marked as not reported (so a stage that never reached its
measured steps still has a section, which says so), with its utterances and audio seconds, its data wait and its
communication: the measured steps run without torch.profiler, so the collectives are timed by
:class:`~sbprof.distributed.comm_clock.CommClock`, installed for the rank's life.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional, Tuple


class RankSteps:
    """This rank's section of the run (``None`` from :func:`rank_steps` outside torchrun)."""

    def __init__(self, section: Any, warmup: int, measured: int):
        from sbprof.decorators.step_profiler import StepProfiler
        from sbprof.distributed.comm_clock import CommClock

        self.section = section
        self.profiler = StepProfiler(activities=())  # timing only: what the section reads of a profiler
        section.attach(self.profiler)
        section.clocked = True
        section.schedule_text = f"sbprof run --warmup {warmup} --measured {measured}, per stage"
        self.clock = CommClock().install()
        self._pending: List[Tuple[str, int, Any]] = []  # device-timed communication not read yet

    def step(self, stage: str, start: float, wall_s: float, cpu_s: float, measured: bool,
             data_wait_s: Optional[float] = None, utterances: Optional[int] = None,
             audio_s: Optional[float] = None, setup_s: float = 0.0) -> None:
        """A step of ``stage`` ended (``start``: its perf_counter start; ``measured``: one of its figures;
        ``setup_s``: sbprof's own work right before it, left out of the time between steps)."""
        comm = self.clock.window(start, start + wall_s)
        index = len(self.section.rows.get(stage, []))
        self.section.step_ended(self.profiler, stage, start, wall_s, cpu_s, reported=measured, items=utterances,
                                audio_s=audio_s, data_wait_s=data_wait_s,
                                comm_s=comm if isinstance(comm, float) else None, own_s=setup_s)
        if not isinstance(comm, float):
            self._pending.append((stage, index, comm))
        self._read_pending(wait=False)

    def counted(self, stage: str) -> None:
        """A step of ``stage`` past its recorded ones started: counted, not written."""
        self.section.step_counted(stage)

    def _read_pending(self, wait: bool) -> None:
        left = []
        for stage, index, comm in self._pending:
            if wait or comm.ready():
                self.section.comm_read(stage, index, comm.seconds())
            else:
                left.append((stage, index, comm))
        self._pending = left

    def close(self, reason: str) -> Optional[int]:
        """Write this rank's records and end line, pass the end barrier; on rank 0, the merge's exit code."""
        from sbprof.distributed.ranklog import finish

        self._read_pending(wait=True)
        self.clock.remove()
        return finish(reason)


def rank_steps(name: str, folder: Path, warmup: int, measured: int) -> Optional[RankSteps]:
    """This rank's :class:`RankSteps` under torchrun (rank files under ``folder``), else ``None``.

    Example
    -------
    >>> import os
    >>> rank_steps("train.py", Path("ranks"), 2, 5) is None or os.environ.get("RANK") is not None
    True
    """
    from sbprof.distributed.recorder import new_section

    section = new_section(name, str(folder))
    return None if section is None else RankSteps(section, warmup, measured)
