"""The trace of ``sbprof run``: a stage's traced steps under torch's profiler, bounded in events, one file per stage.

The profiler is torch's kineto profiler started through ``torch.autograd.profiler.profile``:
``torch.profiler.profile``'s start imports ``torch._inductor`` (158 MB of resident
memory and 2.5 s, measured with torch 2.14 on a CPU), which the trace does not need.

**The cap.** A trace costs memory by its events: about 0.2 kB each while
recording, 1.2 kB more while the profiler turns them into results when it
stops, and 0.3 kB to count them (1.75 kB in all, measured with torch 2.14: a
loop of tiny operators gives 5 events each). A stage's trace holds at most
:attr:`Tracer.cap` events, by default what 10 % of the process's resident memory
holds at that rate (at least :data:`MIN_EVENTS`). Before a traced step the events
are predicted from the FLOP step (:meth:`Tracer.expect`: the operators it
dispatched, times :data:`EVENTS_PER_OPERATOR`, the most seen per operator) and
followed inside the step at each checkpoint (a module call, a backward, an
optimiser step: the FLOP step counted them too); once the next checkpoint would
pass the cap, collection stops there and the stage's trace is **cut**. After
a stop the exact count is read back, and later sessions predict from it.

The profiler's console lines (``gpuGetDeviceCount failed``, ``USDT:``...) go
to ``/dev/null`` unless ``verbose``.
"""
from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

EVENTS_PER_OPERATOR = 5.0
BYTES_PER_EVENT = 1750
TRACE_SHARE = 0.10
MIN_EVENTS = 5000
STEP_MARK = "sbprof.step: "
"""The name of a traced step's mark in the trace, before its stage's name and index."""


@contextlib.contextmanager
def quiet_stderr(verbose: bool) -> Iterator[None]:
    """File descriptor 2 to ``/dev/null`` for the block (the profiler's C++ lines), unless ``verbose``.

    Example
    -------
    >>> with quiet_stderr(False):
    ...     os.write(2, b"not shown")
    9
    """
    if verbose:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def default_cap() -> int:
    """Events a trace may hold: what :data:`TRACE_SHARE` of the resident memory holds at :data:`BYTES_PER_EVENT`.

    Example
    -------
    >>> default_cap() >= MIN_EVENTS
    True
    """
    from sbprof.measuring.memory import current_rss_bytes

    return max(MIN_EVENTS, int(TRACE_SHARE * current_rss_bytes() / BYTES_PER_EVENT))


@dataclass
class StageTrace:
    """What was traced of one stage: its steps (indices in the stage), files, events, and whether it was cut."""

    steps: List[int] = field(default_factory=list)  # steps traced whole
    files: List[str] = field(default_factory=list)
    events: int = 0
    cap: int = 0
    cut_in_step: Optional[int] = None  # the step inside which collection stopped
    skipped: Optional[str] = None  # why no step was traced

    def to_dict(self) -> Dict[str, Any]:
        return {"steps": self.steps, "files": self.files, "events": self.events, "cap": self.cap,
                "cut_in_step": self.cut_in_step, "skipped": self.skipped}


class Tracer:
    """Profiler sessions over traced steps (see the module docstring).

    Arguments
    ---------
    folder : Path
        Where the trace files go.
    log : callable
        Receives a progress line before each pause (exporting a trace).
    verbose : bool
        Keep the profiler's own console lines.
    cap : int, optional
        Events per stage (default :func:`default_cap`, fixed at the first traced step).
    """

    def __init__(self, folder: Path, log: Callable[[str], None], verbose: bool = False, cap: Optional[int] = None):
        self.folder = folder
        self.log = log
        self.verbose = verbose
        self.cap = cap
        self.stages: Dict[str, StageTrace] = {}
        self.notes: List[str] = []  # what went wrong writing a trace (the figures stand without it)
        self._expected: Dict[str, float] = {}  # stage -> events per step predicted
        self._checkpoints: Dict[str, int] = {}  # stage -> checkpoints per step (the FLOP step's)
        self._profiler: Any = None
        self._stage: Optional[str] = None
        self._session_events = 0.0  # events predicted for the session's finished steps
        self._step_checkpoints = 0
        self._step: Optional[int] = None
        self._collecting = False
        self._mark: Any = None
        self._device = "cpu"

    @property
    def recording(self) -> bool:
        return self._collecting

    def expect(self, stage: str, operators: Optional[int], checkpoints: int) -> None:
        """The FLOP step of ``stage`` dispatched ``operators`` operators and passed ``checkpoints`` checkpoints."""
        if operators:
            self._expected[stage] = operators * EVENTS_PER_OPERATOR
        self._checkpoints[stage] = max(1, checkpoints)

    def begin_step(self, stage: str, index: int, device: str) -> bool:
        """A traced step of ``stage`` (its step ``index``) is about to start its clocks: whether it is traced."""
        trace = self.stages.setdefault(stage, StageTrace())
        if self.cap is None:
            self.cap = default_cap()
        trace.cap = self.cap
        if self._stage not in (None, stage):
            self.stop()  # another stage's steps are never in this stage's trace
        if trace.cut_in_step is not None or trace.skipped:
            return False
        per_step = self._expected.get(stage)
        if per_step is None:
            trace.skipped = "no operator count from a FLOP step to bound it"
            return False
        if trace.events + self._session_events + per_step / self._checkpoints.get(stage, 1) > self.cap:
            trace.cut_in_step = index  # not even its first checkpoint fits under the cap
            self.stop()
            return False
        if self._profiler is None:
            trace.skipped = self._start(stage, device)
            if trace.skipped:
                return False
        self._step, self._step_checkpoints = index, 0
        self._mark = _mark(f"{STEP_MARK}{stage} #{index}")
        return True

    def checkpoint(self) -> None:
        """A module call, backward or optimiser step inside a traced step: stop collecting before the cap."""
        if not self._collecting:
            return
        self._step_checkpoints += 1
        stage = self._stage
        per_step = self._expected[stage]
        share = min(1.0, (self._step_checkpoints + 1) / self._checkpoints.get(stage, 1))
        if self.stages[stage].events + self._session_events + per_step * share > self.cap:
            from torch.profiler import ProfilerActivity

            with quiet_stderr(self.verbose):
                self._profiler.toggle_collection_dynamic(False, [ProfilerActivity.CPU, *self._device_activities()])
            self._collecting = False
            self.stages[stage].cut_in_step = self._step

    def end_step(self, stage: str, last: bool) -> bool:
        """The traced step ended (its clocks read); ``last``: the stage's last traced step. Whether collection
        stopped inside it (the cap)."""
        mark, self._mark = self._mark, None
        if mark is not None:
            mark.__exit__(None, None, None)
        if self._profiler is None or self._stage != stage:
            return False
        trace = self.stages[stage]
        cut = trace.cut_in_step == self._step
        if not cut:
            trace.steps.append(self._step)
            self._session_events += self._expected[stage]
        if last or cut:
            self.stop()
        return cut

    def _device_activities(self) -> List[Any]:
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CUDA] if self._device.startswith("cuda") else []

    def _start(self, stage: str, device: str) -> Optional[str]:
        """Start a session; why not, when it cannot be (the script's own profiler running, a profiler error)."""
        import torch
        from torch.autograd import profiler

        if torch.autograd.profiler._is_profiler_enabled or torch._C._autograd._profiler_enabled():
            return "the script runs a torch profiler of its own"
        self._device = device
        session = profiler.profile(use_cpu=True, use_kineto=True,
                                   use_device="cuda" if device.startswith("cuda") else None)
        try:
            with quiet_stderr(self.verbose):
                session.__enter__()
        except Exception as exc:  # the step goes on untraced: the trace is not worth the script's run
            return f"the profiler did not start ({exc})"
        self._profiler = session
        self._stage, self._session_events, self._collecting = stage, 0.0, True
        return None

    def stop(self) -> None:
        """Stop the open session (if any), count its events, write its file."""
        profiler, stage = self._profiler, self._stage
        if profiler is None:
            return
        self._profiler, self._stage, self._collecting = None, None, False
        trace = self.stages[stage]
        self.log(f"stopping the trace of stage {stage} and writing it (the script waits)")
        with quiet_stderr(self.verbose):
            profiler.__exit__(None, None, None)
            events = len(profiler.kineto_results.events())
            name = f"{stage}.pt.trace.json" if not trace.files else f"{stage}.{len(trace.files) + 1}.pt.trace.json"
            path = self.folder / name
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                profiler.export_chrome_trace(str(path))
                written = None if path.is_file() else "is its disk full?"
            except OSError as exc:
                written = exc.strerror or str(exc)
        del profiler
        if written is None:
            trace.files.append(str(path))
        else:  # torch says a failed write (a full disk) only in its own log, and leaves its temporary file
            Path(f"{path}.tmp").unlink(missing_ok=True)
            self.notes.append(f"the trace of {stage} was not written in {self.folder} ({written})")
        trace.events += events
        if self._session_events > 0 and trace.cut_in_step is None:  # the real count predicts the next sessions
            steps = self._session_events / self._expected[stage]
            self._expected[stage] = events / steps
        self._session_events = 0.0


def _mark(name: str) -> Any:
    import torch

    mark = torch.profiler.record_function(name)
    mark.__enter__()
    return mark

