"""The worker of a ``world_sizes`` study: one world launched with torchrun, its record, then each rank's.

``python -m sbprof.train.world_worker RESULT_FD`` (see :mod:`sbprof.workers.cells`):
the batch's first item is the world (rank ``None``), the others its ranks.
Measuring the world runs ``torchrun ... -m sbprof train world.yaml``
(:func:`sbprof.distributed.launch.run_world`), the command a user runs, with
``world_size`` ranks, this one variant and scaling on this setting in
``world.yaml`` and the run id fixed by this worker, under a deadline of 90 %
of ``timeout_s``; the
ranks' files (``<output_folder>/ranks/<run id>/``) then give every rank's
record. A rank whose file has no end line (it died, was killed or hung) is
an ``error`` record naming the step where it was last seen, and the world's
record is then ``error`` too ("incomplete"), with torchrun's exit code.
"""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from sbprof.analysis.distributed import RankPayload, RankSteps
from sbprof.analysis.train import LaunchPayload
from sbprof.record import Cell, Measurement
from sbprof.workers.cells import CellWorker, serve_cells

DEADLINE_SHARE = 0.9
"""Of ``timeout_s``: the world's deadline, so the worker still reports before the runner stops it."""


def rank_record(cell: Cell, path: Path, section: str) -> Tuple[Measurement, Optional[str]]:
    """One rank's record from its file (re-celled to the plan's cell), and why it is missing if it is."""
    from sbprof.distributed.merge import rank_records
    from sbprof.distributed.rankfile import read_rank_file
    from sbprof.measuring.env import collect_env
    from sbprof.base.errors import ConfigError

    label = f"rank {cell.rank}: {cell.model}"
    last: Optional[int] = None
    why = "no rank file: it never ended a step"
    if path.exists():
        try:
            rank = read_rank_file(path)
        except ConfigError as exc:
            rank, why = None, str(exc)
        if rank is not None:
            last = rank.last_seen
            records = rank_records(rank)
            if rank.end is not None and section in records:
                return replace(records[section], label=label, cell=cell), None
            why = "no end line: it died, was killed or hung" if rank.end is None else f"no record of {section}"
    seen = "no step of it ended" if last is None else f"its last step to end was step {last + 1}, counting from 1"
    message = f"rank {cell.rank} has no figures: {why}; {seen}"
    return Measurement(label=label, cell=cell, status="error", message=message, env=collect_env(),
                       extra=RankPayload(rank=RankSteps(last_step=last, section=section)).to_dict()), why


class WorldWorker(CellWorker):
    """Launches its batch's world once (at the world's item), then hands out each rank's record."""

    def setup(self) -> Dict[str, Any]:
        self.records: Optional[Dict[Tuple[Any, ...], Dict[str, Any]]] = None
        return {}

    def measure(self, item: Dict[str, Any]) -> Dict[str, Any]:
        if self.records is None:
            self.records = self.launch([Cell.from_dict(i["cell"]) for i in self.job["items"]])
        return self.records[Cell.from_dict(item["cell"]).key()]

    def launch(self, cells: List[Cell]) -> Dict[Tuple[Any, ...], Dict[str, Any]]:
        from sbprof.distributed.launch import run_world, torchrun_command
        from sbprof.distributed.rankfile import rank_file
        from sbprof.distributed.ranklog import ENV_NO_MERGE
        from sbprof.distributed.world import ENV_RUN_ID, new_run_id
        from sbprof.measuring.env import collect_env
        from sbprof.jobs.plan import worker_env
        from sbprof.jobs.runner import LOG_DIR
        from sbprof.train.config import TrainConfig
        from sbprof.train.rank import RANKS_DIR, section_key

        cfg = TrainConfig.from_dict(self.job["config"])
        world = next(c for c in cells if c.rank is None)
        size, scaling = world.params["world_size"], world.params["scaling"]
        ranks_scaling = "strong" if scaling == "single" else scaling  # one rank: both scalings are the same
        out = Path(cfg.preamble.output_folder)
        run_id = f"{world.model}-{scaling}-{size}ranks-run{world.run}-{new_run_id()}"
        config = out / LOG_DIR / f"world-{run_id}.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(json.dumps({**cfg.tree(world.device, world.threads), "variants": [world.model],
                                      "scaling": [ranks_scaling]}, indent=1))
        command = torchrun_command(size, "sbprof", ["train", str(config)])
        launch = run_world(command, {ENV_RUN_ID: run_id, ENV_NO_MERGE: "1", **worker_env(world.threads)},
                           DEADLINE_SHARE * cfg.preamble.timeout_s, out / LOG_DIR / f"torchrun-{run_id}.log")
        section = f"{section_key(world.model, ranks_scaling)}/train"
        out_records: Dict[Tuple[Any, ...], Dict[str, Any]] = {}
        missing = []
        for cell in cells:
            if cell.rank is None:
                continue
            record, why = rank_record(cell, rank_file(out / RANKS_DIR / run_id, cell.rank), section)
            out_records[cell.key()] = record.to_dict()
            if why is not None:
                missing.append(record.message)
        ended = "stopped at the deadline" if launch.timed_out else f"torchrun exit code {launch.exit_code}"
        incomplete = bool(missing) or launch.exit_code != 0
        out_records[world.key()] = Measurement(
            label=f"world of {size} ({scaling}): {world.model}", cell=world,
            status="error" if incomplete else "ok",
            message=f"incomplete ({ended}): " + "; ".join(missing) if incomplete else "", wall_s=[launch.wall_s],
            env=collect_env(), settings={"torchrun": " ".join(launch.command)},
            extra=LaunchPayload(run_id=run_id, run_folder=str(out / RANKS_DIR / run_id), exit_code=launch.exit_code,
                                timed_out=launch.timed_out).to_dict()).to_dict()
        return out_records


if __name__ == "__main__":
    sys.exit(serve_cells(WorldWorker))
