"""nn.MultiheadAttention and nn.TransformerEncoder on their inference fast paths, against hand counts.

In ``eval()`` under ``torch.no_grad()`` both modules run one fused operator
(``_native_multi_head_attention``, ``_transformer_encoder_layer_fwd``). Given
a ``src_key_padding_mask``, ``nn.TransformerEncoder`` packs the real tokens
into a nested tensor first (when ``enable_nested_tensor`` and the layer allow
it: not with ``norm_first``); otherwise the layers run on the padded batch
with the mask. Hand counts follow sbprof's conventions (FLOPs = 2 x MACs plus
bias adds, scaling, softmax 5 per score, layer norm 7 per element...).
"""
from __future__ import annotations

import warnings

import pytest
import torch

from sbprof.measuring.flops import count_flops

D, HEADS, FFN = 16, 4, 32


def mha_hand_count(lengths, dim=D, heads=HEADS, masked=False, weights=True):
    """Self-attention over sequences of these lengths, each attending to itself: in-projection +
    bias, query scaling, QK^T, softmax (+1 per score for a mask), PV, out-projection + bias, and
    with ``weights`` the head average of the attention weights."""
    tokens, pairs = sum(lengths), sum(length * length for length in lengths)
    scores = heads * pairs
    macs = tokens * dim * 3 * dim + 2 * pairs * dim + tokens * dim * dim
    extra = tokens * 3 * dim + tokens * dim + (5 + masked) * scores + tokens * dim
    if weights:
        extra += scores + pairs
    return macs, 2 * macs + extra


def layer_hand_count(lengths, masked=False, layers=1):
    """``layers`` encoder layers: self-attention without weights, two residual adds, two affine
    layer norms (7 per element), the feed-forward's products, biases and activation (1 per element)."""
    macs, flops = mha_hand_count(lengths, masked=masked, weights=False)
    tokens = sum(lengths)
    macs += 2 * tokens * D * FFN
    flops += 2 * 2 * tokens * D * FFN + 2 * tokens * D + 2 * 7 * tokens * D + 2 * tokens * FFN + tokens * D
    return layers * macs, layers * flops


def encoder(layers, norm_first=False, nested=True, activation="relu"):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(D, HEADS, FFN, dropout=0.0, activation=activation,
                                             batch_first=True, norm_first=norm_first)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that norm_first rules the nested tensor out
        return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=nested).eval()


def test_multihead_attention_train_and_fused_eval_path_count_the_same():
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(D, HEADS, batch_first=True)
    x = torch.randn(2, 6, D)
    expected = mha_hand_count([6, 6])
    train = count_flops(mha, x, x, x, backward=True)
    # backward products: both projections' weight gradients, the out-projection's input
    # gradient (the data needs none), and two products per attention product
    tokens, attention = 12, 2 * 2 * 6 * 6 * D
    assert train.backward_macs == tokens * 3 * D * D + 2 * tokens * D * D + 2 * attention
    mha.eval()
    with torch.no_grad():
        fused = count_flops(mha, x, x, x)
    # the fused path is one operator; its inner products are not seen (nothing counted twice)
    assert [op.name for op in fused.operators] == ["aten._native_multi_head_attention"]
    assert (train.macs, train.flops) == expected == (fused.macs, fused.flops)


def test_multihead_attention_on_a_nested_batch_costs_its_sequences_one_by_one():
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(D, HEADS, batch_first=True).eval()
    sequences = [torch.randn(5, D), torch.randn(3, D)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype
        batch = torch.nested.nested_tensor(sequences)
    with torch.no_grad():
        nested = count_flops(mha, batch, batch, batch, need_weights=False)
        alone = [count_flops(mha, x, x, x, need_weights=False) for x in (s[None] for s in sequences)]
    assert all([op.name for op in c.operators] == ["aten._native_multi_head_attention"] for c in (nested, *alone))
    assert nested.untracked == {}
    assert (nested.macs, nested.flops) == mha_hand_count([5, 3], weights=False)
    assert (nested.macs, nested.flops) == (sum(c.macs for c in alone), sum(c.flops for c in alone))


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("nested", [True, False])
def test_masked_encoder_counts_what_its_path_computes(nested, norm_first, activation):
    """The nested path computes on the real tokens only: the batch costs what each sequence costs
    alone at its real length. The dense path (no nested tensor: ``enable_nested_tensor=False`` or
    ``norm_first``) computes on the whole padded batch and adds the mask to every score."""
    layers, lengths, padded = 3, [7, 5, 2], 7
    model = encoder(layers, norm_first, nested, activation)
    torch.manual_seed(1)
    x = torch.randn(len(lengths), padded, D)
    mask = torch.arange(padded)[None, :] >= torch.tensor(lengths)[:, None]  # True: padding
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype
        batch = count_flops(model, x, src_key_padding_mask=mask)
        alone = [count_flops(model, x[i:i + 1, :length]) for i, length in enumerate(lengths)]
    assert batch.untracked == {}
    assert batch.operator("aten._transformer_encoder_layer_fwd").calls == layers
    each = (sum(c.macs for c in alone), sum(c.flops for c in alone))
    assert each == tuple(map(sum, zip(*(layer_hand_count([n], layers=layers) for n in lengths))))
    assert model.use_nested_tensor == (nested and not norm_first)  # torch's choice of path
    if model.use_nested_tensor:
        assert (batch.macs, batch.flops) == each
    else:
        assert (batch.macs, batch.flops) == layer_hand_count([padded] * len(lengths), masked=True, layers=layers)
        assert batch.macs > each[0] and batch.flops > each[1]


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_fast_path_counts_what_the_slow_path_counts(norm_first, activation):
    """Without a mask the fast path runs ``_transformer_encoder_layer_fwd`` on the dense batch; with
    gradients enabled (or in training) each layer runs operator by operator through SDPA, whose
    reference also scales the keys: one multiply per key element and layer more, the rest equal."""
    layers, batch, length = 2, 2, 6
    model = encoder(layers, norm_first, activation=activation)
    x = torch.randn(batch, length, D)
    with torch.no_grad():
        fast = count_flops(model, x)
    with_grad = count_flops(model, x)
    train = count_flops(model.train(), x)
    assert [op.name for op in fast.operators] == ["aten._transformer_encoder_layer_fwd"]
    assert "aten._transformer_encoder_layer_fwd" not in {op.name for op in with_grad.operators}
    assert (fast.macs, fast.flops) == layer_hand_count([length] * batch, layers=layers)
    key_scaling = layers * batch * length * D
    for slow in (with_grad, train):
        assert (slow.macs, slow.flops) == (fast.macs, fast.flops + key_scaling)
