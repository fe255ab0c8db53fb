"""SpeechBrain-style profiling decorators over ``torch.profiler``.

Drop-in for the historic ``speechbrain.utils.profiling`` module (0.5.x): only
the import changes. ``@profile``, ``@profile_optimiser`` and
``@profile_analyst`` decorate

- a function or method: each call runs under a fresh ``torch.profiler``
  session, exposed afterwards as ``<function>.profiler``;
- a class: instances get a profiler (``instance.profiler``) that hooks their
  step methods (see below);
- an instance of a SpeechBrain ``Brain`` or pretrained interface (e.g.
  ``EncoderASR``), or any ``torch.nn.Module``: the same, in place.

Return rule for functions (historic, kept): a decorated function that returns
``None`` returns its profiler instead, so ``prof = train(...)`` keeps working.
A function that returns a value returns that value unchanged; its profiler is
then read from ``<function>.profiler``. The historic module returned a
``(result, profiler)`` tuple there, which silently changed the function's
return value; we do not.

Step methods: on a ``Brain`` each ``fit_batch`` and ``evaluate_batch`` call is
one profiler step, and ``fit``/``evaluate`` bracket a profiling session, so
``Brain.fit(...)`` is profiled step by step with no change to the training
loop. On a pretrained interface each batch method call (``transcribe_batch``,
``encode_batch``, ``classify_batch``...) is a step; on a plain module,
``forward``. Pass ``class_hooks`` to choose other methods. Nested hooked calls
(``transcribe_batch`` calling ``encode_batch``) count as one step.

SpeechBrain 1.x drives ``brain.profiler`` itself: it calls ``start()`` at each
training epoch, ``step()`` after each training batch and, once ``step_num``
passes ``brain.tot_prof_steps`` (its ``--profile_training`` setting), stops
the profiler and ends the process. Our :class:`StepProfiler` makes ``start``
idempotent, ignores the loop's ``step()`` for a batch our hook already
stepped, and sets ``tot_prof_steps`` to infinity, so a decorated Brain is
never cut short. A profiler made by ``--profile_training`` is replaced; its
schedule and trace handler are kept when the decorator sets none.
"""
from __future__ import annotations

import functools
import logging
import math
import time
import warnings
from collections import defaultdict
from copy import deepcopy
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence

import torch
from torch import profiler as tprof
from torch.autograd.profiler_util import EventList

from sbprof.errors import ConfigError, MeasurementError
from sbprof.record import Measurement

logger = logging.getLogger(__name__)

BRAIN_STEP_HOOKS = ("fit_batch", "evaluate_batch")
BRAIN_SESSION_HOOKS = ("fit", "evaluate")
PRETRAINED_STEP_HOOKS = (
    "transcribe_batch",
    "encode_batch",
    "classify_batch",
    "verify_batch",
    "separate_batch",
    "enhance_batch",
    "decode_batch",
    "get_speech_prob_chunk",
    "estimate_batch",
)

# Defaults of @profile_optimiser's schedule: one idle step, two warm-up steps
# (recorded but discarded, so caches and allocator settle), five measured.
DEFAULT_WAIT = 1
DEFAULT_WARMUP = 2
DEFAULT_ACTIVE = 5
DEFAULT_REPEAT = 1

_OPTIONS_ATTR = "__sbprof_options__"


def _is_brain(obj: Any) -> bool:
    try:
        from speechbrain.core import Brain
    except ImportError:  # speechbrain is optional for plain functions
        return False
    return isinstance(obj, Brain) or (isinstance(obj, type) and issubclass(obj, Brain))


def _is_pretrained(obj: Any) -> bool:
    return hasattr(obj, "HPARAMS_NEEDED") and hasattr(obj, "MODULES_NEEDED")


class StepProfiler(tprof.profile):
    """A ``torch.profiler.profile`` that code can start, stop and step many times.

    Every finished recording (a ``stop``, or a schedule's cycle) is kept as one
    session and ``events()`` joins them, so ``fit`` followed by ``evaluate``
    gives one profile. Each session is parsed once, when first read (torch's
    own ``acc_events`` re-processes everything at each stop, which grows
    quadratically over many short sessions). Reading results stops a running
    session first. Each hooked step's wall time is also kept (``step_wall_s``),
    device-synchronised on CUDA.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        activities = kwargs.get("activities")
        # ``activities=()`` asks for no operator recording at all: steps are only
        # timed, the lightest mode (torch would read an empty list as "default").
        self.timing_only = activities is not None and len(list(activities)) == 0
        if self.timing_only:
            kwargs["activities"] = None
        super().__init__(*args, **kwargs)
        self.running = False
        self.hook_depth = 0
        self.step_wall_s: Dict[str, List[float]] = defaultdict(list)
        self._hook_stepped = False
        self._sessions: List[Any] = []
        self._merged: Optional[EventList] = None

    @property
    def has_schedule(self) -> bool:
        return self.record_steps

    def start(self) -> None:
        """Start a session; a no-op while one is running."""
        if not self.running and self.timing_only:
            self.running = True
        elif not self.running:
            if torch.autograd._profiler_enabled():
                # Kineto runs one session per process: starting ours cancels the other.
                warnings.warn("another torch profiler is already running in this process; starting this "
                              "one stops its recording (profile one thing at a time)", stacklevel=2)
            super().start()
            self.running = True

    def stop(self) -> None:
        """Stop the running session (events so far are kept); a no-op otherwise."""
        if self.running:
            if not self.timing_only:
                super().stop()
            self.running = False

    def prepare_trace(self) -> None:
        # The previous recording is already kept in _sessions: start a fresh one.
        self.profiler = None
        super().prepare_trace()

    def stop_trace(self) -> None:
        super().stop_trace()
        self._sessions.append(self.profiler)
        self._merged = None

    def step(self) -> None:
        """Advance the schedule by one step.

        A training loop that steps after a batch our hook already stepped
        (SpeechBrain's does) is ignored, so each batch counts once.
        """
        if self._hook_stepped:
            self._hook_stepped = False
            return
        self._advance()

    def _advance(self) -> None:
        if self.timing_only:
            self.step_num += 1
        else:
            super().step()

    def _hooked_step(self) -> None:
        self._advance()
        self._hook_stepped = True

    def events(self) -> EventList:
        """All recorded operator events, every session joined."""
        self.stop()
        if self.timing_only:
            raise MeasurementError("this profiler was made with activities=() (timing only): it records no "
                                   "operator events; read step_wall_s / measurement() instead")
        if not self._sessions:
            raise MeasurementError(
                "nothing was profiled yet: no profiled call (or no recorded step of the schedule) has run"
            )
        if len(self._sessions) == 1:
            return self._sessions[0].function_events
        if self._merged is None:
            first = self._sessions[0].function_events
            self._merged = EventList(
                [e for session in self._sessions for e in session.function_events],
                use_device=first._use_device, profile_memory=first._profile_memory, with_flops=first._with_flops,
            )
            # Each session's parent/child tree was built when it was parsed; the
            # sessions do not overlap in time, so the joined list needs no new links.
            self._merged._tree_built = True
        return self._merged

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False, include_python_functions: bool = False) -> EventList:
        """Events aggregated by operator (as ``torch.profiler.profile.key_averages``)."""
        # Older torch (2.4-2.11) lacks the last two grouping options: pass them only when asked.
        extra = {k: v for k, v in (("group_by_overload_name", group_by_overload_name),
                                   ("include_python_functions", include_python_functions)) if v}
        return self.events().key_averages(group_by_input_shape, group_by_stack_n, **extra)

    def measurement(self, hook: str) -> Measurement:
        """The wall times of every call of one hooked method as a :class:`Measurement`."""
        if not self.step_wall_s.get(hook):
            raise MeasurementError(f"no call of {hook!r} was recorded; hooked: {sorted(self.step_wall_s)}")
        return Measurement(label=hook, device=_current_device(), num_threads=torch.get_num_threads(),
                           wall_s=list(self.step_wall_s[hook]), config={"hook": hook})


def _current_device() -> str:
    return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_initialized() else "cpu"


def _sync() -> None:
    # Only when CUDA is already in use: initialising it here would change what is measured.
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


class _Options:
    """The ``torch.profiler.profile`` arguments a decorator was given."""

    def __init__(self, class_hooks: Optional[Iterable[str]], activities, schedule, on_trace_ready,
                 record_shapes: bool, profile_memory: bool, with_stack: bool, with_flops: bool,
                 with_modules: bool):
        if class_hooks is not None:
            if isinstance(class_hooks, str) or not all(isinstance(h, str) for h in class_hooks):
                raise ConfigError(f"class_hooks must be a list of method names, got {class_hooks!r}")
            class_hooks = tuple(class_hooks)
        if schedule is not None and not callable(schedule):
            raise ConfigError(f"schedule must be callable (e.g. sbprof.schedule(...)), got {schedule!r}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise ConfigError(f"on_trace_ready must be callable (e.g. sbprof.export(...)), got {on_trace_ready!r}")
        self.class_hooks = class_hooks
        self.activities = activities
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.flags = dict(record_shapes=record_shapes, profile_memory=profile_memory,
                          with_stack=with_stack, with_flops=with_flops, with_modules=with_modules)

    def new_profiler(self, inherit: Optional[tprof.profile] = None) -> StepProfiler:
        schedule, on_trace_ready = self.schedule, self.on_trace_ready
        if inherit is not None:  # keep what --profile_training set up, unless overridden
            if schedule is None and inherit.record_steps:
                schedule = inherit.schedule
            if on_trace_ready is None:
                on_trace_ready = inherit.on_trace_ready
        return StepProfiler(activities=self.activities, schedule=schedule,
                            on_trace_ready=on_trace_ready, **self.flags)


def _pending(target: Any) -> Dict[str, Any]:
    """Options that ``@schedule``/``@export`` left on a function decorated before ``@profile``."""
    return dict(getattr(target, "__sbprof_pending__", {}))


def _profile_function(func: Callable, options: _Options) -> Callable:
    pending = _pending(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        opts = getattr(wrapper, _OPTIONS_ATTR)
        prof = opts.new_profiler()
        wrapper.profiler = prof  # visible inside the call, for prof.step()
        _ACTIVE.append(prof)
        try:
            prof.start()
            result = func(*args, **kwargs)
        finally:
            _ACTIVE.pop()
            prof.stop()
        return prof if result is None else result

    for key, value in pending.items():
        setattr(options, key, value)
    setattr(wrapper, _OPTIONS_ATTR, options)
    wrapper.profiler = None
    return wrapper


def _default_hooks(obj: Any) -> tuple:
    if _is_brain(obj):
        return BRAIN_STEP_HOOKS
    if _is_pretrained(obj):
        return tuple(h for h in PRETRAINED_STEP_HOOKS if hasattr(obj, h))
    if isinstance(obj, torch.nn.Module):
        return ("forward",)
    return ("__call__",) if callable(obj) else ()


def _hook_step(prof: StepProfiler, method: Callable, name: str, session: bool) -> Callable:
    @functools.wraps(method)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        if prof.hook_depth > 0:  # a hooked method called from another one: one step, not two
            return method(*args, **kwargs)
        prof.hook_depth += 1
        prof.start()
        try:
            _sync()
            t0 = time.perf_counter()
            result = method(*args, **kwargs)
            _sync()
            prof.step_wall_s[name].append(time.perf_counter() - t0)
            prof._hooked_step()
        finally:
            prof.hook_depth -= 1
            if session:
                prof.stop()
        return result

    return hooked


def _hook_session(prof: StepProfiler, method: Callable) -> Callable:
    @functools.wraps(method)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        prof.start()
        try:
            return method(*args, **kwargs)
        finally:
            prof.stop()

    return hooked


def _attach(obj: Any, options: _Options) -> Any:
    """Give an instance a :class:`StepProfiler` and hook its step methods, in place."""
    hooks = options.class_hooks if options.class_hooks is not None else _default_hooks(obj)
    missing = [h for h in hooks if not callable(getattr(obj, h, None))]
    if missing:
        raise ConfigError(f"{type(obj).__name__} has no method(s) {missing} to profile (class_hooks)")
    if not hooks:
        raise ConfigError(f"{type(obj).__name__} has no method to profile: pass class_hooks=[...]")
    existing = getattr(obj, "profiler", None)
    if isinstance(existing, StepProfiler):
        existing.stop()  # re-decorating: the new settings win
        for name in hooks:  # unwrap our previous hooks before wrapping again
            inner = getattr(obj, name)
            if getattr(inner, "__sbprof_hook__", False):
                setattr(obj, name, inner.__wrapped__)
        for name in BRAIN_SESSION_HOOKS:
            inner = getattr(obj, name, None)
            if getattr(inner, "__sbprof_hook__", False):
                setattr(obj, name, inner.__wrapped__)
    inherit = existing if isinstance(existing, tprof.profile) and not isinstance(existing, StepProfiler) else None
    if inherit is not None:
        logger.info("replacing the Brain's own --profile_training profiler; training will not be cut short")
    prof = options.new_profiler(inherit=inherit)
    brain = _is_brain(obj)
    # Without a schedule, a profiler is active only inside hooked calls. With one,
    # it runs from the first step until results are read, as the schedule wants.
    per_call_session = not brain and not prof.has_schedule
    for name in hooks:
        hooked = _hook_step(prof, getattr(obj, name), name, session=per_call_session)
        hooked.__sbprof_hook__ = True
        setattr(obj, name, hooked)
    if brain:
        for name in BRAIN_SESSION_HOOKS:
            hooked = _hook_session(prof, getattr(obj, name))
            hooked.__sbprof_hook__ = True
            setattr(obj, name, hooked)
        # SpeechBrain's loop ends the process once step_num > tot_prof_steps.
        obj.tot_prof_steps = math.inf
    obj.profiler = prof
    return obj


def _profile_class(cls: type, options: _Options) -> type:
    pending = _pending(cls)
    for key, value in pending.items():
        setattr(options, key, value)
    original_init = cls.__init__

    @functools.wraps(original_init)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        _attach(self, getattr(type(self), _OPTIONS_ATTR))

    # A subclass keeps the user's class untouched (other instances stay unprofiled).
    profiled = type(cls.__name__, (cls,), {"__init__": __init__, "__doc__": cls.__doc__,
                                           "__module__": cls.__module__, "__qualname__": cls.__qualname__})
    setattr(profiled, _OPTIONS_ATTR, options)
    return profiled


def _apply(target: Any, options: _Options) -> Any:
    if isinstance(target, type):
        return _profile_class(target, options)
    if _is_brain(target) or _is_pretrained(target) or isinstance(target, torch.nn.Module):
        return _attach(target, options)
    if callable(target):
        if hasattr(target, _OPTIONS_ATTR):  # already profiled: stacking profile decorators
            raise ConfigError(f"{getattr(target, '__name__', target)!r} is already decorated with a profiler")
        return _profile_function(target, options)
    raise ConfigError(
        f"cannot profile a {type(target).__name__}: decorate a function, a class, a SpeechBrain Brain "
        "or pretrained interface, or a torch.nn.Module"
    )


def profile(
    func: Any = None,
    class_hooks: Optional[Iterable[str]] = None,
    activities: Optional[Iterable[tprof.ProfilerActivity]] = None,
    schedule: Optional[Callable[[int], tprof.ProfilerAction]] = None,
    on_trace_ready: Optional[Callable[..., Any]] = None,
    record_shapes: bool = False,
    profile_memory: bool = False,
    with_stack: bool = False,
    with_flops: bool = False,
    with_modules: bool = False,
) -> Any:
    """Profile a function, class, ``Brain`` or pretrained interface with ``torch.profiler``.

    Used bare (``@profile``) or with arguments (``@profile(record_shapes=True)``);
    the arguments are those of ``torch.profiler.profile``. By default every
    PyTorch operator is recorded (no shapes, stacks, memory or FLOPs), which
    costs time on steps made of many small operators (``benchmarks/overhead.py``
    measures it). ``activities=()`` is the lightest mode: no operator is
    recorded, each hooked step is only timed (``profiler.step_wall_s``,
    ``profiler.measurement(name)``), device-synchronised on CUDA.

    Arguments
    ---------
    func : callable, class or instance
        What to profile (see the module docstring); ``None`` returns a decorator.
    class_hooks : list of str
        Methods whose every call is one profiler step (default by kind of object).
    activities, schedule, on_trace_ready, record_shapes, profile_memory,
    with_stack, with_flops, with_modules
        Passed to ``torch.profiler.profile``.

    Returns
    -------
    The wrapped function, the profiled subclass, or the instance itself.

    Example
    -------
    >>> import torch
    >>> @profile
    ... def run(x):
    ...     (x ** 2).sum().backward()
    >>> prof = run(torch.randn(3, requires_grad=True))
    >>> prof is run.profiler and len(prof.key_averages()) > 0
    True
    """
    options = _Options(class_hooks, activities, schedule, on_trace_ready, record_shapes,
                       profile_memory, with_stack, with_flops, with_modules)
    if func is None:
        return lambda target: _apply(target, options)
    return _apply(func, options)


def profile_optimiser(func: Any = None, class_hooks: Optional[Iterable[str]] = None,
                      **schedule_args: int) -> Any:
    """Scheduled profile of steady-state steps, with low overhead (no shapes, stacks or FLOPs).

    The schedule skips ``wait`` steps, records but discards ``warmup`` steps,
    then records ``active`` steps, ``repeat`` times (defaults 1, 2, 5, 1: step
    8 ends the first cycle). Memory is tracked. Export traces by stacking
    ``@export`` or passing ``on_trace_ready``. Code that steps by itself (a
    decorated function) calls ``sbprof.step()`` once per step.

    Example
    -------
    >>> import torch
    >>> @profile_optimiser(wait=0, warmup=1, active=2)
    ... def loop(x):
    ...     for _ in range(4):
    ...         (x @ x).sum()
    ...         step()
    >>> prof = loop(torch.randn(8, 8))
    >>> prof.step_num
    4
    """
    return _scheduled(func, class_hooks, schedule_args, detailed=False)


def profile_analyst(func: Any = None, class_hooks: Optional[Iterable[str]] = None,
                    **schedule_args: int) -> Any:
    """Scheduled, fully detailed profile: shapes, stacks, memory, FLOPs and modules.

    Same schedule as :func:`profile_optimiser`. Its overhead is large (stacks
    and shapes are recorded for every operator: see ``benchmarks/overhead.py``
    for the measured ratio); use it to understand a step, not to time it.

    Example
    -------
    >>> import torch
    >>> @profile_analyst(wait=0, warmup=0, active=1)
    ... def mm(x):
    ...     x @ x
    ...     step()
    >>> prof = mm(torch.randn(16, 16))
    >>> sum(e.flops for e in prof.key_averages()) > 0
    True
    """
    return _scheduled(func, class_hooks, schedule_args, detailed=True)


def _scheduled(func: Any, class_hooks: Optional[Iterable[str]], schedule_args: Dict[str, int],
               detailed: bool) -> Any:
    """The optimiser (``detailed=False``) or analyst profile: memory always, detail on demand."""
    options = _Options(class_hooks, None, schedule(**schedule_args), None, record_shapes=detailed,
                       profile_memory=True, with_stack=detailed, with_flops=detailed, with_modules=False)
    if func is None:
        return lambda target: _apply(target, options)
    return _apply(func, options)


_ACTIVE: List[StepProfiler] = []


def step() -> None:
    """Step the profiler of the innermost running decorated function (no-op if none)."""
    if _ACTIVE:
        _ACTIVE[-1].step()


def _set_option(target: Any, key: str, value: Any) -> Any:
    """Put a schedule/trace handler on a profiled object, or leave it for a later ``@profile``."""
    options = getattr(target, _OPTIONS_ATTR, None)
    if options is not None:  # a profiled function or class
        setattr(options, key, value)
        return target
    prof = getattr(target, "profiler", None)
    if isinstance(prof, StepProfiler):  # a profiled instance: rebuild its profiler
        old = prof
        current = {"schedule": old.schedule if old.record_steps else None, "on_trace_ready": old.on_trace_ready}
        current[key] = value
        opts = _Options(None, None, current["schedule"], current["on_trace_ready"],
                        old.record_shapes, old.profile_memory, old.with_stack, old.with_flops, old.with_modules)
        hooks = [name for name in dir(target) if getattr(getattr(target, name, None), "__sbprof_hook__", False)
                 and name not in BRAIN_SESSION_HOOKS]
        opts.class_hooks = tuple(hooks) or None
        return _attach(target, opts)
    if callable(target):  # decorated before @profile: remember for it
        pending = _pending(target)
        pending[key] = value
        target.__sbprof_pending__ = pending
        return target
    raise ConfigError(f"cannot set a profiler {key} on a {type(target).__name__}")


class _Schedule:
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
        return _set_option(target, "schedule", self)

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
    sched = _Schedule(wait, warmup, active, repeat, skip_first)
    return sched if func is None else sched(func)


class _TraceExport:
    """A trace handler (``on_trace_ready``) that is also a decorator (``@export(...)``)."""

    def __init__(self, dir_name: str, worker_name: Optional[str], use_gzip: bool):
        self.dir_name = dir_name
        self._handler = tprof.tensorboard_trace_handler(dir_name=dir_name, worker_name=worker_name,
                                                        use_gzip=use_gzip)

    def __call__(self, target: Any) -> Any:
        if isinstance(target, tprof.profile):
            return self._handler(target)
        return _set_option(target, "on_trace_ready", self)

    def __repr__(self) -> str:
        return f"export(dir_name={self.dir_name!r})"


def export(func: Any = None, dir_name: str = "./log/", worker_name: Optional[str] = None,
           use_gzip: bool = False) -> Any:
    """Export each finished trace for TensorBoard's profiler plugin / Perfetto.

    Usable like :func:`schedule`: ``profile(on_trace_ready=export(dir_name=...))``,
    stacked as ``@export`` / ``@export(dir_name=...)``, or on a profiled instance.
    Files are ``<worker>.<ns>.pt.trace.json`` in ``dir_name``.
    """
    handler = _TraceExport(dir_name, worker_name, use_gzip)
    return handler if func is None else handler(func)


def _events_of(source: Any) -> EventList:
    if isinstance(source, EventList):
        return source
    if isinstance(source, tprof.profile):
        return source.events()
    prof = getattr(source, "profiler", None)
    if isinstance(prof, tprof.profile):
        return prof.events()
    if isinstance(source, Sequence):
        return EventList(list(source))
    raise ConfigError(
        f"expected a torch profiler, an EventList, or an object with a .profiler; got {type(source).__name__}"
    )


class TimeReport(NamedTuple):
    """Total self time of all profiled operators, in microseconds (torch.profiler's unit)."""

    cpu_us: float
    cuda_us: float


class MemoryReport(NamedTuple):
    """Peak of net bytes allocated through PyTorch's allocators since profiling began."""

    cpu_bytes: int
    cuda_bytes: int


def report_time(events: Any, verbose: bool = False) -> TimeReport:
    """Sum of operator self times (CPU and CUDA) of a finished profile.

    Self times do not double-count nested operators, so the CPU figure is the
    time the host spent inside PyTorch operators. Needs a profile with
    ``profile_memory`` or not, any activities.

    Example
    -------
    >>> import torch
    >>> @profile
    ... def run():
    ...     torch.randn(64, 64) @ torch.randn(64, 64)
    >>> report_time(run()).cpu_us > 0
    True
    """
    evs = _events_of(events)
    cpu = float(sum(e.self_cpu_time_total for e in evs))
    cuda = float(sum(getattr(e, "self_device_time_total", 0.0) for e in evs))
    if verbose:
        print(f"Self CPU time total: {cpu / 1e3:.3f} ms")
        if cuda > 0:
            print(f"Self CUDA time total: {cuda / 1e3:.3f} ms")
    return TimeReport(cpu, cuda)


def report_memory(handler: Any, verbose: bool = False) -> MemoryReport:
    """Peak CPU and CUDA memory allocated through PyTorch during a profile.

    Replays every allocation and free recorded by a profile made with
    ``profile_memory=True`` in time order and returns the highest running
    total. It sees only PyTorch's allocators (not other libraries').

    Example
    -------
    >>> import torch
    >>> @profile(profile_memory=True)
    ... def run():
    ...     x = torch.ones(2**20)  # 4 MiB
    ...     del x
    >>> report_memory(run()).cpu_bytes >= 4 * 2**20
    True
    """
    evs = _events_of(handler)
    if evs and not getattr(evs, "_profile_memory", True):
        raise MeasurementError("report_memory needs a profile made with profile_memory=True")
    changes = sorted(
        ((e.time_range.start, e.self_cpu_memory_usage, getattr(e, "self_device_memory_usage", 0)) for e in evs),
        key=lambda c: c[0],
    )
    cpu = cuda = peak_cpu = peak_cuda = 0
    for _, dc, dg in changes:
        cpu += dc
        cuda += dg
        peak_cpu = max(peak_cpu, cpu)
        peak_cuda = max(peak_cuda, cuda)
    if verbose:
        print(f"Peak CPU Mem: {peak_cpu / 2**20:.2f} MiB")
        if peak_cuda > 0:
            print(f"Peak CUDA Mem: {peak_cuda / 2**20:.2f} MiB")
    return MemoryReport(int(peak_cpu), int(peak_cuda))


def events_diff(a: Any, b: Any, filter_by: str = "count") -> tuple:
    """Operators whose ``filter_by`` figure differs between two profiles.

    Aggregates both profiles by operator (``key_averages``) and drops the
    operators present in both with an equal value (default: call count), so
    what is left shows where two implementations differ.

    Example
    -------
    >>> import torch
    >>> @profile
    ... def f(x):
    ...     x.relu()
    >>> @profile
    ... def g(x):
    ...     x.relu().sigmoid()
    >>> x = torch.randn(4)
    >>> only_f, only_g = events_diff(f(x), g(x))
    >>> [e.key for e in only_g]
    ['aten::sigmoid']
    """
    aa = deepcopy(_events_of(a).key_averages())
    bb = deepcopy(_events_of(b).key_averages())
    if aa and not hasattr(aa[0], filter_by):
        raise ConfigError(f"events have no field {filter_by!r} to compare")
    va = {e.key: getattr(e, filter_by) for e in aa}
    vb = {e.key: getattr(e, filter_by) for e in bb}
    same = {k for k in va if k in vb and va[k] == vb[k]}
    return (EventList([e for e in aa if e.key not in same]), EventList([e for e in bb if e.key not in same]))
