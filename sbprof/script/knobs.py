"""The built-in knobs of ``sbprof run --vary``, set inside a variant's own process before the script's first line,
and the losses its steps compute, kept for the loss check.

Nothing here needs the script's help:

- ``threads``: ``torch.set_num_threads`` (the parent also sets ``OMP_NUM_THREADS``);
- ``num_workers``, ``pin_memory``: every ``DataLoader`` is built with them (its constructor is patched, so
  SpeechBrain's ``make_dataloader`` and any subclass get them too);
- ``precision``: autocast (``bf16``/``fp16``) entered before the script on this process's main thread, so a plain
  loop's forward runs under it; a SpeechBrain ``Brain`` gets it as its own ``precision`` run option (its own
  autocast and, for ``fp16``, its gradient scaler);
- ``matmul_precision``: ``torch.set_float32_matmul_precision``; ``cudnn_benchmark``: ``torch.backends.cudnn``;
- ``compile``: a SpeechBrain ``Brain`` gets its own ``compile`` run option (``torch.compile`` of each of its
  ``modules``); in a plain loop, each module called from outside any other module's forward (the model, the loss
  module: the step's top-level modules) is compiled in place (``nn.Module.compile``) at its first call, on the
  script's main thread. Its limit: a model that is not an ``nn.Module`` (a bare function) is not compiled, and the
  compilation runs in the first steps (give ``--warmup`` enough steps to take it out of the measured ones).

The losses: each scalar tensor ``backward()`` is called on, in order (a loss a gradient scaler scaled is kept
unscaled). Every variant's process is seeded alike (``torch``, ``random``, ``numpy``: 0), so its first steps see the
same batches.

Example
-------
>>> import torch
>>> losses = Losses().install()
>>> (torch.ones(2, requires_grad=True) * 3).sum().backward()
>>> losses.remove(); losses.values
[6.0]
"""
from __future__ import annotations

import contextlib
import inspect
import random
import threading
from typing import Any, Callable, Dict, List

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class Losses:
    """The value of each scalar tensor ``backward()`` runs from, in order (see the module docstring)."""

    def __init__(self) -> None:
        self.values: List[float] = []
        self._undo: List[Callable[[], None]] = []

    def install(self) -> "Losses":
        backward = torch.Tensor.backward
        scale = torch.amp.GradScaler.scale
        losses = self

        def recorded_backward(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if tensor.numel() == 1:
                unscaled = getattr(tensor, "_sbprof_unscaled", None)
                losses.values.append(unscaled if unscaled is not None else float(tensor.detach().float()))
            return backward(tensor, *args, **kwargs)

        def scaled(scaler: Any, outputs: Any) -> Any:
            result = scale(scaler, outputs)
            if isinstance(outputs, torch.Tensor) and isinstance(result, torch.Tensor) and outputs.numel() == 1 \
                    and result is not outputs:
                result._sbprof_unscaled = float(outputs.detach().float())
            return result

        torch.Tensor.backward = recorded_backward
        torch.amp.GradScaler.scale = scaled
        self._undo += [lambda: setattr(torch.Tensor, "backward", backward),
                       lambda: setattr(torch.amp.GradScaler, "scale", scale)]
        return self

    def remove(self) -> None:
        while self._undo:
            self._undo.pop()()


def seed_all(seed: int = 0) -> None:
    """The same random state in every variant's process (its batches, its initial weights)."""
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:  # numpy is optional for torch
        pass


def _patch_loader(settings: Dict[str, Any]) -> Callable[[], None]:
    """Every DataLoader built with ``settings`` (``num_workers``, ``pin_memory``) in place of the script's own."""
    loader = torch.utils.data.DataLoader
    init = loader.__init__
    signature = inspect.signature(init)

    def patched(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.arguments.update(settings)
        if bound.arguments.get("num_workers", 0) == 0:  # options a loader without workers refuses
            bound.arguments.pop("prefetch_factor", None)
            bound.arguments["persistent_workers"] = False
        init(*bound.args, **bound.kwargs)

    loader.__init__ = patched
    return lambda: setattr(loader, "__init__", init)


def _patch_brain(options: Dict[str, Any]) -> Callable[[], None]:
    """Each SpeechBrain Brain gets ``options`` as its run options (``precision``: its own autocast and scaler;
    ``compile``: its own ``torch.compile`` of its modules)."""
    from sbprof.script.hooks import when_imported

    undo: List[Callable[[], None]] = []

    def patch(core: Any) -> None:
        init = core.Brain.__init__
        signature = inspect.signature(init)

        def brain_init(brain: Any, *args: Any, **kwargs: Any) -> None:
            bound = signature.bind(brain, *args, **kwargs)
            bound.arguments["run_opts"] = {**(bound.arguments.get("run_opts") or {}), **options}
            init(*bound.args, **bound.kwargs)

        core.Brain.__init__ = brain_init
        undo.append(lambda: setattr(core.Brain, "__init__", init))

    pending = when_imported("speechbrain.core", patch)

    def remove() -> None:  # the import hook if speechbrain was never imported, else the patch itself
        pending()
        while undo:
            undo.pop()()

    return remove


def _patch_compile() -> Callable[[], None]:
    """Each top-level module the main thread calls (none of its callers a module) compiled in place at its first
    call; the modules it calls inside are compiled with it."""
    module_call = torch.nn.Module.__call__
    main = threading.get_ident()
    depth = [0]

    def call(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() != main or torch.compiler.is_compiling():
            return module_call(module, *args, **kwargs)
        if depth[0] == 0 and not getattr(module, "_sbprof_compiled", False):
            module._sbprof_compiled = True
            module.compile()
        depth[0] += 1
        try:
            return module_call(module, *args, **kwargs)
        finally:
            depth[0] -= 1

    torch.nn.Module.__call__ = call
    return lambda: setattr(torch.nn.Module, "__call__", module_call)


def apply(knobs: Dict[str, Any], stack: contextlib.ExitStack) -> None:
    """Set ``knobs`` (see the module docstring) for as long as ``stack`` is open."""
    if "threads" in knobs:
        torch.set_num_threads(int(knobs["threads"]))
    loader = {k: knobs[k] for k in ("num_workers", "pin_memory") if k in knobs}
    if loader:
        stack.callback(_patch_loader(loader))
    if "matmul_precision" in knobs:
        torch.set_float32_matmul_precision(knobs["matmul_precision"])
    if "cudnn_benchmark" in knobs:
        torch.backends.cudnn.benchmark = bool(knobs["cudnn_benchmark"])
    brain = {k: knobs[k] for k in ("precision", "compile") if k in knobs}
    if brain:
        stack.callback(_patch_brain(brain))
    if knobs.get("compile"):
        stack.callback(_patch_compile())
    precision = knobs.get("precision")
    if precision is not None:
        if precision in DTYPES:
            stack.enter_context(torch.autocast("cpu", dtype=DTYPES[precision]))
            if torch.cuda.is_available():
                stack.enter_context(torch.autocast("cuda", dtype=DTYPES[precision]))
