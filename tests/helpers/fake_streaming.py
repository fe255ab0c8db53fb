"""A fake StreamingASR whose every chunk costs a known time: the ground truth of the stream job's figures.

``FakeStreamingASR`` is a genuine ``speechbrain.inference.interfaces.Pretrained``
loaded by dotted path (``helpers.fake_streaming.FakeStreamingASR``, with
``tests/`` on ``PYTHONPATH``: see ``fake_interfaces.use_test_environment``)
through ``from_hparams``, as the stream job loads any model. The k-th
``transcribe_chunk`` on a context calls ``encode_chunk``, which spins on
``time.perf_counter`` for ``compute_s x pattern[k % len(pattern)]`` seconds
(``pattern`` [1] unless told), whatever the chunk holds, then on
``time.thread_time`` for ``encode_cpu_s`` seconds of this thread's CPU, then
``decode_chunk``, which spins ``decode_cpu_s`` seconds of CPU and emits one
token (a CPU spin cannot end early; under load it only lasts longer); a chunk of ``chunk_size`` frames holds
``frame_samples * chunk_size`` samples. From its first chunk on (as a real
model's caches), its context holds one float32 tensor of ``state_floats``
values, written (``4 x state_floats`` bytes of state per stream); with
``state_view``, that tensor is the first half of a buffer twice its size (the
stream holds ``8 x state_floats`` bytes, addresses half of them), as a cache
sliced out of a larger tensor.
With ``final_chunks`` set, a feature extractor states how many zero chunks
flush a stream (1 without one, as for a model with look-ahead).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from speechbrain.inference.interfaces import Pretrained

RATE = 16000


class FakeExtractor:
    """What ``sbprof.models.streaming`` reads of a feature extractor: flush chunks and look-ahead."""

    def __init__(self, final_chunks: int = 1, padding: int = 0):
        self.final_chunks, self.padding = final_chunks, padding

    def get_recommended_final_chunk_count(self, chunk_samples: int) -> int:
        return self.final_chunks

    def get_required_padding(self) -> int:
        return self.padding


def write_fake_model(folder: Path, compute_s: float, frame_samples: int = 160, trained: Optional[str] = None,
                     pattern: Optional[Sequence[float]] = None, state_floats: int = 0,
                     final_chunks: Optional[int] = None, encode_cpu_s: float = 0.0,
                     decode_cpu_s: float = 0.0, state_view: bool = False) -> Path:
    """A folder ``from_hparams`` loads as :class:`FakeStreamingASR`; ``trained`` adds a
    ``dynchunktrain_config_sampler`` with these ``key: value`` pairs (the ranges the model states)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"sample_rate: {RATE}", f"compute_s: {compute_s}", f"frame_samples: {frame_samples}",
             f"pattern: {list(pattern or [1.0])}", f"state_floats: {state_floats}", f"encode_cpu_s: {encode_cpu_s}",
             f"decode_cpu_s: {decode_cpu_s}", f"state_view: {state_view}", "modules: {}",
             "pretrainer: !new:speechbrain.utils.parameter_transfer.Pretrainer", "    loadables: {}"]
    if final_chunks is not None:
        lines += ["fea_streaming_extractor: !new:helpers.fake_streaming.FakeExtractor",
                  f"    final_chunks: {final_chunks}"]
    if trained:
        lines += ["dynchunktrain_config_sampler: !new:speechbrain.utils.dynamic_chunk_training."
                  "DynChunkTrainConfigRandomSampler"] + [f"    {pair}" for pair in trained.split(", ")]
    (folder / "hyperparams.yaml").write_text("\n".join(lines) + "\n")
    return folder


def spin(seconds: float) -> None:
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


def cpu_spin(seconds: float) -> None:
    """Busy for ``seconds`` of this thread's CPU time (``time.thread_time``)."""
    deadline = time.thread_time() + seconds
    while time.thread_time() < deadline:
        pass


class FakeStreamingASR(Pretrained):
    """Streams like ``StreamingASR`` (see the module docstring): known cost, one token per chunk, known state."""

    def get_chunk_size_frames(self, config: Any) -> int:
        return self.hparams.frame_samples * config.chunk_size

    def make_streaming_context(self, config: Any) -> Dict[str, Any]:
        return {"config": config, "chunks": 0, "cache": None}

    def encode_chunk(self, context: Dict[str, Any], chunk: torch.Tensor, chunk_len: Any = None) -> torch.Tensor:
        if context["cache"] is None:
            n = int(self.hparams.state_floats)
            context["cache"] = torch.full((2 * n,), 1.0)[:n] if self.hparams.state_view else torch.full((n,), 1.0)
        pattern = self.hparams.pattern
        spin(self.hparams.compute_s * pattern[context["chunks"] % len(pattern)])
        cpu_spin(self.hparams.encode_cpu_s)
        return chunk

    def decode_chunk(self, context: Dict[str, Any], x: torch.Tensor) -> Tuple[List[str], List[List[int]]]:
        cpu_spin(self.hparams.decode_cpu_s)
        context["chunks"] += 1
        return ["a"], [[1]]

    def transcribe_chunk(self, context: Dict[str, Any], chunk: torch.Tensor, chunk_len: Any = None) -> List[str]:
        assert chunk.shape[-1] <= self.get_chunk_size_frames(context["config"])
        words, _ = self.decode_chunk(context, self.encode_chunk(context, chunk, chunk_len))
        return words
