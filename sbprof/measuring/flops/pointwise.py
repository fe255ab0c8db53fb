"""Formulas of element-wise operators: arithmetic, activations, softmax, dropout.

One rule for all: an element-wise operator costs a fixed number of FLOPs per
element of its output, given in :data:`PER_ELEMENT`:

- 1 for every arithmetic operation (``x + y``, ``x * 2``, ``-x``, in place or
  not), comparison, and every elementary or activation function (``exp``,
  ``tanh``, ``sigmoid``, ``gelu``, ``silu``...): a library evaluates these in a
  handful of instructions whose count depends on the library, so each counts
  as one operation, as ``exp`` does;
- 2 for the backward of an activation (its derivative, times the incoming
  gradient), for ``addcmul``/``addcdiv``/``lerp``, for GLU (a sigmoid and a
  product per output), and for dropout (mask multiply and rescale);
- softmax and log-softmax 5 (max, subtract, exp, sum, divide or log-subtract);
  their backward 4.

The ``_foreach_`` list forms optimisers use count the same per element of
every tensor in the list. Only floating-point (or complex) work is counted: integer and boolean
arithmetic (lengths, masks, indices) costs 0 FLOPs. An ``add``/``sub`` whose
``alpha`` is not 1 adds one multiply per element.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

from sbprof.measuring.flops.cost import ZERO, Cost, Formula, first, flop_cost, is_float

#: FLOPs per output element -> aten operators.
_BY_COST: Dict[int, Tuple[str, ...]] = {
    1: ("add", "sub", "rsub", "mul", "div", "neg", "abs", "sgn", "sign", "reciprocal", "square",
        "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "pow",
        "sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "atan", "atan2", "erf", "erfc", "erfinv",
        "tanh", "sigmoid", "logit", "relu", "relu6", "gelu", "silu", "elu", "celu", "selu",
        "leaky_relu", "hardtanh", "hardswish", "hardsigmoid", "softplus", "mish", "threshold",
        "_prelu_kernel", "clamp", "clamp_min", "clamp_max", "maximum", "minimum", "fmax", "fmin",
        "fmod", "remainder", "floor", "ceil", "round", "trunc", "frac", "hypot", "xlogy",
        "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "nan_to_num"),
    2: ("addcmul", "addcdiv", "lerp", "glu", "native_dropout_backward",
        "threshold_backward", "sigmoid_backward", "tanh_backward", "gelu_backward", "silu_backward",
        "elu_backward", "leaky_relu_backward", "hardtanh_backward", "hardswish_backward",
        "hardsigmoid_backward", "softplus_backward", "mish_backward", "logit_backward",
        "glu_backward", "_prelu_kernel_backward"),
    4: ("_softmax_backward_data", "_log_softmax_backward_data", "_masked_softmax_backward"),
    5: ("_softmax", "_log_softmax", "_safe_softmax", "_masked_softmax"),
}

#: aten operator name -> FLOPs per output element.
PER_ELEMENT: Dict[str, int] = {name: cost for cost, names in _BY_COST.items() for name in names}

_WITH_ALPHA = ("add", "sub", "rsub")


def _counted(args: Tuple[Any, ...], result: Any) -> bool:
    """Floating-point work: the output, or (for comparisons) the first input, is floating point."""
    return is_float(result) or is_float(args[0] if args else None)


def per_element(cost: int, name: str, for_each: bool = False) -> Formula:
    """The formula of an element-wise operator costing ``cost`` FLOPs per output element;
    with ``for_each``, of its ``_foreach_`` form (optimisers), applied to a list of tensors.

    Example
    -------
    >>> import torch
    >>> f = per_element(1, "mul")
    >>> f((torch.ones(3, 4), 2.0), {}, torch.ones(3, 4)).flops
    12
    >>> f((torch.ones(3, dtype=torch.long), 2), {}, torch.ones(3, dtype=torch.long)).flops  # integers: 0
    0
    >>> per_element(2, "lerp", for_each=True)(([torch.ones(3), torch.ones(5)], [], 0.1), {}, None).flops
    16
    """
    alpha = name in _WITH_ALPHA

    def formula(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
        per = cost + (1 if alpha and kwargs.get("alpha", 1) != 1 else 0)
        if for_each:  # in place or not, the outputs have the shapes of the first list
            return flop_cost(per * sum(t.numel() for t in args[0] if is_float(t)))
        result = first(out)
        if not _counted(args, result):
            return ZERO
        return flop_cost(per * result.numel())

    formula.__doc__ = f"``{'_foreach_' if for_each else ''}{name}``: {cost} FLOP(s) per output element."
    return formula


def native_dropout(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``native_dropout(input, p, train)``: 2 per element in training, nothing when it passes through."""
    train = args[2] if len(args) > 2 else kwargs.get("train")
    if train is False or not is_float(args[0]):
        return ZERO
    return flop_cost(2 * args[0].numel())


def embedding_dense_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """Scattering ``grad_output`` into the embedding table: one add per gradient element."""
    return flop_cost(args[0].numel())


# In-place variants (``add_``, ``sigmoid_``) and list forms (``_foreach_add_``) are operators
# of their own; names that do not exist in this torch are skipped when the table is built.
FORMULAS: Dict[str, Formula] = {
    **{variant: per_element(cost, name) for name, cost in PER_ELEMENT.items() for variant in (name, name + "_")},
    **{variant: per_element(cost, name, for_each=True) for name, cost in PER_ELEMENT.items()
       for variant in ("_foreach_" + name, "_foreach_" + name + "_")},
    "native_dropout": native_dropout,
    "embedding_dense_backward": embedding_dense_backward,
}
