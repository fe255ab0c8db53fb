"""Formulas of interpolation: ``nn.Upsample`` / ``F.interpolate`` (linear, bilinear, bicubic, trilinear, nearest).

Counted as ATen's generic CPU kernel computes them. An output element is
interpolated from ``k`` taps per interpolated dimension (``k = 2`` linear,
``4`` cubic), the dimensions nested: along the outermost one, ``k`` values
each interpolated along the remaining dimensions, multiplied by their weight
and summed (``k`` multiplies, ``k - 1`` adds). Per output element, over ``d``
dimensions: ``F(d) = k*F(d-1) + 2k - 1``, ``F(0) = 0``, that is
``(2k - 1)(k**d - 1)/(k - 1)``:

- forward: linear 3, bilinear 9, trilinear 21, bicubic 35 FLOPs per output
  element; nearest (and nearest-exact) copies, 0 (in :data:`NO_FLOPS
  <sbprof.measuring.flops.formulas.NO_FLOPS>`, never untracked);
- backward: every gradient element is spread over its ``k**d`` taps, each
  the product of its ``d`` weights times the gradient (``d`` multiplies)
  added into the input gradient (1 add): ``k**d * (d + 1)`` per element of
  ``grad_output`` (linear 4, bilinear 12, trilinear 32, bicubic 48); nearest
  adds each gradient element to its source, 1.

Source indices and weights are computed once per output position along each
dimension, not per element: not counted. ``align_corners`` and the scale only
move the taps. Interpolating integer images (``uint8``) costs 0 FLOPs.
ATen's channels-last bilinear kernel (also picked for 3-channel images on one
thread) arranges the arithmetic differently: not modelled, the count does not
depend on the memory layout.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

from sbprof.measuring.flops.cost import ZERO, Cost, Formula, first, flop_cost, is_float


def per_output(taps: int, dims: int) -> int:
    """FLOPs per output element of a ``taps``-tap interpolation nested over ``dims`` dimensions.

    Example
    -------
    >>> per_output(2, 1), per_output(2, 2), per_output(2, 3), per_output(4, 2)
    (3, 9, 21, 35)
    """
    flops = 0
    for _ in range(dims):
        flops = taps * flops + 2 * taps - 1
    return flops


def _forward(taps: int, dims: int) -> Formula:
    per = per_output(taps, dims)

    def formula(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
        return flop_cost(per * first(out).numel()) if is_float(args[0]) else ZERO

    formula.__doc__ = f"{dims}-d interpolation with {taps} taps per dimension: {per} FLOPs per output element."
    return formula


def _backward(taps: int, dims: int) -> Formula:
    per = taps ** dims * (dims + 1)

    def formula(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
        return flop_cost(per * args[0].numel())

    formula.__doc__ = f"Its backward: {per} FLOPs per ``grad_output`` element."
    return formula


def nearest_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """Nearest-neighbour backward: each ``grad_output`` element added to the input position it was copied from."""
    return flop_cost(args[0].numel())


_TAPS: Dict[str, Tuple[int, int]] = {
    "upsample_linear1d": (2, 1),
    "upsample_bilinear2d": (2, 2),
    "upsample_trilinear3d": (2, 3),
    "upsample_bicubic2d": (4, 2),
}

#: Forward nearest-neighbour operators, copies: listed in ``NO_FLOPS``; here for their backward.
NEAREST = ("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
           "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d")

FORMULAS: Dict[str, Formula] = {
    **{name: _forward(*taps) for name, taps in _TAPS.items()},
    **{name + "_backward": _backward(*taps) for name, taps in _TAPS.items()},
    **{name + "_backward": nearest_backward for name in NEAREST},
}
