"""count_flops on real modules, forward and forward + backward, against hand counts.

Hand counts follow the conventions of sbprof.measuring.flops.formulas: FLOPs = 2 x MACs
plus the non-product work (bias adds, scaling, softmax 5 per score...).
"""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.modules.module as nn_module

from sbprof.base.errors import ConfigError
from sbprof.measuring.flops import FlopCounter, UntrackedOperatorWarning, count_flops


class Fn(torch.nn.Module):
    """A module calling ``fn`` on its inputs."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def test_linear_forward_and_backward():
    torch.manual_seed(0)
    x = torch.randn(4, 10, 16)
    c = count_flops(torch.nn.Linear(16, 32), x, backward=True)
    tokens = 40
    assert (c.macs, c.flops) == (tokens * 16 * 32, 2 * tokens * 16 * 32 + tokens * 32)
    # input needs no gradient: weight gradient (a product) and bias gradient (a sum) only
    assert (c.backward_macs, c.backward_flops) == (tokens * 16 * 32, 2 * tokens * 16 * 32 + tokens * 32)
    c = count_flops(torch.nn.Linear(16, 32, bias=False), x.requires_grad_(), backward=True)
    assert (c.flops, c.backward_macs, c.backward_flops) == (2 * tokens * 512, 2 * tokens * 512, 4 * tokens * 512)
    assert c.total_flops == c.flops + c.backward_flops


def test_conv1d_groups_stride_and_backward():
    x = torch.randn(2, 4, 20, requires_grad=True)
    conv = torch.nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2)
    c = count_flops(conv, x, backward=True)
    length = (20 + 2 - 3) // 2 + 1
    macs = 2 * 6 * length * (4 // 2) * 3
    assert (c.macs, c.flops) == (macs, 2 * macs + 2 * 6 * length)
    assert (c.backward_macs, c.backward_flops) == (2 * macs, 4 * macs + 2 * 6 * length)


def test_conv2d_groups_stride_and_transposed():
    x = torch.randn(1, 4, 9, 9)
    c = count_flops(torch.nn.Conv2d(4, 8, 3, stride=2, groups=4, bias=False), x)
    assert c.macs == 8 * 4 * 4 * 1 * 9 and c.flops == 2 * c.macs
    c = count_flops(torch.nn.ConvTranspose1d(4, 6, 3, stride=2), torch.randn(2, 4, 10))
    assert c.macs == 2 * 4 * 10 * 6 * 3 and c.flops == 2 * c.macs + 2 * 6 * ((10 - 1) * 2 + 3)


def test_batched_matmul():
    x, y = torch.randn(3, 5, 8, requires_grad=True), torch.randn(3, 8, 7, requires_grad=True)
    c = count_flops(Fn(torch.matmul), x, y, backward=True)
    assert (c.macs, c.backward_macs, c.backward_flops) == (3 * 5 * 8 * 7, 2 * 3 * 5 * 8 * 7, 4 * 3 * 5 * 8 * 7)
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 9, 8)
    c = count_flops(Fn(lambda a, b: a @ b.transpose(-1, -2)), q, k)
    assert c.macs == 2 * 4 * 6 * 9 * 8 and c.operator("aten.bmm").calls == 1
    # a 3-d input times a matrix folds into one mm
    assert count_flops(Fn(torch.matmul), x, torch.randn(8, 2)).operator("aten.mm").macs == 15 * 8 * 2


MASKS = {None: {}, "bool": {"attn_mask": torch.rand(5, 7) > 0.3}, "float": {"attn_mask": torch.randn(5, 7)},
         "causal": {"is_causal": True}}


def _sdpa_inputs(value_size=8):
    torch.manual_seed(0)
    q = torch.randn(2, 3, 5, 8, requires_grad=True)
    return q, torch.randn(2, 3, 7, 8, requires_grad=True), torch.randn(2, 3, 7, value_size, requires_grad=True)


@pytest.mark.parametrize("mask", list(MASKS))
def test_scaled_dot_product_attention(mask):
    b, h, lq, s, e = 2, 3, 5, 7, 8
    sdpa = Fn(lambda *t: torch.nn.functional.scaled_dot_product_attention(*t, **MASKS[mask]))
    c = count_flops(sdpa, *_sdpa_inputs(), backward=True)
    assert [op.name for op in c.operators if op.calls] == ["aten._scaled_dot_product_flash_attention_for_cpu"]
    scores = b * h * lq * s
    macs = scores * (e + e)
    scaling = b * h * (lq + s) * e  # queries and keys each scaled by sqrt(scale)
    assert (c.macs, c.flops) == (macs, 2 * macs + scaling + scores * (5 + (mask is not None)))
    assert (c.backward_macs, c.backward_flops) == (2 * macs, 4 * macs + scaling + 4 * scores)


@pytest.mark.parametrize("mask", list(MASKS))
def test_fused_attention_counts_what_the_math_reference_counts_operator_by_operator(mask):
    """The reference implementation decomposes into mul/bmm/softmax, each counted on its own:
    an independent count of the same attention."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sdpa = Fn(lambda *t: torch.nn.functional.scaled_dot_product_attention(*t, **MASKS[mask]))
    fused = count_flops(sdpa, *_sdpa_inputs(), backward=True)
    with sdpa_kernel(SDPBackend.MATH):
        math = count_flops(sdpa, *_sdpa_inputs(), backward=True)
    assert "aten.bmm" in {op.name for op in math.operators}
    assert (math.macs, math.flops) == (fused.macs, fused.flops)
    assert (math.backward_macs, math.backward_flops) == (fused.backward_macs, fused.backward_flops)


@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, True)])
def test_lstm_fused_against_hand_count_and_decomposed_path(layers, bidirectional):
    """float32 runs the fused mkldnn_rnn_layer; float64 decomposes into products and
    element-wise operators counted one by one: the two must agree exactly in forward."""
    t, b, i, h = 5, 2, 8, 6
    dirs = 2 if bidirectional else 1
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(i, h, num_layers=layers, bidirectional=bidirectional, batch_first=True)
    x = torch.randn(b, t, i, requires_grad=True)
    fused = count_flops(lstm, x, backward=True)
    assert [op.name for op in fused.operators if op.macs] == ["aten.mkldnn_rnn_layer"]
    inputs = [i] + [dirs * h] * (layers - 1)
    macs = sum(dirs * t * b * (n + h) * 4 * h for n in inputs)
    cells = layers * dirs * t * b * h
    assert (fused.macs, fused.flops) == (macs, 2 * macs + cells * 21)
    # gradients reaching a layer's input from its two directions are added
    accumulation = (dirs - 1) * t * b * sum(inputs)
    assert (fused.backward_macs, fused.backward_flops) == (2 * macs, 4 * macs + cells * 30 + accumulation)
    decomposed = count_flops(lstm.double(), x.double().detach().requires_grad_(), backward=True)
    assert (decomposed.macs, decomposed.flops) == (fused.macs, fused.flops)
    # the fused backward also computes the gradient of the zero initial state, which
    # the decomposed path skips: one (B x 4H) x (4H x H) product per layer and direction
    assert fused.backward_macs - decomposed.backward_macs == layers * dirs * b * 4 * h * h


@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, True)])
def test_gru_against_hand_count(layers, bidirectional):
    t, b, i, h = 5, 2, 8, 6
    dirs = 2 if bidirectional else 1
    gru = torch.nn.GRU(i, h, num_layers=layers, bidirectional=bidirectional, batch_first=True)
    c = count_flops(gru, torch.randn(b, t, i), backward=True)
    inputs = [i] + [dirs * h] * (layers - 1)
    macs = sum(dirs * t * b * (n + h) * 3 * h for n in inputs)
    # per step and unit: 3 gate adds, 2 sigmoids, tanh, r*h_n, h-n, z*(h-n), +: 10; two biases: 6
    assert (c.macs, c.flops) == (macs, 2 * macs + layers * dirs * t * b * h * 16)
    # backward products: weight gradients of every step, the recurrent gradient of all
    # but the first step (the zero initial state needs none), the input gradient of
    # layers above the first (the data needs none)
    weight_grads = macs
    recurrent = layers * dirs * (t - 1) * b * 3 * h * h
    input_grads = sum(dirs * t * b * 3 * h * n for n in inputs[1:])
    assert c.backward_macs == weight_grads + recurrent + input_grads


def test_untracked_operator_is_reported_by_name_and_warned_once():
    model = Fn(lambda x: torch.digamma(x) + torch.digamma(x))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = count_flops(model, torch.rand(3) + 1)
    untracked = [w for w in caught if issubclass(w.category, UntrackedOperatorWarning)]
    assert len(untracked) == 1 and "aten.digamma" in str(untracked[0].message)
    assert c.untracked == {"aten.digamma": 2}
    assert c.flops == 3  # the add only


def test_failing_formula_is_reported_not_raised(monkeypatch):
    from sbprof.measuring.flops import counter

    def broken(args, kwargs, out):
        raise IndexError("schema changed")

    monkeypatch.setitem(counter.FORMULAS, torch.ops.aten.mm, broken)
    with pytest.warns(UntrackedOperatorWarning, match="aten.mm"):
        c = count_flops(torch.nn.Linear(4, 4, bias=False), torch.ones(2, 4))
    assert c.untracked == {"aten.mm": 1}


def test_outputs_unchanged_and_nothing_left_behind():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.LayerNorm(8))
    x = torch.randn(3, 8)
    plain = model(x)
    hooks = (len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks))
    with FlopCounter(model) as counter:
        counted = model(x)
    assert torch.equal(plain, counted) and counter.result().flops > 0
    count_flops(model, x, backward=True)
    assert all(p.grad is None for p in model.parameters())  # autograd.grad: .grad untouched
    assert (len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks)) == hooks
    assert torch._C._len_torch_dispatch_stack() == 0


class _Tagger(torch.nn.Module):
    """Token embedding + feature projection, summed, then an output layer."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.enc = torch.nn.Linear(3, 4)
        self.out = torch.nn.Linear(4, 2)

    def forward(self, feats, tokens):
        return self.out(self.enc(feats) + self.emb(tokens))


def test_backward_belongs_to_the_module_that_ran_the_forward():
    """Each backward operator goes to the module whose forward created its autograd node.

    torch's ModuleTracker (FlopCounterMode's) enters a module in backward when the gradients
    of its outputs are computed and leaves it when those of its inputs are. The embedding's
    input (token ids) needs no gradient, so it never leaves: ``enc``'s weight-gradient product,
    run after it, is counted in ``emb`` too; the last layer's outputs get their gradient from
    the caller, not the engine, so its backward is in no module, not even the root."""
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    model, n = _Tagger(), 5
    feats, tokens = torch.randn(n, 3), torch.randint(0, 10, (n,))
    c = count_flops(model, feats, tokens, backward=True)
    rows = {row.name: row for row in c.modules}
    assert rows["enc"].backward_flops == 2 * n * 3 * 4 + n * 4       # weight grad + bias grad
    assert rows["emb"].backward_flops == n * 4                       # scatter-add of the gradient
    assert rows["out"].backward_flops == 2 * (2 * n * 4 * 2) + n * 2  # input + weight grads, bias grad
    assert rows[""].self_backward_flops == 0                         # the add's gradient passes through
    assert c.backward_flops == sum(r.self_backward_flops for r in c.modules)

    with FlopCounterMode(display=False) as mode:
        out = model(feats, tokens)
        out.backward(torch.ones_like(out))
    theirs = {name: {str(op): f for op, f in ops.items()} for name, ops in mode.get_flop_counts().items()}
    assert theirs["_Tagger.emb"] == {"aten.mm": 2 * n * 3 * 4}
    assert "aten.mm" not in theirs["_Tagger.out"] and "aten.mm" not in theirs["_Tagger"]


def test_gradient_accumulation_goes_to_the_parameter_owner():
    model = _Tagger()
    feats, tokens = torch.randn(5, 3), torch.randint(0, 10, (5,))
    with FlopCounter(model) as counter:
        for _ in range(2):  # the second backward adds into existing .grad
            model(feats, tokens).sum().backward()
    first = count_flops(model, feats, tokens, backward=True)
    twice = counter.result()
    for name, module in model.named_children():
        params = sum(p.numel() for p in module.parameters())
        assert twice.module(name).backward_flops == 2 * first.module(name).backward_flops + params


def test_module_rows_nest_and_sum_to_totals():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(16, 4)))
    c = count_flops(model, torch.randn(3, 8), backward=True)
    rows = {row.name: row for row in c.modules}
    assert [(r.name, r.depth) for r in c.modules] == [("", 0), ("0", 1), ("1", 1), ("1.0", 2), ("1.1", 2)]
    assert rows["1"].flops == rows["1.0"].flops + rows["1.1"].flops == 3 * 16 + 2 * 3 * 16 * 4 + 3 * 4
    assert rows[""].flops == c.flops and rows[""].backward_flops == c.backward_flops
    assert sum(r.self_flops for r in c.modules) == c.flops


def test_errors_are_clear():
    with pytest.raises(ConfigError, match="nn.Module"):
        count_flops(lambda x: x, torch.ones(1))
    with pytest.raises(ConfigError, match="failed on the example inputs"):
        count_flops(torch.nn.Linear(4, 2), torch.ones(3, 5))
    frozen = torch.nn.Linear(4, 2).requires_grad_(False)
    with pytest.raises(ConfigError, match="requires a gradient"):
        count_flops(frozen, torch.ones(3, 4), backward=True)
    with pytest.raises(ConfigError, match="no module named"):
        count_flops(torch.nn.Linear(4, 2), torch.ones(3, 4)).module("decoder")


def test_result_round_trips_through_json():
    import json

    from sbprof.measuring.flops import FlopCount
    c = count_flops(torch.nn.Linear(4, 2), torch.ones(3, 4), backward=True)
    again = FlopCount.from_dict(json.loads(json.dumps(c.to_dict())))
    assert again == c and again.to_dict()["total_flops"] == c.total_flops


@pytest.mark.cuda
def test_cuda_counts_and_attribution_match_the_cpu():
    """Formulas depend on shapes only, and CUDA backward runs on the engine's device thread:
    the counts and the module rows must not change with the device."""
    torch.manual_seed(0)
    model, n = _Tagger(), 5
    feats, tokens = torch.randn(n, 3), torch.randint(0, 10, (n,))
    cpu = count_flops(model, feats, tokens, backward=True)
    gpu = count_flops(model.cuda(), feats.cuda(), tokens.cuda(), backward=True)
    assert [(r.name, r.flops, r.backward_flops) for r in gpu.modules] == \
        [(r.name, r.flops, r.backward_flops) for r in cpu.modules]
    lstm = torch.nn.LSTM(8, 6, num_layers=2, bidirectional=True, batch_first=True)
    x = torch.randn(2, 5, 8)
    on_cpu = count_flops(lstm, x, backward=True)
    on_gpu = count_flops(lstm.cuda(), x.cuda(), backward=True)
    assert "aten._cudnn_rnn" in {op.name for op in on_gpu.operators}
    assert (on_gpu.macs, on_gpu.flops, on_gpu.backward_macs) == (on_cpu.macs, on_cpu.flops, on_cpu.backward_macs)


@pytest.mark.parametrize("step", ["adam", "clip"])
def test_foreach_forms_count_what_the_per_tensor_loops_count(step):
    """Optimisers and gradient clipping run ``_foreach_`` list operators (the default on GPU) or
    a loop over tensors (the default on CPU): the same work, so the same count."""
    counts = []
    for foreach in (False, True):
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 4)
        optimiser = torch.optim.Adam(model.parameters(), foreach=foreach)
        for _ in range(2):  # the first step creates the optimiser's state
            model(torch.randn(3, 8)).sum().backward()
            with FlopCounter() as counter:
                if step == "adam":
                    optimiser.step()
                else:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1, foreach=foreach)
        counts.append(counter.result())
    assert counts[0].untracked == counts[1].untracked == {}
    assert counts[0].flops == counts[1].flops
    if step == "adam":  # per parameter element: 2 moments (lerp 2; mul + addcmul 3), sqrt, divide,
        params = 8 * 4 + 4  # + eps, addcdiv 2; plus the step counter of each of the 2 tensors
        assert counts[0].flops == 10 * params + 2


def test_macs_are_split_by_the_precision_the_products_ran_in():
    """Every MAC of a float32 model lands under fp32 (the CPU has no TF32, whatever the switch says); under CPU
    autocast the products run in bfloat16 (their inputs are cast before the dispatcher hands them on), the backward's
    too; a float64 product is named by its dtype. The split adds up to the MACs counted."""
    model, x = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)), torch.ones(4, 16)
    macs = 4 * 16 * 32 + 4 * 32 * 8
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        plain = count_flops(model, x, backward=True)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    assert plain.macs_by_precision == {"fp32": plain.total_macs} and plain.macs == macs
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = count_flops(model, x, backward=True)
    assert mixed.macs_by_precision == {"bf16": mixed.total_macs}
    assert count_flops(model, x).macs_by_precision == {"fp32": macs}  # no backward counted: none in the split
    double = count_flops(model.double(), x.double())
    assert double.macs_by_precision == {"float64": macs}
