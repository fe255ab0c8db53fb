"""The decorators' rank mode: under torchrun, every profiled target records its steps into this rank's file.

When ``RANK`` and ``WORLD_SIZE`` are set, each profiled target (a decorated
function, a Brain, a module...) gets a :class:`RankSection`. Its profilers
tell it when a step ends (wall and CPU seconds, seconds since the previous
step: data loading and the loop's own work) and when a profiler session
ends; it then reads that session's events for the communication time of each
reported step (:mod:`sbprof.distributed.comm`) and, with ``profile_memory``,
each step's allocator peak; a caller that times its steps without a profiler
(``sbprof run``) gives each step's communication, from
:mod:`sbprof.distributed.comm_clock`, and its data wait itself. The time
between steps is counted only between two steps of the same section and step
name with no other profiled step between them (a validation step between two
training steps is not the training loop's data loading). Lines go to this process's rank file
(:mod:`sbprof.distributed.rankfile`) as they come; the file's opening,
closing and merge: :mod:`sbprof.distributed.ranklog`.
"""
from __future__ import annotations

import signal
import time
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional

from sbprof.analysis.distributed import RankPayload, RankSteps
from sbprof.distributed.machine_load import MachineLoad
from sbprof.distributed.ranklog import RankLog
from sbprof.distributed.world import World, from_env, rank_folder


@dataclass
class StepRow:
    """One step of a section as it ended."""

    index: int
    wall_s: float
    cpu_s: float
    gap_s: Optional[float]
    reported: bool
    cuda_s: Optional[float] = None
    comm_s: Optional[float] = None
    allocated_bytes: Optional[int] = None
    data_wait_s: Optional[float] = None


def record_key(section: str, step: str) -> str:
    """A section's records are per step name: ``CTCBrain/train``; a function's steps bear its name.

    Example
    -------
    >>> record_key("CTCBrain", "train"), record_key("train_step", "train_step")
    ('CTCBrain/train', 'train_step')
    """
    return section if step == section else f"{section}/{step}"


class RankSection:
    """One profiled target's steps on this rank (see the module docstring).

    ``key`` names it in every rank's file (targets are numbered in the order
    they are profiled, the same on every rank); a job may set ``cell``
    (coordinates of its records), ``step_figures`` (per step index, e.g.
    utterances) and ``memory`` (a :class:`~sbprof.record.MemoryPeak`) before
    the file closes.
    """

    def __init__(self, world: World, key: str, folder: Optional[str]):
        self.world = world
        self.key = key
        self.folder = rank_folder(folder)
        self.rows: Dict[str, List[StepRow]] = {}
        self.pending: Dict[str, List[StepRow]] = {}
        self.last_end: Dict[str, float] = {}
        self.profiler: Any = None
        self.cell: Dict[str, Any] = {}
        self.step_figures: Dict[str, List[float]] = {}
        self.memory: Any = None
        self.items: Dict[str, Dict[int, int]] = {}  # per step name and index: utterances in the batch (a Brain's)
        self.audio_s: Dict[str, Dict[int, float]] = {}  # and its seconds of audio
        self.log: Optional[RankLog] = None
        self.clocked = False  # the caller gives each step's communication (sbprof run's comm clock)
        self.schedule_text: Optional[str] = None  # which steps are reported, where no profiler schedule says it
        self.load = MachineLoad()

    def attach(self, prof: Any) -> None:
        """The target's profiler from now on (an unscheduled function makes one per call; the last one is kept)."""
        prof.rank_section = self
        self.profiler = prof

    def step_ended(self, prof: Any, name: str, start: float, wall_s: float, cpu_s: float,
                   cuda_s: Optional[float] = None, index: Optional[int] = None, reported: Optional[bool] = None,
                   items: Optional[int] = None, audio_s: Optional[float] = None, comm_s: Optional[float] = None,
                   data_wait_s: Optional[float] = None, own_s: float = 0.0) -> None:
        """A counted step ended (``start``: its ``perf_counter`` start; ``cuda_s``: between CUDA events, on a GPU;
        ``reported``: whether its stage's schedule reports it; ``items`` and ``audio_s``: utterances and seconds of
        audio in its batch; ``comm_s`` and ``data_wait_s``: its communication and data wait, from a caller that
        times them itself; ``own_s``: the caller's own work right before the step, not the loop's); a line goes out
        at once."""
        if self.log is None:
            self.log = RankLog.get(self.world, self.folder)
            self.log.sections.append(self)
        rows = self.rows.setdefault(name, [])
        # Between steps only from the previous step of this very stage, when no other profiled step came between.
        previous = self.last_end.get(name) if self.log.last_key == (self.key, name) else None
        if reported is None:
            reported = not prof.has_schedule or prof.schedule.reports(prof.step_num)
        row = StepRow(len(rows), wall_s, cpu_s, None if previous is None else max(0.0, start - previous - own_s),
                      reported,
                      cuda_s, comm_s, data_wait_s=data_wait_s)
        rows.append(row)
        if items is not None:
            self.items.setdefault(name, {})[row.index] = items
        if audio_s is not None:
            self.audio_s.setdefault(name, {})[row.index] = audio_s
        if reported and not prof.timing_only:
            self.pending.setdefault(name, []).append(row)
        line = {"section": record_key(self.key, name), "name": name, "index": row.index, "wall_s": wall_s,
                "cpu_s": cpu_s, "gap_s": row.gap_s, "reported": reported, "t": time.time()}
        for key, value in (("cuda_s", cuda_s), ("utterances", items), ("audio_s", audio_s), ("comm_s", comm_s),
                           ("data_wait_s", data_wait_s)):
            if value is not None:
                line[key] = value
        self.log.writer.write("step", line)
        self.load.mark(name, reported)
        # The next step's "between" starts once this bookkeeping is done: sbprof's own time is not the user's.
        self.log.last_key = (self.key, name)
        self.last_end[name] = time.perf_counter()

    def step_counted(self, name: str) -> None:
        """A step of ``name`` ran and is not written (past its recorded ones): the next step of another name has no
        time between steps of its own."""
        if self.log is not None:
            self.log.last_key = (self.key, name)

    def comm_read(self, name: str, index: int, comm_s: float) -> None:
        """The communication of step ``index`` of ``name``, read after the step ended (device-timed collectives)."""
        rows = self.rows.get(name, [])
        if 0 <= index < len(rows):
            rows[index].comm_s = comm_s
            if self.log is not None:
                self.log.writer.write("comm", {"section": record_key(self.key, name), "steps": {str(index): comm_s}})

    def stop_finished(self) -> None:
        """A profiler finished reading its recording: a SIGTERM that came meanwhile is handled now."""
        log = self.log
        if log is not None and log.sigterm_pending:
            log.sigterm_pending = False
            log._on_sigterm(signal.SIGTERM, None)

    def session_ended(self, prof: Any) -> None:
        """Read the profiler's new sessions: communication (and allocator peak) of each reported step in them."""
        from sbprof.distributed.comm import comm_per_window
        from sbprof.measuring.events import peak_per_window

        views = prof.sessions()
        for view in views[prof.rank_views_read:]:
            for name, waiting in self.pending.items():
                windows = [w for w in view.windows if w.step == name][:len(waiting)]
                if not windows:
                    continue
                spans = [(view.to_us(w.start_ns), view.to_us(w.end_ns)) for w in windows]
                comm = comm_per_window(view.function_events, spans)
                peaks = peak_per_window(view.memory, windows) if prof.profile_memory else [None] * len(windows)
                for row, seconds, peak in zip(waiting, comm, peaks):
                    row.comm_s = seconds
                    row.allocated_bytes = None if peak is None else max(peak)
                done = waiting[:len(windows)]
                del waiting[:len(windows)]
                if self.log is not None:
                    self.log.writer.write("comm", {"section": record_key(self.key, name),
                                                   "steps": {str(r.index): r.comm_s for r in done}})
        prof.rank_views_read = len(views)

    def write_records(self, log: RankLog) -> None:
        """Stop this target's profilers (their last sessions are read) and write one record per step name."""
        if self.profiler is not None and self.profiler.running:
            self.profiler.stop()
        for name, rows in self.rows.items():
            log.writer.write("record", {"section": record_key(self.key, name),
                                        "measurement": self.measurement(log, name, rows).to_dict()})

    def measurement(self, log: RankLog, name: str, rows: List[StepRow]) -> Any:
        """The record of one step name on this rank: its reported steps, their communication, gaps and memory."""
        import torch

        from sbprof.measuring.env import collect_env, load_average
        from sbprof.record import Cell, Measurement

        shown = [r for r in rows if r.reported]
        timing_only = self.profiler is None or self.profiler.timing_only
        comm_known = not timing_only or self.clocked
        device = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_initialized() else "cpu"
        world = {**self.world.to_dict(), "run_id": log.run_id, "backend": log.backend}
        steps = RankSteps(section=record_key(self.key, name), steps=[r.index for r in shown],
                          comm_s=[r.comm_s for r in shown] if comm_known else None, gap_s=[r.gap_s for r in shown],
                          last_step=rows[-1].index, allocated_peak_bytes=[r.allocated_bytes for r in shown])
        extra = RankPayload(rank=steps, machine=self.load.figures(name),
                            data_wait_s_per_step=([r.data_wait_s for r in shown] if shown and
                                                  all(r.data_wait_s is not None for r in shown) else None))
        # The step figures a caller gave (utterances_per_step, audio_s_per_step: RankPayload's fields)
        extra = replace(extra, **{figure: [per_step[r.index] for r in shown if r.index < len(per_step)]
                                  for figure, per_step in self.step_figures.items()})
        items = self.items.get(name, {})
        if shown and extra.utterances_per_step is None and all(r.index in items for r in shown):
            extra = replace(extra, utterances_per_step=[float(items[r.index]) for r in shown])
        audio = self.audio_s.get(name, {})
        if shown and extra.audio_s_per_step is None and all(r.index in audio for r in shown):
            extra = replace(extra, audio_s_per_step=[audio[r.index] for r in shown])
        cell = {"model": record_key(self.key, name), "device": device, "threads": torch.get_num_threads(),
                **self.cell}
        cell["params"] = {"world_size": self.world.world_size, **cell.get("params", {})}
        return Measurement(label=f"rank {self.world.rank}: {record_key(self.key, name)}",
                           cell=Cell(rank=self.world.rank, **cell), warmup=len(rows) - len(shown),
                           wall_s=[r.wall_s for r in shown], cpu_s=[r.cpu_s for r in shown],
                           cuda_s=[r.cuda_s for r in shown] if shown and shown[0].cuda_s is not None else None,
                           memory=self.memory if self.memory is not None else process_peak(device),
                           settings={"distributed": world, "step": name, "timing_only": timing_only,
                                     "schedule": self.schedule_text or (repr(self.profiler.schedule)
                                                                        if self.profiler is not None
                                                                        and self.profiler.has_schedule else None),
                                     "load_1min": load_average()},
                           env=collect_env(), extra=extra.to_dict())


def process_peak(device: str) -> Any:
    """This process's memory high-water mark since it started: resident (VmHWM) or the CUDA allocator's peak."""
    from sbprof.measuring.memory import _read_status_kib
    from sbprof.record import MemoryPeak

    if device.startswith("cuda"):
        import torch

        return MemoryPeak(peak_cuda_bytes=torch.cuda.max_memory_allocated(device))
    try:
        return MemoryPeak(peak_rss_bytes=_read_status_kib("VmHWM"), rss_method="vmhwm_process")
    except (OSError, KeyError):
        return None


_KEYS: Dict[str, int] = {}


def new_section(name: str, folder: Optional[str]) -> Optional[RankSection]:
    """A section for a newly profiled target under torchrun (numbered ``name#2``... when a name repeats); else ``None``.

    Example
    -------
    >>> import os
    >>> new_section("f", None) is None or os.environ.get("RANK") is not None
    True
    """
    world = from_env()
    if world is None:
        return None
    _KEYS[name] = _KEYS.get(name, 0) + 1
    return RankSection(world, name if _KEYS[name] == 1 else f"{name}#{_KEYS[name]}", folder)
