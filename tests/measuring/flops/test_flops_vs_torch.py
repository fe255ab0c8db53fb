"""Agreement with ``torch.utils.flop_counter.FlopCounterMode`` where both count, and the Conformers.

Where they agree: FlopCounterMode counts ``2*m*n*k`` for ``mm``, ``addmm``,
``bmm``, ``baddbmm``, convolutions and their backward, and the GPU attention
backends; for each operator it counts, its FLOPs equal twice sbprof's MACs of
that operator, forward and backward.

Where and why they differ (torch 2.14, CPU):

- FlopCounterMode has no formula for ``_scaled_dot_product_flash_attention_for_cpu``
  (SDPA on CPU), ``_native_multi_head_attention`` (``nn.MultiheadAttention``'s
  inference fast path), ``_transformer_encoder_layer_fwd`` (``nn.TransformerEncoder``'s)
  or ``mkldnn_rnn_layer`` (``nn.LSTM``): it counts 0 for them. It prices
  products only: upsampling and weight norm count 0 too. On torchaudio's Conformer this drops the attention (its
  ``nn.MultiheadAttention`` calls SDPA); sbprof counts it.
- sbprof also counts the work that is not a product (bias adds inside
  ``addmm`` and convolutions, activations, normalisations, softmax,
  residual adds, scaling); FlopCounterMode leaves it out.
- FlopCounterMode over-counts the weight gradient of a grouped convolution by
  a factor of ``groups``: its ``conv_backward_flop`` prices it as a
  convolution of the transposed input with the transposed output gradient
  without the groups, i.e. as if every input channel met every output
  channel. For a depthwise convolution (``groups`` = channels, in every
  Conformer's convolution module) that is ``channels`` times too many.
  Each weight element meets each output position once: the weight gradient
  costs the forward's MACs, as sbprof counts.
- FlopCounterMode attributes per module with ``ModuleTracker`` (multi-grad
  hooks), which falls short in backward: see
  ``test_flops_counter.test_backward_belongs_to_the_module_that_ran_the_forward``.
"""
from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from sbprof.measuring.flops import count_flops

BOTH_COUNT = {"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.convolution", "aten.convolution_backward"}


def torch_counts(model, *inputs):
    """FlopCounterMode's FLOPs per operator for a forward and a backward seeded with ones."""
    with FlopCounterMode(display=False) as mode:
        out = model(*inputs)
        out = out[0] if isinstance(out, tuple) else out
        out.backward(torch.ones_like(out))
    model.zero_grad(set_to_none=True)
    return {str(op): flops for op, flops in mode.get_flop_counts()["Global"].items()}


def grouped_weight_grad_overcount(model, count):
    """FLOPs FlopCounterMode adds to grouped convolutions' weight gradients: (groups - 1) x forward."""
    return sum(2 * (m.groups - 1) * count.module(name).macs for name, m in model.named_modules()
               if isinstance(m, torch.nn.modules.conv._ConvNd) and m.weight.requires_grad)


def sbprof_mac_flops(count):
    """2 x MACs per operator, forward + backward, for the operators both counters price."""
    return {op.name: 2 * (op.macs + op.backward_macs) for op in count.operators
            if op.name in BOTH_COUNT and op.macs + op.backward_macs}


class First(torch.nn.Module):
    """Keeps the first output of a module returning a tuple."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *inputs):
        return self.module(*inputs)[0]


@pytest.mark.parametrize("make_model,shape", [
    (lambda: torch.nn.Linear(16, 32), (4, 10, 16)),
    (lambda: torch.nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2), (2, 4, 20)),
    (lambda: torch.nn.Conv2d(4, 8, 3, stride=2, groups=4), (1, 4, 9, 9)),
    (lambda: torch.nn.ConvTranspose1d(4, 6, 3, stride=2), (2, 4, 10)),
    (lambda: First(torch.nn.MultiheadAttention(16, 4, batch_first=True)), None),
    (lambda: First(torch.nn.GRU(8, 6, num_layers=2, bidirectional=True, batch_first=True)), (2, 5, 8)),
])
def test_products_agree_operator_by_operator(make_model, shape):
    torch.manual_seed(0)
    model = make_model()
    inputs = (torch.randn(2, 6, 16),) * 3 if shape is None else (torch.randn(*shape, requires_grad=True),)
    count = count_flops(model, *inputs, backward=True)
    ours, theirs = sbprof_mac_flops(count), torch_counts(model, *inputs)
    overcount = grouped_weight_grad_overcount(model, count)
    if overcount:
        ours["aten.convolution_backward"] += overcount
    assert ours and ours == theirs


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
def test_where_flop_counter_mode_counts_nothing():
    """SDPA on CPU, the MHA and TransformerEncoder inference fast paths (dense, or nested given a
    padding mask), the oneDNN LSTM; upsampling and weight norm, not products: 0 for FlopCounterMode."""
    q = torch.randn(2, 4, 10, 8)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x = torch.randn(2, 10, 16)
    lstm = torch.nn.LSTM(16, 8, batch_first=True)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2).eval()
    padding = torch.arange(10)[None] >= torch.tensor([10, 6])[:, None]  # lengths 10 and 6

    def encoder_macs(tokens, pairs):  # in-projection, QK^T and PV, out-projection, feed-forward; 2 layers
        return 2 * (tokens * 16 * 48 + 2 * pairs * 16 + tokens * 16 * 16 + 2 * tokens * 16 * 32)

    cases = [(lambda: sdpa(q, q, q), 2 * 4 * 10 * 10 * 16),
             (lambda: mha(x, x, x), 2 * 10 * 16 * 48 + 2 * 10 * 10 * 32 + 2 * 10 * 16 * 16),
             (lambda: encoder(x), encoder_macs(20, 2 * 10 * 10)),
             (lambda: encoder(x, src_key_padding_mask=padding), encoder_macs(16, 10 * 10 + 6 * 6)),
             (lambda: lstm(x), 2 * 10 * (16 + 8) * 32)]
    image, v, g = torch.randn(1, 2, 5, 4), torch.randn(6, 4, 3), torch.rand(6, 1, 1)
    not_products = [(lambda: torch.nn.functional.interpolate(image, scale_factor=2, mode="bilinear"), 160 * 9),
                    (lambda: torch._weight_norm(v, g, 0), 3 * 72 + 2 * 6)]
    for call, macs in cases:
        with torch.no_grad():
            with FlopCounterMode(display=False) as mode:
                call()
            ours = count_flops(_Call(call))
        assert mode.get_total_flops() == 0 and ours.macs == macs
    for call, flops in not_products:
        with FlopCounterMode(display=False) as mode:
            call()
        assert mode.get_total_flops() == 0 and count_flops(_Call(call)).flops == flops


class _Call(torch.nn.Module):
    def __init__(self, call):
        super().__init__()
        self.call = call

    def forward(self):
        return self.call()


def _torchaudio_conformer():
    torchaudio = pytest.importorskip("torchaudio")
    torch.manual_seed(0)
    model = torchaudio.models.Conformer(input_dim=80, num_heads=4, ffn_dim=128, num_layers=2,
                                        depthwise_conv_kernel_size=31)
    x, lengths = torch.randn(2, 50, 80), torch.tensor([50, 40])
    return (model, (x, lengths), "conformer_layers.{}.self_attn", "aten._scaled_dot_product_flash_attention_for_cpu",
            "aten._scaled_dot_product_flash_attention_for_cpu_backward")


def _speechbrain_conformer():
    conformer = pytest.importorskip("speechbrain.lobes.models.transformer.Conformer")
    torch.manual_seed(0)
    model = conformer.ConformerEncoder(num_layers=2, d_model=80, d_ffn=128, nhead=4, kernel_size=31,
                                       attention_type="regularMHA")
    return model, (torch.randn(2, 50, 80),), "layers.{}.mha_layer", "aten.bmm", "aten.bmm"


@pytest.mark.parametrize("build", [_torchaudio_conformer, _speechbrain_conformer])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_conformers_count_attention(build, mode):
    model, inputs, attention_module, attention_op, attention_backward_op = build()
    getattr(model, mode)()
    batch, frames, dim, layers = 2, 50, 80, 2
    c = count_flops(model, *inputs, backward=True)
    assert c.untracked == {}
    # attention products by hand: QK^T and PV, B*T*T*D MACs each, per layer (dense, padding included)
    attention_macs = layers * batch * frames * frames * 2 * dim
    forward_op, backward_op = c.operator(attention_op), c.operator(attention_backward_op)
    assert (forward_op.macs, backward_op.backward_macs) == (attention_macs, 2 * attention_macs)
    # each attention module: in-projection, attention, out-projection
    projections = batch * frames * dim * 3 * dim + batch * frames * dim * dim
    for layer in range(layers):
        assert c.module(attention_module.format(layer)).macs == projections + attention_macs // layers
    # products FlopCounterMode also prices agree exactly, but for its grouped-convolution over-count;
    # it misses the CPU SDPA entirely
    ours, theirs = sbprof_mac_flops(c), torch_counts(model, *inputs)
    overcount = grouped_weight_grad_overcount(model, c)
    assert overcount > 0  # the depthwise convolution of each layer
    assert theirs.pop("aten.convolution_backward") == ours.pop("aten.convolution_backward") + overcount
    assert ours == theirs
    missed = 0 if attention_op in BOTH_COUNT else 2 * (forward_op.macs + backward_op.backward_macs)
    assert 2 * (c.macs + c.backward_macs) == sum(theirs.values()) + missed + 2 * c.operator(
        "aten.convolution_backward").backward_macs
    # rows nest: every module's total is its own work plus its children's
    rows = {row.name: row for row in c.modules}
    for row in c.modules:
        children = [r for r in c.modules
                    if r.name and r.name.rpartition(".")[0] == row.name and r.depth == row.depth + 1]
        assert row.flops == row.self_flops + sum(r.flops for r in children)
        assert row.backward_flops == row.self_backward_flops + sum(r.backward_flops for r in children)
    assert rows[""].flops == c.flops and rows[""].backward_flops == c.backward_flops

