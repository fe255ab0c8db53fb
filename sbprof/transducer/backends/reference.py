"""A plain-PyTorch RNN-T loss, the ground truth every backend is checked against, and that loss as a backend.

Convention (shared by every backend adapter): the loss of utterance ``n`` is
``-log P(y_n | x_n)`` in nats, summed over all alignments of the lattice of
``T_n`` frames by ``U_n + 1`` label positions, with a final blank; it is not
normalised by length or batch size. ``reduction="sum"`` adds the per-utterance
losses, ``"mean"`` averages them over the batch.

The forward variable of row ``t`` is computed for all ``u`` at once: with
``C[u]`` the cumulative emission log-probability of the first ``u`` labels
at frame ``t``, ``alpha[t, u] = C[u] + logcumsumexp_k<=u(a[k] - C[k])``, where
``a`` is the previous row moved by one blank. So the Python loop runs over
frames only, and autograd gives the gradients. The arithmetic is float64 by
default, so the reference is more precise than the float32 backends it judges.
"""
from __future__ import annotations

import torch

from sbprof.transducer.backends.base import Backend

REDUCTIONS = ("none", "sum", "mean")


def rnnt_loss_reference(
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int = 0,
    reduction: str = "none",
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """RNN-T loss by log-space dynamic programming over the (T, U+1) lattice.

    Arguments
    ---------
    logits : torch.Tensor
        ``(N, T, U+1, V)`` unnormalised joint-network outputs (log_softmax over
        ``V`` is applied here).
    targets : torch.Tensor
        ``(N, U)`` label ids (no blanks); padding past ``target_lengths`` is ignored.
    logit_lengths, target_lengths : torch.Tensor
        ``(N,)`` frames ``T_n`` and labels ``U_n`` of each utterance.
    blank : int
        Index of the blank symbol in ``V``.
    reduction : str
        ``none`` (per-utterance losses), ``sum`` or ``mean`` (over the batch).
    dtype : torch.dtype
        Precision of the computation; the result has the dtype of ``logits``.

    Returns
    -------
    torch.Tensor
        ``(N,)`` for ``none``, a scalar otherwise.

    Example
    -------
    >>> import math
    >>> logits = torch.zeros(1, 2, 2, 3)  # uniform over 3 symbols
    >>> loss = rnnt_loss_reference(logits, torch.tensor([[1]]), torch.tensor([2]), torch.tensor([1]))
    >>> # two alignments (label at frame 0 or at frame 1), each of 3 symbols of prob 1/3
    >>> round(float(loss), 6) == round(-math.log(2 / 27), 6)
    True
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    n_utt, n_frames, n_pos, vocab = logits.shape
    log_probs = torch.log_softmax(logits.to(dtype), dim=-1)
    blank_lp = log_probs[..., blank]  # (N, T, U+1)
    labels = targets.long().clamp(0, vocab - 1)[:, : n_pos - 1]
    index = labels[:, None, :, None].expand(n_utt, n_frames, n_pos - 1, 1)
    emit_lp = log_probs[:, :, :-1, :].gather(3, index).squeeze(3)  # (N, T, U)
    cumulative = torch.cat([emit_lp.new_zeros(n_utt, n_frames, 1), emit_lp.cumsum(-1)], dim=-1)

    start = torch.full((n_utt, n_pos), float("-inf"), dtype=dtype, device=logits.device)
    start[:, 0] = 0.0
    rows = []
    for t in range(n_frames):
        moved = start if t == 0 else rows[-1] + blank_lp[:, t - 1]
        rows.append(cumulative[:, t] + torch.logcumsumexp(moved - cumulative[:, t], dim=-1))
    alpha = torch.stack(rows, dim=1)  # (N, T, U+1)

    utt = torch.arange(n_utt, device=logits.device)
    last_t = logit_lengths.long() - 1
    last_u = target_lengths.long()
    loss = -(alpha[utt, last_t, last_u] + blank_lp[utt, last_t, last_u])
    loss = loss.to(logits.dtype)
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean()
    return loss


class ReferenceBackend(Backend):
    """Log-space DP in plain PyTorch, float64 inside; a Python loop over frames (slow, exact)."""

    name = "reference"
    module = "torch"
    install_hint = "part of sbprof"
    convention = "per-utterance -log P(y|x) (the convention itself)"

    def loss(self, logits, targets, logit_lengths, target_lengths, blank):
        return rnnt_loss_reference(logits, targets, logit_lengths, target_lengths, blank=blank)


BACKEND = ReferenceBackend()
