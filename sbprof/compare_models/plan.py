"""The plan of a comparison: every variant at every point of the varied dimension, per setting, in runs.

Runs are interleaved (:func:`sbprof.jobs.plan.interleaved_passes`): run 0 of
every (setting, variant), then run 1 of every one, and so on, so slow drift
of the machine (thermal state, other load) spreads over the variants instead
of landing on one. Each (setting, variant, run) is one fresh
:mod:`sbprof.compare_models.worker` process measuring all the variant's points of
that run. An external meter's log, when given, is attached to every
measured point at the end (its energy over each point's window).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List

from sbprof.models.audio import input_kind
from sbprof.compare_models.meterlog import attach_meter_log
from sbprof.compare_models.schema import CompareConfig, Variant
from sbprof.jobs.plan import (Batch, Group, Item, JobPlan, Records, Step, StoreView, interleaved_passes, log_name,
                              models_header, repeat_policy, worker_env)
from sbprof.jobs.preamble import Setting
from sbprof.record import Cell
from sbprof.record.results import Results
from sbprof.compare_models import JOB


class Plan(JobPlan):
    """The comparison's plan (see the module docstring and :class:`sbprof.jobs.plan.Plan`)."""

    job, worker = JOB.name, "sbprof.compare_models.worker"  # the name its Job gives
    cfg: CompareConfig

    def header(self) -> Results:
        cfg = self.cfg
        fixed = {"audio_s": cfg.audio_s} if cfg.vary == "batch_size" else {"batch_size": cfg.batch_size}
        return self.results(
            {"vary": cfg.vary, **fixed, "frame_shift_s": cfg.frame_shift_s,
                  "input": input_kind(cfg.example_audio, self.pre.seed), "warmup": self.pre.warmup,
                  "measured": self.pre.measured},
            models_header({v.name: v.source for v in cfg.variants}))

    def expected(self) -> int:
        return len(self.pre.settings) * len(self.cfg.variants) * len(self.cfg.values) * self.pre.repeats.first_pass

    def cell(self, setting: Setting, variant: Variant, value: float) -> Cell:
        """The coordinates of one point: the varied value in its field, the fixed ones beside it."""
        cfg = self.cfg
        audio_s, batch_size, params = cfg.audio_s, cfg.batch_size, {}
        if cfg.vary == "audio_s":
            audio_s = value
        elif cfg.vary == "frames":
            params = {"frames": int(value)}
            audio_s = value * cfg.frame_shift_s
        else:
            batch_size = int(value)
        feeds = (f"random-features:seed={self.pre.seed}" if variant.source.input == "features" and
                 variant.source.is_module else input_kind(cfg.example_audio, self.pre.seed))
        return Cell(model=variant.source.name, variant=variant.name, device=setting.device, threads=setting.threads,
                    audio_s=audio_s, batch_size=batch_size, input=feeds, params=params)

    def label(self, cell: Cell) -> str:
        value = {"audio_s": f"{cell.audio_s:g} s", "frames": f"{cell.params.get('frames')} frames",
                 "batch_size": f"batch {cell.batch_size}"}[self.cfg.vary]
        return f"{cell.variant} {value} run {cell.run}"

    def settings(self, variant: Variant) -> Dict[str, Any]:
        """How each point is measured, beside its coordinates (the worker adds the sample rate)."""
        src, cfg = variant.source, self.cfg
        return {"kind": src.kind, "interface": src.type or f"module ({src.input})", "method": src.method,
                "overrides": dict(src.overrides), "vary": cfg.vary, "warmup": self.pre.warmup,
                "measured": self.pre.measured,
                "example_audio": Path(cfg.example_audio).name if cfg.example_audio else None}

    def batch(self, setting: Setting, variant: Variant, cells: List[Cell]) -> Batch:
        run = cells[0].run
        items = [Item(c, self.label(c), {"settings": self.settings(variant)}) for c in cells]
        return Batch(name=f"worker for {variant.name} on {setting.name} (run {run})", module=self.worker,
                     payload=self.payload(setting, variant=variant.name),
                     items=items, log=log_name(variant.name), env=worker_env(setting.threads))

    def steps(self, view: StoreView) -> Iterator[Step]:
        groups = [Group([self.cell(s, v, x) for x in self.cfg.values],
                        lambda cells, s=s, v=v: self.batch(s, v, cells))
                  for s in self.pre.settings for v in self.cfg.variants]
        yield from interleaved_passes(view, lambda: groups, repeat_policy(self.pre.repeats), self.pre.seed)
        if self.cfg.energy.meter_log:
            updated, problems = attach_meter_log(view.records(), self.cfg.energy)
            yield Records(updated, replace=True, notes=problems)
