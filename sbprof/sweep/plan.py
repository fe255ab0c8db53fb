"""The plan of a profiling sweep: the grid's cells per setting, in runs, for the one runner (:mod:`sbprof.jobs`).

Per (device, thread count) setting, the cells of the grid that the triangle
rule keeps go to a ``measure`` worker (:mod:`sbprof.sweep.worker`); the
others are stored as ``skipped`` (and predicted on read). Cells are measured
in runs, each run in a fresh worker process, in interleaved passes
(:func:`sbprof.jobs.plan.interleaved_passes`) until each cell's run-to-run
interval meets ``repeats``. On CUDA settings, and with ``export_logs``, a
``profile`` worker then adds the profiled figures of each newly measured
cell. With ``noise_floor``, every measure worker also times the model's
reference batch (the grid's smallest cell) first and last, kept apart as
calibration records: the run's noise floor, measured throughout the run,
on the model's own kind of work, in the processes the cells see.
With ``predict.skip_predicted_over``, the corner of the grid waits for the
first pass: the cells predicted to exceed the memory budget are skipped
before they run.
"""
from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from sbprof.models.audio import input_kind
from sbprof.analysis.grid import cell_label, make_grid
from sbprof.jobs.plan import (Batch, Group, Item, JobPlan, Records, Step, StoreView, interleaved_passes, log_name,
                              models_header, repeat_policy, worker_env)
from sbprof.jobs.preamble import Setting
from sbprof.analysis.predictions import predict_cells
from sbprof.record import Cell, Measurement
from sbprof.record.results import Results
from sbprof.sweep.schema import MEASURED_MIN_S, SweepConfig
from sbprof.sweep import JOB

TRACE_DIR = "traces"


class Plan(JobPlan):
    """The sweep's plan (see the module docstring and :class:`sbprof.jobs.plan.Plan`)."""

    job, worker = JOB.name, "sbprof.sweep.worker"  # the name its Job gives

    def __init__(self, cfg: SweepConfig):
        super().__init__(cfg)
        dims = cfg.profiling_dimensions
        self.input = input_kind(dims.example_audio, self.pre.seed)
        self.grid = make_grid(dims.audio_mockup_secs, dims.batch_sizes, triangle_only=True)
        src = cfg.pretrained_model
        example = dims.example_audio
        self.settings = {"interface": src.type or f"module ({src.input})", "method": src.method,
                         "args": list(src.args or ()), "seed": self.pre.seed,
                         "example_audio": Path(example).name if example else None, "warmup": self.pre.warmup,
                         "measured": self.pre.measured, "repeats": asdict(self.pre.repeats),
                         "predict": asdict(cfg.predict)}

    def header(self) -> Results:
        src = self.cfg.pretrained_model
        return self.results({"input": self.input, "warmup": self.pre.warmup, "measured": self.pre.measured,
                             "measured_min_s": MEASURED_MIN_S},
                            models_header({src.name: src}))

    def cell(self, setting: Setting, audio_s: float, batch_size: int) -> Cell:
        return Cell(model=self.cfg.pretrained_model.name, device=setting.device, threads=setting.threads,
                    audio_s=audio_s, batch_size=batch_size, input=self.input)

    def expected(self) -> int:
        measured = [p for p in self.grid if not (p.skipped and self.cfg.profiling_dimensions.triangle_only)]
        return len(self.pre.settings) * len(measured) * self.pre.repeats.first_pass

    def steps(self, view: StoreView) -> Iterator[Step]:
        triangle_only = self.cfg.profiling_dimensions.triangle_only
        budget = self.cfg.predict.skip_predicted_over
        cells: Dict[Setting, List[Cell]] = {}
        corner: Dict[Setting, List[Cell]] = {}
        skipped: List[Measurement] = []
        for setting in self.pre.settings:
            cells[setting], corner[setting] = [], []
            for point in self.grid:
                cell = self.cell(setting, point.audio_s, point.batch_size)
                if point.skipped and triangle_only:
                    skipped.append(self.skipped(cell, "skipped by the triangle rule (triangle_only: True)"))
                elif point.skipped and budget is not None:
                    corner[setting].append(cell)  # decided after the first pass
                else:
                    cells[setting].append(cell)

        def after_batch(batch: Batch) -> Iterable[Step]:
            # Stored only once a model loaded and the cells were found measurable: bad input leaves no file.
            if skipped:
                yield Records(list(skipped))
                skipped.clear()
            setting = Setting(batch.payload["device"], batch.payload["threads"])
            if setting.device.startswith("cuda") or self.cfg.profiling_dimensions.export_logs:
                new = [i.cell for i in batch.items if i.cell.run == 0 and view.get(i.cell) is not None
                       and view.get(i.cell).ok]
                if new:
                    yield self.batch(setting, new, "profile")

        def after_pass(index: int) -> Iterable[Step]:
            if index != 0 or not any(corner.values()):
                return []
            out: List[Measurement] = []
            for setting, rest in corner.items():
                keep, over = self.over_budget(view, setting, rest)
                cells[setting] += keep
                out += over
            corner.clear()
            return [Records(out)] if out else []

        def groups() -> List[Group]:
            return [Group(cells[s], lambda chosen, s=s: self.batch(s, chosen, "measure", view))
                    for s in self.pre.settings]

        yield from interleaved_passes(view, groups, repeat_policy(self.pre.repeats), self.pre.seed, after_batch,
                                      after_pass)
        if skipped:
            yield Records(skipped)

    def skipped(self, cell: Cell, why: str) -> Measurement:
        return Measurement(label=cell_label(cell), cell=cell, status="skipped", warmup=self.pre.warmup,
                           settings=self.settings, message=why)

    def batch(self, setting: Setting, cells: List[Cell], mode: str, view: Optional[StoreView] = None) -> Batch:
        folder = Path(self.pre.output_folder)
        export = self.cfg.profiling_dimensions.export_logs
        payload = self.payload(setting, mode=mode, trace_dir=str(folder / TRACE_DIR / setting.name) if export else None)
        items = [Item(c, cell_label(c), {"settings": self.settings}) for c in cells]
        if mode == "measure" and self.cfg.noise_floor and view is not None:
            items = self.references(setting, view, "start") + items + self.references(setting, view, "end")
        return Batch(name=f"{mode} worker for {setting.name}", module=self.worker, payload=payload, items=items,
                     log=log_name(setting.name), env=worker_env(setting.threads),
                     adds_figures=mode == "profile", resumable=mode != "profile")

    def references(self, setting: Setting, view: StoreView, position: str) -> List[Item]:
        """The reference batch (the grid's smallest cell) as a calibration item; its run numbers the process."""
        dims = self.cfg.profiling_dimensions
        reference = self.cell(setting, min(dims.audio_mockup_secs), min(dims.batch_sizes))
        process = 1 + max((m.cell.run for m in view.calibration() if m.cell.setting == reference.setting
                           and m.cell.model == reference.model), default=-1)
        return [Item(replace(reference, run=process), f"reference batch ({position} of worker)",
                     {"settings": self.settings, "position": position}, calibration=True)]

    def over_budget(self, view: StoreView, setting: Setting,
                    corner: List[Cell]) -> Tuple[List[Cell], List[Measurement]]:
        """Split the corner into cells to measure and cells predicted to exceed the budget (skipped records)."""
        limit = self.cfg.predict.skip_predicted_over
        if limit == "device":
            sizes = [m.extra.get("device_memory_bytes") for m in view.records()
                     if m.cell.setting == (setting.device, setting.threads) and m.extra.get("device_memory_bytes")]
            budget = float(sizes[0]) if sizes else float("inf")
        else:
            budget = float(limit) * 1e9
        placeholders = [Measurement(label="", cell=c, status="skipped") for c in corner]
        predictions = {(p.audio_s, p.batch_size): p for p in predict_cells(view.records() + placeholders)
                       if p.figure == "peak_memory_bytes"
                       and (p.device, p.threads) == (setting.device, setting.threads)}
        keep, skipped = [], []
        for cell in corner:
            p = predictions.get(cell.grid_key)
            # Beyond the measured range only a lower bound is known: skipped when even that is over budget.
            need = p.value if p is not None and p.beyond is None else (p.low if p is not None else None)
            if need is not None and need > budget:
                at_least = "" if p.beyond is None else "at least "
                skipped.append(self.skipped(cell, f"predicted to need {at_least}{need / 1e9:.2f} GB of peak memory, "
                                                  f"over the {budget / 1e9:.2f} GB budget (predict.skip_predicted_over)"))
            else:
                keep.append(cell)
        return keep, skipped
