"""``StepProfiler``: a torch profiler whose steps are the profiled calls, read truthfully.

A step is one call of a hooked method (``fit_batch``, ``transcribe_batch``,
``forward``...) or of a decorated function. Each step runs inside a
``record_function`` label (see :mod:`sbprof.measuring.events`), so whatever
the profiler records around the steps (a training loop's data loading,
validation batches that were not selected, the user's own code between calls)
stays in the trace but not in the figures: :meth:`StepProfiler.events` keeps
only what ran inside the selected steps.

Each Brain stage counts its own steps against the schedule, and a cycle's
warm-up steps are recorded but left out of every figure: see
:mod:`sbprof.decorators.stage_schedule`. The recording sessions are kept
by :mod:`sbprof.decorators.recording` and read by
:mod:`sbprof.decorators.step_events`.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional, Sequence

import torch
from torch import profiler as tprof

from sbprof.decorators.stage_schedule import REPORTED_ACTIONS, SHARED_KEY, schedule_key
from sbprof.decorators.step_events import StepReader
from sbprof.measuring.events import DISCARD_LABEL, step_label, warmup_label


@dataclass
class _OpenStep:
    """A step now running: its label, its clocks at start, and whether the code inside stepped."""

    name: str
    label: Any = None
    index: int = 0  # the step's index in its stage's count (from 0)
    reported: bool = True  # whether its stage's schedule reports it
    action: Any = None
    marker: Any = None  # torch's own ``ProfilerStep#N`` label, on a scheduled profiler's recorded steps
    wall0: float = 0.0
    cpu0: float = 0.0
    stepped_inside: bool = False
    cuda0: Any = None


def _cuda_event() -> Any:
    """A CUDA event recorded now on the current stream, when CUDA is in use (else ``None``)."""
    if not torch.cuda.is_initialized():
        return None
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def _sync() -> None:
    # Only when CUDA is already in use: initialising it here would change what is measured.
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


class StepProfiler(StepReader):
    """A ``torch.profiler.profile`` that code can start, stop and step many times.

    Every finished recording (a ``stop``, or a schedule's cycle) is kept as one
    session, parsed once when first read; reading results stops a running
    session first. Steps advance the schedule only when their name is
    selected (``steps``; ``None`` selects every step), and only selected steps
    are timed (``step_wall_s``) and counted in :meth:`events`.

    Arguments
    ---------
    steps : sequence of str, optional
        The Brain stages (``train``/``valid``/``test``) whose steps are
        profiled; ``None`` profiles every step.
    *args, **kwargs
        Those of ``torch.profiler.profile``; ``activities=()`` records no
        operator at all and only times the steps (the lightest mode).
    """

    def __init__(self, *args: Any, steps: Optional[Sequence[str]] = None, **kwargs: Any):
        super().__init__(*args, steps=steps, **kwargs)
        self._open: List[_OpenStep] = []  # the steps now running, innermost last

    # ------------------------------------------------------------ steps

    def step(self) -> None:
        """Advance the schedule by one step.

        Inside a decorated function's call (``sbprof.step()``), the iteration
        that ends here is one step and the next one begins; what runs after
        the last call is not a step. Ignored when hooks take the steps
        (SpeechBrain's training loop calls ``step()`` after each batch, which
        our hook already counted).
        """
        if self.owns_steps:
            return
        if not self._open:
            self._advance(None)
            return
        running = self._open[-1]
        self._end(running, counted=True)
        running.stepped_inside = True  # so the call's end is not a step
        self._begin(running)

    def _advance(self, running: Optional[_OpenStep]) -> None:
        """One more step of ``running``'s schedule count (``None``: a bare ``step()`` of the shared count)."""
        key = SHARED_KEY if running is None else schedule_key(running.name)
        self.stage_steps[key] += 1
        self.step_num += 1
        if not self.has_schedule:
            return
        if running is None:  # a bare step(): torch's own semantics, the next step's action decides
            needed = self.schedule(self.stage_steps[key]) in REPORTED_ACTIONS
            if needed and self.running:
                self._start_recording()
                self._open_cycles.setdefault(key, [])
            elif not needed:
                self._open_cycles.pop(key, None)
        elif running.action == tprof.ProfilerAction.RECORD_AND_SAVE:
            self._open_cycles.pop(key, None)  # this stage's cycle ended
        if self._recording and not self._open_cycles:
            self._stop_recording(final=False)

    def _begin(self, running: _OpenStep) -> None:
        """Open a step's label (a warm-up label when the schedule leaves it out) and start its clocks."""
        selected = self.selects(running.name)
        key = schedule_key(running.name)
        running.index = self.stage_steps.get(key, 0)
        running.reported, running.action = True, None
        if self.has_schedule and selected:
            running.action = self.schedule(running.index)
            running.reported = self.schedule.reports(running.index)
            if running.action in REPORTED_ACTIONS and self.running:
                self._start_recording()
                self._open_cycles.setdefault(key, [])
                if running.reported:
                    self._recorded_now.setdefault(key, []).append(running.index)
        left_out = self.has_schedule and selected and not running.reported
        running.marker = None
        if self.has_schedule and selected and self._recording:  # as torch marks its steps (TensorBoard's step view)
            running.marker = tprof.record_function(f"ProfilerStep#{self.step_num}")
            running.marker.__enter__()
        running.label = tprof.record_function((warmup_label if left_out else step_label)(running.name))
        running.label.__enter__()
        _sync()
        running.wall0, running.cpu0 = time.perf_counter(), time.process_time()
        # Under torchrun, a rank's steps also get GPU time between CUDA events (sbprof.distributed.recorder).
        running.cuda0 = _cuda_event() if self.rank_section is not None else None

    def _end(self, running: _OpenStep, counted: bool) -> None:
        """Close a step: a counted one is timed and advances the schedule, another is marked not a step."""
        cuda1 = _cuda_event() if running.cuda0 is not None else None
        _sync()
        elapsed, cpu = time.perf_counter() - running.wall0, time.process_time() - running.cpu0
        if not counted:
            with tprof.record_function(DISCARD_LABEL):
                pass
        running.label.__exit__(None, None, None)
        if running.marker is not None:
            running.marker.__exit__(None, None, None)
            running.marker = None
        if counted and self.selects(running.name):
            self.step_wall_s[running.name].append(elapsed)
            self.step_cpu_s[running.name].append(cpu)
            if self.rank_section is not None:
                cuda = None if cuda1 is None else running.cuda0.elapsed_time(cuda1) / 1e3
                self.rank_section.step_ended(self, running.name, running.wall0, elapsed, cpu, cuda,
                                             index=running.index, reported=running.reported,
                                             items=self.step_items, audio_s=self.step_audio_s)
            self._advance(running)

    @contextlib.contextmanager
    def profiled_step(self, step: str) -> Iterator[None]:
        """Run one step: labelled in the trace, device-synchronised and timed.

        A selected step advances the schedule when it ends, unless the code
        inside stepped the profiler itself (a function with its own loop:
        each ``step()`` ended one). A step that raises is not a step.
        """
        running = _OpenStep(step)
        self._begin(running)
        self._open.append(running)
        try:
            yield
        except BaseException:
            self._open.pop()
            self._end(running, counted=False)
            raise
        self._open.pop()
        self._end(running, counted=not running.stepped_inside)
