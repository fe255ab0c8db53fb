"""The profiling recipe: sweep a pretrained model over audio lengths, batch sizes and settings.

``load_config`` reads and validates the YAML, ``run_sweep`` measures every
missing cell (one worker process per device and thread count) and writes
``results.json``, ``report.md`` and ``results.csv``.
"""
from sbprof.sweep.config import SweepConfig, load_config, parse_command_line
from sbprof.sweep.grid import Cell, grid_picture, make_grid, triangle_skipped
from sbprof.sweep.runner import SweepOutcome, run_sweep

__all__ = [
    "Cell", "SweepConfig", "SweepOutcome", "grid_picture", "load_config", "make_grid",
    "parse_command_line", "run_sweep", "triangle_skipped",
]
