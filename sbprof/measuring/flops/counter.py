"""Count FLOPs and MACs of a model call, per operator and per module, forward and backward.

How it works. A ``TorchDispatchMode`` sees every aten operator that reaches
the dispatcher, below autograd: composite operators (``linear``,
``matmul``, ``lstm``) have already decomposed into the ones that run, and an
operator's own internal calls do not come back to the mode, so nothing is
counted twice. Each operator is priced by :data:`sbprof.measuring.flops.formulas.FORMULAS`.

Modules. Global forward pre/post hooks keep the stack of the modules of
``root`` being run; a forward operator belongs to the innermost one. For
backward, the counter notes at every module boundary the autograd sequence
number (``torch._C._autograd._get_sequence_nr``): every autograd node created
between two boundaries carries a number in that interval. A backward
operator is attributed through the node running it
(``torch._C._current_autograd_node``) to the module whose forward created
that node; gradient accumulation into a parameter (``AccumulateGrad``) to the
module owning the parameter. torch's own module trackers
(``torch.utils.module_tracker.ModuleTracker``, which ``FlopCounterMode``
uses, and ``torch.distributed._tools.mod_tracker.ModTracker``) follow
backward with multi-grad hooks instead. Both leave a module in backward
when the gradients of its inputs are computed: a module whose inputs need
no gradient (an embedding of token ids, a front end fed with features) is
left only when the whole backward ends, so every backward operator run
after it is attributed to it as well. ``ModuleTracker`` also never enters a
module whose outputs get their gradient from the caller (the last layer,
the model itself): its backward belongs to no module. Both measured with torch
2.14 (ModuleTracker's in ``tests/measuring/flops/test_flops_counter.py``).

Limits: modules run through ``module.forward(...)`` rather than
``module(...)`` fire no hooks (their work goes to the caller); models under
``torch.compile`` are not supported; the forward must run in one thread.
"""
from __future__ import annotations

import contextlib
import warnings
from bisect import bisect_right
from collections import defaultdict
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from sbprof.base.errors import ConfigError, MeasurementError
from sbprof.measuring.flops.formulas import CONVENTIONS, FORMULAS, NO_FLOPS
from sbprof.measuring.flops.peak import work_precision
from sbprof.record.flops import FlopCount, ModuleFlops, OperatorFlops

#: Sequence number of ``AccumulateGrad`` nodes (UINT64_MAX: they are not made by a forward).
_ACCUMULATE_GRAD_SEQ = 2 ** 64 - 1
_FREE = object()
_current_autograd_node = torch._C._current_autograd_node


class UntrackedOperatorWarning(UserWarning):
    """An operator without a FLOP formula ran while counting (reported in ``FlopCount.untracked``)."""


class _Dispatch(TorchDispatchMode):
    def __init__(self, record: Any) -> None:
        super().__init__()
        self._record = record

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self._record(func, args, kwargs, out)
        return out


class FlopCounter:
    """Context manager counting the FLOPs of everything run inside it.

    Arguments
    ---------
    root : torch.nn.Module, optional
        Modules registered under it get rows, by their registered names;
        operators outside any of them belong to the root row ``""``.

    Example
    -------
    >>> import torch
    >>> model = torch.nn.Linear(8, 4, bias=False)
    >>> with FlopCounter(model) as counter:
    ...     _ = model(torch.ones(2, 8))
    >>> counter.result().macs == 2 * 8 * 4, counter.operators  # ones, then linear as t + mm
    (True, 3)
    """

    def __init__(self, root: Optional[torch.nn.Module] = None) -> None:
        self.root = root

    def __enter__(self) -> "FlopCounter":
        self._named = list(self.root.named_modules()) if self.root is not None else []
        self._names = {id(m): name for name, m in self._named}
        self._owners: Optional[Dict[int, str]] = None  # parameter -> module, built on first need
        self._stack: List[str] = [""]
        self._starts: List[int] = [torch._C._autograd._get_sequence_nr()]
        self._keys: List[str] = [""]
        self._calls: Dict[str, int] = defaultdict(int)
        self._forward: Dict[str, List[int]] = defaultdict(lambda: [0, 0])  # module -> [flops, macs]
        self._backward: Dict[str, List[int]] = defaultdict(lambda: [0, 0])
        self._untracked: Dict[str, int] = defaultdict(int)
        self._precisions: Tuple[Dict[str, int], Dict[str, int]] = (defaultdict(int), defaultdict(int))  # fwd, bwd
        self._cache: Dict[Any, Tuple[Any, ...]] = {}
        self._saw_backward = False
        self.operators = 0  # every operator dispatched, priced or not (views included)
        self._handles = [register_module_forward_pre_hook(self._enter_module),
                         register_module_forward_hook(self._exit_module, always_call=True)]
        self._mode = _Dispatch(self._record)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._mode.__exit__(*exc)
        finally:
            for handle in self._handles:
                handle.remove()
            self._handles = []

    def _mark(self) -> None:
        """Open a segment of autograd sequence numbers owned by the innermost module."""
        seq = torch._C._autograd._get_sequence_nr()
        if self._starts[-1] == seq:  # no node was created since the last boundary
            self._keys[-1] = self._stack[-1]
        else:
            self._starts.append(seq)
            self._keys.append(self._stack[-1])

    def _enter_module(self, module: torch.nn.Module, inputs: Any) -> None:
        name = self._names.get(id(module))
        if name is not None:
            self._stack.append(name)
            self._calls[name] += 1
            self._mark()

    def _exit_module(self, module: torch.nn.Module, inputs: Any, output: Any) -> None:
        if self._names.get(id(module)) is not None and len(self._stack) > 1:
            self._stack.pop()
            self._mark()

    def _backward_owner(self, node: Any) -> str:
        seq = node._sequence_nr()
        if seq == _ACCUMULATE_GRAD_SEQ:
            if self._owners is None:
                self._owners = {}
                for name, module in self._named:
                    for param in module.parameters(recurse=False):
                        self._owners.setdefault(id(param), name)  # a tied tensor goes to its first owner
            return self._owners.get(id(getattr(node, "variable", None)), "")
        index = bisect_right(self._starts, seq) - 1
        return self._keys[index] if index >= 0 else ""

    def _classify(self, func: Any) -> Tuple[Any, ...]:
        """(formula or _FREE or None, operator name, forward and backward [calls, flops, macs] of the overload)."""
        packet = func.overloadpacket
        name = str(packet)
        if packet in NO_FLOPS:
            return _FREE, name
        formula = FORMULAS.get(packet)
        if formula is None:
            warnings.warn(f"sbprof.measuring.flops: no FLOP formula for operator {name}; its FLOPs are not counted "
                          f"(listed in FlopCount.untracked)", UntrackedOperatorWarning, stacklevel=2)
            return None, name
        return formula, name, [0, 0, 0], [0, 0, 0]

    def _record(self, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> None:
        self.operators += 1
        entry = self._cache.get(func)
        if entry is None:
            entry = self._cache[func] = self._classify(func)
        formula = entry[0]
        if formula is _FREE:
            return
        if formula is None:
            self._untracked[entry[1]] += 1
            return
        try:
            macs, flops = formula(args, kwargs, out)
        except Exception as exc:  # a formula must never break the model's run: report instead
            if entry[1] not in self._untracked:
                warnings.warn(f"sbprof.measuring.flops: the formula of {entry[1]} failed ({exc!r}); counted as untracked",
                              UntrackedOperatorWarning, stacklevel=2)
            self._untracked[entry[1]] += 1
            return
        node = _current_autograd_node()
        if node is None:
            module, op = self._forward[self._stack[-1]], entry[2]
        else:
            self._saw_backward = True
            module, op = self._backward[self._backward_owner(node)], entry[3]
        if macs:
            self._precisions[node is not None][_precision_of(entry[1], args)] += macs
        module[0] += flops
        module[1] += macs
        op[0] += 1
        op[1] += flops
        op[2] += macs

    def result(self, backward: Optional[bool] = None) -> FlopCount:
        """The counts so far.

        Arguments
        ---------
        backward : bool, optional
            Whether backward figures are reported (None: when a backward
            operator was seen).
        """
        if not hasattr(self, "_forward"):
            raise MeasurementError("FlopCounter.result() called before the counter was entered")
        has_backward = self._saw_backward if backward is None else backward
        names = [name for name, _ in self._named] or [""]
        types = {name: type(module).__name__ for name, module in self._named}
        # own work per module, then children's totals added to their parents, deepest first
        own = {(name, b): (self._backward if b else self._forward).get(name, [0, 0])
               for name in names for b in (False, True)}
        total = {key: list(value) for key, value in own.items()}
        for name in reversed(names[1:] if names[0] == "" else names):
            parent = name.rpartition(".")[0]
            for b in (False, True):
                child, acc = total[name, b], total[parent, b]
                acc[0] += child[0]
                acc[1] += child[1]
        rows = []
        for name in names:
            fwd, bwd = total[name, False], total[name, True]
            calls = self._calls.get(name, 0)
            if name and not calls and not fwd[0] and not fwd[1]:
                continue
            mine, mine_bwd = own[name, False], own[name, True]
            rows.append(ModuleFlops(
                name, types.get(name, ""), name.count(".") + 1 if name else 0, calls, fwd[0], fwd[1], mine[0],
                mine[1], *((bwd[0], bwd[1], mine_bwd[0], mine_bwd[1]) if has_backward else ())))
        ops: Dict[str, List[int]] = defaultdict(lambda: [0] * 6)
        for entry in self._cache.values():
            if len(entry) == 4:  # priced operators; overloads of one operator add up
                values = ops[entry[1]]
                for i, value in enumerate(entry[2] + entry[3]):
                    values[i] += value
        forward_total, backward_total = total["", False], total["", True]
        by_precision = dict(self._precisions[0])
        for precision, macs in (self._precisions[1].items() if has_backward else ()):
            by_precision[precision] = by_precision.get(precision, 0) + macs
        return FlopCount(
            flops=forward_total[0], macs=forward_total[1],
            backward_flops=backward_total[0] if has_backward else None,
            backward_macs=backward_total[1] if has_backward else None,
            modules=tuple(rows),
            operators=tuple(OperatorFlops(name, *values) for name, values in sorted(ops.items())),
            untracked=dict(sorted(self._untracked.items())), conventions=CONVENTIONS,
            macs_by_precision=dict(sorted(by_precision.items())))


def _precision_of(name: str, args: Tuple[Any, ...]) -> str:
    """The precision one product ran in, from its first tensor argument (see :func:`work_precision`): cuDNN's
    operators (convolutions, RNNs) follow cuDNN's TF32 switch, the others the matmul one."""
    tensor = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if tensor is None:
        return "unknown"
    cudnn = "convolution" in name or "cudnn" in name
    tf32 = torch.backends.cudnn.allow_tf32 if cudnn else torch.backends.cuda.matmul.allow_tf32
    return work_precision(tensor.dtype, tensor.device.type, tf32)


def _tensors(tree: Any) -> List[torch.Tensor]:
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


def count_flops(model: torch.nn.Module, *example_inputs: Any, backward: bool = False,
                **example_kwargs: Any) -> FlopCount:
    """FLOPs and MACs of ``model(*example_inputs, **example_kwargs)``, per module and per operator.

    With ``backward=True`` the backward is counted too, seeded with ones for
    every floating-point output that requires a gradient, as gradients of the
    trainable parameters and of the inputs that require one. It runs through
    ``torch.autograd.grad``: the parameters' ``.grad`` are left untouched.
    The model runs in the mode it is in (``train()``/``eval()``), and its
    outputs are those of a plain call.

    Arguments
    ---------
    model : torch.nn.Module
        The model; its submodules get rows by their registered names.
    *example_inputs, **example_kwargs
        What the model is called with (``backward`` is reserved).
    backward : bool
        Also count the backward.

    Returns
    -------
    FlopCount

    Example
    -------
    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU())
    >>> c = count_flops(model, torch.ones(4, 16), backward=True)
    >>> c.macs == 4 * 16 * 32 and c.flops == 2 * c.macs + 4 * 32 + 4 * 32   # product, bias, relu
    True
    >>> c.module("0").macs == c.macs and c.backward_macs == 4 * 16 * 32   # weight gradient only
    True
    """
    if not isinstance(model, torch.nn.Module):
        raise ConfigError(f"count_flops needs a torch.nn.Module, got {type(model).__name__}")
    counter = FlopCounter(model)
    with (torch.enable_grad() if backward else contextlib.nullcontext()), counter:
        try:
            output = model(*example_inputs, **example_kwargs)
        except Exception as exc:
            raise ConfigError(f"{type(model).__name__} failed on the example inputs: {exc}") from exc
        if backward:
            _backward(model, output, _tensors((example_inputs, example_kwargs)))
    return counter.result(backward=backward)


def _backward(model: torch.nn.Module, output: Any, inputs: List[torch.Tensor]) -> None:
    outputs = [t for t in _tensors(output) if t.requires_grad and (t.is_floating_point() or t.is_complex())]
    if not outputs:
        raise ConfigError(f"backward=True, but no floating-point output of {type(model).__name__} requires a "
                          f"gradient (all parameters frozen, or called under torch.no_grad?)")
    leaves = [p for p in model.parameters() if p.requires_grad] + [t for t in inputs if t.requires_grad]
    torch.autograd.grad(outputs, leaves, grad_outputs=[torch.ones_like(t) for t in outputs], allow_unused=True)
