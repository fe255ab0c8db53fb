"""Mock-up training batches whose lengths and token counts follow LibriSpeech train-clean-100.

Each utterance draws a pair (T, U) from
:func:`sbprof.models.utterances.sample_shapes` (T: frames after 4x
subsampling, 40 ms each; U: BPE-500 tokens), then both are multiplied by
``scale`` so that a CPU step stays short: at the default 0.25 the median
utterance lasts 343 x 0.04 x 0.25 = 3.4 s and holds 18 tokens (the real
median is 13.7 s and 71 tokens); tokens per second stay those of the data.
The waveform is seeded white noise (0.1 standard deviation) of exactly that
duration; the tokens are seeded random ids in [1, vocab_size) (0 is the
blank). Batches are SpeechBrain ``PaddedBatch``es with ``sig`` and ``tokens``,
in the order drawn (no sorting, as with random sampling). For data-parallel
training, each global batch is drawn whole and every rank keeps its own
contiguous share (each rank pads its share to its own longest utterance, as
under DDP).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List

import torch

FRAME_S = 0.04
"""Seconds per frame of the shape data (10 ms frames, 4x subsampling)."""


@dataclass
class MockBatches:
    """The batches and the seconds of audio each holds (the throughput numerator)."""

    batches: List[object]
    audio_s: List[float]
    tokens: List[int]


def mock_batches(num_batches: int, batch_size: int, scale: float, sample_rate: int, vocab_size: int,
                 seed: int, world_size: int = 1, rank: int = 0) -> MockBatches:
    """``num_batches`` batches of ``batch_size`` utterances (see the module docstring); with ``world_size`` ranks,
    ``rank``'s share of each (``batch_size / world_size`` utterances: ``batch_size`` is the global batch).

    Example
    -------
    >>> data = mock_batches(2, 3, scale=0.25, sample_rate=16000, vocab_size=500, seed=1)
    >>> len(data.batches), data.batches[0].sig[0].shape[0], round(sum(data.audio_s) / 6, 1) > 0.5
    (2, 3, True)
    >>> halves = [mock_batches(2, 4, 0.25, 16000, 500, seed=1, world_size=2, rank=r) for r in (0, 1)]
    >>> whole = mock_batches(2, 4, 0.25, 16000, 500, seed=1)
    >>> [len(h.batches[0].id) for h in halves], round(halves[0].audio_s[1] + halves[1].audio_s[1], 6) == round(
    ...     whole.audio_s[1], 6)
    ([2, 2], True)
    """
    if batch_size % world_size or not 0 <= rank < world_size:
        raise ValueError(f"a global batch of {batch_size} cannot be shared as rank {rank} of {world_size}")
    share = batch_size // world_size
    from speechbrain.dataio.batch import PaddedBatch

    from sbprof.models.utterances import sample_shapes

    shapes = sample_shapes(num_batches * batch_size, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    batches, audio_s, tokens = [], [], []
    for b in range(num_batches):
        examples, seconds, count = [], 0.0, 0
        for i, (t, u) in enumerate(shapes[b * batch_size:(b + 1) * batch_size]):
            samples = max(1, round(t * FRAME_S * scale * sample_rate))
            n_tokens = max(1, round(u * scale))
            example = {"id": f"utt{b}-{i}", "sig": 0.1 * torch.randn(samples, generator=generator),
                       "tokens": torch.randint(1, vocab_size, (n_tokens,), generator=generator)}
            if i // share != rank:  # drawn all the same, so every rank sees the same global batch
                continue
            examples.append(example)
            seconds += samples / sample_rate
            count += n_tokens
        batches.append(PaddedBatch(examples))
        audio_s.append(seconds)
        tokens.append(count)
    return MockBatches(batches, audio_s, tokens)
