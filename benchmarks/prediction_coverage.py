"""Do predicted cells' intervals hold? Full grids of local models: the corner predicted from the triangle alone.

For each model, the main job measures its whole grid (``triangle_only:
False``) on one CPU thread; then, as the report's held-out validation does,
the cost model is fitted on the triangle cells alone and predicts the
corner with the intervals the report would print (calibrated on held-out
cells of the triangle) or, too far out, a lower bound. Each corner cell and
figure (batch time, memory a batch adds, peak memory) counts once: held
(inside its interval, or at least its bound) or not. Printed per model and
figure, then over everything: how often intervals hold, how many cells were
bounds, and the median half-width of the intervals (relative, the larger
side).

Target (issue 21): across the default model, ``encoder_decoder_asr`` and one
more local model, the intervals hold in at least 90 % of cells.

Run: ``python benchmarks/prediction_coverage.py [--models encoder_asr encoder_decoder_asr enhancement]
[--runs 2] [--repeats 2] [--output DIR]``
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import List

from sbprof.models.build import LOCAL_MODELS
from sbprof.analysis.predictions import held_out_validation
from sbprof.results import load_results

GRID = """pretrained_model: {{source: {model}, type: {interface}}}
profiling_dimensions: {{audio_mockup_secs: [0.5, 1, 2, 4], batch_sizes: [1, 2, 4], example_audio: example,
                       triangle_only: False, export_logs: False}}
devices: [cpu]
cpu_threads: [1]
repeats: {{runs: {runs}}}
noise_floor: False
output_folder: {out}
"""
FIGURES = {"time_s": "batch time", "batch_memory_bytes": "memory a batch adds", "peak_memory_bytes": "peak memory"}


def main() -> None:
    from sbprof.registry import run

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["encoder_asr", "encoder_decoder_asr", "enhancement"])
    parser.add_argument("--runs", type=int, default=2, help="fresh-process runs per cell")
    parser.add_argument("--repeats", type=int, default=2, help="full grids per model")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    root = args.output or Path(tempfile.mkdtemp(prefix="sbprof-predictions-"))
    held = bounds = total = 0
    widths: List[float] = []
    print(f"{'model':<20} {'rep':>3} {'figure':<20} {'held':>6} {'bounds':>6} {'half-widths':<30} wall")
    for model in args.models:
        for repeat in range(args.repeats):
            folder = root / f"{model}-{repeat}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "grid.yaml").write_text(GRID.format(model=model, interface=LOCAL_MODELS[model], runs=args.runs,
                                                          out=folder / "out"))
            t0 = time.perf_counter()
            run("profile", folder / "grid.yaml", noprogressbar=True, log=lambda line: None)
            wall = time.perf_counter() - t0
            for (_, figure), report in held_out_validation(load_results(folder / "out").records).items():
                cells = report.cells
                numeric = [c for c in cells if c.prediction.beyond is None]
                halves = [max(c.prediction.high / c.prediction.value - 1, 1 - c.prediction.low / c.prediction.value)
                          for c in numeric]
                held += sum(c.inside for c in cells)
                bounds += len(cells) - len(numeric)
                total += len(cells)
                widths += halves
                print(f"{model:<20} {repeat:>3} {FIGURES[figure]:<20} {sum(c.inside for c in cells)}/{len(cells):<4} "
                      f"{len(cells) - len(numeric):>6} {', '.join(f'{100 * h:.0f}%' for h in halves):<30} "
                      f"{wall:.0f} s")
    print(f"held: {held}/{total} = {100 * held / max(total, 1):.0f}% of corner cells and figures "
          f"({bounds} of them bounds); median half-width of the intervals {100 * statistics.median(widths):.0f}%")


if __name__ == "__main__":
    main()
