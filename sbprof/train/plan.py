"""The plan of the training recipe: each (variant x setting) a cell, measured in a fresh worker process per run.

Before anything is written, every variant's modules are built once here
and the module selection is checked on them (bad input is one line, not a
failed cell). Then each (setting, variant, run) is one
:mod:`sbprof.train.worker` process, in interleaved passes
(:func:`sbprof.jobs.plan.interleaved_passes`), so a training step that
crashes its process, meets the OOM killer or hangs is that cell's record
and the run goes on; the one runner saves each record at once and resumes.
"""
from __future__ import annotations

from typing import Iterator, List

import torch

from sbprof.errors import ConfigError
from sbprof.jobs.plan import Batch, Group, Item, JobPlan, Step, StoreView, interleaved_passes, repeat_policy, worker_env
from sbprof.jobs.preamble import Setting
from sbprof.record import Cell
from sbprof.record.results import Results
from sbprof.train.config import TrainConfig
from sbprof.train.models import build_modules


class Plan(JobPlan):
    """The training recipe's plan (see the module docstring and :class:`sbprof.jobs.plan.Plan`)."""

    job, worker = "train", "sbprof.train.worker"

    def __init__(self, cfg: TrainConfig):
        from sbprof.modules.selection import select_modules

        super().__init__(cfg)
        for variant in cfg.variants:
            modules = build_modules(variant, cfg.model, cfg.data.sample_rate, self.pre.seed)
            try:
                select_modules(torch.nn.ModuleDict(modules), cfg.profiling.modules)
            except ConfigError as exc:
                raise ConfigError(f"profiling.{exc} (variant {variant})") from None

    def header(self) -> Results:
        from sbprof.train.brains import BRAINS

        return self.results(self.cfg.rules(), {v: {"brain": BRAINS[v].__name__, "sizes": self.cfg.model.to_dict()}
                                                      for v in self.cfg.variants})

    def expected(self) -> int:
        return len(self.pre.settings) * len(self.cfg.variants) * self.pre.repeats.first_pass

    def cell(self, setting: Setting, variant: str) -> Cell:
        data = self.cfg.data
        return Cell(model=variant, device=setting.device, threads=setting.threads, batch_size=data.batch_size,
                    input=f"librispeech-like:seed={self.pre.seed},scale={data.scale:g}")

    def batch(self, setting: Setting, variant: str, cells: List[Cell]) -> Batch:
        items = [Item(c, f"train:{variant} on {setting.name} run {c.run}") for c in cells]
        return Batch(name=f"training worker for {variant} on {setting.name}", module=self.worker,
                     payload={"config": self.cfg.to_dict(), "device": setting.device, "threads": setting.threads},
                     items=items, log=f"worker-{variant}-{setting.name}.log", env=worker_env(setting.threads))

    def steps(self, view: StoreView) -> Iterator[Step]:
        groups = [Group([self.cell(s, v)], lambda cells, s=s, v=v: self.batch(s, v, cells))
                  for s in self.pre.settings for v in self.cfg.variants]
        yield from interleaved_passes(view, lambda: groups, repeat_policy(self.pre.repeats), self.pre.seed)
