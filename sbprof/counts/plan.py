"""The plan of a count command: one cell (the target on its device), measured in one worker process."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from sbprof.jobs.plan import Batch, Item, JobPlan, Step, StoreView, log_name, models_header, worker_env
from sbprof.record import Cell
from sbprof.record.results import Results
from sbprof.counts.target import CountsConfig


class Plan(JobPlan):
    """One cell: the target, its input and the command's options are the rules (see :class:`sbprof.jobs.plan.Plan`)."""

    worker = "sbprof.counts.worker"
    cfg: CountsConfig

    @property
    def job(self) -> str:  # type: ignore[override]  # the command: flops, params or modules
        return self.cfg.command

    def header(self) -> Results:
        cfg = self.cfg
        rules = {k: v for k, v in cfg.to_dict().items() if k not in ("preamble", "source", "target")}
        rules["input"] = [list(s) for s in cfg.input] if cfg.input else None
        rules["select"] = list(cfg.select)
        return self.results({**rules, "seed": cfg.preamble.seed},
                            models_header({cfg.target: cfg.source}))

    def expected(self) -> int:
        return 1

    def steps(self, view: StoreView) -> Iterator[Step]:
        cfg = self.cfg
        setting = cfg.preamble.settings[0]
        cell = Cell(model=cfg.target, device=setting.device, threads=setting.threads,
                    audio_s=None if cfg.source.is_module else cfg.audio_s,
                    batch_size=None if cfg.source.is_module else cfg.batch_size,
                    input=f"random:seed={cfg.preamble.seed}")
        yield Batch(name=f"{cfg.command} worker for {Path(cfg.target).name}", module=self.worker,
                    payload=self.payload(setting),
                    items=[Item(cell, f"{cfg.command} {cfg.target}")], log=log_name(cfg.command),
                    env=worker_env(setting.threads))
