"""``StepProfiler``: a torch profiler whose steps are the profiled calls, read truthfully.

A step is one call of a hooked method (``fit_batch``, ``transcribe_batch``,
``forward``...) or of a decorated function. Each step runs inside a
``record_function`` label (see :mod:`sbprof.events`), so whatever
the profiler records around the steps (a training loop's data loading,
validation batches that were not selected, the user's own code between calls)
stays in the trace but not in the figures: :meth:`StepProfiler.events` keeps
only what ran inside the selected steps.

With a schedule, each Brain stage (``train``, ``valid``, ``test``) counts
its own steps against its own copy of the schedule: ``fit`` records its
training steps 4-8 (counting from 1, with the defaults) and ``evaluate``
its test steps 4-8, whatever ran before. One torch recording serves them
all: it runs while any stage is inside a cycle, and each step's label says
whether its stage's schedule reports it. Other step names (functions,
pretrained interfaces) share one count.

With a schedule, torch records nothing during a cycle's warm-up, so the first
recorded step would free blocks of unknown size (gradients freed by
``opt.zero_grad()`` at the top of a step were allocated in the step before):
torch drops those frees and the step reads as if it kept that memory. So the
warm-up steps are recorded here, labelled as warm-up and left out of every
figure (:class:`LeadInSchedule`).
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time
import warnings
import weakref
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence

import torch
from torch import profiler as tprof
from torch.autograd.profiler_util import EventList

from sbprof.events import DISCARD_LABEL, MemoryRecord, SessionView, StepWindow, step_label, warmup_label
from sbprof.errors import MeasurementError
from sbprof.record import Cell, Measurement

FIRST_STEPS_SHOWN = 50  # how far the "nothing recorded yet" message looks into a schedule
BRAIN_STAGES = ("train", "valid", "test")
# A Brain profiled through fit() is profiled for training, through evaluate() for
# evaluation: fit's validation batches are left out unless asked for.
DEFAULT_BRAIN_STAGES = ("train", "test")
REPORTED_ACTIONS = (tprof.ProfilerAction.RECORD, tprof.ProfilerAction.RECORD_AND_SAVE)
KEPT_OPEN: "weakref.WeakSet[Any]" = weakref.WeakSet()  # profilers whose recording is kept open across calls
SHARED_KEY = "*"  # the schedule count of every step that is not a Brain stage
PAUSE_NOTICE_S = 0.2  # a mid-run post-processing pause longer than this is said on the console


def schedule_key(step: str) -> str:
    """Which schedule count a step advances: its own for a Brain stage, one shared count otherwise.

    Example
    -------
    >>> schedule_key("test"), schedule_key("transcribe_batch")
    ('test', '*')
    """
    return step if step in BRAIN_STAGES else SHARED_KEY


class LeadInSchedule:
    """The schedule torch runs: the user's, with the steps before each cycle's first reported step recorded.

    Warm-up steps are recorded instead of only prepared; a cycle without
    warm-up records the one step before its first reported step. Blocks
    allocated there have known sizes when a reported step frees them. Which
    steps are reported is still the user's schedule (:meth:`reports`).

    Example
    -------
    >>> from torch.profiler import ProfilerAction, schedule
    >>> lead_in = LeadInSchedule(schedule(wait=1, warmup=1, active=1))
    >>> [lead_in(i).name for i in range(3)], [lead_in.reports(i) for i in range(3)]
    (['NONE', 'RECORD', 'RECORD_AND_SAVE'], [False, False, True])
    >>> no_warmup = LeadInSchedule(lambda i: ProfilerAction.RECORD_AND_SAVE if i == 2 else ProfilerAction.NONE)
    >>> [no_warmup(i).name for i in range(3)], [no_warmup.reports(i) for i in range(3)]
    (['NONE', 'RECORD', 'RECORD_AND_SAVE'], [False, False, True])
    """

    def __init__(self, user: Any):
        self.user = user.user if isinstance(user, LeadInSchedule) else user

    def reports(self, step_num: int) -> bool:
        """Whether the user's schedule records step ``step_num`` (so its figures count)."""
        return self.user(step_num) in REPORTED_ACTIONS

    def __call__(self, step_num: int) -> tprof.ProfilerAction:
        action = self.user(step_num)
        if action == tprof.ProfilerAction.WARMUP or (action == tprof.ProfilerAction.NONE
                                                     and self.reports(step_num + 1)):
            return tprof.ProfilerAction.RECORD
        return action

    def __repr__(self) -> str:
        return repr(self.user)


class StepEvents(EventList):
    """The events of the selected steps, with the raw memory records and windows they came from."""

    def __init__(self, events: List[Any], windows: List[StepWindow], memory: List[MemoryRecord], **kwargs: Any):
        super().__init__(events, **kwargs)
        self.windows = windows
        self.memory = memory
        # Each session's parent/child tree was built when it was parsed; sessions
        # do not overlap in time, so the joined list needs no new links.
        self._tree_built = True


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


class StepProfiler(tprof.profile):
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
        self.lock = threading.RLock()  # calls from several threads run one after the other
        self._open: List[_OpenStep] = []  # the steps now running, innermost last
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
            self.stopping = False
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
                                             items=self.step_items)
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

    # ------------------------------------------------------------ results

    def sessions(self) -> List[SessionView]:
        """Every finished session of this profiler, each parsed once, on one shared clock."""
        for session in self._sessions[len(self._views):]:
            origin = self._views[0].origin_ns if self._views else None
            self._views.append(SessionView(session, origin, labelled=True))
        return self._views

    def _nothing_recorded(self) -> MeasurementError:
        if self.has_schedule:
            counts = dict(self.stage_steps) or {SHARED_KEY: 0}
            parts = []
            for key, taken in counts.items():
                first = next((i for i in range(taken, taken + FIRST_STEPS_SHOWN) if self.schedule.reports(i)), None)
                where = "it records no further step" if first is None else f"its first recorded step is step {first + 1}"
                parts.append(f"{'' if key == SHARED_KEY else key + ': '}{where}")
            return MeasurementError(
                f"nothing was profiled yet: no step was recorded in the {self.step_num} step(s) taken, and this "
                f"schedule ({self.schedule!r}) is still waiting ({'; '.join(parts)}; steps counted from 1, each Brain "
                "stage counting its own). Each call of a decorated function, and each hooked batch of a Brain or "
                "pretrained interface, is one step; a function that loops by itself calls sbprof.step() once per "
                "iteration")
        return MeasurementError("nothing was profiled yet: no profiled call has run")

    def events(self, step: Optional[str] = None) -> StepEvents:
        """Events that ran inside the selected steps (or inside the steps named ``step``), every session joined."""
        self.stop()
        if self.timing_only:
            raise MeasurementError("this profiler was made with activities=() (timing only): it records no "
                                   "operator events; read step_wall_s / measurement() instead")
        views = self.sessions()
        events: List[Any] = []
        windows: List[StepWindow] = []
        memory: List[MemoryRecord] = []
        for view in views:
            chosen = [w for w in view.windows if (w.step == step if step is not None else self.selects(w.step))]
            windows += chosen
            events += view.events_in(chosen)
            memory += view.memory
        if step is not None and not windows and self.has_schedule and self.stage_steps.get(schedule_key(step)):
            taken = self.stage_steps[schedule_key(step)]
            first = next((i for i in range(taken, taken + FIRST_STEPS_SHOWN) if self.schedule.reports(i)), None)
            where = "it records no further step" if first is None else f"its first recorded step is step {first + 1}"
            raise MeasurementError(f"no {step!r} step was recorded: {taken} step(s) taken, and its schedule "
                                   f"({self.schedule!r}, counted for each stage on its own) has not reached its "
                                   f"recorded part ({where}; steps counted from 1)")
        if step is not None and not windows and any(v.windows for v in views):
            raise MeasurementError(f"no recorded step is named {step!r}; recorded: "
                                   f"{sorted({w.step for v in views for w in v.windows if self.selects(w.step)})}")
        if not windows:
            raise self._nothing_recorded()
        first = views[0].function_events
        return StepEvents(events, windows, memory, use_device=first._use_device,
                          profile_memory=first._profile_memory, with_flops=first._with_flops)

    @property
    def recorded_steps(self) -> int:
        """How many selected steps the recorded sessions hold."""
        if self.timing_only:
            return 0
        self.stop()
        return sum(self.selects(w.step) for view in self.sessions() for w in view.windows)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False, include_python_functions: bool = False) -> EventList:
        """Events of the selected steps aggregated by operator (as ``torch.profiler.profile.key_averages``)."""
        # Older torch (2.4-2.11) lacks the last two grouping options: pass them only when asked.
        extra = {k: v for k, v in (("group_by_overload_name", group_by_overload_name),
                                   ("include_python_functions", include_python_functions)) if v}
        return self.events().key_averages(group_by_input_shape, group_by_stack_n, **extra)

    def measurement(self, step: str) -> Measurement:
        """Every selected step of one name as a :class:`Measurement`.

        Raw samples: wall and process CPU time of each step (device-synchronised
        on CUDA). When operators were recorded, ``extra`` adds the recorded
        steps' ``report_time`` figures (``operator_cpu_us``, ``device_us``), and
        with ``profile_memory`` the ``report_memory`` peaks (bytes).
        """
        if not self.step_wall_s.get(step):
            raise MeasurementError(f"no step {step!r} was timed; timed steps: {sorted(self.step_wall_s)}")
        from sbprof.env import collect_env
        from sbprof.events import device_us, operator_cpu_us, peak_per_window

        device = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_initialized() else "cpu"
        extra: Dict[str, Any] = {}
        self.stop()  # as every read does: what ran so far becomes readable (a timing-only profiler has none)
        if any(w.step == step for view in self.sessions() for w in view.windows):
            events = self.events(step)
            extra.update(recorded_steps=len(events.windows), operator_cpu_us=operator_cpu_us(events),
                         device_us=device_us(events))
            if self.profile_memory:
                peaks = peak_per_window(events.memory, events.windows)
                extra.update(allocated_peak_cpu_bytes=max(c for c, _ in peaks),
                             allocated_peak_device_bytes=max(d for _, d in peaks))
        return Measurement(label=step, cell=Cell(model=step, device=device, threads=torch.get_num_threads()),
                           wall_s=list(self.step_wall_s[step]), cpu_s=list(self.step_cpu_s[step]),
                           settings={"schedule": repr(self.schedule) if self.has_schedule else None,
                                     "record_shapes": self.record_shapes, "with_stack": self.with_stack,
                                     "profile_memory": self.profile_memory, "timing_only": self.timing_only},
                           env=collect_env(), extra=extra)
