"""Formulas of the dense operators: matrix products, convolutions, FFTs.

Counts are those of the textbook algorithm on dense operands: a product of an
``m x k`` by a ``k x n`` matrix is ``m*k*n`` MACs whatever kernel runs it.
``linear`` and ``matmul`` never reach the dispatcher under eager execution:
they decompose into ``mm``/``addmm``/``bmm`` first, and are counted there.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Sequence, Tuple

from sbprof.measuring.flops.cost import Cost, Formula, arg, mac_cost, prod


def _scaling_flops(out_numel: int, beta: Any, alpha: Any) -> int:
    """Adding ``beta * self`` to ``alpha * (a @ b)``: an add per element, and a
    multiply for each factor that is not 1 (none when ``beta`` is 0)."""
    flops = 0
    if beta != 0:
        flops += out_numel * (1 + (beta != 1))
    return flops + out_numel * (alpha != 1)


def mm(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``a @ b`` for ``a: (m, k)``, ``b: (k, n)``: ``m*k*n`` MACs.

    Example
    -------
    >>> import torch
    >>> mm((torch.ones(2, 3), torch.ones(3, 4)), {}, None)
    Cost(macs=24, flops=48)
    """
    a, b = args[0], args[1]
    return mac_cost(a.shape[0] * a.shape[1] * b.shape[1])


def addmm(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``beta * bias + alpha * (a @ b)``: the product's MACs plus the bias add."""
    a, b = args[1], args[2]
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    return mac_cost(m * k * n, _scaling_flops(m * n, beta, alpha))


def bmm(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """Batched ``a @ b`` for ``a: (B, m, k)``, ``b: (B, k, n)``: ``B*m*k*n`` MACs."""
    a, b = args[0], args[1]
    return mac_cost(a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2])


def baddbmm(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``beta * self + alpha * (a @ b)`` batched: the product's MACs plus the add."""
    a, b = args[1], args[2]
    batch, m, k, n = a.shape[0], a.shape[1], a.shape[2], b.shape[2]
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    return mac_cost(batch * m * k * n, _scaling_flops(batch * m * n, beta, alpha))


def _conv_macs(out_numel: int, in_numel: int, weight_shape: Sequence[int], transposed: bool) -> int:
    """MACs of a (grouped) convolution.

    The weight is ``(C_out, C_in / groups, *kernel)``, or ``(C_in, C_out /
    groups, *kernel)`` when transposed: every output element (input element
    when transposed) takes ``weight[1] * prod(kernel)`` MACs.
    """
    per_element = prod(weight_shape[1:])
    return (in_numel if transposed else out_numel) * per_element


def convolution(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """N-d convolution, plain or transposed, any groups/stride/dilation, plus the bias add.

    Example
    -------
    >>> import torch
    >>> x, w = torch.ones(1, 4, 10), torch.ones(6, 2, 3)   # groups=2, kernel 3
    >>> y = torch.ones(1, 6, 8)
    >>> convolution((x, w, None, [1], [0], [1], False, [0], 2), {}, y).macs == 8 * 6 * 2 * 3
    True
    """
    x, weight, bias = args[0], args[1], args[2]
    transposed = bool(args[6])
    macs = _conv_macs(out.numel(), x.numel(), weight.shape, transposed)
    return mac_cost(macs, out.numel() if bias is not None else 0)


def convolution_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """Gradients of a convolution: input and weight each cost the forward's MACs; the
    bias gradient one add per element of ``grad_output``; as ``output_mask`` asks."""
    grad_output, x, weight = args[0], args[1], args[2]
    transposed, mask = bool(args[7]), args[10]
    forward_macs = _conv_macs(grad_output.numel(), x.numel(), weight.shape, transposed)
    macs = forward_macs * (int(bool(mask[0])) + int(bool(mask[1])))
    return mac_cost(macs, grad_output.numel() if mask[2] else 0)


def _fft_flops(shape: Sequence[int], dims: Sequence[int], per_point_log: float) -> int:
    """``per_point_log * N * log2(N)`` per transform of ``N`` points over ``dims``."""
    points = prod([shape[d] for d in dims])
    if points <= 1:
        return 0
    transforms = prod(shape) // points
    return int(round(transforms * per_point_log * points * math.log2(points)))


def _normalised(flops: int, normalization: Any, out: Any) -> Cost:
    """An FFT's cost, plus one multiply per output element when it is normalised."""
    return Cost(0, flops + (out.numel() if normalization else 0))


def fft_c2c(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """Complex FFT: ``5 N log2 N`` real FLOPs per transform of ``N`` points (the
    radix-2 count FFT benchmarks use), counted as non-MAC work.

    Example
    -------
    >>> import torch
    >>> fft_c2c((torch.ones(3, 8, dtype=torch.complex64), [1], 0, True), {}, None).flops == 3 * 5 * 8 * 3
    True
    """
    x = args[0]
    return _normalised(_fft_flops(x.shape, args[1], 5.0), arg(args, kwargs, 2, "normalization"), out)


def fft_r2c(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """Real-input FFT: half a complex one, ``2.5 N log2 N`` per transform."""
    x = args[0]
    return _normalised(_fft_flops(x.shape, args[1], 2.5), arg(args, kwargs, 2, "normalization"), out)


def fft_c2r(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """Real-output inverse FFT: ``2.5 N log2 N`` per transform, ``N`` read from the output."""
    return _normalised(_fft_flops(out.shape, args[1], 2.5), arg(args, kwargs, 2, "normalization"), out)


FORMULAS: Dict[str, Formula] = {
    "mm": mm,
    "addmm": addmm,
    "bmm": bmm,
    "baddbmm": baddbmm,
    "convolution": convolution,
    "_convolution": convolution,
    "convolution_backward": convolution_backward,
    "_fft_c2c": fft_c2c,
    "_fft_r2c": fft_r2c,
    "_fft_c2r": fft_c2r,
}
