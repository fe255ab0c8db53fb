"""Mock-up batches follow the shape distribution they claim, scaled, and are reproducible."""
import torch

from sbprof.train.data import FRAME_S, mock_batches
from sbprof.models.utterances import sample_shapes


def test_lengths_and_token_counts_are_the_scaled_shapes():
    data = mock_batches(3, 4, scale=0.5, sample_rate=8000, vocab_size=50, seed=7)
    shapes = sample_shapes(12, seed=7)
    for b, batch in enumerate(data.batches):
        wavs, lens = batch.sig
        tokens, token_lens = batch.tokens
        samples = (lens * wavs.shape[1]).round().long().tolist()
        counts = (token_lens * tokens.shape[1]).round().long().tolist()
        for i, (t, u) in enumerate(shapes[4 * b:4 * b + 4]):
            assert samples[i] == round(t * FRAME_S * 0.5 * 8000)
            assert counts[i] == max(1, round(u * 0.5))
        assert abs(data.audio_s[b] - sum(samples) / 8000) < 1e-9 and data.tokens[b] == sum(counts)
        for row, count in zip(tokens, counts):  # ids of real tokens (not padding) avoid the blank, 0
            assert 1 <= int(row[:count].min()) and int(row[:count].max()) < 50


def test_seeded():
    a, b = (mock_batches(2, 2, 0.1, 16000, 10, seed=3) for _ in range(2))
    assert torch.equal(a.batches[1].sig[0], b.batches[1].sig[0])
    assert torch.equal(a.batches[1].tokens[0], b.batches[1].tokens[0])
