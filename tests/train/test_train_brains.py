"""The training code: both Brains run a real step, and their losses equal independent computations."""
import pytest
import speechbrain as sb
import torch
import torchaudio

from sbprof.train.brains import BRAINS
from sbprof.train.data import mock_batches
from sbprof.train.models import ModelSizes, build_modules
from helpers.train_tiny import TINY_MODEL

SIZES = ModelSizes(**TINY_MODEL)


def brain_and_batch(variant):
    modules = build_modules(variant, SIZES, 16000, seed=1)
    brain = BRAINS[variant](modules, lambda p: torch.optim.SGD(p, lr=0.01), run_opts={"device": "cpu"})
    return brain, mock_batches(1, 2, 0.05, 16000, SIZES.vocab_size, seed=1).batches[0]


def true_lengths(relative, full):
    return (relative * full).round().int()


@pytest.mark.parametrize("variant", ["ctc", "transducer"])
def test_loss_equals_an_independent_computation(variant):
    brain, batch = brain_and_batch(variant)
    brain.modules.eval()  # no dropout: two forwards give the same outputs
    with torch.no_grad():
        predictions = brain.compute_forward(batch, sb.Stage.VALID)
        loss = brain.compute_objectives(predictions, batch, sb.Stage.VALID)
        out, wav_lens = predictions
        tokens, token_lens = batch.tokens
        out_lens, tok_lens = true_lengths(wav_lens, out.shape[1]), true_lengths(token_lens, tokens.shape[1])
        if variant == "ctc":
            expected = torch.nn.functional.ctc_loss(out.transpose(0, 1), tokens, out_lens, tok_lens, blank=0,
                                                    zero_infinity=True)
        else:
            expected = torchaudio.functional.rnnt_loss(out, tokens.int(), out_lens, tok_lens, blank=0)
    assert torch.isfinite(loss) and torch.allclose(loss, expected)


@pytest.mark.parametrize("variant", ["ctc", "transducer"])
def test_a_training_step_updates_every_trainable_parameter(variant):
    brain, batch = brain_and_batch(variant)
    brain.fit(range(1), [batch], train_loader_kwargs={"batch_size": None})
    before = {n: p.detach().clone() for n, p in brain.modules.named_parameters()}
    brain.fit_batch(batch)
    unchanged = [n for n, p in brain.modules.named_parameters() if p.requires_grad and torch.equal(p, before[n])]
    assert not unchanged
