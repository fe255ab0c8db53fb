"""Each formula on its own, against counts worked out by hand from the operator's math.

Operators that only run on a GPU (flash / memory-efficient / cuDNN attention,
cuDNN RNN) are checked two ways on the CPU: their formula called on the
argument layout of their schema, and the whole counter run on ``meta``
tensors, which execute the operator's shape function only.
"""
from __future__ import annotations

import math

import pytest
import torch

from sbprof.measuring.flops import FlopCounter
from sbprof.measuring.flops.attention import attention_cost
from sbprof.measuring.flops.formulas import FORMULAS, NO_FLOPS, formula_for

aten = torch.ops.aten


def cost(op, *args, out=None, **kwargs):
    return FORMULAS[op](args, kwargs, out)


def test_table_is_keyed_by_packets_and_disjoint_from_free_ops():
    assert all(isinstance(k, torch._ops.OpOverloadPacket) for k in FORMULAS)
    assert not set(FORMULAS) & NO_FLOPS
    assert formula_for(aten.digamma) is None


def test_products():
    a, b = torch.ones(5, 7), torch.ones(7, 3)
    assert cost(aten.mm, a, b) == (105, 210)
    # bias add: one per output element; beta != 1 adds a multiply, alpha != 1 another
    assert cost(aten.addmm, torch.ones(3), a, b) == (105, 210 + 15)
    assert cost(aten.addmm, torch.ones(3), a, b, beta=0.5, alpha=2.0) == (105, 210 + 3 * 15)
    assert cost(aten.addmm, torch.ones(3), a, b, beta=0) == (105, 210)
    x, y = torch.ones(4, 5, 7), torch.ones(4, 7, 3)
    assert cost(aten.bmm, x, y) == (4 * 105, 8 * 105)
    assert cost(aten.baddbmm, torch.ones(4, 5, 3), x, y) == (420, 840 + 60)


@pytest.mark.parametrize("transposed", [False, True])
def test_convolution_and_its_backward(transposed):
    # Conv2d(4 -> 8, 3x3, groups=2, stride 2) on 9x9, or its transpose (4 -> 8, groups=2)
    x = torch.ones(2, 4, 9, 9)
    weight = torch.ones(4, 4, 3, 3) if transposed else torch.ones(8, 2, 3, 3)
    out = torch.ones(2, 8, 19, 19) if transposed else torch.ones(2, 8, 4, 4)
    args = (x, weight, torch.ones(8), [2, 2], [0, 0], [1, 1], transposed, [0, 0], 2)
    # each input (transposed) / output element meets C/groups * kernel weights
    macs = 2 * 4 * 81 * 4 * 9 if transposed else 2 * 8 * 16 * 2 * 9
    assert cost(aten.convolution, *args, out=out) == (macs, 2 * macs + out.numel())
    grad_args = (out, x, weight, [8], [2, 2], [0, 0], [1, 1], transposed, [0, 0], 2)
    assert cost(aten.convolution_backward, *grad_args, [True, True, True]) == (2 * macs, 4 * macs + out.numel())
    assert cost(aten.convolution_backward, *grad_args, [False, True, False]) == (macs, 2 * macs)


def test_fft():
    x = torch.ones(3, 400)
    assert cost(aten._fft_r2c, x, [1], 0, True).flops == round(3 * 2.5 * 400 * math.log2(400))
    spectrum = torch.ones(3, 201, dtype=torch.complex64)
    assert cost(aten._fft_c2r, spectrum, [1], 2, 400, out=x).flops == round(3 * 2.5 * 400 * math.log2(400)) + 1200


def test_pointwise_rule():
    x = torch.ones(2, 3)
    assert cost(aten.add, x, x, out=x).flops == 6
    assert cost(aten.add, x, x, alpha=2, out=x).flops == 12
    assert cost(aten.sigmoid_, x, out=x).flops == 6
    assert cost(aten.tanh_backward, x, x, out=x).flops == 12
    assert cost(aten._softmax, x, -1, False, out=x).flops == 30
    assert cost(aten._softmax_backward_data, x, x, -1, torch.float32, out=x).flops == 24
    assert cost(aten.native_dropout, x, 0.1, True).flops == 12
    assert cost(aten.native_dropout, x, 0.1, False).flops == 0
    lengths = torch.tensor([3, 4])
    assert cost(aten.lt, lengths, 2, out=lengths < 2).flops == 0  # integers: no floating-point work
    assert cost(aten.lt, x, 2, out=x < 2).flops == 6
    assert all(c.macs == 0 for c in (cost(aten.mul, x, x, out=x), cost(aten.exp, x, out=x)))


def test_normalisations():
    x = torch.ones(2, 4, 10)
    n = x.numel()
    w, b = torch.ones(4), torch.ones(4)
    assert cost(aten.native_layer_norm, x, [10], torch.ones(10), torch.ones(10), 1e-5).flops == 7 * n
    assert cost(aten.native_layer_norm, x, [10], None, None, 1e-5).flops == 5 * n
    assert cost(aten.native_batch_norm, x, w, b, torch.ones(4), torch.ones(4), True, 0.1, 1e-5).flops == 7 * n
    assert cost(aten.native_batch_norm, x, w, b, torch.ones(4), torch.ones(4), False, 0.1, 1e-5).flops == 4 * n
    assert cost(aten.native_group_norm, x, w, b, 2, 4, 10, 2, 1e-5).flops == 7 * n
    backward = cost(aten.native_layer_norm_backward, x, x, [10], None, None, torch.ones(10), torch.ones(10),
                    [True, True, True])
    assert backward.flops == (9 + 1 + 2 + 1) * n
    eval_backward = cost(aten.native_batch_norm_backward, x, x, w, None, None, None, None, False, 1e-5,
                         [True, False, False])
    assert eval_backward.flops == 2 * n


def test_reductions_and_pooling():
    x = torch.ones(4, 6)
    assert cost(aten.sum, x, [1], out=torch.ones(4)).flops == 24
    assert cost(aten.mean, x, [1], out=torch.ones(4)).flops == 24 + 4
    assert cost(aten.var, x, [1], out=torch.ones(4)).flops == 4 * 24 + 2 * 4
    assert cost(aten.std, x, [1], out=torch.ones(4)).flops == 4 * 24 + 3 * 4
    assert cost(aten.sum, torch.ones(4, dtype=torch.long), out=torch.tensor(4)).flops == 0
    y = torch.ones(2, 3, 8, 8)
    assert cost(aten.max_pool2d_with_indices, y, [2], out=(torch.ones(2, 3, 4, 4), None)).flops == 96 * 4
    assert cost(aten.avg_pool2d, y, [2, 1], out=torch.ones(2, 3, 4, 8)).flops == 192 * 2


def test_mse_loss_and_its_backward_through_the_counter():
    # n elements: subtract, square, add each, and one divide for the mean; backward: subtract, scale, times the
    # incoming gradient (worked out from (x - y)^2 summed over n, divided by n)
    x = torch.randn(6, 7, requires_grad=True)
    with FlopCounter() as counter:
        torch.nn.functional.mse_loss(x, torch.zeros(6, 7)).backward()
    result = counter.result()
    assert (result.flops, result.backward_flops, result.untracked) == (3 * 42 + 1, 3 * 42, {})
    assert cost(aten.mse_loss, x, x, 2) == (0, 3 * 42) and cost(aten.mse_loss, x, x, 0) == (0, 2 * 42)


def test_attention_backends_agree_with_the_dense_formula():
    q, k = torch.ones(2, 3, 10, 16), torch.ones(2, 3, 12, 16)
    v = torch.ones(2, 3, 12, 8)
    scores = 2 * 3 * 10 * 12
    scaling = q.numel() + k.numel()  # the reference scales queries and keys by sqrt(scale) each
    forward = (scores * 24, 2 * scores * 24 + scaling + 5 * scores)
    assert cost(aten._scaled_dot_product_flash_attention_for_cpu, q, k, v) == forward
    masked = cost(aten._scaled_dot_product_flash_attention_for_cpu, q, k, v, attn_mask=torch.ones(10, 12))
    assert masked.flops == forward[1] + scores
    assert cost(aten._scaled_dot_product_flash_attention_for_cpu, q, k, v, 0.0, True).flops == forward[1] + scores
    assert cost(aten._scaled_dot_product_flash_attention, q, k, v) == forward
    assert cost(aten._scaled_dot_product_efficient_attention, q, k, v, None, True) == forward
    assert cost(aten._scaled_dot_product_cudnn_attention, q, k, v, None, True) == forward
    assert cost(aten._scaled_dot_product_fused_attention_overrideable, q, k, v) == forward
    backward = (2 * scores * 24, 4 * scores * 24 + scaling + 4 * scores)
    assert cost(aten._scaled_dot_product_flash_attention_for_cpu_backward, q, q, k, v, q, None, 0.0, False) \
        == backward
    assert cost(aten._scaled_dot_product_efficient_attention_backward, q, q, k, v, None, q, None, None, None,
                0.0, [True] * 4) == backward
    # low-level kernels take (B, L, H, E); packed ragged sequences count only their real pairs
    lq, lk = q.transpose(1, 2), k.transpose(1, 2)
    assert cost(aten._flash_attention_forward, lq, lk, v.transpose(1, 2), None, None, 10, 12, 0.0, False,
                False) == forward
    packed_q, packed_k = torch.ones(7, 3, 16), torch.ones(9, 3, 16)
    cum_q, cum_k = torch.tensor([0, 3, 7]), torch.tensor([0, 5, 9])
    ragged = cost(aten._flash_attention_forward, packed_q, packed_k, torch.ones(9, 3, 8), cum_q, cum_k, 4, 5,
                  0.0, False, False)
    assert ragged.macs == 3 * (3 * 5 + 4 * 4) * 24


def test_dropout_in_attention_counts_two_per_score_forward_one_backward():
    assert attention_cost((1, 1, 4, 8), (1, 1, 4, 8), (1, 1, 4, 8), dropout_p=0.1).flops == \
        attention_cost((1, 1, 4, 8), (1, 1, 4, 8), (1, 1, 4, 8)).flops + 2 * 16
    assert attention_cost((1, 1, 4, 8), (1, 1, 4, 8), (1, 1, 4, 8), dropout_p=0.1, backward=True).flops == \
        attention_cost((1, 1, 4, 8), (1, 1, 4, 8), (1, 1, 4, 8), backward=True).flops + 16


def test_gpu_only_operators_run_through_the_counter_on_meta_tensors():
    """flash / efficient / cuDNN attention and the cuDNN LSTM, as they arrive on CUDA."""
    q = torch.empty(2, 3, 10, 16, device="meta")
    k = torch.empty(2, 3, 12, 16, device="meta")
    scores = 2 * 3 * 10 * 12
    for call in (lambda: aten._scaled_dot_product_flash_attention(q, k, k),
                 lambda: aten._scaled_dot_product_efficient_attention(q, k, k, None, True),
                 lambda: aten._scaled_dot_product_cudnn_attention(q, k, k, None, True)):
        with FlopCounter() as counter:
            call()
        assert counter.result().macs == scores * 32
    # 2-layer LSTM on cuDNN: weights (w_ih, w_hh, b_ih, b_hh) per layer, T=5, B=2, I=8, H=6
    shapes = [(24, 8), (24, 6), (24,), (24,), (24, 6), (24, 6), (24,), (24,)]
    weights = [torch.empty(s, device="meta") for s in shapes]
    x, hx = torch.empty(5, 2, 8, device="meta"), torch.empty(2, 2, 6, device="meta")
    with FlopCounter() as counter:
        aten._cudnn_rnn(x, weights, 4, None, hx, hx, 2, 6, 0, 2, False, 0.0, True, False, [], None)
    count = counter.result()
    assert count.macs == 10 * (24 * 8 + 24 * 6 + 24 * 6 + 24 * 6)
    assert count.flops == 2 * count.macs + 2 * 10 * 6 * (13 + 8)


def test_cudnn_rnn_backward_always_computes_data_gradients():
    x, hx = torch.ones(5, 2, 8), torch.ones(1, 2, 6)
    weights = [torch.ones(24, 8), torch.ones(24, 6), torch.ones(24), torch.ones(24)]
    args = (x, weights, 4, None, hx, hx, None, None, None, None, 2, 6, 0, 1, False, 0.0, True, False, [], None, None)
    macs = 10 * (24 * 8 + 24 * 6)
    with_weights = cost(aten._cudnn_rnn_backward, *args, [False, False, False, True])
    assert with_weights == (2 * macs, 4 * macs + 10 * 6 * (26 + 8))
    assert cost(aten._cudnn_rnn_backward, *args, [True, False, False, False]) == (macs, 2 * macs + 10 * 6 * 26)


def test_fused_cells():
    gates, state = torch.ones(3, 24), torch.ones(3, 6)
    assert cost(aten._thnn_fused_lstm_cell, gates, gates, state, torch.ones(24), torch.ones(24)).flops == 18 * 21
    assert cost(aten._thnn_fused_gru_cell, torch.ones(3, 18), torch.ones(3, 18), state).flops == 18 * 10
