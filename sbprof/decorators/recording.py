"""``RecordingProfiler``: the torch recording sessions of a profiler that code starts and stops many times.

Every finished recording (a ``stop``, or a schedule's cycle) is kept as one
session for :mod:`sbprof.decorators.step_events` to read. Torch records one
session per process: a recording kept open across calls by another profiler
is ended before a new one starts. The profiler's whole state is set here; its
steps are taken by :class:`~sbprof.decorators.step_profiler.StepProfiler`.
"""
from __future__ import annotations

import sys
import threading
import time
import warnings
import weakref
from collections import defaultdict
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import profiler as tprof

from sbprof.decorators.stage_schedule import BRAIN_STAGES, SHARED_KEY, LeadInSchedule
from sbprof.measuring.events import SessionView

KEPT_OPEN: "weakref.WeakSet[Any]" = weakref.WeakSet()  # profilers whose recording is kept open across calls
PAUSE_NOTICE_S = 0.2  # a mid-run post-processing pause longer than this is said on the console


class RecordingProfiler(tprof.profile):
    """A ``torch.profiler.profile`` whose recording code can start and stop many times, each one kept.

    Takes the arguments of :class:`~sbprof.decorators.step_profiler.StepProfiler`.
    """

    def __init__(self, *args: Any, steps: Optional[Sequence[str]] = None, **kwargs: Any):
        activities = kwargs.get("activities")
        # ``activities=()`` asks for no operator recording at all: torch would read
        # an empty list as "the default activities".
        self.timing_only = activities is not None and len(list(activities)) == 0
        if self.timing_only:
            kwargs["activities"] = None
        if kwargs.get("schedule") is not None:
            kwargs["schedule"] = LeadInSchedule(kwargs["schedule"])
        super().__init__(*args, **kwargs)
        self.selected_steps = None if steps is None else frozenset(steps)
        self.running = False
        self.hook_depth = 0
        self.owns_steps = False  # set when hooks step it: outside step() calls are then ignored
        self.step_num = 0  # selected steps taken, every stage together
        self.stage_steps: Dict[str, int] = defaultdict(int)  # selected steps taken per schedule count
        self.step_wall_s: Dict[str, List[float]] = defaultdict(list)
        self.step_cpu_s: Dict[str, List[float]] = defaultdict(list)
        self.step_items: Optional[int] = None  # set by a hook before a step: utterances in its batch
        self.step_audio_s: Optional[float] = None  # and its seconds of audio
        self.lock = threading.RLock()  # calls from several threads run one after the other
        self.thread: Optional[int] = None  # the thread whose calls are this profiler's steps (its first caller's)
        self.thread_name = ""
        self.other_thread_calls = 0  # calls from other threads, run unprofiled
        self._sessions: List[Any] = []
        self._views: List[SessionView] = []
        self._recording = False  # a scheduled profiler's torch recording is on
        self.stopping = False  # inside stop_trace (reading the recording)
        self.keep_open = False  # an unscheduled function's profiler kept running across calls (torchrun)
        self._torch_started = False  # an unscheduled session's torch recording was started
        self._said_busy = False
        self._open_cycles: Dict[str, List[int]] = {}  # schedule counts inside a cycle
        self._recorded_now: Dict[str, List[int]] = {}  # the reported steps of the recording now on, per count
        self.pauses: List[float] = []  # seconds each mid-run end of a recording held the run
        # Under torchrun, the rank file's section of the profiled target (sbprof.distributed.recorder).
        self.rank_section: Any = None
        self.rank_views_read = 0

    @property
    def has_schedule(self) -> bool:
        return self.record_steps

    def selects(self, step: str) -> bool:
        """Whether steps of this name are profiled (the selection applies to a Brain's stages only)."""
        return self.selected_steps is None or step not in BRAIN_STAGES or step in self.selected_steps

    def from_other_thread(self) -> bool:
        """Whether this call comes from another thread than the first caller's. Torch's profiler records only
        the thread that started it, so such a call runs unprofiled and is no step: counted, and said once."""
        me = threading.current_thread()
        if self.thread is None:
            self.thread, self.thread_name = me.ident, me.name
        if me.ident == self.thread:
            return False
        if not self.other_thread_calls:
            warnings.warn(f"sbprof: a profiled function or method was called from thread {me.name!r}, but its steps "
                          f"are the calls of thread {self.thread_name!r} (its first caller): torch's profiler records "
                          "only the thread that started it, so calls from other threads run unprofiled and are not "
                          "steps; profile it from one thread", stacklevel=4)
        self.other_thread_calls += 1
        return True

    # ------------------------------------------------------------ sessions

    def _warn_if_another(self) -> None:
        if torch.autograd._profiler_enabled():
            # Kineto runs one session per process: starting ours cancels the other.
            warnings.warn("another torch profiler is already running in this process; starting this "
                          "one stops its recording (profile one thing at a time)", stacklevel=3)

    def _stop_kept_others(self) -> None:
        """Torch records one session per process: a recording kept open across calls by another profiler
        (an unscheduled function under torchrun) is ended first; its next call starts a new one."""
        for other in list(KEPT_OPEN):
            if other is not self and other.running:
                other.stop()

    def start(self) -> None:
        """Start a session; a no-op while one is running.

        Without a schedule, torch records from now on; with one, torch records
        only while a stage is inside a cycle (started at that stage's step).
        """
        if self.running:
            return
        self._torch_started = False
        if not self.timing_only and not self.has_schedule:
            self._stop_kept_others()
            if self.keep_open and torch.autograd._profiler_enabled():
                # Another profiler is inside its cycle: this call is timed, not recorded (never cancel theirs).
                if not self._said_busy:
                    warnings.warn("another torch profiler is recording: this unscheduled function's calls are timed "
                                  "but not recorded while it does", stacklevel=2)
                    self._said_busy = True
            else:
                self._warn_if_another()
                super().start()
                self._torch_started = True
        self.running = True
        if self.keep_open:
            KEPT_OPEN.add(self)

    def stop(self) -> None:
        """Stop the running session (events so far are kept); a no-op otherwise."""
        KEPT_OPEN.discard(self)
        if self.running:
            if self.has_schedule:
                self._stop_recording(final=True)
            elif not self.timing_only and self._torch_started:
                self.stopping = True
                try:
                    super().stop()
                finally:
                    # Also when reading failed: a SIGTERM held back meanwhile is never dropped.
                    self.stopping = False
                    if self.rank_section is not None:
                        self.rank_section.stop_finished()
            self.running = False

    def _start_recording(self) -> None:
        if self._recording or self.timing_only:
            return
        self._stop_kept_others()
        self._warn_if_another()
        self.prepare_trace()
        self.start_trace()
        self._recording = True

    def _stop_recording(self, final: bool) -> None:
        """End the torch recording (a session is kept, the trace handler called); a mid-run pause is said."""
        self._open_cycles = {}
        cycles, self._recorded_now = self._recorded_now, {}
        if not self._recording:
            return
        t0 = time.perf_counter()
        self.stopping = True  # a signal handler arriving now must not read this recording half-read
        try:
            self.stop_trace()
            self._recording = False
            self._trace_ready()
        finally:
            self.stopping = False  # and a SIGTERM held back meanwhile is handled, even when reading failed
            if self.rank_section is not None:
                self.rank_section.stop_finished()
        pause = time.perf_counter() - t0
        if not final:
            self.pauses.append(pause)
            if pause > PAUSE_NOTICE_S:
                steps = "; ".join(f"{'steps' if k == SHARED_KEY else k + ' steps'} "
                                  f"{min(v) + 1}-{max(v) + 1}" for k, v in cycles.items() if v)
                print(f"sbprof: the profiler read its recording ({steps or 'a cycle'}; steps counted from 1) in "
                      f"{pause:.2f} s: the run paused meanwhile, outside every step's figures", file=sys.stderr)

    def prepare_trace(self) -> None:
        # The previous recording is already kept in _sessions: start a fresh one.
        self.profiler = None
        super().prepare_trace()

    def stop_trace(self) -> None:
        super().stop_trace()
        self._sessions.append(self.profiler)
        if self.rank_section is not None:
            self.rank_section.session_ended(self)
