"""The stream job runs SpeechBrain's real chunk loop: on sbprof's local StreamingASR model, the transcript its
worker assembled chunk by chunk is the one the model's own ``transcribe_file`` gives with the same
``DynChunkTrainConfig`` (left context -1 as an unlimited one)."""
from __future__ import annotations

import json

import soundfile
import torch

from helpers.fake_interfaces import use_test_environment
from helpers.stream_configs import write_stream_yaml
from sbprof.cli import main
from sbprof.models.build import load_local_model
from sbprof.results import RESULTS_FILE
from sbprof.base.yamlconfig import shipped_example

SECONDS = 2


def test_chunked_transcript_equals_transcribe_file_with_the_same_config(tmp_path, monkeypatch, capsys):
    from speechbrain.utils.dynamic_chunk_training import DynChunkTrainConfig

    use_test_environment(monkeypatch, tmp_path / "models")
    speech, rate = soundfile.read(str(shipped_example()), dtype="float32", frames=SECONDS * 16000)
    wav = tmp_path / "cut.wav"
    soundfile.write(str(wav), speech, rate)
    path = write_stream_yaml(tmp_path / "s.yaml", "streaming_asr", type_name="StreamingASR", chunk_sizes=[8],
                             left_context_chunks=[2, -1], audio=str(wav), audio_s=None)
    assert main(["stream", str(path), "--noprogressbar"]) == 0, capsys.readouterr().err
    records = json.loads((tmp_path / "out" / RESULTS_FILE).read_text())["records"]
    chunked = {r["cell"]["params"]["left_context_chunks"]: r["extra"]["transcript"] for r in records}

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the worker ran: untrained weights make the text sensitive to rounding
    try:
        asr = load_local_model("streaming_asr")
        for left, config in ((2, DynChunkTrainConfig(8, 2)), (-1, DynChunkTrainConfig(8, 1000))):
            assert chunked[left] == asr.transcribe_file(str(wav), config, use_torchaudio_streaming=False)
    finally:
        torch.set_num_threads(threads)
    assert chunked[2] and chunked[2] != chunked[-1]  # text came out, and the left context reached the encoder
