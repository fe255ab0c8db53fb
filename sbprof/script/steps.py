"""The clocks of ``sbprof run``: steps per stage, their phases (warm-up, measured, done), and what each step held.

A step is one hooked call (a Brain's ``fit_batch``/``evaluate_batch``, an
inference interface's ``transcribe_batch``...) or, in a plain PyTorch loop,
the span between two optimiser steps. :class:`Steps` keeps, for each stage,
the first ``warmup + measured`` steps: wall and process CPU time, the data
wait before each one, the time inside forward (outermost ``nn.Module``
calls), backward (``torch.autograd.backward``) and ``Optimizer.step``, and the
utterances and audio seconds of its batch when it carries them. It measures
only; :mod:`sbprof.script.hooks` decides when steps begin and end.

Example
-------
>>> import time
>>> steps = Steps(warmup=1, measured=2)
>>> for _ in range(4):
...     steps.begin("train")
...     with steps.region("forward"):
...         time.sleep(0.001)
...     _ = steps.end()
>>> s = steps.stages["train"]
>>> len(s.wall_s), s.forward_s[1] >= 0.001, steps.phase("train")
(3, True, 'done')
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

REGIONS = ("forward", "backward", "optimizer")
PHASES = ("warmup", "measured", "done")


@dataclass
class StageSteps:
    """The recorded steps of one stage (warm-up ones first), one value per step in each list."""

    kind: str = ""
    wall_s: List[float] = field(default_factory=list)
    cpu_s: List[float] = field(default_factory=list)
    data_wait_s: List[float] = field(default_factory=list)
    forward_s: List[float] = field(default_factory=list)
    backward_s: List[float] = field(default_factory=list)
    optimizer_s: List[float] = field(default_factory=list)
    utterances: List[Optional[int]] = field(default_factory=list)
    audio_s: List[Optional[float]] = field(default_factory=list)
    seen: int = 0  # steps seen, recorded or not


@dataclass
class _Open:
    stage: str
    wall0: float
    cpu0: float
    wait_s: float
    regions: Dict[str, float] = field(default_factory=lambda: dict.fromkeys(REGIONS, 0.0))
    utterances: Optional[int] = None
    audio_s: Optional[float] = None


class Steps:
    """Step clocks per stage (see the module docstring).

    Arguments
    ---------
    warmup, measured : int
        Steps per stage left out of the figures, then steps in them; later steps are counted, not recorded.
    """

    def __init__(self, warmup: int, measured: int):
        self.warmup = warmup
        self.measured = measured
        self.stages: Dict[str, StageSteps] = {}
        self.current: Optional[_Open] = None
        self.pending_wait_s = 0.0
        self._depth: Dict[str, int] = dict.fromkeys(REGIONS, 0)
        self._since: Dict[str, float] = dict.fromkeys(REGIONS, 0.0)

    def phase(self, stage: str) -> str:
        """``warmup``, ``measured`` or ``done``: where the next step of ``stage`` falls."""
        seen = self.stages[stage].seen if stage in self.stages else 0
        return PHASES[0] if seen < self.warmup else PHASES[1] if seen < self.warmup + self.measured else PHASES[2]

    def recording(self, stage: str) -> bool:
        return self.phase(stage) != "done"

    def begin(self, stage: str, kind: str = "") -> None:
        """A step of ``stage`` starts now; the data wait since the last step belongs to it."""
        record = self.stages.setdefault(stage, StageSteps(kind=kind))
        if kind != "loop":  # a Brain's or an interface's own call names the stage, whatever began it before
            record.kind = kind
        wait, self.pending_wait_s = self.pending_wait_s, 0.0
        if record.seen >= self.warmup + self.measured:
            record.seen += 1
            self.current = None
            return
        self.current = _Open(stage, time.perf_counter(), time.process_time(), wait)

    def end(self) -> Optional[Tuple[float, float, float]]:
        """The open step ends now: its ``(perf_counter start, wall seconds, CPU seconds)``, or ``None`` when no step
        was open."""
        step, self.current = self.current, None
        if step is None:
            return None
        wall, cpu = time.perf_counter() - step.wall0, time.process_time() - step.cpu0
        record = self.stages[step.stage]
        record.seen += 1
        record.wall_s.append(wall)
        record.cpu_s.append(cpu)
        record.data_wait_s.append(step.wait_s)
        record.forward_s.append(step.regions["forward"])
        record.backward_s.append(step.regions["backward"])
        record.optimizer_s.append(step.regions["optimizer"])
        record.utterances.append(step.utterances)
        record.audio_s.append(step.audio_s)
        return step.wall0, wall, cpu

    def discard(self) -> None:
        """The open step raised: it is not a step."""
        self.current = None

    def add_wait(self, seconds: float) -> None:
        """Time spent waiting for a batch; it belongs to the next step."""
        self.pending_wait_s += seconds

    def set_batch(self, utterances: Optional[int], audio_s: Optional[float]) -> None:
        """The open step's batch size and audio seconds (the first ones set win)."""
        if self.current is not None and self.current.utterances is None:
            self.current.utterances, self.current.audio_s = utterances, audio_s

    def enter(self, region: str) -> None:
        """Entering forward/backward/optimiser; nested entries count once."""
        self._depth[region] += 1
        if self._depth[region] == 1:
            self._since[region] = time.perf_counter()

    def leave(self, region: str) -> None:
        if self._depth[region] == 0:
            return
        self._depth[region] -= 1
        if self._depth[region] == 0 and self.current is not None:
            self.current.regions[region] += time.perf_counter() - self._since[region]

    @contextlib.contextmanager
    def region(self, region: str) -> Iterator[None]:
        self.enter(region)
        try:
            yield
        finally:
            self.leave(region)
