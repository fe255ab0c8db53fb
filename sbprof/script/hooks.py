"""Where ``sbprof run`` finds steps in a script it does not edit: class-level hooks installed before the script runs.

- ``speechbrain.core.Brain``: see :mod:`sbprof.script.brains`.
- ``speechbrain.inference`` interfaces: each call of a batch or file method
  (``transcribe_batch``, ``transcribe_file``, ``encode_batch``...) is a step of
  the stage named after the method; a call inside another counts once.
- a plain PyTorch loop: a step starts at the first outermost ``nn.Module``
  call with gradients enabled and ends when ``Optimizer.step`` returns; the
  modules whose parameters the optimiser updates are its model.
- ``DataLoader`` iterators: the time inside ``__next__`` is data wait, a new
  iterator's length the batches of the stage that reads it, and a SpeechBrain
  ``PaddedBatch`` gives the step its utterances and audio seconds.

Forward time is the time inside outermost ``nn.Module`` calls, backward inside
``torch.autograd.backward``, optimiser inside ``Optimizer.step``. Outermost
calls are found two ways: global module hooks (every module call pays for
them, 1.5 µs here: 10 % of a step of 800 small module calls, measured) on
warm-up, FLOP and traced steps, which also learn which modules are called
outermost; on the other steps only those modules carry hooks of their own
(``roots``), so a measured step pays for a few calls, not for every one.
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from sbprof.models.batches import batch_size_and_audio
from sbprof.models.source import DEFAULT_SAMPLE_RATE
from sbprof.script.session import Session

INFERENCE_METHODS = ("transcribe_batch", "transcribe_file", "encode_batch", "encode_file", "classify_batch",
                     "classify_file", "separate_batch", "separate_file", "enhance_batch", "enhance_file",
                     "verify_batch", "verify_files", "decode_batch", "estimate_batch")
ROOT_ROLES = ("measured", "memory", "modules", "spare")
"""Roles whose steps run with hooks on the outermost modules only (once they are known)."""


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
        self._recent: List[torch.nn.Module] = []  # the last modules called outermost
        self._roots: Dict[int, torch.nn.Module] = {}  # every module seen called outermost
        self._optimizers: List[torch.optim.Optimizer] = []
        self._pending_batch: Any = None  # the last batch a DataLoader gave, for the next loop step
        self.loader_batches: Optional[int] = None  # the length of the last DataLoader iterated
        self._mode = "off"
        self._module_handles: List[Any] = []
        self.brains = 0  # Brains that ran a step so far

    # ------------------------------------------------------------ install

    def install(self) -> None:
        self._patch(torch.autograd, "backward", self._timed("backward", torch.autograd.backward))
        from torch.utils.data import dataloader

        iterator = dataloader._BaseDataLoaderIter
        self._patch(iterator, "__next__", self._waited(iterator.__next__))
        self._patch(iterator, "__init__", self._counted(iterator.__init__))
        from torch.optim import optimizer

        self._set_mode("global")
        self._undo.append(lambda: self._set_mode("off"))
        for handle in (optimizer.register_optimizer_step_pre_hook(self._optimizer_pre),
                       optimizer.register_optimizer_step_post_hook(self._optimizer_post)):
            self._undo.append(handle.remove)
        # SpeechBrain's classes are hooked when the script imports them (importing SpeechBrain here would apply
        # its quirks, e.g. torch flags, to scripts that never use it).
        from sbprof.script.brains import patch_brain

        self._when_imported("speechbrain.core", lambda m: patch_brain(self, m.Brain))
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

    def remove(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo = []

    # ------------------------------------------------------------ module hooks

    def _set_mode(self, mode: str) -> None:
        """Module hooks: ``global`` (every module call), ``roots`` (modules seen outermost) or ``off``."""
        if mode == "roots" and not self._roots:
            mode = "global"  # nothing learned yet (no warm-up step): every call
        if mode == self._mode and (mode != "roots" or len(self._module_handles) == 2 * len(self._roots)):
            return  # (roots learned since they were hooked get theirs)
        for handle in self._module_handles:
            handle.remove()
        self._module_handles = []
        self._mode = mode
        if mode == "global":
            from torch.nn.modules import module

            self._module_handles = [module.register_module_forward_pre_hook(self._forward_pre),
                                    module.register_module_forward_hook(self._forward_post, always_call=True)]
        elif mode == "roots":
            for root in self._roots.values():
                self._module_handles += [root.register_forward_pre_hook(self._forward_pre),
                                         root.register_forward_hook(self._forward_post, always_call=True)]

    def mode_for(self, role: Optional[str]) -> None:
        """The module hooks a step of ``role`` runs with; past its plan (``None``) none under ``--continue``, else
        the outermost modules' (a plain loop's next step must still be seen, to stop the script there)."""
        if role is None:
            self._set_mode("off" if self.session.keep_going else "roots")
        else:
            self._set_mode("roots" if role in ROOT_ROLES else "global")

    # ------------------------------------------------------------ regions

    def _timed(self, region: str, function: Callable, checkpoint: bool = True) -> Callable:
        steps, session = self.steps, self.session

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if checkpoint:
                session.checkpoint()
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
            steps.add_wait(start, time.perf_counter())
            self._pending_batch = batch
            return batch
        return waited

    def _counted(self, init: Callable) -> Callable:
        @functools.wraps(init)
        def counted(iterator: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
            init(iterator, loader, *args, **kwargs)
            try:
                self.loader_batches = len(loader)
            except TypeError:  # an iterable dataset without a length
                self.loader_batches = None
        return counted

    # A compiled module runs its hooks inside its compiled call: kept out of Dynamo, which would trace sbprof's own
    # state into guards and recompile at each change of it (past its recompile limit, the model runs eagerly).
    @torch.compiler.disable
    def _forward_pre(self, module: torch.nn.Module, args: Any) -> None:
        self.session.checkpoint()
        self._depth += 1
        if self._depth != 1:
            return
        if self.steps.current is None and self._in_call == 0 and torch.is_grad_enabled():
            self._begin_loop_step(module)
        if self._mode == "global":
            self._roots.setdefault(id(module), module)
        if not self._recent or module is not self._recent[-1]:
            self._recent.append(module)
            del self._recent[:-8]
        self.steps.enter("forward")

    @torch.compiler.disable
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

    def _optimizer_pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> Any:
        self.session.checkpoint()
        self.steps.enter("optimizer")
        closure = args[0] if args else kwargs.get("closure")
        if not callable(closure):
            return None
        # A closure optimiser (LBFGS) runs the forward and backward inside its step: the closure's time is the
        # script's, never the optimiser's (its module calls and backward still count as forward and backward).
        timed = self._timed("closure", closure, checkpoint=False)
        return ((timed, *args[1:]), kwargs) if args else (args, {**kwargs, "closure": timed})

    def _optimizer_post(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self.steps.leave("optimizer")
        step = self.steps.current
        if self._in_call or step is None or self.session.found.get(step.stage) != "loop":
            return
        self.session.end()
        if self._loop_model is None:
            self._find_loop_model(optimizer)
        self.mode_for(self.session.next_role(step.stage))

    def _find_loop_model(self, optimizer: torch.optim.Optimizer) -> None:
        """The modules (called outermost) whose parameters this optimiser updates: the loop's model."""
        updated = {id(p) for group in optimizer.param_groups for p in group["params"]}
        owners = [m for m in dict.fromkeys(self._recent) if any(id(p) in updated for p in m.parameters())]
        self._optimizers = [optimizer]
        if len(owners) == 1:
            self._loop_model = owners[0]
        elif owners:
            self._loop_model = torch.nn.ModuleDict({f"{type(m).__name__}{i}": m for i, m in enumerate(owners)})

    # ------------------------------------------------------------ inference interfaces

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
            return hooks.step(name, "inference", interface.mods, str(interface.device), list, method, args,
                              kwargs, audio)
        return step

    def step(self, stage: str, kind: str, root: Any, device: str, optimizers: Callable, method: Callable,
             args: tuple, kwargs: dict, audio: Tuple[Optional[int], Optional[float]]) -> Any:
        """One hooked call (a Brain batch, an interface call) as one step of ``stage``."""
        if not self.session.should_stop(stage, kind):
            self.mode_for(self.session.next_role(stage))
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
        return result
