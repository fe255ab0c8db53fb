"""What can be profiled and how: functions, classes, and instances hooked in place.

- A function: each call is one step. Without a schedule each call runs under
  a fresh profiler (``function.profiler``); with one, repeated calls are the
  steps of one profiler that lives across calls. Under torchrun an
  unscheduled function also keeps one profiler and one recording across
  calls (until its results are read or the rank file closes): starting and
  stopping torch's profiler around every call would put that cost between
  the steps, where it would read as the user's data loading. (Torch
  records one session per process: when another profiler starts
  recording, a kept one is ended first and its next call starts anew.)
- Calls from several threads at once run one after the other (a lock per
  profiled function or instance, as :func:`sbprof.measure` has): the steps
  of one profiler never overlap. Torch's profiler records only the thread
  that started it, so a profiler's steps are the calls of one thread, its
  first caller's: a call from another thread runs unprofiled, is no step,
  and is said once (a warning) and counted (``other_thread_calls``).
- An instance (``Brain``, pretrained interface, ``nn.Module``): its step
  methods are wrapped in place, each call one step; nested hooked calls
  (``transcribe_batch`` calling ``encode_batch``) count once.
- A class: a same-named subclass whose instances are hooked at ``__init__``.

Under torchrun (``RANK`` and ``WORLD_SIZE`` set), each profiled target also
writes its steps to this rank's file (:mod:`sbprof.distributed.recorder`).

With ``modules=``, each selected step is also a step of a
:class:`~sbprof.measuring.modules.ModuleAttribution` (``profiler.modules``), whose hooks
are installed at the first step and removed when the session ends (``fit`` /
``evaluate`` on a Brain, each call otherwise).

On a ``Brain`` the steps are named by stage: ``fit_batch`` is ``train``,
``evaluate_batch`` is ``valid`` or ``test``; ``fit``/``evaluate`` bracket a
session. A session profiles its own stages only (``fit``: ``train`` and
``valid``; ``evaluate``: ``test``): an ``evaluate()`` called inside ``fit``
(say at an epoch's end) is part of fit's session, its batches are not steps
and do not advance the training schedule. SpeechBrain 1.x drives
``brain.profiler`` itself (``start`` per epoch, ``step`` per training batch,
and it ends the process once ``step_num > tot_prof_steps``); hooks take the
steps, so its ``step`` calls are ignored and ``tot_prof_steps`` is set to
infinity.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import math
import threading
from typing import Any, Callable, ContextManager, List, Optional, Tuple

import torch
from torch import profiler as tprof

from sbprof.decorators.options import Options
from sbprof.decorators.stage_schedule import BRAIN_STAGES
from sbprof.decorators.step_profiler import StepProfiler
from sbprof.distributed.recorder import new_section
from sbprof.base.errors import ConfigError
from sbprof.measuring.modules.attribution import ModuleAttribution
from sbprof.models.batches import batch_size_and_audio, brain_sample_rate

logger = logging.getLogger(__name__)

BRAIN_STEP_HOOKS = ("fit_batch", "evaluate_batch")
BRAIN_SESSION_HOOKS = ("fit", "evaluate")
SESSION_STAGES = {"fit": ("train", "valid"), "evaluate": ("test",)}  # the stages each session runs itself
PRETRAINED_STEP_HOOKS = (
    "transcribe_batch", "encode_batch", "classify_batch", "verify_batch", "separate_batch",
    "enhance_batch", "decode_batch", "get_speech_prob_chunk", "estimate_batch",
)
OPTIONS_ATTR = "__sbprof_options__"
HOOK_ATTR = "__sbprof_hook__"

NEEDS_ATTRIBUTION = ("modules= on {kind} needs a ready sbprof.measuring.modules.ModuleAttribution(model, ...): it has no "
                     "modules of its own to select from")

# The profilers of the decorated functions now running, innermost last (for sbprof.step()).
ACTIVE: List[StepProfiler] = []


def is_brain(obj: Any) -> bool:
    try:
        from speechbrain.core import Brain
    except ImportError:  # speechbrain is optional for plain functions
        return False
    return isinstance(obj, Brain) or (isinstance(obj, type) and issubclass(obj, Brain))


def is_pretrained(obj: Any) -> bool:
    return hasattr(obj, "HPARAMS_NEEDED") and hasattr(obj, "MODULES_NEEDED")


def pending_options(target: Any) -> dict:
    """Options that ``@schedule``/``@export`` left on a function decorated before ``@profile``."""
    return dict(getattr(target, "__sbprof_pending__", {}))


def module_step(prof: StepProfiler, step: str) -> ContextManager[None]:
    """The attribution step of a profiled step (hooks installed at the first one), or nothing."""
    attribution = getattr(prof, "modules", None)
    if attribution is None or not prof.selects(step):
        return contextlib.nullcontext()
    if not attribution.active:
        attribution.__enter__()
    return attribution.step(step)


def close_modules(prof: Any) -> None:
    """Remove the attribution hooks of a profiler's session (results stay readable)."""
    attribution = getattr(prof, "modules", None)
    if attribution is not None:
        attribution.close()


def make_attribution(obj: Any, options: Options, prof: StepProfiler) -> Optional[ModuleAttribution]:
    """The attribution ``modules=`` asks for on ``obj``: light without operator recording, detailed with it."""
    if options.modules is None or isinstance(options.modules, ModuleAttribution):
        return options.modules
    optimizers: Any = ()
    if is_brain(obj):
        root = obj.modules
        optimizers = lambda: list((getattr(obj, "optimizers_dict", None) or {}).values())  # noqa: E731
    elif is_pretrained(obj):
        root = obj.mods
    elif isinstance(obj, torch.nn.Module):
        root = obj
    else:
        raise ConfigError(NEEDS_ATTRIBUTION.format(kind=f"a {type(obj).__name__}"))
    return ModuleAttribution(root, options.modules, mode="light" if prof.timing_only else "detailed",
                             optimizers=optimizers)


def _refuse_deferred_body(func: Callable) -> None:
    """Refuse functions whose call returns before their body runs: the step would be empty."""
    kind = ("a generator function" if inspect.isgeneratorfunction(func)
            else "an async generator function" if inspect.isasyncgenfunction(func)
            else "a coroutine function (async def)" if inspect.iscoroutinefunction(func) else None)
    if kind is not None:
        raise ConfigError(
            f"cannot profile {getattr(func, '__qualname__', func)!r}: it is {kind}, so a call only creates "
            "the generator or coroutine and its body runs later, outside the call (the step would hold "
            "nothing). Decorate the plain function that does the work of one item, or profile the loop "
            "that consumes it (a decorated function calling sbprof.step() once per item)")


def profile_function(func: Callable, options: Options) -> Callable:
    """Wrap a function so each call is one profiled step (see the module docstring)."""
    _refuse_deferred_body(func)
    for key, value in pending_options(func).items():
        setattr(options, key, value)
    step_name = getattr(func, "__name__", "call")
    made_with: List[int] = [-1]  # the options version the current profiler was made with
    section = new_section(step_name, options.rank_folder)  # under torchrun: this function's part of the rank file
    if options.modules is not None and not isinstance(options.modules, ModuleAttribution):
        raise ConfigError(NEEDS_ATTRIBUTION.format(kind="a function"))

    lock = threading.RLock()  # several threads: one call at a time (a recursive call is a nested step)
    # Under torchrun, one recording across calls even without a schedule (see the module docstring).
    keep_session = section is not None

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return call(*args, **kwargs)

    def call(*args: Any, **kwargs: Any) -> Any:
        opts: Options = getattr(wrapper, OPTIONS_ATTR)
        prof = wrapper.profiler
        # Scheduled: one profiler for every call, unless the options changed since it was made.
        reuse = opts.schedule is not None or keep_session
        if not reuse or prof is None or made_with[0] != opts.version:
            prof = opts.new_profiler()
            prof.modules = opts.modules
            prof.keep_open = keep_session and not prof.has_schedule
            made_with[0] = opts.version
            if section is not None:
                section.attach(prof)
        wrapper.profiler = prof  # visible inside the call, for sbprof.step()
        if prof.from_other_thread():
            result = func(*args, **kwargs)
            return prof if result is None else result
        ACTIVE.append(prof)
        try:
            prof.start()
            with prof.profiled_step(step_name), module_step(prof, step_name):
                result = func(*args, **kwargs)
        finally:
            ACTIVE.pop()
            if not prof.has_schedule and not keep_session:
                prof.stop()
                close_modules(prof)
        return prof if result is None else result

    setattr(wrapper, OPTIONS_ATTR, options)
    wrapper.profiler = None
    return wrapper


def default_hooks(obj: Any) -> Tuple[str, ...]:
    if is_brain(obj):
        return BRAIN_STEP_HOOKS
    if is_pretrained(obj):
        return tuple(h for h in PRETRAINED_STEP_HOOKS if hasattr(obj, h))
    if isinstance(obj, torch.nn.Module):
        return ("forward",)
    return ("__call__",) if callable(obj) else ()


def _brain_step(name: str, args: tuple, kwargs: dict) -> str:
    """A Brain hook's step name: its stage for the batch methods, else the method name."""
    if name == "fit_batch":
        return "train"
    if name == "evaluate_batch":
        stage = kwargs.get("stage", args[1] if len(args) > 1 else None)
        return getattr(stage, "name", str(stage)).lower()
    return name


def _batch(method: Callable, args: tuple) -> Tuple[Optional[int], Optional[float]]:
    """Utterances in a Brain batch (``PaddedBatch.batchsize``) and its seconds of audio, when the batch says."""
    if not args:
        return None, None
    size = getattr(args[0], "batchsize", None)
    _, audio_s = batch_size_and_audio(args[0], brain_sample_rate(getattr(method, "__self__", None)))
    return (size if isinstance(size, int) and not isinstance(size, bool) else None), audio_s


def _hook_step(prof: StepProfiler, method: Callable, name: str, session: bool, brain: bool,
               sessions: List[str]) -> Callable:
    @functools.wraps(method)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        with prof.lock:  # several threads: one step at a time
            return step_call(*args, **kwargs)

    def step_call(*args: Any, **kwargs: Any) -> Any:
        if prof.hook_depth > 0 or prof.from_other_thread():  # a hooked call inside another counts once
            return method(*args, **kwargs)
        step = _brain_step(name, args, kwargs) if brain else name
        if sessions and step in BRAIN_STAGES and step not in SESSION_STAGES[sessions[0]]:
            return method(*args, **kwargs)  # e.g. evaluate() inside fit: not a step of fit's session
        prof.hook_depth += 1
        prof.start()
        prof.step_items, prof.step_audio_s = _batch(method, args) if brain else (None, None)
        try:
            with prof.profiled_step(step), module_step(prof, step):
                return method(*args, **kwargs)
        finally:
            prof.hook_depth -= 1
            if session:
                prof.stop()
                close_modules(prof)

    setattr(hooked, HOOK_ATTR, True)
    return hooked


def _hook_session(prof: StepProfiler, method: Callable, name: str, sessions: List[str]) -> Callable:
    """``fit``/``evaluate``: the outermost one runs the session, a nested one is part of it."""
    @functools.wraps(method)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        sessions.append(name)
        if len(sessions) == 1:
            prof.start()
        try:
            return method(*args, **kwargs)
        finally:
            sessions.pop()
            if not sessions:
                prof.stop()
                close_modules(prof)

    setattr(hooked, HOOK_ATTR, True)
    return hooked


def _unhook(obj: Any, names: Tuple[str, ...]) -> None:
    for name in names:
        inner = getattr(obj, name, None)
        if getattr(inner, HOOK_ATTR, False):
            setattr(obj, name, inner.__wrapped__)


def hooked_methods(obj: Any) -> Tuple[str, ...]:
    """Names of the step methods sbprof hooked on ``obj``."""
    return tuple(name for name in dir(obj) if getattr(getattr(obj, name, None), HOOK_ATTR, False)
                 and name not in BRAIN_SESSION_HOOKS)


def attach(obj: Any, options: Options) -> Any:
    """Give an instance a :class:`StepProfiler` and hook its step methods, in place."""
    hooks = options.class_hooks if options.class_hooks is not None else default_hooks(obj)
    missing = [h for h in hooks if not callable(getattr(obj, h, None))]
    if missing:
        raise ConfigError(f"{type(obj).__name__} has no method(s) {missing} to profile (class_hooks)")
    if not hooks:
        raise ConfigError(f"{type(obj).__name__} has no method to profile: pass class_hooks=[...]")
    brain = is_brain(obj)
    if options.stages is not None and not brain:
        raise ConfigError(f"stages= selects a SpeechBrain Brain's stages; {type(obj).__name__} is not a Brain")
    existing = getattr(obj, "profiler", None)
    if isinstance(existing, StepProfiler):  # re-decorating: the new settings win
        existing.stop()
        close_modules(existing)
        _unhook(obj, tuple(hooks) + BRAIN_SESSION_HOOKS)
    inherit = existing if isinstance(existing, tprof.profile) and not isinstance(existing, StepProfiler) else None
    if inherit is not None:
        logger.info("replacing the Brain's own --profile_training profiler; training will not be cut short")
    prof = options.new_profiler(inherit=inherit, brain=brain)
    prof.owns_steps = True
    prof.modules = make_attribution(obj, options, prof)
    section = existing.rank_section if isinstance(existing, StepProfiler) else None
    section = section or new_section(type(obj).__name__, options.rank_folder)
    if section is not None:  # under torchrun: this object's part of the rank file
        section.attach(prof)
    # Without a schedule, a profiler is active only inside hooked calls. With one,
    # it runs from the first step until results are read, as the schedule wants.
    per_call_session = not brain and not prof.has_schedule
    sessions: List[str] = []  # the Brain's fit/evaluate calls now running, outermost first
    for name in hooks:
        setattr(obj, name, _hook_step(prof, getattr(obj, name), name, per_call_session, brain, sessions))
    if brain:
        for name in BRAIN_SESSION_HOOKS:
            setattr(obj, name, _hook_session(prof, getattr(obj, name), name, sessions))
        obj.tot_prof_steps = math.inf
    obj.profiler = prof
    return obj


def profile_class(cls: type, options: Options) -> type:
    """A same-named subclass whose instances are profiled (the user's class stays untouched)."""
    for key, value in pending_options(cls).items():
        setattr(options, key, value)
    original_init = cls.__init__

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        attach(self, getattr(type(self), OPTIONS_ATTR))

    profiled = type(cls.__name__, (cls,), {"__init__": __init__, "__doc__": cls.__doc__,
                                           "__module__": cls.__module__, "__qualname__": cls.__qualname__})
    setattr(profiled, OPTIONS_ATTR, options)
    return profiled


def apply(target: Any, options: Options) -> Any:
    """Profile ``target`` (a class, an instance or a function) with ``options``."""
    if isinstance(target, type):
        return profile_class(target, options)
    if is_brain(target) or is_pretrained(target) or isinstance(target, torch.nn.Module):
        return attach(target, options)
    if callable(target):
        if hasattr(target, OPTIONS_ATTR):  # already profiled: stacking profile decorators
            raise ConfigError(f"{getattr(target, '__name__', target)!r} is already decorated with a profiler")
        if options.stages is not None:
            raise ConfigError("stages= selects a SpeechBrain Brain's stages; a function has none")
        return profile_function(target, options)
    raise ConfigError(
        f"cannot profile a {type(target).__name__}: decorate a function, a class, a SpeechBrain Brain "
        "or pretrained interface, or a torch.nn.Module"
    )


def current_profiler() -> Optional[StepProfiler]:
    """The profiler of the innermost decorated function now running, if any."""
    return ACTIVE[-1] if ACTIVE else None
