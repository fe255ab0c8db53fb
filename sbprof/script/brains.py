"""How ``sbprof run`` follows a ``speechbrain.core.Brain`` it did not write.

Every instance, once built, has its ``fit_batch`` and ``evaluate_batch`` (the
subclass's own, when it overrides them) wrapped: each call is a step of its
stage (``train``, ``valid``, ``test``). Each Brain is its own section: the
stages of the second Brain that runs a step are ``brain2.train``,
``brain2.valid``... A test stage knows its batches (the length of the loader
``evaluate`` iterates) before its first step, so a short one gets a smaller
warm-up (:func:`sbprof.script.lifecycle.stage_plan`).

Unless ``--continue``, the Brain runs in SpeechBrain's own debug mode: each
stage stops after the steps of its plan (``debug_batches``), its checkpointer
writes to a temporary folder (the recipe's own checkpoints are left as they
were), and ``fit`` runs as many epochs as its stages' steps need (a recipe with
one batch per epoch runs one epoch per step, past its own epoch count if need
be); the script stops when ``evaluate`` returns (the test stage is a recipe's
last), or ends after ``fit``.
"""
from __future__ import annotations

import dataclasses
import functools
import threading
from typing import Any, Callable, Iterator, List

from sbprof.models.batches import batch_size_and_audio, brain_sample_rate
from sbprof.script.lifecycle import stage_plan
from sbprof.script.session import StopRun

BRAIN_METHODS = ("fit_batch", "evaluate_batch")


def patch_brain(hooks: Any, brain_class: type) -> None:
    """Hook ``brain_class.__init__`` (undone by ``hooks.remove()``)."""
    hooks._patch(brain_class, "__init__", _brain_init(hooks, brain_class.__init__))


def _debug_run_opts(run_opts: Any, steps: int) -> Any:
    """The script's run options with SpeechBrain's debug mode on for ``steps`` batches a stage. SpeechBrain >= 1.1
    passes a frozen ``RunOptions`` whose ``overridden_args`` are the command line's: a copy keeps them, so that
    run options set in the hparams file still win over the defaults (a plain dict marks every key overridden)."""
    debug = {"debug": True, "debug_batches": steps, "debug_epochs": 1}
    if dataclasses.is_dataclass(run_opts) and hasattr(run_opts, "overridden_args"):
        return dataclasses.replace(run_opts, **debug, overridden_args={*run_opts.overridden_args, *debug})
    return {**(run_opts or {}), **debug}


def _brain_init(hooks: Any, init: Callable) -> Callable:
    session = hooks.session

    @functools.wraps(init)
    def brain_init(brain: Any, modules: Any = None, opt_class: Any = None, hparams: Any = None,
                   run_opts: Any = None, checkpointer: Any = None) -> None:
        if not session.keep_going:
            steps = stage_plan(session.warmup, session.measured, trace=session.tracer is not None).total
            run_opts = _debug_run_opts(run_opts, steps)
        init(brain, modules, opt_class, hparams, run_opts, checkpointer)
        shared = session.checkpoints_dir
        if not session.keep_going and shared is not None and getattr(brain, "checkpointer", None) is not None:
            # Under torchrun debug mode gives each rank a temporary folder of its own, and SpeechBrain's deletion
            # of old checkpoints (rank 0 deletes and broadcasts, the others only wait) then deadlocks from the
            # second epoch on: the ranks share one folder instead.
            shared.mkdir(parents=True, exist_ok=True)
            brain.checkpointer.checkpoints_dir = shared
        number: List[int] = []  # given at the Brain's first step: Brains built and never run take none
        for name in BRAIN_METHODS:
            setattr(brain, name, _brain_step(hooks, brain, name, getattr(brain, name), number))
        if not session.keep_going:
            brain.fit = _enough_epochs(hooks, brain, brain.fit, number)
            brain.evaluate = _stop_after(session, brain.evaluate)
    return brain_init


def _stage(base: str, number: List[int]) -> str:
    return base if not number or number[0] == 1 else f"brain{number[0]}.{base}"


def _brain_step(hooks: Any, brain: Any, name: str, method: Callable, number: List[int]) -> Callable:
    session = hooks.session
    rate = brain_sample_rate(brain)

    @functools.wraps(method)
    def step(*args: Any, **kwargs: Any) -> Any:
        if hooks._in_call:
            return method(*args, **kwargs)
        if not number:
            hooks.brains += 1
            number.append(hooks.brains)
        base = "train" if name == "fit_batch" else getattr(
            kwargs.get("stage", args[1] if len(args) > 1 else None), "name", "test").lower()
        stage = _stage(base, number)
        if stage not in session.steps.stages:
            session.brains[stage] = {"class_name": type(brain).__name__, "number": number[0]}
            if base == "test":  # one pass over its loader
                session.limit(stage, hooks.loader_batches)
        optimizers = lambda: list((getattr(brain, "optimizers_dict", None) or {}).values())  # noqa: E731
        return hooks.step(stage, "brain", brain.modules, str(brain.device), optimizers, method, args, kwargs,
                          batch_size_and_audio(args[0] if args else kwargs.get("batch"), rate))
    return step


def _enough_epochs(hooks: Any, brain: Any, fit: Callable, number: List[int]) -> Callable:
    """``fit`` over as many epochs as its stages' steps need (SpeechBrain's own debug-mode stop switched off)."""
    session = hooks.session

    def needs_more() -> bool:
        stages = [_stage(base, number) for base in ("train", "valid")]
        seen = [s for s in stages if s in session.steps.stages]
        return bool(seen) and stages[0] in seen and any(session.recording(s) for s in seen)

    def epochs(counter: Any) -> Iterator[Any]:
        last = getattr(counter, "current", 0)
        for epoch in counter:
            last = epoch
            yield epoch
            if not needs_more():
                return
        if not isinstance(last, int):
            return
        for _ in range(stage_plan(session.warmup, session.measured).total + 1):  # one step per epoch at least
            if not needs_more():
                return
            last += 1
            if hasattr(counter, "current"):  # the recipe's counter reads the epoch it is in
                counter.current = last
            yield last

    @functools.wraps(fit)
    def enough_epochs(*args: Any, **kwargs: Any) -> Any:
        brain.debug_epochs = -1  # SpeechBrain's stop (epoch == debug_epochs) never fires: epochs() ends the fit
        if "epoch_counter" in kwargs:
            kwargs["epoch_counter"] = epochs(kwargs["epoch_counter"])
        elif args:
            args = (epochs(args[0]),) + args[1:]
        return fit(*args, **kwargs)
    return enough_epochs


def _stop_after(session: Any, evaluate: Callable) -> Callable:
    """``evaluate``, after which the script stops (in its own thread): its test steps are the recipe's last stage."""

    @functools.wraps(evaluate)
    def stop_after(*args: Any, **kwargs: Any) -> Any:
        result = evaluate(*args, **kwargs)
        if any(s.endswith("test") for s in session.steps.stages) and threading.get_ident() == session.thread:
            raise StopRun("test")
        return result
    return stop_after
