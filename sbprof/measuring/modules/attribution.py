"""Per-module attribution of a step's time, forward and backward, without editing the model.

Forward: each selected module's ``forward`` is wrapped
(:mod:`sbprof.measuring.modules.wrapping`, undone on exit) to take the time and the
autograd sequence number at its entry and exit. Backward: at those
moments the hooks also put a pre-hook on the autograd node that made the
module's inputs and on the one that made its outputs; when the engine starts
such a node, the time is noted, and :mod:`sbprof.measuring.modules.timeline` hands each
interval between two notes to the module whose forward made the node. So
backward costs one hook per module boundary, not one per autograd node.

Two modes:

- ``light``: clocks only (the host's ``perf_counter_ns`` and the process CPU
  clock ``process_time_ns``; on CUDA also one CUDA event per boundary on the
  current stream). No operator is recorded.
- ``detailed``: the same, plus a ``record_function`` label around each
  selected module's forward (``sbprof.forward:<name>``) and backward
  (``sbprof.backward:<name>``), and around optimiser steps
  (``sbprof.optimizer:<Class>``), so the regions show in torch.profiler
  tables and traces when a profiler runs.

Limits: the backward of one graph must run on one thread (CPU, or a single
CUDA device); reentrant checkpointing and ``torch.compile`` are not supported.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch
from torch.autograd.profiler import record_function

from sbprof.base.checks import check_int
from sbprof.base.errors import ConfigError, MeasurementError
from sbprof.measuring.modules.memory import MEMORY_NOTE, module_memory
from sbprof.measuring.modules.result import build_breakdown
from sbprof.measuring.modules.selection import DEFAULT, select_modules
from sbprof.measuring.modules.steps import StepRecord, cpu_now, newest_node, now, sequence_nr
from sbprof.measuring.modules.timeline import END_OF_BACKWARD, owner_of
from sbprof.measuring.modules.wrapping import WrappedForward, wrap_forward
from sbprof.record.breakdown import ModuleBreakdown

MODES = ("light", "detailed")
FORWARD_LABEL = "sbprof.forward:"
BACKWARD_LABEL = "sbprof.backward:"
OPTIMIZER_LABEL = "sbprof.optimizer:"
MAX_STEPS = 2000
SESSION = "session"
"""Name of the step that holds whatever ran inside the context but outside explicit steps."""


class ModuleAttribution:
    """Times the selected modules of a model, forward and backward, and optimiser steps.

    Use it as a context manager (hooks are installed on entry and removed on
    exit) and mark each step with :meth:`step`; whatever runs inside the
    context but outside explicit steps is one step named ``session``. Or pass
    ``modules=`` to the sbprof decorators, which mark the steps themselves.

    Arguments
    ---------
    root : torch.nn.Module
        The model (in a ``Brain``: ``brain.modules``). It is not modified.
    modules : selection
        Which modules get rows (:func:`sbprof.measuring.modules.selection.select_modules`):
        ``"default"``, name globs, classes or ``"type:Name"``.
    mode : str
        ``light`` (clocks only) or ``detailed`` (also ``record_function`` labels).
    optimizers : sequence of torch.optim.Optimizer, or a callable returning one
        Optimisers whose ``step`` gets its own row (a callable is asked on
        entry: a ``Brain`` makes its optimisers when ``fit`` starts).
    max_steps : int
        Steps kept (a few kB each); past it, steps run unrecorded and the hooks
        are removed, so a long training run under the decorator stays bounded.

    Example
    -------
    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    >>> attribution = ModuleAttribution(model, modules=["0", "2"])
    >>> with attribution:
    ...     for _ in range(3):
    ...         with attribution.step("train"):
    ...             model(torch.randn(4, 8)).sum().backward()
    >>> result = attribution.breakdown("train")
    >>> result.steps, [r.label for r in result.rows][:2], result.row("0").calls
    (3, ['0', '2'], 1.0)
    >>> result.row("2").backward_ms > 0 and "forward" not in vars(model[0])  # unwrapped on exit
    True
    """

    def __init__(self, root: torch.nn.Module, modules: Any = DEFAULT, mode: str = "light",
                 optimizers: Any = (), max_steps: int = MAX_STEPS):
        if mode not in MODES:
            raise ConfigError(f"attribution mode must be one of {MODES}, got {mode!r}")
        self.max_steps = check_int(max_steps, "max_steps", 1)
        self.root = root
        self.names = select_modules(root, modules)
        named = dict(root.named_modules())
        self.types = {name: type(named[name]).__name__ for name in self.names}
        self.mode = mode
        self._optimizers = optimizers
        self.optimizers: List[torch.optim.Optimizer] = []
        if not callable(optimizers):
            self.optimizers = self._checked_optimizers()
        self.active = False
        self._handles: List[Any] = []
        self._wrapped: List[WrappedForward] = []
        self._finished: List[StepRecord] = []
        self._step: Optional[StepRecord] = None
        self._stack: List[Optional[int]] = [None]
        self._in_backward = False
        self._open_backward: List[Tuple[int, Any]] = []
        self._forward_labels: List[Any] = []
        self._recent_node_handles: List[Any] = []
        self._memory: Optional[Tuple[Dict[str, Dict[str, int]], Dict[str, int]]] = None
        self._optimizer_label: Any = None
        self._optimizer_depth = 0
        self._cuda = False

    def _checked_optimizers(self) -> List[torch.optim.Optimizer]:
        found = self._optimizers() if callable(self._optimizers) else self._optimizers
        found = list(found or ())
        for opt in found:
            if not isinstance(opt, torch.optim.Optimizer):
                raise ConfigError(f"optimizers must be torch.optim.Optimizer instances, got {type(opt).__name__}")
        return found

    # ------------------------------------------------------------ hooks

    def __enter__(self) -> "ModuleAttribution":
        if self.active:
            raise MeasurementError("this ModuleAttribution is already active (enter it once at a time)")
        if self.full:  # nothing more will be recorded: no hooks
            return self
        named = dict(self.root.named_modules())
        self.optimizers = self._checked_optimizers()
        self._cuda = any(t.is_cuda for t in self.root.parameters()) or any(t.is_cuda for t in self.root.buffers())
        for name in self.names:
            self._wrapped.append(wrap_forward(named[name], functools.partial(self._enter_module, name),
                                              functools.partial(self._exit_module, name)))
        for opt in self.optimizers:
            label = type(opt).__name__
            self._handles.append(opt.register_step_pre_hook(functools.partial(self._enter_optimizer, label)))
            self._handles.append(opt.register_step_post_hook(functools.partial(self._exit_optimizer, label)))
        self.active = True
        self._begin(SESSION)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._end()
        # The last step's graph may outlive the context: unhook it (older graphs' hooks are inert).
        for handle in self._recent_node_handles:
            handle.remove()
        self._recent_node_handles = []
        self.active = False
        for handle in self._handles:
            handle.remove()
        self._handles = []
        for wrapped in reversed(self._wrapped):
            wrapped.undo()
        self._wrapped = []

    def close(self) -> None:
        """Remove every hook (as leaving the context does); a no-op when not active."""
        if self.active:
            self.__exit__(None, None, None)

    def _begin(self, name: str) -> None:
        self._step = StepRecord(name, self._cuda)
        self._stack = [None]
        self._in_backward = False

    def _end(self) -> None:
        step = self._step
        if step is None:
            return
        self._close_backward_labels()
        step.end_event = step.event()
        step.end, step.cpu_end = now(), cpu_now()
        if len(self._stack) > 1 or (step.spans and not step.spans[-1][2]):
            self._close_unfinished(step)
        if step.node_handles:
            self._recent_node_handles = step.node_handles
            step.node_handles = []
        if not step.empty() or step.name != SESSION:
            self._finished.append(step)
        self._step = None

    def _close_unfinished(self, step: StepRecord) -> None:
        """Calls and optimiser steps a raised exception left open end with the step."""
        for index in self._stack[1:]:
            step.calls[index][3] = step.end
            step.calls[index][5] = step.cpu_end
            if step.cuda:
                step.call_events[index][1] = step.end_event
        self._stack = [None]
        if step.spans and not step.spans[-1][2]:
            step.spans[-1] = step.spans[-1][:2] + (step.end, step.spans[-1][3], step.cpu_end)
            if step.cuda:
                step.span_events[-1] = (step.span_events[-1][0], step.end_event)

    @property
    def full(self) -> bool:
        """Whether ``max_steps`` steps are kept (later steps run unrecorded)."""
        return len(self._finished) >= self.max_steps

    @contextlib.contextmanager
    def step(self, name: str = "step") -> Iterator[None]:
        """One step (forward, backward, optimiser) named ``name``; needs the context to be active."""
        if self.full:
            self.close()
            yield
            return
        if not self.active:
            raise MeasurementError("ModuleAttribution.step() runs inside 'with attribution:' (hooks installed)")
        self._end()
        self._begin(name)
        try:
            yield
        finally:
            self._end()
            if self.full:
                self.close()
            else:
                self._begin(SESSION)

    # The hooks below run at every module boundary and hooked autograd node: a few plain operations each.
    # Hooked nodes: the one holding a module's inputs and the one holding its outputs. The node between
    # two adjacent modules is found twice (outputs of one, inputs of the next) and hooked once; a node
    # hooked twice anyway would only add an empty interval.

    def _mark_seq(self, step: StepRecord, owner: Optional[int]) -> None:
        seq = sequence_nr()
        if step.seq_starts[-1] == seq:  # no node made since the last boundary
            step.seq_owners[-1] = owner
        else:
            step.seq_starts.append(seq)
            step.seq_owners.append(owner)

    def _enter_module(self, name: str, module: Any, args: Any) -> None:
        step = self._step
        if step is None or self._in_backward:  # recomputation during backward is backward time
            return
        # Positional inputs only: keyword arguments of speech modules are masks and positions,
        # made before the module's main input.
        node, seq = newest_node(args)
        if node is not None and seq != step.last_hooked:
            step.last_hooked = seq
            step.node_handles.append(node.register_prehook(functools.partial(self._node_started, step, seq)))
        stack = self._stack
        index = len(step.calls)
        call = [name, stack[-1], 0, 0, 0, 0]
        step.calls.append(call)
        stack.append(index)
        self._mark_seq(step, index)
        if self.mode == "detailed":
            label = record_function(FORWARD_LABEL + name)
            label.__enter__()
            self._forward_labels.append(label)
        if step.cuda:
            step.call_events.append([step.event(), None])
        call[4] = cpu_now()  # the clocks last, so the hook's own work stays outside the module's time
        call[2] = now()

    def _exit_module(self, name: str, module: Any, args: Any, output: Any) -> None:
        t, cpu = now(), cpu_now()
        step = self._step
        if step is None or self._in_backward or len(self._stack) < 2:
            return
        index = self._stack.pop()
        call = step.calls[index]
        call[3], call[5] = t, cpu
        if step.cuda:
            step.call_events[index][1] = step.event()
        if self.mode == "detailed":
            self._forward_labels.pop().__exit__(None, None, None)
        self._mark_seq(step, self._stack[-1])
        node, seq = newest_node((output,))
        if node is not None and seq != step.last_hooked:
            step.last_hooked = seq
            step.node_handles.append(node.register_prehook(functools.partial(self._node_started, step, seq)))

    def _node_started(self, step: StepRecord, seq: int, grad_outputs: Any) -> None:
        if step is not self._step:  # a graph kept from an earlier step, run again
            return
        t, cpu = now(), cpu_now()
        if not self._in_backward:
            self._in_backward = True
            torch.autograd.Variable._execution_engine.queue_callback(functools.partial(self._backward_ended, step))
        step.marks.append((t, seq, cpu))
        if step.cuda:
            step.mark_events.append(step.event())
        if self.mode == "detailed":
            self._relabel_backward(step, seq)

    def _backward_ended(self, step: StepRecord) -> None:
        self._in_backward = False
        if step is not self._step:
            return
        if self.mode == "detailed":
            self._close_backward_labels()
        step.marks.append((now(), END_OF_BACKWARD, cpu_now()))
        if step.cuda:
            step.mark_events.append(step.event())

    def _relabel_backward(self, step: StepRecord, seq: int) -> None:
        """Keep one backward label open per call on the path from the outermost call to the node's owner."""
        chain: List[int] = []
        owner = owner_of(seq, step.seq_starts, step.seq_owners)
        while owner is not None:
            chain.append(owner)
            owner = step.calls[owner][1]
        chain.reverse()
        keep = 0
        while (keep < len(self._open_backward) and keep < len(chain)
               and self._open_backward[keep][0] == chain[keep]):
            keep += 1
        while len(self._open_backward) > keep:
            self._open_backward.pop()[1].__exit__(None, None, None)
        for index in chain[keep:]:
            label = record_function(BACKWARD_LABEL + step.calls[index][0])
            label.__enter__()
            self._open_backward.append((index, label))

    def _close_backward_labels(self) -> None:
        while self._open_backward:
            self._open_backward.pop()[1].__exit__(None, None, None)
        while self._forward_labels:  # a forward that raised left its labels open
            self._forward_labels.pop().__exit__(None, None, None)

    def _enter_optimizer(self, label: str, optimizer: Any, args: Any, kwargs: Any) -> None:
        # An optimizer whose step() calls super().step() runs the hooks twice (torch wraps
        # both classes' step): only the outermost call is the optimizer's span.
        self._optimizer_depth += 1
        step = self._step
        if step is None or self._optimizer_depth > 1:
            return
        if self.mode == "detailed":
            self._optimizer_label = record_function(OPTIMIZER_LABEL + label)
            self._optimizer_label.__enter__()
        step.spans.append(("optimizer", now(), 0, cpu_now(), 0))
        if step.cuda:
            step.span_events.append((step.event(), None))

    def _exit_optimizer(self, label: str, optimizer: Any, args: Any, kwargs: Any) -> None:
        t, cpu = now(), cpu_now()
        self._optimizer_depth -= 1
        step = self._step
        if step is None or self._optimizer_depth > 0 or not step.spans or step.spans[-1][2]:
            return
        step.spans[-1] = step.spans[-1][:2] + (t, step.spans[-1][3], cpu)
        if step.cuda:
            step.span_events[-1] = (step.span_events[-1][0], step.event())
        if self.mode == "detailed":
            self._optimizer_label.__exit__(None, None, None)

    def measure_memory(self, run_step: Callable[[], Any]) -> None:
        """Run one step under torch's MemTracker; later breakdowns carry its per-module memory.

        The step is not timed (the tracker slows every operator) and not recorded as a step.
        """
        paused, self._step = self._step, None
        try:
            self._memory = module_memory(self.root, run_step, self.names, self.optimizers)
        finally:
            self._step = paused

    # ------------------------------------------------------------ results

    def step_names(self) -> List[str]:
        """Names of the finished steps, in the order first seen."""
        return list(dict.fromkeys(s.name for s in self._finished))

    def breakdown(self, step: Optional[str] = None, skip_first: int = 0) -> ModuleBreakdown:
        """Per-label times over the finished steps named ``step``, skipping the first ``skip_first`` of them.

        ``step`` may be left out when all finished steps share one name.
        """
        names = self.step_names()
        if step is None:
            if len(names) != 1:
                raise MeasurementError(f"name the step to report: finished steps are named {names}"
                                       if names else "no step has finished yet")
            step = names[0]
        chosen = [s for s in self._finished if s.name == step][skip_first:]
        if not chosen:
            raise MeasurementError(f"no finished step named {step!r} (after skipping {skip_first}); "
                                   f"finished: {names}")
        timelines = [s.timelines() for s in chosen]
        result = build_breakdown(step, self.mode, self.names, self.types, [h for h, _, _ in timelines],
                                 [c for _, _, c in timelines] if chosen[0].cuda else None,
                                 cpu=[c for _, c, _ in timelines])
        if self.full:
            result.note = f"Recording stopped after {self.max_steps} steps (max_steps); later steps are not included."
        if self._memory is not None:
            result.add_memory(*self._memory, note=MEMORY_NOTE)
        return result
