"""The cost one operator call adds up to, and the argument readers every formula shares.

A formula receives an operator's arguments as the dispatcher hands them over
(positional arguments, keyword-only ones in ``kwargs``; trailing arguments
left at their default are omitted) and its output, and returns a
:class:`Cost`. Nothing here imports torch: formulas only read ``.shape``,
``.numel()`` and ``.dtype`` of what they get.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, NamedTuple, Sequence, Tuple


class Cost(NamedTuple):
    """Multiply-accumulates and floating-point operations of one operator call.

    ``flops`` always includes ``2 * macs`` (one multiply and one add per MAC)
    plus any work that is not a multiply-accumulate (a bias add, a softmax).

    Example
    -------
    >>> c = mac_cost(6, extra_flops=3)
    >>> (c.macs, c.flops)
    (6, 15)
    """

    macs: int
    flops: int


ZERO = Cost(0, 0)

#: A formula: (args, kwargs, output) -> Cost.
Formula = Callable[[Tuple[Any, ...], Dict[str, Any], Any], Cost]


def mac_cost(macs: int, extra_flops: int = 0) -> Cost:
    """The cost of ``macs`` multiply-accumulates plus ``extra_flops`` other operations."""
    return Cost(int(macs), 2 * int(macs) + int(extra_flops))


def flop_cost(flops: int) -> Cost:
    """The cost of work that has no multiply-accumulate in it."""
    return Cost(0, int(flops))


def arg(args: Sequence[Any], kwargs: Dict[str, Any], index: int, name: str, default: Any = None) -> Any:
    """Argument ``name`` at schema position ``index``, wherever the dispatcher put it.

    Example
    -------
    >>> arg((1, 2), {}, 1, "b"), arg((1,), {"b": 5}, 1, "b"), arg((1,), {}, 1, "b", 7)
    (2, 5, 7)
    """
    if index < len(args):
        return args[index]
    return kwargs.get(name, default)


def first(value: Any) -> Any:
    """The first element of a multi-output result, or the value itself."""
    return value[0] if isinstance(value, (tuple, list)) else value


def is_float(tensor: Any) -> bool:
    """Whether a tensor holds floating-point (or complex) numbers; False for non-tensors."""
    dtype = getattr(tensor, "dtype", None)
    return dtype is not None and (dtype.is_floating_point or dtype.is_complex)


def prod(values: Sequence[int]) -> int:
    """Product of a shape (1 for an empty one)."""
    return math.prod(int(v) for v in values)
