"""A fake StreamingASR whose every chunk costs a known time: the ground truth of the stream job's figures.

``FakeStreamingASR`` is a genuine ``speechbrain.inference.interfaces.Pretrained``
loaded by dotted path (``stream.fake_streaming.FakeStreamingASR``, with
``tests/`` on ``PYTHONPATH``: see ``fake_interfaces.use_test_environment``)
through ``from_hparams``, as the stream job loads any model. Each
``transcribe_chunk`` spins on ``time.perf_counter`` for ``compute_s``
seconds, whatever the chunk holds, then emits one token through
``decode_chunk``; a chunk of ``chunk_size`` frames holds
``frame_samples * chunk_size`` samples.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch
from speechbrain.inference.interfaces import Pretrained

RATE = 16000


def write_fake_model(folder: Path, compute_s: float, frame_samples: int = 160, trained: Optional[str] = None) -> Path:
    """A folder ``from_hparams`` loads as :class:`FakeStreamingASR`; ``trained`` adds a
    ``dynchunktrain_config_sampler`` with these ``key: value`` pairs (the ranges the model states)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"sample_rate: {RATE}", f"compute_s: {compute_s}", f"frame_samples: {frame_samples}", "modules: {}",
             "pretrainer: !new:speechbrain.utils.parameter_transfer.Pretrainer", "    loadables: {}"]
    if trained:
        lines += ["dynchunktrain_config_sampler: !new:speechbrain.utils.dynamic_chunk_training."
                  "DynChunkTrainConfigRandomSampler"] + [f"    {pair}" for pair in trained.split(", ")]
    (folder / "hyperparams.yaml").write_text("\n".join(lines) + "\n")
    return folder


def spin(seconds: float) -> None:
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


class FakeStreamingASR(Pretrained):
    """Streams like ``StreamingASR`` (see the module docstring): known cost, one token per chunk."""

    def get_chunk_size_frames(self, config: Any) -> int:
        return self.hparams.frame_samples * config.chunk_size

    def make_streaming_context(self, config: Any) -> Dict[str, Any]:
        return {"config": config, "chunks": 0}

    def decode_chunk(self, context: Dict[str, Any], x: torch.Tensor) -> Tuple[List[str], List[List[int]]]:
        context["chunks"] += 1
        return ["a"], [[1]]

    def transcribe_chunk(self, context: Dict[str, Any], chunk: torch.Tensor, chunk_len: Any = None) -> List[str]:
        assert chunk.shape[-1] <= self.get_chunk_size_frames(context["config"])
        spin(self.hparams.compute_s)
        words, _ = self.decode_chunk(context, chunk)
        return words
