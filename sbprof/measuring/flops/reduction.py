"""Formulas of reductions (sum, mean, var, std, max, norms) and pooling.

``n`` is the number of input elements, ``m`` of output elements:

- ``sum``, ``prod``, ``cumsum``, ``cumprod``, ``amax``/``amin``, ``max``/``min``,
  ``argmax``/``argmin``: 1 FLOP per input element (an add or compare into
  the accumulator);
- ``mean``: ``n + m`` (the adds, then one divide per output);
- ``var``: ``4n + 2m`` (mean ``n + m``, subtract, square and add per element,
  one divide per output); ``std`` one more per output (the root);
  ``var_mean``/``std_mean`` the same;
- p-norms: ``2n + m`` (power and add per element, a root per output), also
  per tensor of ``_foreach_norm``;
  ``logsumexp``: ``4n + 2m`` (max, subtract, exp, add; log and add back);
- ``mse_loss`` over ``n`` elements: a subtract, a square and an add each (``3n``),
  and one divide for ``reduction='mean'`` (``reduction='none'`` adds nothing:
  ``2n``); its backward ``3n`` (subtract, scale by 2 (and 1/n), times the
  incoming gradient);
- pooling over a window of ``k`` elements: max ``k`` compares per output,
  average ``k`` (adds and the divide); their backward one add per gradient
  element (max) or ``k`` (average); adaptive average ``n + m``, backward ``n``.

Integer reductions (lengths, masks) cost 0 FLOPs.
"""
from __future__ import annotations

from typing import Any, Dict, Sequence, Tuple

from sbprof.measuring.flops.cost import ZERO, Cost, Formula, first, flop_cost, is_float, prod


def _reduction(per_input: int, per_output: int, name: str) -> Formula:
    def formula(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
        x = args[0]
        if not is_float(x):
            return ZERO
        n, m = x.numel(), first(out).numel()
        if name in ("max", "min"):  # also the element-wise binary overload: count the larger side
            n = max(n, m)
        return flop_cost(per_input * n + per_output * m)

    formula.__doc__ = f"``{name}``: {per_input} FLOP(s) per input element, {per_output} per output element."
    return formula


def _window(kernel_size: Sequence[int], dims: int) -> int:
    """Elements in a pooling window; a single size stands for a square (cube) window."""
    sizes = list(kernel_size)
    return prod(sizes * dims if len(sizes) == 1 else sizes)


def _pool(dims: int) -> Formula:
    def formula(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
        return flop_cost(first(out).numel() * _window(args[1], dims))

    formula.__doc__ = f"{dims}-d max or average pooling: the window size per output element."
    return formula


def _avg_pool_backward(dims: int) -> Formula:
    def formula(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
        return flop_cost(args[0].numel() * _window(args[2], dims))

    formula.__doc__ = f"{dims}-d average pooling backward: the window size per gradient element."
    return formula


def max_pool_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """Max pooling backward: each gradient element is added to the input position it came from."""
    return flop_cost(args[0].numel())


def foreach_norm(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``_foreach_norm(tensors, ord)`` (gradient clipping): a p-norm of each tensor."""
    return flop_cost(sum(2 * t.numel() + 1 for t in args[0] if is_float(t)))


def adaptive_avg_pool(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """Adaptive average pooling: each input element added once, each output divided once.

    Example
    -------
    >>> import torch
    >>> adaptive_avg_pool((torch.ones(2, 4, 10, 6), [1, 1]), {}, torch.ones(2, 4, 1, 1)).flops
    488
    """
    return flop_cost(args[0].numel() + first(out).numel())


def adaptive_avg_pool_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """Adaptive average pooling backward: one scaled copy per input element."""
    return flop_cost(args[1].numel())


_NONE, _MEAN = 0, 1  # aten's reduction enum (0 none, 1 mean, 2 sum)


def mse_loss(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """Mean squared error: ``3n`` FLOPs (``2n`` without reduction), and one divide for the mean.

    Example
    -------
    >>> import torch
    >>> mse_loss((torch.ones(4, 5), torch.zeros(4, 5)), {}, torch.tensor(1.0))
    Cost(macs=0, flops=61)
    """
    x = args[0]
    if not is_float(x):
        return ZERO
    reduction = args[2] if len(args) > 2 else kwargs.get("reduction", _MEAN)
    n = x.numel()
    return flop_cost((2 * n if reduction == _NONE else 3 * n) + (reduction == _MEAN))


def mse_loss_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """Mean squared error's backward (grad_output, input, target, reduction): ``3n`` FLOPs."""
    x = args[1]
    return flop_cost(3 * x.numel()) if is_float(x) else ZERO


_REDUCTIONS: Dict[str, Tuple[int, int]] = {
    **dict.fromkeys(("sum", "prod", "cumsum", "cumprod", "amax", "amin", "max", "min", "argmax", "argmin"), (1, 0)),
    "mean": (1, 1),
    **dict.fromkeys(("var", "var_mean"), (4, 2)),
    **dict.fromkeys(("std", "std_mean"), (4, 3)),
    **dict.fromkeys(("norm", "linalg_vector_norm"), (2, 1)),
    "logsumexp": (4, 2),
}

FORMULAS: Dict[str, Formula] = {
    **{name: _reduction(n, m, name) for name, (n, m) in _REDUCTIONS.items()},
    "_foreach_norm": foreach_norm,
    "mse_loss": mse_loss,
    "mse_loss_backward": mse_loss_backward,
    "max_pool2d_with_indices": _pool(2),
    "max_pool3d_with_indices": _pool(3),
    "max_pool2d_with_indices_backward": max_pool_backward,
    "max_pool3d_with_indices_backward": max_pool_backward,
    "avg_pool2d": _pool(2),
    "avg_pool3d": _pool(3),
    "avg_pool2d_backward": _avg_pool_backward(2),
    "avg_pool3d_backward": _avg_pool_backward(3),
    "_adaptive_avg_pool2d": adaptive_avg_pool,
    "_adaptive_avg_pool3d": adaptive_avg_pool,
    "_adaptive_avg_pool2d_backward": adaptive_avg_pool_backward,
    "_adaptive_avg_pool3d_backward": adaptive_avg_pool_backward,
}
