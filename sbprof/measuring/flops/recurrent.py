"""Formulas of the fused recurrent operators (LSTM, GRU, plain RNN).

What reaches the dispatcher depends on the path. Measured with torch 2.14 on
CPU: a float32 ``nn.LSTM`` without projections runs one
``mkldnn_rnn_layer`` per layer and direction (``mkldnn_rnn_layer_backward`` in
backward); ``nn.GRU``, ``nn.RNN``, packed sequences, float64 and
``proj_size`` LSTMs decompose into ``mm``/``addmm`` and element-wise
operators, counted one by one. On CUDA, cuDNN runs the whole stack as
``_cudnn_rnn``; without cuDNN the cells run as ``_thnn_fused_lstm_cell`` /
``_thnn_fused_gru_cell`` beside ``mm`` products counted elsewhere.

Conventions, per time step, batch element and hidden unit (``G`` gates:
4 LSTM, 3 GRU, 1 RNN):

- MACs: every element of every weight matrix (input, recurrent, projection)
  is one MAC per step and batch element; backward twice that (gradients of
  the data and of the weights).
- Cell FLOPs, matching what the decomposed CPU path counts operator by
  operator: LSTM 13 (4 gate adds, 3 sigmoids, 2 tanh, 3 for the cell update,
  1 for the output), GRU 10, RNN 2; each bias vector adds ``G``. Backward:
  twice the cell FLOPs without biases, plus ``G`` for each bias gradient the
  operator returns (a sum over steps and batch).
- Dropout between layers is not counted.

The fused kernels compute every gradient, also that of the (zero) initial
state; the decomposed path skips gradients nobody needs, so its backward
can count fewer MACs for the same layer (one ``B x 4H x H`` product per
layer and direction for an LSTM: ``tests/measuring/flops/test_flops_counter.py``).
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

from sbprof.measuring.flops.cost import Cost, Formula, arg, flop_cost, mac_cost

#: mode number (cuDNN / oneDNN enumeration) -> (name, gates, cell FLOPs without biases)
MODES: Dict[int, Tuple[str, int, int]] = {0: ("rnn_relu", 1, 2), 1: ("rnn_tanh", 1, 2), 2: ("lstm", 4, 13),
                                          3: ("gru", 3, 10)}


def _steps(x: Any) -> int:
    """Time steps x batch elements of ``(T, B, I)``, ``(B, T, I)`` or packed ``(sum of batch sizes, I)``."""
    return x.numel() // int(x.shape[-1])


def _cell(mode: int, biases: int) -> int:
    _, gates, flops = MODES[int(mode)]
    return flops + biases * gates


def _cell_backward(mode: int, bias_grads: int) -> int:
    _, gates, flops = MODES[int(mode)]
    return 2 * flops + bias_grads * gates


def mkldnn_rnn_layer(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """One layer and direction on oneDNN: ``(input, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse,
    batch_sizes, mode, hidden_size, num_layers, has_biases, ...)``. Without biases the
    bias slots hold placeholder tensors, so ``has_biases`` is read, not their presence.

    Example
    -------
    >>> import torch
    >>> x, w_ih, w_hh = torch.ones(5, 2, 8), torch.ones(24, 8), torch.ones(24, 6)
    >>> c = mkldnn_rnn_layer((x, w_ih, w_hh, None, None, None, None, False, [], 2, 6, 1, True), {}, None)
    >>> c.macs == 5 * 2 * (24 * 8 + 24 * 6), c.flops - 2 * c.macs == 5 * 2 * 6 * (13 + 8)
    (True, True)
    """
    x, w_ih, w_hh, mode, hidden, biases = args[0], args[1], args[2], args[9], int(args[10]), bool(args[12])
    steps = _steps(x)
    return mac_cost(steps * (w_ih.numel() + w_hh.numel()), steps * hidden * _cell(mode, 2 * biases))


def mkldnn_rnn_layer_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``(input, w_ih, w_hh, b_ih, b_hh, hx, cx, output, hy, cy, grad_output, grad_hy, grad_cy, reverse,
    mode, hidden_size, num_layers, has_biases, ...)``; one bias gradient is returned."""
    x, w_ih, w_hh, mode, hidden, biases = args[0], args[1], args[2], args[14], int(args[15]), bool(args[17])
    steps = _steps(x)
    return mac_cost(2 * steps * (w_ih.numel() + w_hh.numel()), steps * hidden * _cell_backward(mode, int(biases)))


def _cudnn_weights(weights: Any) -> Tuple[int, int]:
    """(elements of the weight matrices, number of bias vectors) of a cuDNN weight list."""
    matrices = sum(w.numel() for w in weights if w.dim() == 2)
    return matrices, sum(1 for w in weights if w.dim() == 1)


def cudnn_rnn(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """The whole stack on cuDNN: ``(input, weights, weight_stride0, weight_buf, hx, cx, mode,
    hidden_size, proj_size, num_layers, batch_first, dropout, train, bidirectional, batch_sizes, ...)``."""
    x, weights, mode, hidden = args[0], args[1], args[6], int(args[7])
    layers, directions = int(args[9]), 2 if args[13] else 1
    matrices, bias_vectors = _cudnn_weights(weights)
    cells = layers * directions
    steps = _steps(x)
    return mac_cost(steps * matrices, steps * hidden * cells * _cell(mode, bias_vectors // cells))


def cudnn_rnn_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``(input, weights, weight_stride0, weight_buf, hx, cx, output, grad_output, grad_hy, grad_cy,
    mode, hidden_size, proj_size, num_layers, batch_first, dropout, train, bidirectional, batch_sizes,
    dropout_state, reserve, output_mask)``: ATen always runs the data gradients (cuDNN's weight
    gradient needs them), the weight gradients (and every bias gradient) when ``output_mask[3]``."""
    x, weights, mode, hidden = args[0], args[1], args[10], int(args[11])
    layers, directions = int(args[13]), 2 if args[17] else 1
    weight = bool(args[21][3])
    matrices, bias_vectors = _cudnn_weights(weights)
    cells = layers * directions
    steps = _steps(x)
    bias_grads = bias_vectors // cells if weight else 0
    return mac_cost(steps * matrices * (1 + weight), steps * hidden * cells * _cell_backward(mode, bias_grads))


def fused_lstm_cell(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``_thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias, hidden_bias)``: the cell only."""
    cx = args[2]
    biases = int(arg(args, kwargs, 3, "input_bias") is not None) + int(arg(args, kwargs, 4, "hidden_bias") is not None)
    return flop_cost(cx.numel() * _cell(2, biases))


def fused_lstm_cell_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``_thnn_fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace, has_bias)``."""
    return flop_cost(args[2].numel() * _cell_backward(2, int(bool(args[5]))))


def fused_gru_cell(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``_thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias, hidden_bias)``: the cell only."""
    hx = args[2]
    biases = int(arg(args, kwargs, 3, "input_bias") is not None) + int(arg(args, kwargs, 4, "hidden_bias") is not None)
    return flop_cost(hx.numel() * _cell(3, biases))


def fused_gru_cell_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``_thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias)``: two bias gradients."""
    return flop_cost(args[0].numel() * _cell_backward(3, 2 * int(bool(args[2]))))


FORMULAS: Dict[str, Formula] = {
    "mkldnn_rnn_layer": mkldnn_rnn_layer,
    "mkldnn_rnn_layer_backward": mkldnn_rnn_layer_backward,
    "_cudnn_rnn": cudnn_rnn,
    "_cudnn_rnn_backward": cudnn_rnn_backward,
    "_thnn_fused_lstm_cell": fused_lstm_cell,
    "_thnn_fused_lstm_cell_backward_impl": fused_lstm_cell_backward,
    "_thnn_fused_gru_cell": fused_gru_cell,
    "_thnn_fused_gru_cell_backward": fused_gru_cell_backward,
}
