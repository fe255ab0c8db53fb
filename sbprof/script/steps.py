"""The clocks of ``sbprof run``: what each step of each stage held, and the loop's time around it.

A step is one hooked call (a Brain's ``fit_batch``/``evaluate_batch``, an
inference interface's ``transcribe_batch``...) or, in a plain PyTorch loop,
the span from the first model call with gradients to the end of
``Optimizer.step``. :class:`Steps` keeps, for each stage, every step that has
a role (:mod:`sbprof.script.lifecycle`: warm-up, measured, memory...): wall
and process CPU time, the data wait before it (time inside ``DataLoader``
iterators' ``__next__``), the time between (the rest of the loop's iteration:
from the end of the stage's previous step, or at a stage's first step of an
epoch from its first ``__next__``, to the step's start, less the data wait and
sbprof's own work), the time inside forward, backward and ``Optimizer.step``
(each region's own time: a region inside another, such as a closure
optimiser's forward, counts for the inner one only; its closure's other
time for none), and the utterances and
audio seconds of its batch. It measures only; :mod:`sbprof.script.hooks`
decides when steps begin and end, :mod:`sbprof.script.session` their roles.

Example
-------
>>> import time
>>> steps = Steps()
>>> for _ in range(3):
...     steps.begin("train", role="measured")
...     with steps.region("optimizer"):
...         with steps.region("forward"):  # a closure optimiser's forward: forward time, not optimiser time
...             time.sleep(0.002)
...     _ = steps.end()
>>> s = steps.stages["train"]
>>> s.forward_s[2] >= 0.002, s.optimizer_s[2] < 0.002, s.roles
(True, True, ['measured', 'measured', 'measured'])
"""
from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

REGIONS = ("forward", "backward", "optimizer")
UNCOUNTED = "closure"
"""A region whose own time goes to no share: a closure optimiser's closure, outside its forward and backward."""


@dataclass
class StageSteps:
    """The recorded steps of one stage, one value per step in each list, in the order they ran."""

    kind: str = ""
    roles: List[str] = field(default_factory=list)
    wall_s: List[float] = field(default_factory=list)
    cpu_s: List[float] = field(default_factory=list)
    data_wait_s: List[float] = field(default_factory=list)
    between_s: List[Optional[float]] = field(default_factory=list)
    forward_s: List[float] = field(default_factory=list)
    backward_s: List[float] = field(default_factory=list)
    optimizer_s: List[float] = field(default_factory=list)
    utterances: List[Optional[int]] = field(default_factory=list)
    audio_s: List[Optional[float]] = field(default_factory=list)
    loop_cpu_s: List[Optional[float]] = field(default_factory=list)  # with LOOP_CPU: the iteration's, workers too
    workers_cpu_s: List[Optional[float]] = field(default_factory=list)  # with LOOP_CPU: its DataLoader workers'
    seen: int = 0  # steps begun, recorded or not


@dataclass
class _Open:
    stage: str
    kind: str
    role: str
    wall0: float
    cpu0: float
    wait_s: float
    between_s: Optional[float]
    thread: int
    regions: Dict[str, float] = field(default_factory=lambda: dict.fromkeys(REGIONS, 0.0))
    utterances: Optional[int] = None
    audio_s: Optional[float] = None


LOOP_CPU = False
LOOP_CPU_FIELDS = ("loop_cpu_s", "workers_cpu_s")
"""Set (by ``sbprof run --vary``'s child process) to record each step's loop CPU, its workers' included
(:mod:`sbprof.script.loop_cpu`): a few child-process reads a step, so off for a plain ``sbprof run``."""


class Steps:
    """Step clocks per stage (see the module docstring)."""

    def __init__(self) -> None:
        self._loop_cpu: Any = None
        if LOOP_CPU:
            from sbprof.script.loop_cpu import LoopCPU

            self._loop_cpu = LoopCPU()
        self.stages: Dict[str, StageSteps] = {}
        self.current: Optional[_Open] = None
        self._wait_s = 0.0  # time in __next__ since the last step ended (a sum: a long run past its steps adds no list)
        self._first_wait: Optional[float] = None  # when the first of those __next__ calls started
        self._own: List[Tuple[float, float]] = []  # sbprof's own work since the last step ended
        self._last_end: Optional[Tuple[str, float]] = None  # (stage, perf_counter) of the last step's end
        self._local = threading.local()  # each thread's open regions, innermost last

    def seen(self, stage: str) -> int:
        """Steps of ``stage`` begun so far (the index of its next step)."""
        return self.stages[stage].seen if stage in self.stages else 0

    def begin(self, stage: str, kind: str = "", role: Optional[str] = "measured") -> None:
        """A step of ``stage`` starts now (``role`` ``None``: counted, not recorded)."""
        record = self.stages.setdefault(stage, StageSteps(kind=kind))
        if kind and kind != "loop":  # a Brain's or an interface's own call names the stage, whatever began it before
            record.kind = kind
        record.seen += 1
        if role is None:
            self.current = None
            self._forget()
            # This stage's loop ran since the last recorded step: the next recorded step's time between starts at
            # its own first __next__ (a stage past its plan would otherwise lend its steps to another's).
            self._last_end = None
            return
        wall0 = time.perf_counter()
        wait = self._wait_s
        mark = None
        if self._last_end is not None and self._last_end[0] == stage:
            mark = self._last_end[1]
        elif self._first_wait is not None:  # another stage (or nothing) ran before: from its first __next__
            mark = self._first_wait
        between = None
        if mark is not None:
            own = sum(max(0.0, min(end, wall0) - max(start, mark)) for start, end in self._own)
            between = max(0.0, wall0 - mark - wait - own)
        self._forget()
        if self._loop_cpu is not None and self._last_end is None:  # the first step: its loop CPU from here
            self._loop_cpu.sample()
        self.current = _Open(stage, kind, role, wall0, time.process_time(), wait, between, threading.get_ident())

    def _forget(self) -> None:
        self._wait_s, self._first_wait, self._own = 0.0, None, []

    def end(self) -> Optional[Tuple[float, float, float]]:
        """The open step ends now: its ``(perf_counter start, wall seconds, CPU seconds)``, or ``None`` when no step
        was open."""
        step, t, cpu = self.current, time.perf_counter(), time.process_time()
        if step is None:
            return None
        self._charge(t)
        self.current = None
        wall, cpu = t - step.wall0, cpu - step.cpu0
        record = self.stages[step.stage]
        record.roles.append(step.role)
        record.wall_s.append(wall)
        record.cpu_s.append(cpu)
        record.data_wait_s.append(step.wait_s)
        record.between_s.append(step.between_s)
        for region in REGIONS:
            getattr(record, f"{region}_s").append(step.regions[region])
        record.utterances.append(step.utterances)
        record.audio_s.append(step.audio_s)
        mark = t
        if self._loop_cpu is not None:
            main, workers = self._loop_cpu.sample()
            record.loop_cpu_s.append(main + workers)
            record.workers_cpu_s.append(workers)
            mark = time.perf_counter()  # the sampling is sbprof's own work: not the next step's time between
        self._last_end = (step.stage, mark)
        self._forget()
        return step.wall0, wall, cpu

    def discard(self, unseen: bool = False) -> None:
        """The open step raised: it is not a step (its index stays used, unless ``unseen``: it never was one)."""
        if unseen and self.current is not None:
            self.stages[self.current.stage].seen -= 1
        self.current = None

    def relabel(self, stage: str, roles: List[str]) -> None:
        """Give the recorded steps of ``stage`` other roles (a stage that ended before its measured steps)."""
        self.stages[stage].roles[:] = roles

    def add_wait(self, start: float, end: float) -> None:
        """A ``__next__`` call from ``start`` to ``end``: data wait of the next step."""
        self._wait_s += end - start
        if self._first_wait is None:
            self._first_wait = start

    def add_own(self, start: float, end: float, cpu_s: float = 0.0) -> None:
        """sbprof's own work between steps, from ``start`` to ``end`` (``cpu_s`` of this process's CPU): not the
        loop's time, nor its CPU (the FLOP step's counting, before the first measured step, would be in it)."""
        if len(self._own) < 64:  # a few pieces between two steps; past the steps, nothing reads them
            self._own.append((start, end))
        if self._loop_cpu is not None:
            self._loop_cpu.exclude(cpu_s)

    def set_batch(self, utterances: Optional[int], audio_s: Optional[float]) -> None:
        """The open step's batch size and audio seconds (the first ones set win)."""
        if self.current is not None and self.current.utterances is None:
            self.current.utterances, self.current.audio_s = utterances, audio_s

    # ------------------------------------------------------------ regions

    def _stack(self) -> List[str]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
            self._local.since = 0.0
        return stack

    def _charge(self, now: float) -> None:
        """The time since the last region boundary goes to the innermost open region (within the open step)."""
        stack, step = self._stack(), self.current
        if stack and step is not None and step.thread == threading.get_ident():
            start = max(self._local.since, step.wall0)
            if now > start and stack[-1] != UNCOUNTED:
                step.regions[stack[-1]] += now - start
        self._local.since = now

    def enter(self, region: str) -> None:
        """Entering forward, backward or optimiser (in this thread)."""
        stack = self._stack()
        self._charge(time.perf_counter())
        stack.append(region)

    def leave(self, region: str) -> None:
        stack = self._stack()
        if region not in stack:
            return
        self._charge(time.perf_counter())
        del stack[len(stack) - 1 - stack[::-1].index(region)]

    @contextlib.contextmanager
    def region(self, region: str) -> Iterator[None]:
        self.enter(region)
        try:
            yield
        finally:
            self.leave(region)
