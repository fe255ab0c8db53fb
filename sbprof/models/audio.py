"""The audio fed to each cell: seeded noise, or a real recording fitted to length.

Every batch holds exactly the seconds its cell claims: a real recording is
truncated when it is longer than the cell's length and *tiled* (repeated end
to end) when it is shorter. SpeechBrain's historic recipe only truncated, so
its long cells silently held less audio than their row said and their RTF
came out too good.

Random audio is white Gaussian noise from a generator seeded per call, so two
runs with the same seed feed byte-identical inputs.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import numpy
import soundfile
import torch

from sbprof.base.errors import ConfigError
from sbprof.base.yamlconfig import EXAMPLE_TOKEN, resolve_path, shipped_example

NOISE_STD = 0.1
"""Standard deviation of mock-up noise: about -20 dB full scale, the level of normalised speech."""


@dataclass
class Batch:
    """One batch of audio and what it holds.

    Arguments
    ---------
    wavs : torch.Tensor
        ``[batch, samples]`` float32 waveforms.
    wav_lens : torch.Tensor
        ``[batch]`` relative lengths (all ``1.0``: every row is full length).
    sample_rate : int
        Samples per second of ``wavs``.
    """

    wavs: torch.Tensor
    wav_lens: torch.Tensor
    sample_rate: int

    @property
    def seconds(self) -> float:
        """Total seconds of audio in the batch (all rows), the RTF denominator."""
        return self.wavs.shape[0] * self.wavs.shape[1] / self.sample_rate


def num_samples(audio_s: float, sample_rate: int) -> int:
    """Samples in ``audio_s`` seconds, rounded to the nearest sample.

    Example
    -------
    >>> num_samples(1.5, 16000)
    24000
    """
    n = round(audio_s * sample_rate)
    if n < 1:
        raise ConfigError(f"{audio_s} s of audio at {sample_rate} Hz is less than one sample")
    return n


def file_digest(path: Union[str, Path]) -> str:
    """First 16 hex digits of the SHA-256 of a file (identifies the example input)."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def input_kind(example_audio: Optional[Union[str, Path]], seed: int) -> str:
    """A short key naming the input, stored with every cell.

    Example
    -------
    >>> input_kind(None, 3)
    'random:seed=3'
    """
    if example_audio is None:
        return f"random:seed={seed}"
    return f"file:{Path(example_audio).name}:sha256={file_digest(example_audio)}"


def check_recording(path: Union[str, Path]) -> Optional[str]:
    """Why ``path`` cannot stand for speech (unreadable, empty, non-finite or silent samples), or ``None``.

    Example
    -------
    >>> import tempfile, pathlib, numpy
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "nan.wav"
    >>> soundfile.write(str(p), numpy.full(160, numpy.nan, dtype="float32"), 16000, subtype="FLOAT")
    >>> check_recording(p)
    'holds non-finite samples (NaN or infinity) at 160 of its 160 samples'
    """
    try:
        data, _ = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as exc:  # libsndfile's errors are RuntimeErrors
        return f"is not readable audio: {' '.join(str(exc).split())}"
    if data.shape[0] == 0:
        return "holds no samples (a valid header, no audio)"
    bad = int((~numpy.isfinite(data)).any(axis=1).sum())
    if bad:
        return f"holds non-finite samples (NaN or infinity) at {bad} of its {data.shape[0]} samples"
    if not numpy.abs(data).max() > 0:
        return "holds only digital silence (every sample is 0): use null for seeded noise instead"
    return None


def check_example_audio(value: Any, where: str, key: str, base: Path) -> Optional[str]:
    """``example_audio``: ``null`` (seeded noise), ``example`` (the recording shipped in sbprof) or a readable
    recording that holds sound; the absolute path."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: {key} must be null, {EXAMPLE_TOKEN!r} or a path, got {value!r}")
    path = shipped_example() if value == EXAMPLE_TOKEN else resolve_path(value, base)
    if path.is_dir():
        raise ConfigError(f"{where}: {key} {str(path.resolve())!r} is a folder, not an audio file")
    if not path.is_file():
        raise ConfigError(f"{where}: {key}: no such file {str(path.resolve())!r}")
    problem = check_recording(path)
    if problem:
        raise ConfigError(f"{where}: {key} {str(path)!r} {problem}")
    return str(path.resolve())


def load_example(path: Union[str, Path], sample_rate: int) -> torch.Tensor:
    """Read a recording as mono float32 at ``sample_rate`` (channels averaged, resampled if needed)."""
    try:
        data, file_rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as exc:  # libsndfile errors are RuntimeErrors
        raise ConfigError(f"example_audio {str(path)!r} cannot be read as audio: {exc}") from None
    if data.shape[0] == 0:
        raise ConfigError(f"example_audio {str(path)!r} holds no samples")
    wav = torch.from_numpy(data).mean(dim=1)
    if file_rate != sample_rate:
        import torchaudio.functional

        wav = torchaudio.functional.resample(wav, file_rate, sample_rate)
    return wav.contiguous()


def fit_length(wav: torch.Tensor, n: int) -> torch.Tensor:
    """Truncate ``wav`` to ``n`` samples, tiling it first when it is shorter.

    Example
    -------
    >>> fit_length(torch.tensor([1.0, 2.0, 3.0]), 7).tolist()
    [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0]
    >>> fit_length(torch.tensor([1.0, 2.0, 3.0]), 2).tolist()
    [1.0, 2.0]
    """
    repeats = math.ceil(n / wav.shape[0])
    return wav.repeat(repeats)[:n]


def make_batch(
    audio_s: float,
    batch_size: int,
    sample_rate: int,
    seed: int = 0,
    example: Optional[torch.Tensor] = None,
) -> Batch:
    """A ``[batch_size, audio_s * sample_rate]`` batch of noise or of ``example``.

    Arguments
    ---------
    audio_s : float
        Seconds per utterance.
    batch_size : int
        Utterances in the batch.
    sample_rate : int
        The model's sample rate.
    seed : int
        Seeds the noise (ignored when ``example`` is given).
    example : torch.Tensor, optional
        A mono recording at ``sample_rate`` (see :func:`load_example`); each
        row of the batch is that recording fitted to length.

    Returns
    -------
    Batch

    Example
    -------
    >>> a = make_batch(0.5, 2, 16000, seed=7)
    >>> a.wavs.shape, a.seconds
    (torch.Size([2, 8000]), 1.0)
    >>> torch.equal(a.wavs, make_batch(0.5, 2, 16000, seed=7).wavs)
    True
    """
    n = num_samples(audio_s, sample_rate)
    if example is None:
        generator = torch.Generator().manual_seed(seed)
        wavs = torch.randn(batch_size, n, generator=generator) * NOISE_STD
    else:
        wavs = fit_length(example, n).unsqueeze(0).repeat(batch_size, 1)
    return Batch(wavs=wavs, wav_lens=torch.ones(batch_size), sample_rate=sample_rate)
