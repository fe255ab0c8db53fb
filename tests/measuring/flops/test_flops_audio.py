"""FLOPs per second of audio, for a counted module and through a pretrained-interface call."""
from __future__ import annotations

import types

import pytest
import torch

from sbprof.base.errors import ConfigError
from sbprof.measuring.flops import FlopCount, count_flops, count_interface_flops, per_audio_second
from sbprof.models.interfaces import InterfaceSpec


class FrameASR:
    """Interface-shaped: ``mods`` holds the modules; frames 10 ms hops of 16 kHz audio and projects them."""

    def __init__(self, sample_rate=16000):
        torch.manual_seed(0)
        self.mods = torch.nn.ModuleDict({"encoder": torch.nn.Linear(160, 32, bias=False)})
        self.audio_normalizer = types.SimpleNamespace(sample_rate=sample_rate)

    def encode_batch(self, wavs, wav_lens):
        frames = wavs.reshape(wavs.shape[0], -1, 160)
        return self.mods["encoder"](frames)


SPEC = InterfaceSpec("FrameASR", "encode_batch", ("wavs", "wav_lens"))


def test_interface_call_per_audio_second():
    wavs = torch.randn(2, 16000)  # two 1 s utterances, the second padded to half its length
    wav_lens = torch.tensor([1.0, 0.5])
    result = count_interface_flops(FrameASR(), wavs, wav_lens, spec=SPEC)
    macs = 2 * 100 * 160 * 32  # the padded batch is computed whole
    assert result.count.macs == macs and result.count.module("encoder").macs == macs
    assert result.audio_s == 1.5
    assert result.macs_per_audio_s == macs / 1.5 and result.flops_per_audio_s == 2 * macs / 1.5
    assert result.to_dict()["count"]["macs"] == macs


def test_sample_rate_is_read_or_required():
    interface = FrameASR(sample_rate=8000)
    assert count_interface_flops(interface, torch.randn(1, 16000), spec=SPEC).audio_s == 2.0
    del interface.audio_normalizer
    with pytest.raises(ConfigError, match="sample_rate"):
        count_interface_flops(interface, torch.randn(1, 16000), spec=SPEC)
    assert count_interface_flops(interface, torch.randn(1, 16000), spec=SPEC, sample_rate=16000).audio_s == 1.0


def test_module_per_audio_second_and_achieved():
    count = count_flops(torch.nn.Linear(80, 10, bias=False), torch.randn(1, 300, 80))  # 3 s of 10 ms frames
    rate = per_audio_second(count, audio_s=3.0)
    assert rate.macs_per_audio_s == 100 * 80 * 10
    assert rate.achieved(time_s=0.5).flops_per_s == count.flops / 0.5
    with pytest.raises(ConfigError, match="audio_s"):
        per_audio_second(FlopCount(1, 0), 0)


@pytest.mark.slow
def test_default_local_model_per_audio_second(tmp_path):
    """sbprof's default EncoderASR (conv front end, Conformer, CTC head) through its real batch call."""
    from sbprof.models import load_local_model

    asr = load_local_model("encoder_asr", root=tmp_path)
    wavs, wav_lens = torch.randn(2, 4 * 16000), torch.tensor([1.0, 0.75])
    result = count_interface_flops(asr, wavs, wav_lens)
    assert result.count.untracked == {}  # every operator the model runs has a formula
    assert result.audio_s == 7.0
    head = asr.mods.encoder.ctc_lin.w
    with torch.no_grad():
        frames = asr.encode_batch(wavs, wav_lens).shape[1]
    assert result.count.module("encoder.ctc_lin").macs == 2 * frames * head.in_features * head.out_features
    rows = result.count.modules
    assert sum(r.self_flops for r in rows) == result.count.flops
    assert {"encoder.compute_features", "encoder.CNN", "encoder.enc"} <= {r.name for r in rows if r.flops}
