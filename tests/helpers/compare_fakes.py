"""Test helpers for comparisons: a model whose energy is known, YAML writers, constructed results.

:class:`RaplBumpInterface` is loaded by workers through its dotted path
(``helpers.compare_fakes.RaplBumpInterface``), so tests put ``tests/`` on
``PYTHONPATH`` (:func:`helpers.fake_interfaces.use_test_environment`).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import torch
from speechbrain.inference.interfaces import Pretrained

from sbprof.record import Cell, Counts, Energy, Measurement, MemoryPeak
from sbprof.record import Results

BUSY = {"type": "helpers.fake_interfaces.BusyInterface", "method": "process", "args": ["wavs", "wav_lens"]}


def write_counter(folder: Path, energy_uj: int) -> None:
    """Replace a fake RAPL zone's ``energy_uj`` whole, as a sysfs read sees it."""
    tmp = folder / "energy_uj.tmp"
    tmp.write_text(f"{energy_uj}\n")
    os.replace(tmp, folder / "energy_uj")


def fake_powercap(root: Path, start_uj: int, max_uj: int) -> Path:
    """A powercap tree with one package zone; returns the zone's folder."""
    zone = root / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text(f"{max_uj}\n")
    write_counter(zone, start_uj)
    return zone


class RaplBumpInterface(Pretrained):
    """Spins ``rtf`` x (seconds of audio) and adds ``uj_per_call`` to a fake RAPL counter per call,
    wrapping past ``max_uj`` as sbprof reads the hardware counter: its energy per call is known exactly."""

    def process(self, wavs: torch.Tensor, wav_lens: torch.Tensor) -> float:
        deadline = time.perf_counter() + self.hparams.rtf * wavs.shape[0] * wavs.shape[1] / self.hparams.sample_rate
        while time.perf_counter() < deadline:
            pass
        zone = Path(self.hparams.zone)
        now = int((zone / "energy_uj").read_text())
        write_counter(zone, (now + self.hparams.uj_per_call) % self.hparams.max_uj)
        return deadline


def flow(value: Any) -> str:
    """A YAML flow value (lists, mappings, scalars) for the small files tests write."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    return str(value)


def write_compare_yaml(path: Path, variants: Sequence[Dict[str, Any]], **keys: Any) -> Path:
    """A comparison YAML with the given variants and top-level keys (small defaults for tests)."""
    top = {"vary": "audio_s", "values": [0.5, 1], "measured": 3, "warmup": 1, "repeats": "{runs: 1}", "devices": "cpu",
           "cpu_threads": 1, "example_audio": None, "seed": 0, "output_folder": str(path.parent / "out"), **keys}
    lines = ["variants:"]
    for v in variants:
        lines += [f"    - name: {v['name']}"] + [f"      {k}: {flow(val)}" for k, val in v.items() if k != "name"]
    lines += [f"{k}: {flow(v)}" for k, v in top.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def record(variant: str, x: float, run: int, wall_s: Sequence[float], *, vary: str = "audio_s",
           audio_seconds: Optional[float] = None, status: str = "ok", peak: Optional[int] = None,
           added: Optional[int] = None, energy: Optional[Energy] = None, params: Optional[int] = None,
           model: str = "m") -> Measurement:
    """A constructed comparison record at point ``x`` of run ``run``."""
    audio_s, batch, extra = (x, 1, {}) if vary == "audio_s" else (2.0, int(x), {})
    if vary == "frames":
        audio_s, extra = x * 0.01, {"frames": int(x)}
    memory = MemoryPeak(peak_rss_bytes=peak, peak_rss_delta_bytes=added) if peak or added else None
    return Measurement(label=f"{variant} {x} run {run}", status=status,
                       cell=Cell(model=model, variant=variant, audio_s=audio_s, batch_size=batch, run=run,
                                 params=extra),
                       wall_s=list(wall_s) if status == "ok" else [], cpu_s=list(wall_s) if status == "ok" else [],
                       audio_seconds=audio_seconds if audio_seconds is not None else audio_s * batch,
                       memory=memory, energy=energy, counts=Counts(params=params) if params else None)


def results_of(records: List[Measurement], vary: str = "audio_s", machine: Optional[Dict[str, Any]] = None,
               models: Optional[List[str]] = None) -> Results:
    """Constructed comparison results (job ``compare-models``)."""
    return Results(job="compare-models", rules={"vary": vary, "batch_size": 1, "warmup": 1, "measured": 3,
                                                "input": "random:seed=0"},
                   models={name: {} for name in (models or [])},
                   machine=machine or {"hostname": "box", "cpu": "CPU", "cpu_count": 2, "gpu": None},
                   records=records)
