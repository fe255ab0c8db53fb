"""Formulas of layer, batch, group and instance normalisation (instance norm runs as batch norm),
and of weight normalisation.

Per element of the normalised input (``N`` elements):

- forward with statistics computed from the input (layer and group norm,
  batch norm in training): 5 FLOPs (mean: an add; variance: a subtract, a
  square, an add; normalise: a multiply by the inverse deviation); batch norm
  with running statistics (inference): 2 (subtract, multiply); an affine
  weight and bias add 1 each;
- backward: the input gradient 9 (recompute the normalised value 2, the two
  mean terms 4, two subtracts, the final scale 1), plus 1 with a weight; with
  running statistics 1, plus 1 with a weight; the weight gradient 2 and the
  bias gradient 1, each only when ``output_mask`` asks for it.

Per-group scalars (one ``1/n``, ``+eps`` and square root per normalised
group) are not counted: they are negligible beside the per-element work.

Weight normalisation (``torch.nn.utils.weight_norm`` and
``parametrizations.weight_norm``, as in HiFi-GAN vocoders) reparametrises a
weight ``w = g * v / ||v||``, the norm taken over every dimension but
``dim``. With ``dim`` the first or last dimension it runs as one fused
operator, counted as its CPU kernel computes it, per-group work included
(the decomposed path counts it too); for ``n`` elements of ``v`` in ``m``
groups (elements of ``g``):

- forward ``3n + 2m``: the norm 2 per element (square, add) and a root per
  group, ``g / norm`` once per group, one multiply per element; exactly what
  the decomposed path (any other ``dim``) counts operator by operator;
- backward ``5n + 4m``: ``sum(grad_w * v)`` 2 per element, ``a * grad_w - b * v``
  3 per element, and per group ``grad_g = sum / norm``, ``a = g / norm``,
  ``b = a * grad_g / norm`` (4). Both gradients are always computed.
"""
from __future__ import annotations

from typing import Any, Dict, Sequence, Tuple

from sbprof.measuring.flops.cost import Cost, Formula, flop_cost

_STATISTICS = 5
_RUNNING = 2
_GRAD_INPUT = 9
_GRAD_INPUT_RUNNING = 1
_GRAD_WEIGHT = 2
_GRAD_BIAS = 1


def _forward(x: Any, weight: Any, bias: Any, from_input: bool) -> Cost:
    per = (_STATISTICS if from_input else _RUNNING) + int(weight is not None) + int(bias is not None)
    return flop_cost(per * x.numel())


def _backward(x: Any, weight: Any, from_input: bool, mask: Sequence[bool]) -> Cost:
    per = 0
    if mask[0]:
        per += (_GRAD_INPUT if from_input else _GRAD_INPUT_RUNNING) + int(weight is not None)
    if mask[1]:
        per += _GRAD_WEIGHT
    if mask[2]:
        per += _GRAD_BIAS
    return flop_cost(per * x.numel())


def layer_norm(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``native_layer_norm(input, normalized_shape, weight, bias, eps)``.

    Example
    -------
    >>> import torch
    >>> x = torch.ones(2, 3, 8)
    >>> layer_norm((x, [8], torch.ones(8), torch.zeros(8), 1e-5), {}, None).flops == 7 * 48
    True
    """
    return _forward(args[0], args[2], args[3], from_input=True)


def batch_norm(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``native_batch_norm`` / ``cudnn_batch_norm(input, weight, bias, running_mean, running_var, training, ...)``."""
    from_input = bool(args[5]) or args[3] is None
    return _forward(args[0], args[1], args[2], from_input)


def group_norm(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``native_group_norm(input, weight, bias, N, C, HxW, group, eps)``."""
    return _forward(args[0], args[1], args[2], from_input=True)


def layer_norm_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)``."""
    return _backward(args[1], args[5], True, args[7])


def batch_norm_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
    save_invstd, train, eps, output_mask)``."""
    return _backward(args[1], args[2], bool(args[7]), args[9])


def cudnn_batch_norm_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``cudnn_batch_norm_backward(input, grad_output, weight, ...)``: training statistics, all three gradients."""
    return _backward(args[0], args[2], True, (True, True, True))


def group_norm_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask)``."""
    return _backward(args[1], args[4], True, args[9])


def weight_norm(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``_weight_norm_interface(v, g, dim)``: ``3n + 2m``.

    Example
    -------
    >>> import torch
    >>> weight_norm((torch.ones(6, 4, 3), torch.ones(6, 1, 1)), {}, None).flops == 3 * 72 + 2 * 6
    True
    """
    return flop_cost(3 * args[0].numel() + 2 * args[1].numel())


def weight_norm_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``_weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim)``: ``5n + 4m``."""
    return flop_cost(5 * args[1].numel() + 4 * args[2].numel())


FORMULAS: Dict[str, Formula] = {
    "native_layer_norm": layer_norm,
    "native_batch_norm": batch_norm,
    "cudnn_batch_norm": batch_norm,
    "native_group_norm": group_norm,
    "native_layer_norm_backward": layer_norm_backward,
    "native_batch_norm_backward": batch_norm_backward,
    "cudnn_batch_norm_backward": cudnn_batch_norm_backward,
    "native_group_norm_backward": group_norm_backward,
    "_weight_norm_interface": weight_norm,
    "_weight_norm_interface_backward": weight_norm_backward,
}
