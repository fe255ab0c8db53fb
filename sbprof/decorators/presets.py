"""``profile``, ``profile_optimiser`` and ``profile_analyst``: the SpeechBrain-style entry points."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Optional

from torch import profiler as tprof

from sbprof.decorators.options import Options
from sbprof.decorators.schedule import schedule
from sbprof.decorators.targets import apply
from sbprof.base.errors import ConfigError

# ``@profile(...)`` (arguments, no target) returns a decorator; an explicit
# ``profile(None)`` is a mistake (a target that is unset), not that form.
_NO_TARGET: Any = object()


def _decorate(func: Any, options: Options, name: str) -> Any:
    """``options`` applied to ``func``, or the decorator that will apply them."""
    if func is _NO_TARGET:
        return lambda target: _decorate(target, options, name)
    if func is None:
        raise ConfigError(f"{name}(None): nothing to profile. Pass a function, class, Brain, pretrained "
                          f"interface or module, or use @{name} / @{name}(...) as a decorator")
    return apply(func, options)


def profile(
    func: Any = _NO_TARGET,
    class_hooks: Optional[Iterable[str]] = None,
    stages: Optional[Iterable[str]] = None,
    activities: Optional[Iterable[tprof.ProfilerActivity]] = None,
    schedule: Optional[Callable[[int], tprof.ProfilerAction]] = None,
    on_trace_ready: Optional[Callable[..., Any]] = None,
    record_shapes: bool = False,
    profile_memory: bool = False,
    with_stack: bool = False,
    with_flops: bool = False,
    with_modules: bool = False,
    modules: Any = None,
    rank_folder: Optional[str] = None,
) -> Any:
    """Profile a function, class, ``Brain`` or pretrained interface with ``torch.profiler``.

    Used bare (``@profile``) or with arguments (``@profile(record_shapes=True)``);
    the arguments are those of ``torch.profiler.profile``. By default every
    PyTorch operator is recorded (no shapes, stacks, memory or FLOPs), which
    costs time on steps made of many small operators (``benchmarks/overhead.py``
    measures it). ``activities=()`` is the lightest mode: no operator is
    recorded, each step is only timed (``profiler.step_wall_s``,
    ``profiler.measurement(name)``), device-synchronised on CUDA.

    Arguments
    ---------
    func : callable, class or instance
        What to profile (see :mod:`sbprof.decorators.targets`); left out, a
        decorator is returned (``@profile(...)``). Generator and ``async``
        functions are refused (their body runs after the call returns).
    class_hooks : list of str
        Methods whose every call is one profiler step (default by kind of object).
    stages : list of str
        On a ``Brain``, the stages whose batches are profiled, from ``train``,
        ``valid``, ``test``; default ``train`` and ``test``: ``fit`` profiles
        its training batches (not its validation), ``evaluate`` its batches.
    activities, schedule, on_trace_ready, record_shapes, profile_memory,
    with_stack, with_flops, with_modules
        Passed to ``torch.profiler.profile``.
    modules : selection or ModuleAttribution
        Per-module attribution of each step (:mod:`sbprof.measuring.modules`): a
        selection (``"default"``, name globs, classes) of the modules of a
        decorated Brain (``brain.modules``), module or pretrained interface
        (``mods``), or, for a function, a ready
        :class:`~sbprof.measuring.modules.ModuleAttribution`. Light mode (clocks only)
        with ``activities=()``, detailed mode (``record_function`` labels in
        the profile) otherwise. Read it from ``profiler.modules.breakdown(step)``.

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
    >>> prof is run.profiler and "aten::pow" in {e.key for e in prof.key_averages()}
    True
    """
    options = Options(class_hooks, stages, activities, schedule, on_trace_ready, record_shapes,
                      profile_memory, with_stack, with_flops, with_modules, modules, rank_folder)
    return _decorate(func, options, "profile")


def _scheduled(func: Any, class_hooks: Optional[Iterable[str]], stages: Optional[Iterable[str]],
               schedule_args: Dict[str, int], detailed: bool, modules: Any, rank_folder: Optional[str]) -> Any:
    """The optimiser (``detailed=False``) or analyst profile: memory always, detail on demand."""
    options = Options(class_hooks, stages, None, schedule(**schedule_args), None, record_shapes=detailed,
                      profile_memory=True, with_stack=detailed, with_flops=detailed, with_modules=False,
                      modules=modules, rank_folder=rank_folder)
    return _decorate(func, options, "profile_analyst" if detailed else "profile_optimiser")


def profile_optimiser(func: Any = _NO_TARGET, class_hooks: Optional[Iterable[str]] = None,
                      stages: Optional[Iterable[str]] = None, modules: Any = None, rank_folder: Optional[str] = None,
                      **schedule_args: int) -> Any:
    """Scheduled profile of steady-state steps, with low overhead (no shapes, stacks or FLOPs).

    The schedule skips ``wait`` steps, records but discards ``warmup`` steps,
    then records ``active`` steps, ``repeat`` times (defaults 1, 2, 5, 1: step
    8 ends the first cycle). Memory is tracked. On a decorated function, each
    call is one step and repeated calls share one profiler; a function that
    loops by itself calls ``sbprof.step()`` once per iteration instead.
    Under torchrun each rank writes its own file (``rank_folder``: see :func:`profile`).

    Example
    -------
    >>> import torch
    >>> @profile_optimiser(wait=1, warmup=1, active=2)
    ... def infer(x):
    ...     return (x @ x).sum()
    >>> for _ in range(5):
    ...     _ = infer(torch.randn(8, 8))
    >>> infer.profiler.step_num, infer.profiler.recorded_steps
    (5, 2)
    """
    return _scheduled(func, class_hooks, stages, schedule_args, detailed=False, modules=modules,
                      rank_folder=rank_folder)


def profile_analyst(func: Any = _NO_TARGET, class_hooks: Optional[Iterable[str]] = None,
                    stages: Optional[Iterable[str]] = None, modules: Any = None, rank_folder: Optional[str] = None,
                    **schedule_args: int) -> Any:
    """Scheduled, fully detailed profile: shapes, stacks, memory and FLOPs.

    Same schedule as :func:`profile_optimiser`. Its overhead is large (stacks
    and shapes are recorded for every operator: see ``benchmarks/overhead.py``
    for the measured ratio); use it to understand a step, not to time it.

    Example
    -------
    >>> import torch
    >>> from sbprof import step
    >>> @profile_analyst(wait=0, warmup=1, active=1)
    ... def mm(x):
    ...     for _ in range(2):
    ...         x @ x
    ...         step()
    >>> prof = mm(torch.randn(16, 16))
    >>> sum(e.flops for e in prof.key_averages()) == 2 * 16 ** 3
    True
    """
    return _scheduled(func, class_hooks, stages, schedule_args, detailed=True, modules=modules,
                      rank_folder=rank_folder)
