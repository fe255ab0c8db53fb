"""The reference RNN-T loss against brute-force enumeration and torchaudio."""
from __future__ import annotations

import itertools

import pytest
import torch

from sbprof.transducer.backends.reference import rnnt_loss_reference


def brute_force(logits, targets, t_len, u_len, blank):
    """-log P(y|x) of one utterance by summing over every alignment explicitly.

    An alignment interleaves T - 1 blank moves (t -> t + 1) with the U label
    emissions and ends with the final blank at (T - 1, U).
    """
    lp = torch.log_softmax(logits.double(), dim=-1)
    paths = []
    for emit_at in itertools.combinations(range(t_len - 1 + u_len), u_len):
        t = u = 0
        total = lp.new_zeros(())
        for move in range(t_len - 1 + u_len):
            if move in emit_at:
                total = total + lp[t, u, targets[u]]
                u += 1
            else:
                total = total + lp[t, u, blank]
                t += 1
        paths.append(total + lp[t_len - 1, u_len, blank])
    return -torch.logsumexp(torch.stack(paths), dim=0)


@pytest.mark.parametrize("blank", [0, 4])
def test_loss_and_gradient_match_enumeration_of_all_alignments(blank):
    gen = torch.Generator().manual_seed(3)
    shapes = [(4, 3), (3, 2), (1, 1), (2, 0)]
    vocab = 5
    logits = torch.randn(4, 4, 4, vocab, generator=gen, requires_grad=True)
    labels = [v for v in range(vocab) if v != blank]
    targets = torch.tensor([[labels[i % 4] for i in range(k, k + 3)] for k in range(4)])
    t_len = torch.tensor([t for t, _ in shapes])
    u_len = torch.tensor([u for _, u in shapes])

    got = rnnt_loss_reference(logits, targets, t_len, u_len, blank=blank)
    expected = torch.stack([brute_force(logits[n], targets[n], t, u, blank) for n, (t, u) in enumerate(shapes)])
    assert torch.allclose(got.double(), expected, rtol=1e-6)

    weights = torch.tensor([1.0, 0.5, 2.0, 1.5])
    (g_got,) = torch.autograd.grad((weights * got).sum(), logits)
    (g_exp,) = torch.autograd.grad((weights * expected).sum(), logits)
    assert torch.allclose(g_got, g_exp, atol=1e-6)
    # Padding (t >= T_n, u > U_n) receives no gradient.
    assert g_got[1, 3:].abs().max() == 0 and g_got[1, :, 3:].abs().max() == 0


def test_reductions_are_sum_and_batch_mean():
    logits = torch.randn(3, 5, 3, 6)
    args = (logits, torch.ones(3, 2, dtype=torch.long), torch.tensor([5, 4, 2]), torch.tensor([2, 1, 2]))
    per_utt = rnnt_loss_reference(*args)
    assert torch.allclose(rnnt_loss_reference(*args, reduction="sum"), per_utt.sum())
    assert torch.allclose(rnnt_loss_reference(*args, reduction="mean"), per_utt.sum() / 3)
    with pytest.raises(ValueError, match="reduction"):
        rnnt_loss_reference(*args, reduction="batchmean")


def test_agrees_with_torchaudio():
    torchaudio_functional = pytest.importorskip("torchaudio.functional")
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 9, 6, 20, generator=gen, requires_grad=True)
    targets = torch.randint(1, 20, (3, 5), generator=gen, dtype=torch.int32)
    t_len = torch.tensor([9, 7, 3], dtype=torch.int32)
    u_len = torch.tensor([5, 2, 4], dtype=torch.int32)
    ours = rnnt_loss_reference(logits, targets, t_len, u_len, blank=0)
    theirs = torchaudio_functional.rnnt_loss(logits, targets, t_len, u_len, blank=0, reduction="none")
    assert torch.allclose(ours, theirs, rtol=1e-5)
    (g1,) = torch.autograd.grad(ours.sum(), logits)
    (g2,) = torch.autograd.grad(theirs.sum(), logits)
    assert (g1 - g2).abs().max() < 1e-4
