"""Fake models whose work keeps the GPU busy a known time (:func:`helpers.cuda.gpu_busy_for`), loaded by dotted path
(``helpers.fake_cuda_models.<Class>``) as the jobs load any model:

- :class:`CudaFakeStreamingASR`: each chunk's encoder keeps the GPU busy, timed by CUDA events that the model
  records around it and appends, one line per chunk, to the file its ``events_file`` hyperparameter names (the
  outside clock of the stream job's CUDA test);
- :class:`GpuBusyInterface`: keeps the GPU busy ``rtf`` x (seconds of audio in the batch), the GPU twin of
  ``helpers.fake_interfaces.BusyInterface``, its kernels timed the same way.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import torch
from speechbrain.inference.interfaces import Pretrained

from helpers.cuda import gpu_busy_for
from helpers.fake_streaming import FakeStreamingASR, write_fake_model


def write_cuda_fake_model(folder: Path, compute_s: float, events_file: Path, **more: Any) -> Path:
    """A folder that loads as :class:`CudaFakeStreamingASR` (the arguments of ``write_fake_model``)."""
    write_fake_model(folder, compute_s, **more)
    with open(folder / "hyperparams.yaml", "a") as f:
        f.write(f"events_file: {events_file}\n")
    return folder


class CudaFakeStreamingASR(FakeStreamingASR):
    """:class:`~helpers.fake_streaming.FakeStreamingASR` whose encoder keeps the GPU busy instead of the CPU."""

    def encode_chunk(self, context: Dict[str, Any], chunk: torch.Tensor, chunk_len: Any = None) -> torch.Tensor:
        pattern = self.hparams.pattern
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        gpu_busy_for(self.hparams.compute_s * pattern[context["chunks"] % len(pattern)])
        end.record()
        end.synchronize()
        with open(self.hparams.events_file, "a") as f:
            f.write(f"{start.elapsed_time(end) / 1e3!r}\n")
        return chunk


class GpuBusyInterface(Pretrained):
    """The GPU busy ``rtf`` x (seconds of audio in the batch) per call, timed by CUDA events appended to
    ``events_file`` (the call returns once its work is done)."""

    def process(self, wavs: torch.Tensor, wav_lens: torch.Tensor) -> torch.Tensor:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        gpu_busy_for(self.hparams.rtf * wavs.shape[0] * wavs.shape[1] / self.hparams.sample_rate)
        end.record()
        end.synchronize()
        with open(self.hparams.events_file, "a") as f:
            f.write(f"{start.elapsed_time(end) / 1e3!r}\n")
        return wav_lens
