"""Weight normalisation (HiFi-GAN vocoders) against hand counts, forward and backward.

``w = g * v / ||v||``, the norm over every dimension but ``dim``; for ``n``
elements of ``v`` in ``m`` groups: forward ``3n + 2m`` (square and add per
element, a root per group; ``g / norm`` per group; a multiply per element),
backward ``5n + 4m`` (``sum(grad_w * v)`` 2 and ``a * grad_w - b * v`` 3 per
element; 4 per group for ``grad_g``, ``a`` and ``b``).
"""
from __future__ import annotations

import warnings

import pytest
import torch

from sbprof.measuring.flops import count_flops
from sbprof.measuring.flops.formulas import FORMULAS
from test_flops_counter import Fn

aten = torch.ops.aten


def test_formulas_by_hand():
    v, g = torch.ones(6, 4, 3), torch.ones(6, 1, 1)  # n = 72 elements in m = 6 groups
    assert FORMULAS[aten._weight_norm_interface]((v, g), {}, None) == (0, 3 * 72 + 2 * 6)
    assert FORMULAS[aten._weight_norm_interface]((v, torch.ones(1, 1, 3), 2), {}, None).flops == 3 * 72 + 2 * 3
    assert FORMULAS[aten._weight_norm_interface_backward]((v, v, g, g, 0), {}, None) == (0, 5 * 72 + 4 * 6)


def test_fused_forward_counts_what_the_decomposed_path_counts():
    """dim 0 runs the fused operator; a middle dim decomposes into norm, div and mul, each priced
    by its own rule: the same normalisation (equal outputs), the same count."""
    torch.manual_seed(0)
    v, g = torch.randn(6, 4, 3), torch.rand(6, 1, 1)
    fused = count_flops(Fn(lambda v, g: torch._weight_norm(v, g, 0)), v, g)
    middle = count_flops(Fn(lambda v, g: torch._weight_norm(v, g, 1)), v.transpose(0, 1), g.view(1, 6, 1))
    assert [op.name for op in fused.operators] == ["aten._weight_norm_interface"]
    assert "aten._weight_norm_interface" not in {op.name for op in middle.operators}
    assert torch.allclose(torch._weight_norm(v, g, 0), torch._weight_norm(v.transpose(0, 1), g.view(1, 6, 1), 1)
                          .transpose(0, 1))
    assert fused.flops == middle.flops == 3 * 72 + 2 * 6


def _weight_normed(make, api):
    torch.manual_seed(0)
    module = make()
    if api == "utils":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # deprecated for parametrizations, still in use
            return torch.nn.utils.weight_norm(module)
    return torch.nn.utils.parametrizations.weight_norm(module)


@pytest.mark.parametrize("api", ["utils", "parametrizations"])
@pytest.mark.parametrize("transposed", [False, True])
def test_weight_normed_convolution_forward_and_backward(api, transposed):
    cls = torch.nn.ConvTranspose1d if transposed else torch.nn.Conv1d
    conv = _weight_normed(lambda: cls(4, 6, 3), api)
    x = torch.randn(2, 4, 10)
    c = count_flops(conv, x, backward=True)
    assert c.untracked == {}
    # weight (C_in, C_out, k) when transposed, (C_out, C_in, k) otherwise; normalised over dim 0
    n, m = 4 * 6 * 3, 4 if transposed else 6
    positions = 12 if transposed else 8  # output length
    macs = 2 * 4 * 10 * 6 * 3 if transposed else 2 * 6 * 8 * 4 * 3
    bias = 2 * 6 * positions
    assert (c.macs, c.flops) == (macs, 2 * macs + bias + 3 * n + 2 * m)
    # the data needs no gradient: the weight's (a product) and the bias's, then through the norm to v and g
    assert (c.backward_macs, c.backward_flops) == (macs, 2 * macs + bias + 5 * n + 4 * m)


def test_speechbrain_hifigan_generator_has_nothing_untracked():
    hifigan = pytest.importorskip("speechbrain.lobes.models.HifiGAN")
    torch.manual_seed(0)
    generator = hifigan.HifiganGenerator(
        in_channels=8, out_channels=1, resblock_type="2", resblock_dilation_sizes=[[1, 3], [1, 3]],
        resblock_kernel_sizes=[3, 5], upsample_kernel_sizes=[4, 4], upsample_initial_channel=16,
        upsample_factors=[2, 2])
    c = count_flops(generator, torch.randn(1, 8, 10), backward=True)
    assert c.untracked == {}
    # parametrizations.weight_norm keeps g as original0 (one value per group) and v as original1
    normed = [m.parametrizations.weight for m in generator.modules() if hasattr(m, "parametrizations")]
    weights = [(w.original1.numel(), w.original0.numel()) for w in normed]
    assert len(weights) == c.operator("aten._weight_norm_interface").calls > 0
    assert c.operator("aten._weight_norm_interface").flops == sum(3 * n + 2 * m for n, m in weights)
    assert c.operator("aten._weight_norm_interface_backward").backward_flops == sum(5 * n + 4 * m for n, m in weights)
