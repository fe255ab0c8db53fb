"""The worker side of a comparison: ``python -m sbprof.compare_models.worker RESULT_FD`` (see :mod:`sbprof.workers.cells`).

One fresh process per (setting, variant, run): it loads the variant once
(:class:`~sbprof.models.source.LoadedModel`), then for each point of the
varied dimension builds the input (before the first point, the process
warm-up, :func:`sbprof.measuring.timing.warm_up_process`), makes ``warmup`` unmeasured calls, and
opens an :class:`~sbprof.measuring.energy.meter.EnergyMeter` window around
:func:`sbprof.measuring.timing.measure` (``measured`` timed calls, then the one call
for memory). The record's energy therefore covers ``measured + 1`` calls,
and ``Energy.calls`` says so. A point that runs out of memory or raises
becomes its record (``oom`` / ``error``); the worker goes on.
"""
from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import Any, Dict, Optional

import torch

from sbprof.analysis.cell_payload import CellPayload, cell_payload
from sbprof.models.audio import load_example
from sbprof.compare_models.schema import CompareConfig
from sbprof.measuring.energy.meter import EnergyMeter
from sbprof.measuring.env import OthersCpu, collect_env, load_average
from sbprof.base.errors import ConfigError, SbprofError
from sbprof.measuring.memory import release_memory
from sbprof.models.source import LoadedModel
from sbprof.measuring.params import count_params
from sbprof.record import Cell, Counts, Energy, Measurement
from sbprof.measuring.timing import measure, warm_up_process
from sbprof.workers.cells import CellWorker, SetupError, serve_cells
from sbprof.workers.protocol import one_line

CPU_ONLY = "not read: this variant runs on the CPU"


def measure_energy_window(cfg: CompareConfig, device: str, threads: int, call: Any, label: str,
                          cell: Cell) -> Measurement:
    """Time ``call`` under an energy window; the window's reading (or why none) goes in the record."""
    on_cuda = device.startswith("cuda")
    measured = cfg.preamble.measured
    meter = EnergyMeter(cpu=cfg.energy.cpu, gpu=cfg.energy.gpu and on_cuda,
                        gpu_indices=[torch.device(device).index or 0] if on_cuda else None,
                        powercap_root=cfg.energy.powercap_root)
    meter.start()
    try:
        m = measure(call, warmup=0, repeats=measured, max_repeats=measured, device=device, num_threads=threads,
                    label=label, cell=cell)
    finally:
        try:
            energy: Optional[Energy] = meter.stop()
        except (SbprofError, OSError, ValueError) as exc:  # a failed counter read must not cost the timing
            energy, reading_error = None, one_line(exc)
        else:
            reading_error = None
    if energy is not None:
        energy.calls = measured + 1
        if cfg.energy.gpu and not on_cuda:
            energy.unavailable.setdefault("nvml", CPU_ONLY)
    else:
        m.extra = CellPayload(energy_error=reading_error).to_dict()
    m.energy = energy
    return m


class VariantWorker(CellWorker):
    """Measures the points of one variant on one setting in this process (see the module docstring)."""

    def setup(self) -> Dict[str, Any]:
        self.cfg = CompareConfig.from_dict(self.job["config"])
        self.device = self.job["device"]
        variant = self.cfg.variant(self.job["variant"])
        seed = self.cfg.preamble.seed
        torch.manual_seed(seed)
        collect_env()  # its one-off cost (a git call) stays out of the gaps between points
        t0 = time.perf_counter()
        try:
            self.model = LoadedModel(variant.source, self.device, seed, self.cfg.preamble.output_folder)
        except ConfigError as exc:
            raise ConfigError(f"variant {variant.name!r}: {exc}") from None
        except Exception as exc:  # anything: the run records this variant's points with this line
            raise SetupError(f"could not load variant {variant.name!r} ({variant.source.name}) on {self.device}: "
                             f"{one_line(exc)}") from None
        rate = self.model.sample_rate
        self.example = load_example(self.cfg.example_audio, rate) if self.cfg.example_audio else None
        too_short = sorted({i["cell"]["audio_s"] for i in self.job["items"] if round(i["cell"]["audio_s"] * rate) < 1})
        if too_short and variant.source.input != "features":
            raise ConfigError(f"variant {variant.name!r}: {too_short} s is shorter than one sample at its {rate} Hz")
        self.counts = Counts()
        if self.model.modules is not None:
            count = count_params(self.model.modules)
            self.counts = Counts(params=count.total, trainable_params=count.trainable)
        self.warmed = False
        return {"sample_rate": rate, "load_s": time.perf_counter() - t0, "params": self.counts.params}

    def measure(self, item: Dict[str, Any]) -> Dict[str, Any]:
        """One point's record."""
        cfg, cell = self.cfg, Cell.from_dict(item["cell"])
        settings = dict(item["settings"], sample_rate=self.model.sample_rate, sample_rate_source=self.model.rate_source)
        call, seconds = self.model.prepare(cell.audio_s, cell.batch_size, self.example, cell.params.get("frames"),
                                           cfg.frame_shift_s)
        warmed_up = None if self.warmed else warm_up_process(call)  # the process's, on its first point
        self.warmed = True
        for _ in range(cfg.preamble.warmup):
            call()
        with OthersCpu() as others:  # the load beside the run: the gate may judge on CPU time
            m = measure_energy_window(cfg, self.device, self.job["threads"], call, item["label"], cell)
        m.extra = replace(cell_payload(m), others_cpu_s=others.cpu_s,
                          window_s=others.wall_s if others.cpu_s is not None else None,
                          process_warmup_calls=warmed_up, loadavg_1m=load_average()).to_dict()
        m.audio_seconds, m.settings, m.counts = seconds, settings, self.counts
        m.warmup = cfg.preamble.warmup
        return m.to_dict()

    def failed(self, item: Dict[str, Any], exc: BaseException) -> Dict[str, Any]:
        d = super().failed(item, exc)
        d["counts"], d["warmup"] = self.counts.to_dict(), self.cfg.preamble.warmup
        return d

    def release(self) -> None:
        release_memory(self.device)


if __name__ == "__main__":
    sys.exit(serve_cells(VariantWorker))
