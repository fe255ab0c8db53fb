"""The worker side of a sweep setting: ``python -m sbprof.sweep.worker RESULT_FD`` (see :mod:`sbprof.workers.cells`).

A fresh process per (device, thread count) setting and run means thread
pools, the CUDA caching allocator and the process's memory high-water mark
start clean. The worker loads the model once, checks that every cell is
measurable at the model's sample rate (a length under one sample is bad
input, not a failed cell), then for every cell builds the batch and, by the
batch's mode:

- ``measure``: after a process-level warm-up
  (:func:`~sbprof.measuring.timing.warm_up_process` on the first item's batch, the
  reference batch when there is one), times it with :func:`sbprof.measuring.timing.measure` (warm-up
  batches, measured batches, more while they add up to less than
  :data:`~sbprof.sweep.schema.MEASURED_MIN_S`, then one call for the memory the batch adds),
  with the CPU time other processes took meanwhile
  (:class:`~sbprof.measuring.env.OthersCpu`). Calibration items (the reference batch
  at the start and end of the process) are timed the same way;
- ``profile``: runs it under torch.profiler, after every cell of the setting
  was measured, in a process of its own so the profiler's memory and threads
  never touch a measured figure: on CUDA the host-busy / GPU-busy split
  (:mod:`sbprof.measuring.device_split`), and with ``export_logs`` a trace file;
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional

import torch

from sbprof.analysis.cell_payload import CellPayload
from sbprof.models.audio import load_example
from sbprof.measuring.device_split import measure_device_split
from sbprof.measuring.env import OthersCpu, collect_env, load_average
from sbprof.base.errors import ConfigError
from sbprof.measuring.memory import release_memory
from sbprof.models.source import LoadedModel
from sbprof.record import Cell
from sbprof.sweep.schema import MEASURED_MAX, MEASURED_MIN_S, SweepConfig
from sbprof.measuring.timing import measure, warm_up_process
from sbprof.measuring.traces import profile_to_trace
from sbprof.workers.cells import CellWorker, SetupError, serve_cells
from sbprof.workers.protocol import one_line



def device_memory_bytes(device: str) -> int:
    """All the memory of the device a setting runs on: the GPU's, or the machine's RAM."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_properties(torch.device(device)).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


class SweepWorker(CellWorker):
    """Measures or profiles the items of one batch (see the module docstring)."""

    def setup(self) -> Dict[str, Any]:
        self.config = SweepConfig.from_dict(self.job["config"])
        preamble = self.config.preamble
        self.device = self.job["device"]
        self.warmup, self.measured = preamble.warmup, preamble.measured
        torch.manual_seed(preamble.seed)
        # measure() records the environment after each cell; reading it once now
        # keeps its one-off cost (a git call, file reads) out of the gap between cells.
        collect_env()
        t0 = time.perf_counter()
        source = self.config.pretrained_model
        try:
            self.model = LoadedModel(source, self.device, preamble.seed, preamble.output_folder)
        except Exception as exc:  # anything: the run says why, once per batch
            raise SetupError(f"could not load model {source.name!r} ({source.type or 'module'}) on {self.device}: "
                             f"{one_line(exc)}") from None
        rate = self.model.sample_rate
        example = self.config.profiling_dimensions.example_audio
        self.example = load_example(example, rate) if example else None
        too_short = sorted({i["cell"]["audio_s"] for i in self.job["items"] if round(i["cell"]["audio_s"] * rate) < 1})
        if too_short:
            raise ConfigError(f"profiling_dimensions.audio_mockup_secs: {too_short} s is shorter than one sample at "
                              f"the model's {rate} Hz")
        self.memory_bytes = device_memory_bytes(self.device)
        self.warmed = self.job["mode"] != "measure"
        return {"sample_rate": rate, "load_s": time.perf_counter() - t0}

    def measure(self, item: Dict[str, Any]) -> Dict[str, Any]:
        cell = Cell.from_dict(item["cell"])
        settings = dict(item["settings"], sample_rate=self.model.sample_rate,
                        sample_rate_source=self.model.rate_source)
        call, seconds = self.model.prepare(cell.audio_s, cell.batch_size, self.example)
        if self.job["mode"] == "profile":
            return self.profile(cell, call)
        warmed_up = None if self.warmed else warm_up_process(call)
        self.warmed = True
        with OthersCpu() as others:
            m = measure(call, warmup=self.warmup, repeats=self.measured, min_time_s=MEASURED_MIN_S,
                        max_repeats=max(self.measured, MEASURED_MAX), device=self.device, num_threads=self.job["threads"], label=item["label"])
        m.cell, m.settings, m.audio_seconds = cell, settings, seconds
        # cuda_initialized: kept so a CPU setting on a GPU machine can show it never paid for a CUDA context.
        m.extra = CellPayload(others_cpu_s=others.cpu_s, window_s=others.wall_s if others.cpu_s is not None else None,
                              reference=item.get("position") or None, process_warmup_calls=warmed_up,
                              loadavg_1m=load_average(), cuda_initialized=torch.cuda.is_initialized(),
                              device_memory_bytes=self.memory_bytes).to_dict()
        return m.to_dict()

    def profile(self, cell: Cell, call: Any) -> Dict[str, Any]:
        """The profiled figures of one cell (device split on CUDA, trace file), added to its record."""
        call()  # one warm-up, as the timed batches had
        split = measure_device_split(call).to_dict() if self.device.startswith("cuda") else None
        trace_dir: Optional[str] = self.job.get("trace_dir")
        trace = None
        if trace_dir is not None:
            name = f"{cell.audio_s:g}s_b{cell.batch_size}"  # the folder names the setting
            # Relative to the output folder, so the folder can be moved whole.
            trace = os.path.relpath(profile_to_trace(call, self.device, Path(trace_dir), name),
                                    self.config.preamble.output_folder)
        return CellPayload(device_split=split, trace=trace).to_dict()

    def failed(self, item: Dict[str, Any], exc: BaseException) -> Dict[str, Any]:
        if self.job["mode"] == "profile":  # the timing stands; only the profiled figures are missing
            return CellPayload(extra_error=one_line(exc)).to_dict()
        return super().failed(item, exc)

    def release(self) -> None:
        release_memory(self.device)


if __name__ == "__main__":
    sys.exit(serve_cells(SweepWorker))
