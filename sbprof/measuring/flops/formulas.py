"""The table operator -> FLOP formula, and the counting conventions, in one place.

Keys are aten operators as the dispatcher sees them under eager execution
(overload packets: ``torch.ops.aten.addmm`` covers ``addmm.default`` and
``addmm.out``). Each value is a small function ``(args, kwargs, output) ->
Cost`` that can be called, and tested, on its own.

Conventions
-----------
- MACs are multiply-accumulates of products of matrices or tensors
  (``mm``, ``addmm``, ``bmm``, ``baddbmm``, convolutions, attention, recurrent
  layers) and only of those; every other operator (FFTs included, counted as
  ``5 N log2 N`` FLOPs per complex transform) reports 0 MACs.
- FLOPs = 2 x MACs + the other floating-point operations the operator does
  (bias adds, scaling, softmax, gates); so ``FLOPs == 2 * MACs`` only for a
  bare product, and MACs are never derived as FLOPs / 2.
- Element-wise operators, activations and softmax: :mod:`sbprof.measuring.flops.pointwise`
  (1 FLOP per output element for arithmetic and elementary functions alike).
- Normalisations (weight normalisation included): :mod:`sbprof.measuring.flops.normalization`;
  reductions and pooling: :mod:`sbprof.measuring.flops.reduction`; attention:
  :mod:`sbprof.measuring.flops.attention`; recurrent layers: :mod:`sbprof.measuring.flops.recurrent`;
  products, convolutions and FFTs: :mod:`sbprof.measuring.flops.dense`; upsampling
  (interpolation): :mod:`sbprof.measuring.flops.interpolation`.
- Only floating-point work counts: integer and boolean arithmetic (lengths,
  masks, indices) costs 0 FLOPs.
- Counts are of the dense math on the shapes given (padding and masks
  included; a nested tensor's sequences at their own lengths);
  data-dependent shortcuts of a kernel are not modelled.
- Operators that only move, view, create or select data (:data:`NO_FLOPS`)
  cost 0 by definition. Any other operator without a formula is reported by
  name as untracked, never silently counted as 0.

Example
-------
>>> import torch
>>> formula_for(torch.ops.aten.mm)((torch.ones(2, 3), torch.ones(3, 4)), {}, None)
Cost(macs=24, flops=48)
>>> torch.ops.aten.view in NO_FLOPS
True
"""
from __future__ import annotations

from typing import Dict, FrozenSet, Iterable, Optional

import torch

# Each family module by its own path, never through the package face (whose __init__ imports this module).
import sbprof.measuring.flops.attention as attention
import sbprof.measuring.flops.dense as dense
import sbprof.measuring.flops.interpolation as interpolation
import sbprof.measuring.flops.normalization as normalization
import sbprof.measuring.flops.pointwise as pointwise
import sbprof.measuring.flops.recurrent as recurrent
import sbprof.measuring.flops.reduction as reduction
from sbprof.measuring.flops.cost import Formula

#: Conventions version, saved with every result so counts from different rules are never mixed.
CONVENTIONS = "sbprof-flops-1"

_NO_FLOP_NAMES = (
    # views and reshapes
    "view", "_unsafe_view", "reshape", "_reshape_alias", "alias", "as_strided", "t", "t_", "transpose",
    "transpose_", "permute", "expand", "squeeze", "squeeze_", "unsqueeze", "unsqueeze_", "select", "slice",
    "narrow", "split", "split_with_sizes", "unsafe_split", "unsafe_split_with_sizes", "chunk", "unbind",
    "unfold", "view_as_real", "view_as_complex", "detach", "detach_", "lift_fresh", "_conj", "conj",
    "_neg_view", "diagonal", "movedim",
    # copies, concatenation, layout and type changes
    "clone", "copy_", "_to_copy", "contiguous", "cat", "stack", "repeat", "repeat_interleave", "flip",
    "roll", "tril", "triu", "_pack_padded_sequence", "_pad_packed_sequence", "constant_pad_nd",
    "reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d",
    "reflection_pad1d_backward", "reflection_pad2d_backward",
    "select_backward", "slice_backward", "unfold_backward", "as_strided_scatter", "slice_scatter",
    "select_scatter", "_local_scalar_dense",
    # padded batch <-> nested tensor (nn.TransformerEncoder's inference path), and its alignment check
    "_nested_tensor_from_mask", "_nested_tensor_from_mask_left_aligned", "to_padded_tensor",
    # creation, filling and random numbers
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill", "fill_", "zero_",
    "scalar_tensor", "lift_fresh_copy", "arange", "linspace", "eye", "hann_window", "hamming_window",
    "randn", "randn_like", "rand", "rand_like", "randint", "randperm", "normal_", "uniform_", "bernoulli",
    "bernoulli_", "exponential_",
    # selection, indexing, sorting and logic (no arithmetic on values)
    "where", "masked_fill", "masked_fill_", "masked_select", "index", "index_select", "gather", "take",
    "embedding", "nonzero", "sort", "topk", "argsort", "_unique2", "unique_consecutive", "logical_and",
    "logical_and_", "logical_or", "logical_or_", "logical_not", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_not", "bitwise_xor", "any", "all", "_assert_async", "_foreach_copy_", "_foreach_zero_",
    # profiler markers (``record_function``, e.g. around every optimiser step)
    "profiler._record_function_enter", "profiler._record_function_enter_new", "profiler._record_function_exit",
)


def _packets(names: Iterable[str]) -> Dict[str, torch._ops.OpOverloadPacket]:
    """Packets by name (``aten`` unless ``namespace.name``); names this torch does not have are skipped."""
    found = {}
    for name in names:
        namespace, _, op = name.rpartition(".")
        packet = getattr(getattr(torch.ops, namespace or "aten"), op, None)
        if isinstance(packet, torch._ops.OpOverloadPacket):
            found[name] = packet
    return found


def _build() -> Dict[torch._ops.OpOverloadPacket, Formula]:
    table: Dict[torch._ops.OpOverloadPacket, Formula] = {}
    for module in (pointwise, reduction, normalization, dense, attention, recurrent, interpolation):
        for name, packet in _packets(module.FORMULAS).items():
            table[packet] = module.FORMULAS[name]
    return table


#: Operators that do no floating-point arithmetic: 0 FLOPs, never reported as untracked.
NO_FLOPS: FrozenSet[torch._ops.OpOverloadPacket] = frozenset(
    _packets(_NO_FLOP_NAMES + interpolation.NEAREST).values())

#: aten overload packet -> formula.
FORMULAS: Dict[torch._ops.OpOverloadPacket, Formula] = _build()


def formula_for(packet: torch._ops.OpOverloadPacket) -> Optional[Formula]:
    """The formula of an operator, or None when it has none (see :data:`NO_FLOPS` for the free ones)."""
    return FORMULAS.get(packet)
