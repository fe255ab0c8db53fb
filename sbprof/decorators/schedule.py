"""``schedule``, ``export`` and ``step``: profiler settings usable as decorators, in any order."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from torch import profiler as tprof

from sbprof.decorators.options import Options
from sbprof.decorators.step_profiler import StepProfiler
from sbprof.decorators.targets import OPTIONS_ATTR, attach, current_profiler, hooked_methods, pending_options
from sbprof.base.errors import ConfigError

# Defaults of the scheduled decorators: one idle step, two warm-up steps
# (recorded but discarded, so caches and allocator settle), five measured.
DEFAULT_WAIT = 1
DEFAULT_WARMUP = 2
DEFAULT_ACTIVE = 5
DEFAULT_REPEAT = 1
DEFAULT_TRACE_DIR = "./log/"


def step() -> None:
    """End one step of the innermost running decorated function (no-op outside one).

    For a function that holds its own loop: call it at the end of each
    iteration (as torch's ``prof.step()``), and each iteration is one step,
    scheduled, labelled, timed and reported on its own; what runs after the
    last call is not a step.

    Example
    -------
    >>> import torch
    >>> from sbprof import profile_optimiser
    >>> @profile_optimiser(wait=1, warmup=1, active=2)
    ... def train():
    ...     for _ in range(6):
    ...         torch.ones(4).sum()
    ...         step()
    >>> prof = train()
    >>> prof.step_num, prof.recorded_steps, len(prof.step_wall_s["train"])
    (6, 2, 6)
    """
    prof = current_profiler()
    if prof is not None:
        prof.step()


def set_option(target: Any, key: str, value: Any) -> Any:
    """Put a schedule/trace handler on a profiled object, or leave it for a later ``@profile``."""
    options = getattr(target, OPTIONS_ATTR, None)
    if options is not None:  # a profiled function or class
        setattr(options, key, value)
        return target
    prof = getattr(target, "profiler", None)
    if isinstance(prof, StepProfiler):  # a profiled instance: rebuild its profiler
        options = Options.of_profiler(prof, **{key: value})
        options.class_hooks = hooked_methods(target) or None
        return attach(target, options)
    if callable(target):  # decorated before @profile: remember for it
        pending = pending_options(target)
        pending[key] = value
        target.__sbprof_pending__ = pending
        return target
    raise ConfigError(f"cannot set a profiler {key} on a {type(target).__name__}")


class Schedule:
    """A ``torch.profiler`` schedule that is also a decorator (``@schedule(...)``)."""

    def __init__(self, wait: int, warmup: int, active: int, repeat: int, skip_first: int):
        for name, value, minimum in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1),
                                     ("repeat", repeat, 0), ("skip_first", skip_first, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ConfigError(f"schedule {name} must be an integer >= {minimum}, got {value!r}")
        self.args = dict(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
        self._fn = tprof.schedule(**self.args)

    def __call__(self, target: Any) -> Any:
        if isinstance(target, int) and not isinstance(target, bool):
            return self._fn(target)
        return set_option(target, "schedule", self)

    def __repr__(self) -> str:
        return "schedule(" + ", ".join(f"{k}={v}" for k, v in self.args.items()) + ")"


def schedule(func: Any = None, wait: int = DEFAULT_WAIT, warmup: int = DEFAULT_WARMUP,
             active: int = DEFAULT_ACTIVE, repeat: int = DEFAULT_REPEAT, skip_first: int = 0) -> Any:
    """A profiler schedule (wait / warmup / active / repeat), usable three ways.

    ``profile(schedule=schedule(active=3))``; as a decorator stacked with
    ``@profile`` (either order); or on a profiled instance,
    ``schedule(brain, active=3)``.

    Example
    -------
    >>> from torch.profiler import ProfilerAction
    >>> s = schedule(wait=1, warmup=1, active=1)
    >>> [s(i) for i in range(3)] == [ProfilerAction.NONE, ProfilerAction.WARMUP,
    ...                               ProfilerAction.RECORD_AND_SAVE]
    True
    """
    sched = Schedule(wait, warmup, active, repeat, skip_first)
    return sched if func is None else sched(func)


class TraceExport:
    """A trace handler (``on_trace_ready``) that is also a decorator (``@export(...)``).

    Under torchrun (a profiler with a rank section), traces without a
    ``worker_name`` are named by rank (``rank00001.<ns>.pt.trace.json``) and,
    without a ``dir_name``, go to the run folder's ``traces/`` beside the rank
    files: every rank's trace of one run in one folder, for TensorBoard,
    Perfetto or HolisticTraceAnalysis.
    """

    def __init__(self, dir_name: Optional[str], worker_name: Optional[str], use_gzip: bool):
        if dir_name is not None:
            _check_trace_folder(dir_name)
        self.dir_name = dir_name
        self.worker_name = worker_name
        self.use_gzip = use_gzip
        self._handler = tprof.tensorboard_trace_handler(dir_name=dir_name or DEFAULT_TRACE_DIR,
                                                        worker_name=worker_name, use_gzip=use_gzip)

    def __call__(self, target: Any) -> Any:
        if isinstance(target, tprof.profile):
            return self._handler_for(target)(target)
        return set_option(target, "on_trace_ready", self)

    def _handler_for(self, prof: tprof.profile) -> Any:
        section = getattr(prof, "rank_section", None)
        if section is None or section.log is None or self.worker_name is not None:
            return self._handler
        folder = self.dir_name or str(section.log.folder / "traces")
        return tprof.tensorboard_trace_handler(dir_name=folder, worker_name=f"rank{section.world.rank:05d}",
                                               use_gzip=self.use_gzip)

    def __repr__(self) -> str:
        return f"export(dir_name={(self.dir_name or DEFAULT_TRACE_DIR)!r})"


def _check_trace_folder(dir_name: Any) -> None:
    """Refuse, when the handler is built, a ``dir_name`` that no trace could be written into at the end of a run."""
    if not isinstance(dir_name, (str, os.PathLike)) or not str(dir_name):
        raise ConfigError(f"export(dir_name=...) must name a folder, got {dir_name!r}")
    path = Path(dir_name)
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        where = "is" if existing == path else f"lies under {existing}, which is"
        raise ConfigError(f"export(dir_name={str(dir_name)!r}): {where} a file, not a folder: traces could not be "
                          "written there")


def export(func: Any = None, dir_name: Optional[str] = None, worker_name: Optional[str] = None,
           use_gzip: bool = False) -> Any:
    """Export each finished trace for TensorBoard's profiler plugin / Perfetto.

    Usable like :func:`schedule`: ``profile(on_trace_ready=export(dir_name=...))``,
    stacked as ``@export`` / ``@export(dir_name=...)``, or on a profiled instance.
    Files are ``<worker>.<ns>.pt.trace.json`` in ``dir_name`` (default
    ``./log/``; under torchrun, named by rank in the run folder's ``traces/``);
    a trace holds everything recorded in its cycle, the profiled steps
    labelled ``sbprof.step:<name>``.

    Example
    -------
    >>> import tempfile
    >>> handler = export(dir_name=tempfile.mkdtemp())
    >>> callable(handler) and "export(dir_name=" in repr(handler)
    True
    """
    handler = TraceExport(dir_name, worker_name, use_gzip)
    return handler if func is None else handler(func)
