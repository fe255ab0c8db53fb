"""Upsampling (``nn.Upsample`` / ``F.interpolate``) against hand counts, forward and backward.

Convention (``sbprof.measuring.flops.interpolation``): an output element is interpolated
from 2 taps per dimension (linear) or 4 (cubic), the dimensions nested as in
ATen's CPU kernel; a tap costs a multiply by its weight, taps are summed.
Backward spreads each gradient element over its taps: per tap the product of
the per-dimension weights times the gradient, and an add. Nearest copies.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from sbprof.measuring.flops import count_flops
from sbprof.measuring.flops.formulas import FORMULAS, NO_FLOPS

aten = torch.ops.aten

LINEAR = 2 + 1  # one linear interpolation: two taps times their weight, one add
CUBIC = 4 + 3  # one cubic interpolation: four taps times their weight, three adds

# mode, input shape, output shape, FLOPs per output element, backward FLOPs per grad_output element
CASES = [
    ("linear", (2, 3, 5), (2, 3, 10), LINEAR, 2 * (1 + 1)),
    # two rows interpolated along the width, then those two along the height
    ("bilinear", (2, 3, 5, 4), (2, 3, 10, 8), 2 * LINEAR + LINEAR, 4 * (2 + 1)),
    ("trilinear", (1, 2, 3, 4, 5), (1, 2, 6, 8, 10), 4 * LINEAR + 2 * LINEAR + LINEAR, 8 * (3 + 1)),
    ("bicubic", (2, 3, 5, 4), (2, 3, 10, 8), 4 * CUBIC + CUBIC, 16 * (2 + 1)),
    ("nearest", (2, 3, 5), (2, 3, 10), 0, 1),
    ("nearest", (2, 3, 5, 4), (2, 3, 10, 8), 0, 1),
    ("nearest", (1, 2, 3, 4, 5), (1, 2, 6, 8, 10), 0, 1),
    ("nearest-exact", (2, 3, 5, 4), (2, 3, 10, 8), 0, 1),
]


def test_formulas_by_hand():
    out = torch.ones(2, 3, 10, 8)  # 480 output elements, from (2, 3, 5, 4)
    x = torch.ones(2, 3, 5, 4)
    assert FORMULAS[aten.upsample_bilinear2d]((x, [10, 8], False, 2.0, 2.0), {}, out).flops == 480 * 9
    assert FORMULAS[aten.upsample_bicubic2d]((x, [10, 8], False), {}, out).flops == 480 * 35
    assert FORMULAS[aten.upsample_linear1d]((torch.ones(2, 3, 5), [10], False), {}, torch.ones(2, 3, 10)).flops == 180
    grad = (out, [10, 8], [2, 3, 5, 4], False)
    assert FORMULAS[aten.upsample_bilinear2d_backward](grad, {}, x).flops == 480 * 12
    assert FORMULAS[aten.upsample_bicubic2d_backward](grad, {}, x).flops == 480 * 48
    assert FORMULAS[aten.upsample_nearest2d_backward](grad[:3], {}, x).flops == 480
    # nearest copies: free, never untracked; integer images cost no FLOPs
    assert {aten.upsample_nearest1d, aten.upsample_nearest2d, aten.upsample_nearest3d} <= NO_FLOPS
    image = torch.zeros(1, 3, 5, 4, dtype=torch.uint8)
    assert count_flops(torch.nn.Upsample(scale_factor=2, mode="bilinear"), image).flops == 0


@pytest.mark.parametrize("mode,shape,out_shape,per_out,per_grad", CASES)
def test_upsample_module_forward_and_backward(mode, shape, out_shape, per_out, per_grad):
    x = torch.randn(*shape, requires_grad=True)
    c = count_flops(torch.nn.Upsample(scale_factor=2, mode=mode), x, backward=True)
    assert c.untracked == {}
    outputs = math.prod(out_shape)
    assert (c.macs, c.flops) == (0, outputs * per_out)
    assert (c.backward_macs, c.backward_flops) == (0, outputs * per_grad)


def test_align_corners_and_sizes_only_move_the_taps():
    x = torch.randn(2, 3, 5, 4)
    for kwargs in ({"size": (7, 9), "align_corners": True}, {"scale_factor": (1.5, 3.0)}):
        c = count_flops(torch.nn.Upsample(mode="bilinear", **kwargs), x)
        out = torch.nn.functional.interpolate(x, mode="bilinear", **kwargs)
        assert c.flops == out.numel() * 9 and c.untracked == {}


class HandBilinear(torch.nn.Module):
    """Bilinear upsampling by 2 written out element by element, as ATen nests it: two row
    interpolations along the width, then one along the height (indices and weights precomputed)."""

    def forward(self, x, rows, cols):
        (h0, h1, hw0, hw1), (w0, w1, ww0, ww1) = rows, cols
        top = x[:, :, h0][..., w0] * ww0 + x[:, :, h0][..., w1] * ww1
        bottom = x[:, :, h1][..., w0] * ww0 + x[:, :, h1][..., w1] * ww1
        return top * hw0[:, None] + bottom * hw1[:, None]


def _taps(size, scale=2):
    """Source indices and weights of each output position (align_corners=False)."""
    src = ((torch.arange(size * scale) + 0.5) / scale - 0.5).clamp(min=0)
    i0 = src.floor().long()
    i1 = (i0 + 1).clamp(max=size - 1)
    w1 = src - i0
    return i0, i1, 1 - w1, w1


def test_bilinear_counts_what_a_hand_written_interpolation_counts():
    """An independent count: the same interpolation (equal outputs) through element-wise operators,
    each priced by its own rule."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 4)
    rows, cols = _taps(5), _taps(4)
    hand = HandBilinear()
    assert torch.allclose(hand(x, rows, cols), F.interpolate(x, scale_factor=2, mode="bilinear"), atol=1e-6)
    ours = count_flops(torch.nn.Upsample(scale_factor=2, mode="bilinear"), x)
    assert ours.flops == count_flops(hand, x, rows, cols).flops == 480 * 9
