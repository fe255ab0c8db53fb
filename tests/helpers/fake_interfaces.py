"""Test-only pretrained interfaces, loaded by dotted path through the real sweep path.

Each is a genuine ``speechbrain.inference.interfaces.Pretrained`` subclass:
the sweep loads it with ``from_hparams`` from a folder written by
:func:`write_model_folder` and calls its ``process`` method through
``sbprof.models.interfaces.make_call``, exactly as it would a SpeechBrain model.
What differs is that their cost (or failure) is known in advance.

Workers import this module by its dotted path (``helpers.fake_interfaces.BusyInterface``), so tests put
``tests/`` on their ``PYTHONPATH`` (:func:`use_test_environment`); pytest has it on ``sys.path`` (setup.cfg).
"""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import torch
from speechbrain.inference.interfaces import Pretrained

from helpers.paths import TESTS


def write_model_folder(folder: Path, **hparams: Any) -> Path:
    """A model folder ``from_hparams`` can load: hyperparams.yaml with no weights.

    Arguments
    ---------
    folder : Path
        Created if needed.
    **hparams
        Plain scalar or list hyperparameters (written as YAML flow values).
    """
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"{key}: {value!r}" if not isinstance(value, list) else f"{key}: {value}"
             for key, value in {"sample_rate": 16000, **hparams}.items()]
    lines += [
        "modules: {}",
        "pretrainer: !new:speechbrain.utils.parameter_transfer.Pretrainer",
        "    loadables: {}",
    ]
    (folder / "hyperparams.yaml").write_text("\n".join(lines) + "\n")
    return folder


def _batch_seconds(model: Pretrained, wavs: torch.Tensor) -> float:
    return wavs.shape[0] * wavs.shape[1] / model.hparams.sample_rate


class BusyInterface(Pretrained):
    """Spins for exactly ``rtf`` x (seconds of audio in the batch) of wall-clock time.

    The spin reads ``time.perf_counter`` until the deadline, so the batch's
    wall time is the target plus the call's overhead: its true RTF is
    ``hparams.rtf``. With ``clock: cpu`` it reads the thread's CPU clock
    instead: the batch does that much work, as a real model does, however
    long other processes keep it from a core. With ``cold_s`` (optional), calls that start within
    that many seconds of the process's first call spin ``cold_factor`` times
    longer, as a fresh process's first calls do while its thread pools and
    caches settle.
    """

    first_call = None

    def process(self, wavs: torch.Tensor, wav_lens: torch.Tensor) -> float:
        now = time.perf_counter()
        if BusyInterface.first_call is None:
            BusyInterface.first_call = now
        cold = now - BusyInterface.first_call < getattr(self.hparams, "cold_s", 0.0)
        factor = self.hparams.cold_factor if cold else 1.0
        clock = time.thread_time if getattr(self.hparams, "clock", "wall") == "cpu" else time.perf_counter
        deadline = clock() + factor * self.hparams.rtf * _batch_seconds(self, wavs)
        while clock() < deadline:
            pass
        return deadline


class MatmulInterface(Pretrained):
    """Per second of audio in the batch, ``matmuls_per_second`` products of two n x n matrices.

    Each call also times its own work with ``time.perf_counter`` and appends
    ``{"samples", "batch", "inner_s"}`` as a JSON line to ``hparams.timing_log``:
    an independent clock around the same work, read in the same moments.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        n = self.hparams.matrix_size
        generator = torch.Generator().manual_seed(0)
        self.a = torch.randn(n, n, generator=generator)
        self.b = torch.randn(n, n, generator=generator)

    def process(self, wavs: torch.Tensor, wav_lens: torch.Tensor) -> torch.Tensor:
        t0 = time.perf_counter()
        out = self.a
        for _ in range(round(self.hparams.matmuls_per_second * _batch_seconds(self, wavs))):
            out = self.a @ self.b
        inner = time.perf_counter() - t0
        with open(self.hparams.timing_log, "a") as log:
            log.write(json.dumps({"samples": wavs.shape[1], "batch": wavs.shape[0], "inner_s": inner}) + "\n")
        return out


class FaultyInterface(Pretrained):
    """Fails in chosen cells: raises, runs out of memory, or kills its own process.

    Hyperparameters (lists may be empty):
    ``raise_batch_sizes`` -> ValueError; ``oom_from_s`` -> MemoryError for
    utterances at least that long; ``kill_batch_sizes`` -> SIGKILL, as the
    kernel's OOM killer would; ``hang_batch_sizes`` (optional) -> never returns.
    """

    def process(self, wavs: torch.Tensor, wav_lens: torch.Tensor) -> torch.Tensor:
        batch, samples = wavs.shape
        if batch in self.hparams.kill_batch_sizes:
            os.kill(os.getpid(), signal.SIGKILL)
        if batch in getattr(self.hparams, "hang_batch_sizes", []):
            while True:
                time.sleep(60)
        if batch in self.hparams.raise_batch_sizes:
            raise ValueError(f"fake failure for batch size {batch}")
        if samples / self.hparams.sample_rate >= self.hparams.oom_from_s:
            raise MemoryError(f"fake: no memory for {samples} samples")
        return wavs.sum()


class PiecesInterface(Pretrained):
    """Holds ``mib_per_audio_s`` x (seconds of audio in the batch) MiB live in 64 KiB tensors,
    as a model's many small activations are, then frees them all (heap-sized pieces that
    glibc keeps for reuse, so a warmed-up process shows no resident growth without a trim)."""

    def process(self, wavs: torch.Tensor, wav_lens: torch.Tensor) -> int:
        pieces = [torch.ones(16 * 1024) for _ in range(round(self.hparams.mib_per_audio_s * 16
                                                                 * _batch_seconds(self, wavs)))]
        return len(pieces)


class LengthSpinInterface(Pretrained):
    """Spins ``linear_s * L + quadratic_s * L^2`` seconds per utterance of L seconds: a cost model whose B*L^2
    term passes the linear one at exactly ``linear_s / quadratic_s`` seconds.

    The spin reads ``time.perf_counter``, as :class:`BusyInterface` does, so
    the wall time the sweep measures is that cost even while other processes
    share the cores (only the noise floor and the load readings show them).
    """

    def process(self, wavs: torch.Tensor, wav_lens: torch.Tensor) -> float:
        length = wavs.shape[1] / self.hparams.sample_rate
        work = wavs.shape[0] * (self.hparams.linear_s * length + self.hparams.quadratic_s * length ** 2)
        deadline = time.perf_counter() + work
        while time.perf_counter() < deadline:
            pass
        return work


def write_sweep_yaml(
    path: Path,
    source: str,
    type_name: str,
    *,
    lengths: list = (0.5, 1),
    batch_sizes: list = (1, 2),
    example_audio: Any = None,
    triangle_only: bool = False,
    export_logs: bool = False,
    method: Any = None,
    args: Any = None,
    warmup: int = 1,
    measured: int = 2,
    threads: list = (1,),
    output_folder: Any = None,
    runs: Any = 1,
    noise_floor: bool = False,
) -> Path:
    """A small sweep YAML for tests (one CPU setting, one run per cell, no noise floor by default)."""
    def flow(value: Any) -> str:
        if value is None:
            return "null"
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(str(v) for v in value) + "]"
        return str(value)

    lines = [
        "pretrained_model:",
        f"    source: {source}",
        f"    type: {type_name}",
    ]
    if method is not None:
        lines.append(f"    method: {method}")
    if args is not None:
        lines.append(f"    args: {flow(args)}")
    lines += [
        "profiling_dimensions:",
        f"    audio_mockup_secs: {flow(lengths)}",
        f"    batch_sizes: {flow(batch_sizes)}",
        f"    example_audio: {flow(example_audio)}",
        f"    triangle_only: {triangle_only}",
        f"    export_logs: {export_logs}",
        "devices: [cpu]",
        f"cpu_threads: {flow(threads)}",
        f"warmup: {warmup}",
        f"measured: {measured}",
        f"repeats: {{runs: {runs}}}",
        f"noise_floor: {noise_floor}",
        "seed: 0",
        f"output_folder: {flow(output_folder or path.parent / 'out')}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def replace_in_file(path: Path, old: str, new: str) -> Path:
    """Edit a test YAML in place; ``old`` must be there (a silent no-op would test nothing)."""
    text = path.read_text()
    if old not in text:
        raise AssertionError(f"{old!r} not in {path}")
    path.write_text(text.replace(old, new))
    return path


def use_test_environment(monkeypatch: Any, model_cache: Path) -> None:
    """Make the test helpers importable by workers and keep built models in ``model_cache``."""
    pythonpath = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(TESTS) + (os.pathsep + pythonpath if pythonpath else ""))
    monkeypatch.setenv("SBPROF_CACHE", str(model_cache))


class GreedyInterface(Pretrained):
    """Allocates ``gigabytes_per_audio_s`` x (seconds of audio in the batch) GB on the model's device."""

    def process(self, wavs: torch.Tensor, wav_lens: torch.Tensor) -> torch.Tensor:
        n_bytes = int(self.hparams.gigabytes_per_audio_s * 1e9 * _batch_seconds(self, wavs))
        block = torch.empty(n_bytes, dtype=torch.uint8, device=wavs.device)
        return block[:1].fill_(1)


class CappedGreedyInterface(GreedyInterface):
    """:class:`GreedyInterface` on a GPU made to look smaller: this process may hold ``cap_gb`` GB of the device
    (``torch.cuda.set_per_process_memory_fraction``, set at the first call), so cells past the cap run out of memory
    as they would on a smaller GPU."""

    def process(self, wavs: torch.Tensor, wav_lens: torch.Tensor) -> torch.Tensor:
        if not getattr(self, "_capped", False):
            total = torch.cuda.get_device_properties(wavs.device).total_memory
            torch.cuda.set_per_process_memory_fraction(self.hparams.cap_gb * 1e9 / total, wavs.device)
            self._capped = True
        return super().process(wavs, wav_lens)
