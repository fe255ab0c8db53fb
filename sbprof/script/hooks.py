"""Where ``sbprof run`` finds steps in a script it does not edit: class-level hooks installed before the script runs.

- ``speechbrain.core.Brain``: every instance, once built, has its
  ``fit_batch`` and ``evaluate_batch`` (the subclass's own, when it overrides
  them) wrapped: each call is a step of its stage (``train``, ``valid``,
  ``test``). Unless ``--continue``, the Brain is built in SpeechBrain's own debug
  mode (``debug_batches = warmup + measured``, one epoch): each stage stops
  after its steps, and its checkpointer writes to a temporary folder, so
  the recipe's own checkpoints are left as they were; the script stops when
  ``evaluate`` returns (the test stage is a recipe's last), or ends after ``fit``.
- ``speechbrain.inference`` interfaces: each call of a batch or file method
  (``transcribe_batch``, ``transcribe_file``, ``encode_batch``...) is a step of
  the stage named after the method; a call inside another counts once.
- a plain PyTorch loop: a step starts at the first outermost ``nn.Module``
  call with gradients enabled and ends when ``Optimizer.step`` returns; the
  modules whose parameters the optimiser updates are its model.
- ``DataLoader`` iterators: the time inside ``__next__`` is data wait, and
  a SpeechBrain ``PaddedBatch`` gives the step its utterances and audio seconds.

Forward time is the time inside outermost ``nn.Module`` calls,
backward inside ``torch.autograd.backward``, optimiser inside ``Optimizer.step``.
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import sys
import time
from typing import Any, Callable, List, Optional, Tuple

import torch

from sbprof.models.batches import batch_size_and_audio, brain_sample_rate
from sbprof.models.source import DEFAULT_SAMPLE_RATE
from sbprof.script.session import Session, StopRun

BRAIN_METHODS = ("fit_batch", "evaluate_batch")
INFERENCE_METHODS = ("transcribe_batch", "transcribe_file", "encode_batch", "encode_file", "classify_batch",
                     "classify_file", "separate_batch", "separate_file", "enhance_batch", "enhance_file",
                     "verify_batch", "verify_files", "decode_batch", "estimate_batch")
def _call_audio(args: tuple, kwargs: dict, sample_rate: int) -> Tuple[Optional[int], Optional[float]]:
    """Utterances and seconds of an interface's ``*_batch(wavs, wav_lens)`` call."""
    wavs = args[0] if args else kwargs.get("wavs", kwargs.get("mix", kwargs.get("noisy")))
    if not torch.is_tensor(wavs) or wavs.dim() < 2:
        return None, None
    lengths = args[1] if len(args) > 1 else kwargs.get("wav_lens", kwargs.get("lengths"))
    relative = float(lengths.sum()) if torch.is_tensor(lengths) else float(wavs.shape[0])
    return int(wavs.shape[0]), relative * wavs.shape[1] / sample_rate


def _device_of(module: Optional[torch.nn.Module]) -> str:
    parameter = next(module.parameters(), None) if module is not None else None
    return "cpu" if parameter is None else str(parameter.device)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when module ``name`` is about to load, wraps its loader to call ``patch`` after."""

    def __init__(self, name: str, patch: Callable[[Any], None]):
        self.name, self.patch = name, patch

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # once; the other finders find the real spec
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        exec_module, patch = spec.loader.exec_module, self.patch

        def exec_then_patch(module: Any) -> None:
            exec_module(module)
            patch(module)
        spec.loader.exec_module = exec_then_patch
        return spec


def when_imported(name: str, patch: Callable[[Any], None]) -> Callable[[], None]:
    """Run ``patch(module)`` now if module ``name`` is imported, else right after its import runs; returns what
    takes the pending patch back (nothing, once it ran)."""
    if name in sys.modules:
        patch(sys.modules[name])
        return lambda: None
    finder = _AfterImport(name, patch)
    sys.meta_path.insert(0, finder)
    return lambda: finder in sys.meta_path and sys.meta_path.remove(finder)


class Hooks:
    """Installs the hooks of the module docstring into this process; :meth:`remove` undoes every one."""

    def __init__(self, session: Session):
        self.session = session
        self.steps = session.steps
        self._undo: List[Callable[[], None]] = []
        self._depth = 0  # outermost module calls
        self._in_call = 0  # hooked Brain or interface calls now running
        self._loop_model: Optional[torch.nn.Module] = None
        self._roots: List[torch.nn.Module] = []
        self._optimizers: List[torch.optim.Optimizer] = []
        self._pending_batch: Any = None  # the last batch a DataLoader gave, for the next loop step
        self._module_handles: List[Any] = []

    # ------------------------------------------------------------ install

    def install(self) -> None:
        self._patch(torch.autograd, "backward", self._timed("backward", torch.autograd.backward))
        from torch.utils.data import dataloader

        self._patch(dataloader._BaseDataLoaderIter, "__next__", self._waited(dataloader._BaseDataLoaderIter.__next__))
        from torch.optim import optimizer

        self._module_hooks(True)
        self._undo.append(lambda: self._module_hooks(False))
        for handle in (optimizer.register_optimizer_step_pre_hook(self._optimizer_pre),
                       optimizer.register_optimizer_step_post_hook(self._optimizer_post)):
            self._undo.append(handle.remove)
        # SpeechBrain's classes are hooked when the script imports them (importing SpeechBrain here would apply
        # its quirks, e.g. torch flags, to scripts that never use it).
        self._when_imported("speechbrain.core", lambda m: self._patch(m.Brain, "__init__",
                                                                      self._brain_init(m.Brain.__init__)))
        self._when_imported("speechbrain.inference.interfaces", lambda m: self._patch(
            m.Pretrained, "__init__", self._pretrained_init(m.Pretrained.__init__)))

    def _when_imported(self, name: str, patch: Callable[[Any], None]) -> None:
        """Run ``patch(module)`` now if ``name`` is imported, else right after the script's import of it runs."""
        self._undo.append(when_imported(name, patch))

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        had = name in vars(owner)
        original = vars(owner).get(name)
        setattr(owner, name, value)
        self._undo.append(lambda: setattr(owner, name, original) if had else delattr(owner, name))

    def _module_hooks(self, on: bool) -> None:
        """Install or remove the global ``nn.Module`` hooks (forward time, a plain loop's steps).

        With ``--continue`` they go once no stage records (every ``nn.Module`` call pays for global hooks), and come
        back for a hooked call of a stage that still records.
        """
        from torch.nn.modules import module

        if on and not self._module_handles:
            self._module_handles = [module.register_module_forward_pre_hook(self._forward_pre),
                                    module.register_module_forward_hook(self._forward_post, always_call=True)]
        elif not on and self._module_handles:
            for handle in self._module_handles:
                handle.remove()
            self._module_handles = []

    def remove(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo = []

    # ------------------------------------------------------------ regions

    def _timed(self, region: str, function: Callable) -> Callable:
        steps = self.steps

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            steps.enter(region)
            try:
                return function(*args, **kwargs)
            finally:
                steps.leave(region)
        return timed

    def _waited(self, next_batch: Callable) -> Callable:
        steps = self.steps

        @functools.wraps(next_batch)
        def waited(iterator: Any) -> Any:
            start = time.perf_counter()
            batch = next_batch(iterator)
            steps.add_wait(time.perf_counter() - start)
            self._pending_batch = batch
            return batch
        return waited

    def _forward_pre(self, module: torch.nn.Module, args: Any) -> None:
        self._depth += 1
        if self._depth != 1:
            return
        if self.steps.current is None and self._in_call == 0 and torch.is_grad_enabled():
            self._begin_loop_step(module)
        if not self._roots or module is not self._roots[-1]:
            self._roots.append(module)
            del self._roots[:-8]
        self.steps.enter("forward")

    def _forward_post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.steps.leave("forward")

    def _begin_loop_step(self, module: torch.nn.Module) -> None:
        model = self._loop_model
        self.session.begin("train", "loop", model, _device_of(model or module),
                           optimizers=lambda: list(self._optimizers))
        if self._pending_batch is not None:
            self.steps.set_batch(*batch_size_and_audio(self._pending_batch, DEFAULT_SAMPLE_RATE))
            self._pending_batch = None

    def _optimizer_pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self.steps.enter("optimizer")

    def _optimizer_post(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self.steps.leave("optimizer")
        step = self.steps.current
        if self._in_call or step is None or self.session.found.get(step.stage) != "loop":
            return
        self.session.end()
        if self._loop_model is None:
            self._find_loop_model(optimizer)
        if self.session.keep_going and not self.steps.recording(step.stage):
            self._module_hooks(False)

    def _find_loop_model(self, optimizer: torch.optim.Optimizer) -> None:
        """The modules (called outermost) whose parameters this optimiser updates: the loop's model."""
        updated = {id(p) for group in optimizer.param_groups for p in group["params"]}
        owners = [m for m in dict.fromkeys(self._roots) if any(id(p) in updated for p in m.parameters())]
        self._optimizers = [optimizer]
        if len(owners) == 1:
            self._loop_model = owners[0]
        elif owners:
            self._loop_model = torch.nn.ModuleDict({f"{type(m).__name__}{i}": m for i, m in enumerate(owners)})

    # ------------------------------------------------------------ SpeechBrain

    def _brain_init(self, init: Callable) -> Callable:
        hooks = self

        @functools.wraps(init)
        def brain_init(brain: Any, modules: Any = None, opt_class: Any = None, hparams: Any = None,
                       run_opts: Any = None, checkpointer: Any = None) -> None:
            if not hooks.session.keep_going:
                steps = hooks.steps.warmup + hooks.steps.measured
                run_opts = {**(run_opts or {}), "debug": True, "debug_batches": steps, "debug_epochs": 1}
            init(brain, modules, opt_class, hparams, run_opts, checkpointer)
            for name in BRAIN_METHODS:
                setattr(brain, name, hooks._brain_step(brain, name, getattr(brain, name)))
            if not hooks.session.keep_going:
                brain.fit = hooks._one_epoch(brain, brain.fit)
                brain.evaluate = hooks._stop_after(brain.evaluate)
        return brain_init

    def _one_epoch(self, brain: Any, fit: Callable) -> Callable:
        """``fit`` with SpeechBrain's debug mode stopping after its first epoch, whatever its epoch numbering."""

        @functools.wraps(fit)
        def one_epoch(epoch_counter: Any, *args: Any, **kwargs: Any) -> Any:
            if hasattr(epoch_counter, "current"):  # an EpochCounter: epochs current + 1, current + 2, ...
                brain.debug_epochs = epoch_counter.current + 1
            elif isinstance(epoch_counter, (range, list, tuple)) and len(epoch_counter):
                brain.debug_epochs = epoch_counter[0]
            return fit(epoch_counter, *args, **kwargs)
        return one_epoch

    def _stop_after(self, evaluate: Callable) -> Callable:
        """``evaluate``, after which the script stops: its test steps are the recipe's last stage."""
        hooks = self

        @functools.wraps(evaluate)
        def stop_after(*args: Any, **kwargs: Any) -> Any:
            result = evaluate(*args, **kwargs)
            if "test" in hooks.steps.stages:
                raise StopRun("test")
            return result
        return stop_after

    def _brain_step(self, brain: Any, name: str, method: Callable) -> Callable:
        hooks = self
        rate = brain_sample_rate(brain)

        @functools.wraps(method)
        def step(*args: Any, **kwargs: Any) -> Any:
            if hooks._in_call:
                return method(*args, **kwargs)
            stage = "train" if name == "fit_batch" else getattr(
                kwargs.get("stage", args[1] if len(args) > 1 else None), "name", "test").lower()
            optimizers = lambda: list((getattr(brain, "optimizers_dict", None) or {}).values())  # noqa: E731
            return hooks._step(stage, "brain", brain.modules, str(brain.device), optimizers, method, args, kwargs,
                               batch_size_and_audio(args[0] if args else kwargs.get("batch"), rate))
        return step

    def _pretrained_init(self, init: Callable) -> Callable:
        hooks = self

        @functools.wraps(init)
        def pretrained_init(interface: Any, *args: Any, **kwargs: Any) -> None:
            init(interface, *args, **kwargs)
            for name in INFERENCE_METHODS:
                method = getattr(interface, name, None)
                if callable(method):
                    setattr(interface, name, hooks._inference_step(interface, name, method))
        return pretrained_init

    def _inference_step(self, interface: Any, name: str, method: Callable) -> Callable:
        hooks = self
        rate = int(getattr(getattr(interface, "audio_normalizer", None), "sample_rate", DEFAULT_SAMPLE_RATE))

        @functools.wraps(method)
        def step(*args: Any, **kwargs: Any) -> Any:
            audio = _call_audio(args, kwargs, rate) if name.endswith("_batch") else (None, None)
            if hooks._in_call:  # e.g. transcribe_file calling transcribe_batch: its audio is the outer step's
                hooks.steps.set_batch(*audio)
                return method(*args, **kwargs)
            return hooks._step(name, "inference", interface.mods, str(interface.device), list, method, args,
                               kwargs, audio)
        return step

    def _step(self, stage: str, kind: str, root: Any, device: str, optimizers: Callable, method: Callable,
              args: tuple, kwargs: dict, audio: Tuple[Optional[int], Optional[float]]) -> Any:
        """One hooked call as one step of ``stage``."""
        recording = self.steps.recording(stage)
        if recording:
            self._module_hooks(True)
        self.session.begin(stage, kind, root, device, optimizers)
        self.steps.set_batch(*audio)
        self._in_call += 1
        try:
            result = method(*args, **kwargs)
        except BaseException:
            self._in_call -= 1
            self.session.end(ok=False)
            raise
        self._in_call -= 1
        self.session.end()
        if self.session.keep_going and recording and not self.steps.recording(stage):
            self._module_hooks(False)
        return result
