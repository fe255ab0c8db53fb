"""Does a cell vary more inside a sweep than alone? Side by side, in one run, through the real runner and worker.

Each round, per setting of the main job's config: one fresh worker process
measures every cell of the grid's triangle in a shuffled order (a sweep
run, with its reference batches first and last, as the main job does),
and, interleaved with it in a shuffled order, one fresh process per chosen
cell measures that cell alone. Both go through the same runner, worker,
process warm-up and schedule (``warmup``, ``measured``); only the company a
cell keeps differs. Over the rounds, each chosen cell gets as many sweep
runs as alone runs, and the benchmark prints the spread of their run
medians (standard deviation of the logarithms, ~ the CV; beside it the same
with outlying runs left out, as the report does) and their ratio.

Target (issue 21): a sweep cell's run-to-run spread within 1.3x of the same
cell's alone, on this 2-core machine.

Run: ``python benchmarks/sweep_precision.py [--rounds 8] [--config profile.yaml] [--output DIR]``
"""
from __future__ import annotations

import argparse
import math
import random
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from sbprof.analysis.intervals import typical_interval
from sbprof.analysis.grid import make_grid
from sbprof.jobs.plan import Step, StoreView
from sbprof.registry import get_job
from sbprof.jobs.runner import run_job
from sbprof.results import load_results
from sbprof.analysis.runs import group_runs
from sbprof.sweep.config import load_config
from sbprof.sweep.plan import Plan

REPO = Path(__file__).resolve().parents[1]
ALONE = "alone"


class SideBySide(Plan):
    """Rounds of (one sweep process per setting, one process per chosen cell alone), shuffled."""

    def __init__(self, cfg, rounds: int, chosen: List[Tuple[float, int]]):
        super().__init__(cfg)
        self.rounds, self.chosen = rounds, chosen

    def expected(self) -> int:
        return self.rounds * len(self.pre.settings) * (len(self.triangle()) + len(self.chosen))

    def triangle(self) -> List[Tuple[float, int]]:
        dims = self.cfg.profiling_dimensions
        return [(p.audio_s, p.batch_size) for p in make_grid(dims.audio_mockup_secs, dims.batch_sizes, True)
                if not p.skipped]

    def steps(self, view: StoreView) -> Iterator[Step]:
        rng = random.Random(self.pre.seed)
        for r in range(self.rounds):
            batches = []
            for setting in self.pre.settings:
                cells = [replace(self.cell(setting, a, b), run=r) for a, b in self.triangle()]
                rng.shuffle(cells)
                batches.append(self.batch(setting, cells, "measure", view))
                batches += [self.batch(setting, [replace(self.cell(setting, a, b), variant=ALONE, run=r)], "measure")
                            for a, b in self.chosen]
            rng.shuffle(batches)
            yield from batches


def spread(medians: List[float], robust: bool) -> Optional[float]:
    """Standard deviation of the logs of the run medians (with ``robust``, outlying runs left out)."""
    if len(medians) < 2:
        return None
    out = typical_interval(medians).outliers if robust else ()
    kept = [math.log(x) for i, x in enumerate(medians) if i not in out]
    return statistics.stdev(kept) if len(kept) > 1 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--config", type=Path, default=REPO / "profile.yaml")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--cells", default="1x1,2x4,8x1,32x1", help="cells measured alone too: LxB,...")
    args = parser.parse_args()
    folder = args.output or Path(tempfile.mkdtemp(prefix="sbprof-precision-"))
    cfg = load_config(args.config, {"output_folder": str(folder)}, {"noprogressbar": True})
    chosen = [(float(c.split("x")[0]), int(c.split("x")[1])) for c in args.cells.split(",")]
    t0 = time.perf_counter()
    entry = get_job("profile")
    run_job(SideBySide(cfg, args.rounds, chosen), str(folder), progress_bar=False,
            derive=entry.derive, log=lambda line: None)
    print(f"{args.rounds} rounds in {time.perf_counter() - t0:.0f} s, into {folder}")
    groups: Dict[Tuple, List[float]] = {}
    for runs in group_runs(load_results(folder).records).values():
        ok = [m for m in runs if m.ok and m.wall_s]
        if ok:
            c = ok[0].cell
            groups[(c.device, c.threads, c.audio_s, c.batch_size, c.variant == ALONE)] = [
                statistics.median(m.wall_s) for m in ok]
    print(f"{'setting':<10} {'cell':>7} {'runs':>5} {'sweep CV':>9} {'alone CV':>9} {'ratio':>6} "
          f"{'sweep CV*':>9} {'alone CV*':>9} {'ratio*':>6}")
    ratios, robust_ratios = [], []
    for (device, threads, a, b, alone), medians in sorted(groups.items()):
        if alone or (device, threads, a, b, True) not in groups:
            continue
        other = groups[(device, threads, a, b, True)]
        row = [spread(medians, False), spread(other, False), spread(medians, True), spread(other, True)]
        if None in row:
            continue
        ratio, robust = row[0] / row[1], row[2] / row[3]
        ratios.append(ratio)
        robust_ratios.append(robust)
        print(f"{f'{device}/{threads}t':<10} {f'{a:g}x{b}':>7} {len(medians):>5} {100 * row[0]:>8.1f}% "
              f"{100 * row[1]:>8.1f}% {ratio:>6.2f} {100 * row[2]:>8.1f}% {100 * row[3]:>8.1f}% {robust:>6.2f}")
    if ratios:
        print(f"median ratio sweep / alone: {statistics.median(ratios):.2f} (all runs), "
              f"{statistics.median(robust_ratios):.2f} (* outlying runs left out, as the report does); target <= 1.3")


if __name__ == "__main__":
    main()
