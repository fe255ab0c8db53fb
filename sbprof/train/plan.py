"""The plan of the training recipe: each (variant x setting) a cell, measured in a fresh worker process per run.

Before anything is written, every variant's modules are built once here
and the module selection is checked on them (bad input is one line, not a
failed cell). Then each (setting, variant, run) is one
:mod:`sbprof.train.worker` process, in interleaved passes
(:func:`sbprof.jobs.plan.interleaved_passes`), so a training step that
crashes its process, meets the OOM killer or hangs is that cell's record
and the run goes on; the one runner saves each record at once and resumes.

With ``world_sizes``, a cell is one world: (setting, variant, scaling, world
size), measured by one :mod:`sbprof.train.world_worker` process that
launches it through torchrun; its items are the world (rank ``None``, the
launch's record) and each rank. World size 1 is measured once and serves
both scalings. A world and its ranks are saved in one write (a batch
saved whole), so an interruption never leaves a world stored without its
ranks; a world whose record is missing, or failed and ``--retry_failed`` is
given, or (in a file edited, or written by an older sbprof) whose ranks are
not all stored, is launched again whole.
"""
from __future__ import annotations

from typing import Any, Iterator, List, Optional

import torch

from sbprof.base.errors import ConfigError
from sbprof.analysis.intervals import RepeatPolicy
from sbprof.jobs.plan import (Batch, Group, Item, JobPlan, Step, StoreView, interleaved_passes, log_name,
                              repeat_policy, worker_env)
from sbprof.jobs.preamble import Setting
from sbprof.record import Cell, Measurement
from sbprof.record.results import Results
from sbprof.train.config import TrainConfig
from sbprof.train.models import build_modules
from sbprof.train import JOB


class Plan(JobPlan):
    """The training recipe's plan (see the module docstring and :class:`sbprof.jobs.plan.Plan`)."""

    job, worker = JOB.name, "sbprof.train.worker"  # the name its Job gives

    def __init__(self, cfg: TrainConfig):
        from sbprof.measuring.modules.selection import select_modules

        super().__init__(cfg)
        if cfg.world_sizes:
            return  # ranks record no per-module rows: no selection to check
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
        if self.cfg.world_sizes:
            return sum(n + 1 for n in self.cfg.world_sizes for _ in self.worlds_of(n)) * len(self.pre.settings) * \
                len(self.cfg.variants) * self.pre.repeats.first_pass
        return len(self.pre.settings) * len(self.cfg.variants) * self.pre.repeats.first_pass

    def cell(self, setting: Setting, variant: str) -> Cell:
        data = self.cfg.data
        return Cell(model=variant, device=setting.device, threads=setting.threads, batch_size=data.batch_size,
                    input=f"librispeech-like:seed={self.pre.seed},scale={data.scale:g}")

    def batch(self, setting: Setting, variant: str, cells: List[Cell]) -> Batch:
        items = [Item(c, f"train:{variant} on {setting.name} run {c.run}") for c in cells]
        return Batch(name=f"training worker for {variant} on {setting.name}", module=self.worker,
                     payload=self.payload(setting),
                     items=items, log=log_name(variant, setting.name), env=worker_env(setting.threads))

    def steps(self, view: StoreView) -> Iterator[Step]:
        if self.cfg.world_sizes:
            groups = [Group([self.world_cell(s, v, n, sc)], self.world_batch) for s in self.pre.settings
                      for v in self.cfg.variants for n in self.cfg.world_sizes for sc in self.worlds_of(n)]
            # A world's runs are fresh launches; their number is fixed (the first pass of repeats).
            policy = RepeatPolicy.fixed(self.pre.repeats.first_pass)
            view = WholeWorlds(view)
        else:
            groups = [Group([self.cell(s, v)], lambda cells, s=s, v=v: self.batch(s, v, cells))
                      for s in self.pre.settings for v in self.cfg.variants]
            policy = repeat_policy(self.pre.repeats)
        yield from interleaved_passes(view, lambda: groups, policy, self.pre.seed)

    def worlds_of(self, world_size: int) -> List[str]:
        """The scalings measured at a world size (one world of size 1 is both scalings' baseline)."""
        return ["single"] if world_size == 1 else list(self.cfg.scaling)

    def world_cell(self, setting: Setting, variant: str, world_size: int, scaling: str) -> Cell:
        """A world's cell (rank ``None``); its ranks' cells are the same with ``rank`` set."""
        from dataclasses import replace

        cell = self.cell(setting, variant)
        return replace(cell, batch_size=self.cfg.rank_batch(scaling, world_size),
                       params={"world_size": world_size, "scaling": scaling})

    def world_batch(self, cells: List[Cell]) -> Batch:
        """One world per batch: its record first, then each rank's (launched again whole when needed)."""
        from dataclasses import replace

        world = cells[0]
        size, scaling, setting = world.params["world_size"], world.params["scaling"], Setting(*world.setting)
        items = [Item(world, f"train:{world.model} world of {size} ({scaling}) on {setting.name} run {world.run}")]
        items += [Item(replace(world, rank=r), f"train:{world.model} rank {r} of {size} ({scaling}) run {world.run}")
                  for r in range(size)]
        return Batch(name=f"torchrun world of {size} ({scaling}) for {world.model} on {setting.name}",
                     module="sbprof.train.world_worker", payload={"config": self.cfg.to_dict()}, items=items,
                     log=log_name(world.model, setting.name, f"world{size}", scaling),
                     env=worker_env(setting.threads), resumable=False, whole=True)


class WholeWorlds:
    """The store as a ``world_sizes`` plan reads it: a world stored without every one of its ranks reads as not
    measured, so it is launched again whole (a file edited, or written by an sbprof that saved them apart)."""

    def __init__(self, view: StoreView):
        self.view = view
        self.retry_failed = view.retry_failed

    def get(self, cell: Cell) -> Optional[Measurement]:
        from dataclasses import replace

        stored = self.view.get(cell)
        if stored is not None and cell.rank is None and any(
                self.view.get(replace(cell, rank=r)) is None for r in range(int(cell.params["world_size"]))):
            return None
        return stored

    def __getattr__(self, name: str) -> Any:
        return getattr(self.view, name)
