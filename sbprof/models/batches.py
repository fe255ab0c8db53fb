"""What a SpeechBrain batch holds: its utterances and seconds of audio, read from the batch without a copy.

Used wherever a step is timed on a Brain's batch (``sbprof run``'s hooks, the
decorators under torchrun), so throughput and CPU cost per second of audio
come from the data the step really saw.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import torch

from sbprof.models.source import DEFAULT_SAMPLE_RATE


def brain_sample_rate(brain: Any) -> int:
    """The Brain's ``hparams.sample_rate``, else 16 kHz (SpeechBrain's recipes' default).

    Example
    -------
    >>> brain_sample_rate(object())
    16000
    """
    return int(getattr(getattr(brain, "hparams", None), "sample_rate", DEFAULT_SAMPLE_RATE))


def batch_size_and_audio(batch: Any, sample_rate: int) -> Tuple[Optional[int], Optional[float]]:
    """Utterances and audio seconds of a SpeechBrain ``PaddedBatch`` (its ``sig``); a ``PaddedBatch`` without audio
    (text, for a language model) gives its utterances only; anything else ``(None, None)``.

    The seconds are the utterances' own lengths (relative lengths x the padded length), not the padding.

    Example
    -------
    >>> from speechbrain.dataio.batch import PaddedBatch
    >>> batch = PaddedBatch([{"sig": torch.zeros(16000)}, {"sig": torch.zeros(8000)}])
    >>> batch_size_and_audio(batch, 16000)
    (2, 1.5)
    >>> batch_size_and_audio(PaddedBatch([{"chars": torch.ones(5)}, {"chars": torch.ones(3)}]), 16000)
    (2, None)
    """
    signal = getattr(batch, "sig", None)
    if signal is None or not isinstance(signal, tuple) or len(signal) != 2:
        size = getattr(batch, "batchsize", None)
        return (size, None) if isinstance(size, int) and not isinstance(size, bool) else (None, None)
    wavs, lengths = signal
    if not torch.is_tensor(wavs) or wavs.dim() < 2:
        return None, None
    return int(wavs.shape[0]), float(lengths.sum()) * wavs.shape[1] / sample_rate
