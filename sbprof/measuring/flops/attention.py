"""Formulas of the fused attention operators.

``scaled_dot_product_attention`` reaches the dispatcher as one backend
operator (``_scaled_dot_product_flash_attention_for_cpu`` on CPU; flash,
memory-efficient, cuDNN or an overrideable backend on GPU), and
``nn.MultiheadAttention`` / ``nn.TransformerEncoderLayer`` in inference take a
fused fast path (``_native_multi_head_attention``,
``_transformer_encoder_layer_fwd``). The operators they call inside are not
seen by the dispatcher, so each is counted whole, here, as the reference
math implementation (``_scaled_dot_product_attention_math``, which the
dispatcher shows operator by operator when it runs) computes it, so the count
does not depend on the backend picked. For ``L`` queries, ``S`` keys, head
sizes ``E`` (query/key) and ``Ev`` (value), per batch and head there are
``L*S`` scores:

- forward: ``L*S*(E + Ev)`` MACs (``QK^T`` and ``PV``); the scaling of queries
  and keys (1 FLOP per element of each); per score 5 FLOPs for the softmax,
  1 for the mask add when a mask is given or ``is_causal`` (the reference adds
  a ``-inf`` mask), 2 for dropout when ``p > 0``;
- backward: ``2*L*S*(E + Ev)`` MACs (``dV``, ``dP``, ``dQ``, ``dK``); the
  scaling of the query and key gradients; per score 4 FLOPs for the softmax
  backward and 1 for dropout. Recomputation of the scores by flash kernels is
  not counted (it is the kernel's choice, not the model's work).

Masks and ``is_causal`` do not reduce the count: every score of the dense
``L x S`` matrix is counted, as the reference computes it (flash kernels skip
about half of them when causal). A nested batch has no padding to mask: each
of its sequences is counted at its own length.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.measuring.flops.cost import Cost, Formula, arg, mac_cost, prod

_SOFTMAX_FLOPS = 5
_SOFTMAX_BACKWARD_FLOPS = 4


def attention_cost(q_shape: Sequence[int], k_shape: Sequence[int], v_shape: Sequence[int],
                   masked: bool = False, dropout_p: float = 0.0, backward: bool = False,
                   pairs: Optional[int] = None) -> Cost:
    """Cost of attention for ``(..., L, E)`` queries, ``(..., S, E)`` keys, ``(..., S, Ev)`` values.

    Arguments
    ---------
    q_shape, k_shape, v_shape : sequence of int
        Shapes; leading dimensions of the query are the batch and heads (key
        and value heads may be fewer, grouped-query attention).
    masked : bool
        A mask (additive, boolean or causal) is added to the scores.
    dropout_p : float
        Dropout probability on the attention weights.
    backward : bool
        Cost of the backward instead of the forward.
    pairs : int, optional
        Number of (query, key) pairs over all batch and heads, when the
        sequences are ragged; default ``prod(q_shape[:-1]) * S``.

    Returns
    -------
    Cost

    Example
    -------
    >>> c = attention_cost((2, 4, 10, 8), (2, 4, 12, 8), (2, 4, 12, 8))
    >>> c.macs == 2 * 4 * 10 * 12 * (8 + 8)
    True
    """
    if pairs is None:
        pairs = prod(q_shape[:-1]) * int(k_shape[-2])
    head_sizes = int(q_shape[-1]) + int(v_shape[-1])
    scaling = prod(q_shape) + prod(k_shape)
    dropout = bool(dropout_p)
    if backward:
        return mac_cost(2 * pairs * head_sizes, scaling + pairs * (_SOFTMAX_BACKWARD_FLOPS + dropout))
    return mac_cost(pairs * head_sizes, scaling + pairs * (_SOFTMAX_FLOPS + int(masked) + 2 * dropout))


def sdpa_cpu(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``_scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, *, attn_mask, scale)``."""
    masked = kwargs.get("attn_mask") is not None or bool(arg(args, kwargs, 4, "is_causal", False))
    return attention_cost(args[0].shape, args[1].shape, args[2].shape, masked=masked,
                          dropout_p=arg(args, kwargs, 3, "dropout_p", 0.0))


def sdpa_cpu_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``_scaled_dot_product_flash_attention_for_cpu_backward(grad_out, q, k, v, out, lse, dropout_p, ...)``."""
    return attention_cost(args[1].shape, args[2].shape, args[3].shape, dropout_p=args[6], backward=True)


def sdpa_flash(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``_scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal, ...)``: causal is its only mask."""
    return attention_cost(args[0].shape, args[1].shape, args[2].shape,
                          masked=bool(arg(args, kwargs, 4, "is_causal", False)),
                          dropout_p=arg(args, kwargs, 3, "dropout_p", 0.0))


def sdpa_flash_backward(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``_scaled_dot_product_flash_attention_backward(grad_out, q, k, v, out, lse, cum_q, cum_k,
    max_q, max_k, dropout_p, ...)``."""
    return attention_cost(args[1].shape, args[2].shape, args[3].shape, dropout_p=args[10], backward=True)


def _with_bias(dropout_index: int) -> Formula:
    """An SDPA backend ``(q, k, v, attn_bias, ...)`` with ``dropout_p``, then ``is_causal``, from ``dropout_index``."""
    def formula(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
        masked = arg(args, kwargs, 3, "attn_bias") is not None
        masked = masked or bool(arg(args, kwargs, dropout_index + 1, "is_causal", False))
        return attention_cost(args[0].shape, args[1].shape, args[2].shape, masked=masked,
                              dropout_p=arg(args, kwargs, dropout_index, "dropout_p", 0.0))
    formula.__doc__ = f"SDPA forward with an optional bias, ``dropout_p`` at argument {dropout_index}."
    return formula


def _backward_at(dropout_index: int) -> Formula:
    """Backward of an SDPA backend whose ``(grad_out, q, k, v, ...)`` has ``dropout_p`` at ``dropout_index``."""
    def formula(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
        return attention_cost(args[1].shape, args[2].shape, args[3].shape,
                              dropout_p=arg(args, kwargs, dropout_index, "dropout_p", 0.0), backward=True)
    formula.__doc__ = f"SDPA backward with ``dropout_p`` at argument {dropout_index}."
    return formula


def _pairs(q: Any, k: Any, cum_q: Any, cum_k: Any) -> int:
    """(query, key) pairs over batch and heads: ``(B, L, H, E)`` inputs, or sequences packed
    along one dimension with cumulative lengths ``cum_q``/``cum_k`` (read from the device)."""
    heads = int(q.shape[-2])
    if cum_q is None:
        return int(q.shape[0]) * int(q.shape[1]) * heads * int(k.shape[1])
    lq, lk = cum_q.tolist(), cum_k.tolist()
    return heads * sum((lq[i + 1] - lq[i]) * (lk[i + 1] - lk[i]) for i in range(len(lq) - 1))


def _low_level(q_index: int, cum_index: int, dropout_index: int, backward: bool,
               bias_index: Optional[int] = None) -> Formula:
    """``_flash_attention_*`` / ``_efficient_attention_*`` kernels: ``(B, L, H, E)`` layout."""
    def formula(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
        q, k, v = args[q_index], args[q_index + 1], args[q_index + 2]
        pairs = _pairs(q, k, args[cum_index], args[cum_index + 1])
        # forward: flash takes is_causal, efficient a custom_mask_type (nonzero: causal), after dropout_p
        masked = not backward and (bool(args[dropout_index + 1])
                                   or (bias_index is not None and args[bias_index] is not None))
        return attention_cost(q.shape, k.shape, v.shape, masked=masked, dropout_p=args[dropout_index],
                              backward=backward, pairs=pairs)
    formula.__doc__ = "Low-level flash / memory-efficient attention kernel, ``(B, L, H, E)`` layout."
    return formula


def _lengths(batch: Any) -> List[int]:
    """Sequence lengths of a batch-first ``(B, L, D)`` tensor, or of each ``(L_i, D)`` sequence
    of a nested tensor (what ``nn.TransformerEncoder`` makes of a padded batch and its mask).

    Example
    -------
    >>> import torch
    >>> _lengths(torch.ones(2, 5, 8)), _lengths(torch.nested.nested_tensor([torch.ones(5, 8), torch.ones(3, 8)]))
    ([5, 5], [5, 3])
    """
    if batch.is_nested:
        return [int(size[0]) for size in batch._nested_tensor_size().tolist()]
    return [int(batch.shape[1])] * int(batch.shape[0])


def native_multi_head_attention(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``nn.MultiheadAttention``'s fused inference path, step by step as ATen computes it.

    Query ``(B, L, D)``, key/value ``(B, S, D)``, ``H`` heads: the in-projection
    ``B*D*D*(L + 2S)`` MACs plus its bias; queries scaled (``B*L*D``); the
    attention (a mask adds 1 per score, as the training path adds it); the out-projection
    ``B*L*D*D`` MACs plus bias; with ``need_weights`` and
    ``average_attn_weights`` the head average of the weights (an add per
    score, a divide per averaged weight). This equals what the same module
    counts operator by operator in training mode.

    Nested inputs (sequences of lengths ``L_i``, ``S_i``) are counted per
    sequence: ``L_i`` query and ``S_i`` key tokens, ``L_i*S_i`` (query, key)
    pairs, the sum over the batch of what each sequence costs alone. On the
    CPU, ATen pads queries, keys and values to the longest sequence of the
    batch for their bias add, the scaling and the two attention products (the
    softmax runs per sequence); like the recomputation of flash kernels, that
    is the kernel's choice, not counted.
    """
    query, key = args[0], args[1]
    embed_dim, heads = int(args[3]), int(args[4])
    query_lengths, key_lengths = _lengths(query), _lengths(key)
    tokens, keys = sum(query_lengths), sum(key_lengths)
    pairs = sum(lq * lk for lq, lk in zip(query_lengths, key_lengths))
    need_weights = arg(args, kwargs, 10, "need_weights", True)
    average = arg(args, kwargs, 11, "average_attn_weights", True)
    head = embed_dim // heads
    core = attention_cost((heads, tokens, head), (heads, keys, head), (heads, keys, head),
                          masked=arg(args, kwargs, 9, "mask") is not None, pairs=heads * pairs)
    projections = embed_dim * embed_dim * (tokens + 2 * keys) + tokens * embed_dim * embed_dim
    biases = embed_dim * (tokens + 2 * keys) + tokens * embed_dim
    # the fused kernel (and the module's training path) scales the queries only, not the keys
    extra = core.flops - 2 * core.macs - keys * embed_dim + biases
    if need_weights and average:
        extra += heads * pairs + pairs
    return mac_cost(core.macs + projections, extra)


def transformer_encoder_layer(args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Cost:
    """``nn.TransformerEncoderLayer``'s fused inference path: self-attention (no
    weights returned), two residual adds, two layer norms with affine
    (7 FLOPs per element, see :mod:`sbprof.measuring.flops.normalization`), the
    feed-forward's two products with biases and its activation.

    A dense ``(B, L, D)`` input is counted whole, padding included (a key
    padding mask adds 1 per score). A nested input (``nn.TransformerEncoder``
    in inference given ``src_key_padding_mask``) holds only the real tokens:
    everything is counted on them, attention per sequence (see
    :func:`native_multi_head_attention`), so the batch costs what its
    sequences cost one by one.
    """
    src, embed_dim, heads = args[0], int(args[1]), int(args[2])
    ffn_dim = int(args[14].shape[0])
    tokens = src.numel() // embed_dim
    mask = arg(args, kwargs, 18, "mask")
    attention = native_multi_head_attention((src, src, src, embed_dim, heads, None, None, None, None, mask, False),
                                            {}, None)
    macs = attention.macs + 2 * tokens * embed_dim * ffn_dim
    elements = tokens * embed_dim
    extra = attention.flops - 2 * attention.macs + 2 * elements + 2 * 7 * elements
    extra += tokens * ffn_dim + tokens * ffn_dim + elements  # bias 1, activation, bias 2
    return mac_cost(macs, extra)


FORMULAS: Dict[str, Formula] = {
    "_scaled_dot_product_flash_attention_for_cpu": sdpa_cpu,
    "_scaled_dot_product_flash_attention_for_cpu_backward": sdpa_cpu_backward,
    "_scaled_dot_product_flash_attention": sdpa_flash,
    "_scaled_dot_product_flash_attention_backward": sdpa_flash_backward,
    "_scaled_dot_product_efficient_attention": _with_bias(5),
    "_scaled_dot_product_efficient_attention_backward": _backward_at(9),
    "_scaled_dot_product_cudnn_attention": _with_bias(5),
    "_scaled_dot_product_cudnn_attention_backward": _backward_at(13),
    "_scaled_dot_product_fused_attention_overrideable": _with_bias(4),
    "_scaled_dot_product_fused_attention_overrideable_backward": _backward_at(12),
    "_flash_attention_forward": _low_level(0, 3, 7, backward=False),
    "_flash_attention_backward": _low_level(1, 6, 10, backward=True),
    "_efficient_attention_forward": _low_level(0, 4, 8, backward=False, bias_index=3),
    "_efficient_attention_backward": _low_level(1, 6, 11, backward=True),  # the bias gradient is a copy
    "_native_multi_head_attention": native_multi_head_attention,
    "_transformer_encoder_layer_fwd": transformer_encoder_layer,
}
