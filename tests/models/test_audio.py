"""Inputs of a cell: seeded noise, or a real recording fitted to exactly the cell's length."""
from __future__ import annotations

import numpy as np
import pytest
import soundfile
import torch

from helpers.paths import EXAMPLE_AUDIO as EXAMPLE
from sbprof.base.errors import ConfigError
from sbprof.models.audio import fit_length, input_kind, load_example, make_batch, num_samples


def test_noise_is_seeded_and_exactly_sized():
    a = make_batch(0.75, 3, 16000, seed=5)
    assert a.wavs.shape == (3, 12000) and a.wav_lens.tolist() == [1.0, 1.0, 1.0]
    assert a.seconds == pytest.approx(2.25)
    assert torch.equal(a.wavs, make_batch(0.75, 3, 16000, seed=5).wavs)
    assert not torch.equal(a.wavs, make_batch(0.75, 3, 16000, seed=6).wavs)
    # Rows differ: a batch is not one utterance copied.
    assert not torch.equal(a.wavs[0], a.wavs[1])


def test_example_is_tiled_to_long_lengths_not_padded():
    example = load_example(EXAMPLE, 16000)
    n_file = example.shape[0]
    batch = make_batch(32, 2, 16000, example=example)
    assert batch.wavs.shape == (2, 32 * 16000)
    assert batch.seconds == 64.0
    row = batch.wavs[0]
    # Every tile is the recording itself: the batch holds 32 s of speech, no silence padding.
    assert torch.equal(row[:n_file], example)
    assert torch.equal(row[n_file:2 * n_file], example)
    tail = row[(32 * 16000 // n_file) * n_file:]
    assert torch.equal(tail, example[: tail.shape[0]])


def test_example_is_truncated_to_short_lengths():
    example = load_example(EXAMPLE, 16000)
    batch = make_batch(0.5, 1, 16000, example=example)
    assert torch.equal(batch.wavs[0], example[:8000])


def test_fit_length_exact_multiple():
    assert fit_length(torch.arange(4.0), 8).tolist() == [0, 1, 2, 3, 0, 1, 2, 3]


def test_stereo_file_is_averaged_and_resampled(tmp_path):
    left = np.sin(np.linspace(0, 100, 8000, dtype=np.float32))
    stereo = np.stack([left, np.zeros_like(left)], axis=1)
    path = tmp_path / "stereo_8k.wav"
    soundfile.write(path, stereo, 8000, subtype="FLOAT")
    wav = load_example(path, 16000)
    assert wav.dim() == 1 and wav.shape[0] == 16000  # 1 s at 8 kHz -> 1 s at 16 kHz
    assert wav.abs().max() == pytest.approx(0.5, abs=0.05)  # (left + 0) / 2


def test_unreadable_file_is_a_config_error(tmp_path):
    bad = tmp_path / "not_audio.wav"
    bad.write_text("hello")
    with pytest.raises(ConfigError, match="not_audio.wav"):
        load_example(bad, 16000)


def test_less_than_a_sample_is_refused():
    assert num_samples(1e-4, 16000) == 2
    with pytest.raises(ConfigError, match="less than one sample"):
        num_samples(1e-5, 16000)


def test_input_kind_names_seed_or_file_content(tmp_path):
    assert input_kind(None, 7) == "random:seed=7"
    kind = input_kind(EXAMPLE, 7)
    assert kind.startswith("file:example_audio.wav:sha256=")
    copy = tmp_path / "example_audio.wav"
    copy.write_bytes(EXAMPLE.read_bytes())
    assert input_kind(copy, 0) == kind  # same content, same input, wherever it lies
