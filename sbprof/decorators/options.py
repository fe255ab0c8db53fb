"""The arguments a profiling decorator was given, and the profiler they make."""
from __future__ import annotations

from typing import Any, Iterable, Optional, Tuple

from torch import profiler as tprof

from sbprof.decorators.stage_schedule import BRAIN_STAGES, DEFAULT_BRAIN_STAGES
from sbprof.decorators.step_profiler import StepProfiler
from sbprof.base.errors import ConfigError


def check_stages(stages: Optional[Iterable[str]]) -> Optional[Tuple[str, ...]]:
    """Validate a ``stages=`` argument (``None`` keeps the default).

    Example
    -------
    >>> check_stages(["train", "valid"])
    ('train', 'valid')
    """
    if stages is None:
        return None
    if isinstance(stages, str) or not all(isinstance(s, str) for s in stages):
        raise ConfigError(f"stages must be a list of stage names from {BRAIN_STAGES}, got {stages!r}")
    stages = tuple(stages)
    unknown = [s for s in stages if s not in BRAIN_STAGES]
    if unknown or not stages:
        raise ConfigError(f"stages must be a non-empty list from {BRAIN_STAGES}, got {list(stages)!r}")
    return stages


class Options:
    """The ``torch.profiler.profile`` arguments a decorator was given (plus hooks, stages, modules, rank folder).

    ``version`` changes whenever a later ``@schedule``/``@export`` changes them,
    so a profiler kept across calls knows it is stale.
    """

    def __init__(self, class_hooks: Optional[Iterable[str]], stages: Optional[Iterable[str]], activities: Any,
                 schedule: Any, on_trace_ready: Any, record_shapes: bool, profile_memory: bool,
                 with_stack: bool, with_flops: bool, with_modules: bool, modules: Any = None,
                 rank_folder: Optional[str] = None):
        if class_hooks is not None:
            if isinstance(class_hooks, str) or not all(isinstance(h, str) for h in class_hooks):
                raise ConfigError(f"class_hooks must be a list of method names, got {class_hooks!r}")
            class_hooks = tuple(class_hooks)
        self.class_hooks = class_hooks
        self.stages = check_stages(stages)
        self.modules = modules  # per-module attribution (sbprof.measuring.modules), resolved when attached
        self.rank_folder = rank_folder  # under torchrun: where rank files go (sbprof.distributed.world.rank_folder)
        self.activities = activities
        self.version = 0
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.flags = dict(record_shapes=record_shapes, profile_memory=profile_memory,
                          with_stack=with_stack, with_flops=with_flops, with_modules=with_modules)

    def __setattr__(self, key: str, value: Any) -> None:
        if key == "schedule" and value is not None and not callable(value):
            raise ConfigError(f"schedule must be callable (e.g. sbprof.schedule(...)), got {value!r}")
        if key == "on_trace_ready" and value is not None and not callable(value):
            raise ConfigError(f"on_trace_ready must be callable (e.g. sbprof.export(...)), got {value!r}")
        object.__setattr__(self, key, value)
        if key in ("schedule", "on_trace_ready"):
            object.__setattr__(self, "version", self.version + 1)

    @classmethod
    def of_profiler(cls, prof: StepProfiler, **changes: Any) -> "Options":
        """The options that made ``prof``, with ``changes`` applied."""
        opts = cls(None, None, prof.activities if not prof.timing_only else (),
                   prof.schedule if prof.record_steps else None, prof.on_trace_ready, prof.record_shapes,
                   prof.profile_memory, prof.with_stack, prof.with_flops, prof.with_modules,
                   getattr(prof, "modules", None))
        opts.stages = None if prof.selected_steps is None else tuple(sorted(prof.selected_steps))
        for key, value in changes.items():
            setattr(opts, key, value)
        return opts

    def new_profiler(self, inherit: Optional[tprof.profile] = None, brain: bool = False) -> StepProfiler:
        schedule, on_trace_ready = self.schedule, self.on_trace_ready
        if inherit is not None:  # keep what --profile_training set up, unless overridden
            if schedule is None and inherit.record_steps:
                schedule = inherit.schedule
            if on_trace_ready is None:
                on_trace_ready = inherit.on_trace_ready
        steps = self.stages if self.stages is not None else (DEFAULT_BRAIN_STAGES if brain else None)
        return StepProfiler(activities=self.activities, schedule=schedule, on_trace_ready=on_trace_ready,
                            steps=steps, **self.flags)
