"""FLOPs per second of input audio, for a module or a pretrained interface call.

SUPERB tabulates the MACs its upstream models spend on audio; dividing by
the seconds of audio processed makes models and input lengths comparable.
The audio seconds of a padded batch are those its relative lengths claim
(``sum(wav_lens) * samples / sample_rate``), not the padded size.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

import torch

from sbprof.base.errors import ConfigError
from sbprof.measuring.flops.counter import FlopCounter
from sbprof.measuring.flops.peak import Achieved, Peak, achieved
from sbprof.record.flops import FlopCount
from sbprof.models.interfaces import InterfaceSpec, make_call, resolve_interface


@dataclass(frozen=True)
class AudioFlops:
    """A FLOP count and the seconds of audio it was spent on.

    Example
    -------
    >>> a = per_audio_second(FlopCount(flops=3_000_000, macs=1_000_000), audio_s=2.0)
    >>> (a.flops_per_audio_s, a.macs_per_audio_s)
    (1500000.0, 500000.0)
    >>> a.achieved(time_s=0.001).flops_per_s
    3000000000.0
    """

    count: FlopCount
    audio_s: float

    @property
    def flops_per_audio_s(self) -> float:
        return self.count.flops / self.audio_s

    @property
    def macs_per_audio_s(self) -> float:
        return self.count.macs / self.audio_s

    def achieved(self, time_s: float, peak: Optional[Peak] = None) -> Achieved:
        """Achieved FLOP/s when the counted call took ``time_s`` seconds (e.g. a measured median)."""
        return achieved(self.count.flops, time_s, peak)

    def to_dict(self) -> Dict[str, Any]:
        # Not the codec's: written for readers only (never read back), with the per-second figures first.
        return {"audio_s": self.audio_s, "flops_per_audio_s": self.flops_per_audio_s,
                "macs_per_audio_s": self.macs_per_audio_s, "count": self.count.to_dict()}


def per_audio_second(count: FlopCount, audio_s: float) -> AudioFlops:
    """Pair a count (e.g. ``count_flops(encoder, feats)``) with the seconds of audio behind its input."""
    if not audio_s > 0:
        raise ConfigError(f"audio_s must be > 0 seconds, got {audio_s!r}")
    return AudioFlops(count, float(audio_s))


def _sample_rate(interface: Any) -> int:
    normalizer = getattr(interface, "audio_normalizer", None)
    rate = getattr(normalizer, "sample_rate", None)
    if rate is None:
        rate = getattr(getattr(interface, "hparams", None), "sample_rate", None)
    if rate is None:
        raise ConfigError(f"{type(interface).__name__} states no sample rate (audio_normalizer.sample_rate or "
                          f"hparams.sample_rate): pass sample_rate=")
    return int(rate)


def count_interface_flops(interface: Any, wavs: torch.Tensor, wav_lens: Optional[torch.Tensor] = None, *,
                          spec: Optional[InterfaceSpec] = None, sample_rate: Optional[int] = None) -> AudioFlops:
    """FLOPs of one batch call of a SpeechBrain pretrained interface, per second of audio.

    The call is the one the profiling recipe times (``sbprof.models.interfaces``:
    e.g. ``transcribe_batch(wavs, wav_lens)`` for ``EncoderASR``), so counts
    and times match. Rows are by module name under ``interface.mods``.

    Arguments
    ---------
    interface : object
        A loaded interface (``EncoderASR.from_hparams(...)``).
    wavs : torch.Tensor
        Waveforms ``[batch, samples]``.
    wav_lens : torch.Tensor, optional
        Relative lengths ``[batch]`` (default: all 1.0).
    spec : InterfaceSpec, optional
        How to call it (default: the built-in call of its class).
    sample_rate : int, optional
        Default: the interface's ``audio_normalizer.sample_rate`` or ``hparams.sample_rate``.

    Returns
    -------
    AudioFlops
    """
    if wav_lens is None:
        wav_lens = torch.ones(wavs.shape[0])
    spec = spec if spec is not None else resolve_interface(type(interface).__name__)
    rate = sample_rate if sample_rate is not None else _sample_rate(interface)
    call = make_call(interface, spec, wavs, wav_lens)
    mods = getattr(interface, "mods", None)
    with FlopCounter(mods if isinstance(mods, torch.nn.Module) else None) as counter:
        call()
    audio_s = float(wav_lens.double().sum()) * wavs.shape[1] / rate
    return per_audio_second(counter.result(), audio_s)
