"""``sbprof profile`` (also ``sbprof-profile``, ``python recipes/profile.py``): run a profiling sweep.

Usage::

    sbprof profile PROFILE.yaml [--output_folder DIR] [--key value ...] [--noprogressbar] [--retry_failed]
    sbprof profile --render-only DIR_OR_RESULTS_JSON

Exit codes: 0 done (failed cells are results, not failures of the run),
1 the sweep could not go on (the model does not load, the disk is full),
2 bad input (nothing measured), 130 interrupted (finished cells kept).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional

from sbprof.cli.common import EXIT_CONFIG, EXIT_OK, job_config, print_outputs, render_only, run_in_folder

if TYPE_CHECKING:
    from sbprof.results import Results

SCHEMA_KEYS = ("pretrained_model", "profiling_dimensions", "devices", "cpu_threads", "cuda_threads",
               "warmup_batches", "measured_batches", "repeats", "noise_floor", "predict", "seed", "output_folder")
FLAGS = ("noprogressbar", "retry_failed")
VALUES = ("device",)


def parser(prog: str = "sbprof profile") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        usage="%(prog)s PROFILE.yaml [--output_folder DIR] [--key value ...]\n"
              "       %(prog)s --render-only RESULTS",
        description="Profile a SpeechBrain pretrained model: real-time factor and memory over audio lengths, "
                    "batch sizes, devices and thread counts.",
        epilog="Any other --key value overrides that key of the YAML file, SpeechBrain-style, e.g. "
               "--output_folder results/x --seed 3 --profiling_dimensions '{batch_sizes: [1, 2]}'. "
               "Run options: --noprogressbar; --device cpu|cuda:N (instead of the YAML's devices); "
               "--retry_failed (measure again the cells that ended OOM or in error).",
        allow_abbrev=False,
    )
    p.add_argument("--render-only", metavar="RESULTS",
                   help="re-render report.md and results.csv from an existing results.json (or its folder) "
                        "without measuring")
    return p


def _render(target: str) -> Dict[str, Path]:
    from sbprof.report import render_results

    return render_results(target)


def main(argv: Optional[List[str]] = None, prog: str = "sbprof-profile") -> int:
    """Parse, validate, lock the output folder, sweep, render; return the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args, rest = parser(prog).parse_known_args(argv)
    if args.render_only:
        return render_only(args.render_only, rest, _render)

    cfg = job_config(rest, SCHEMA_KEYS, FLAGS, VALUES, "sbprof.sweep.config:load_config")
    if cfg is None:
        return EXIT_CONFIG
    from sbprof.sweep.runner import run_sweep

    outputs: Dict[str, Path] = {}
    code, outcome = run_in_folder(cfg.output_folder, lambda folder: run_sweep(
        cfg, on_progress=lambda results: outputs.update(write_reports_or_fail(results, folder))), "cells")
    if code:
        return code
    repeats = f" in {outcome.runs} runs" if outcome.runs > outcome.measured else ""
    predicted = f", {outcome.skipped_predicted} skipped as predicted over budget" if outcome.skipped_predicted else ""
    print(f"measured {outcome.measured} cell(s){repeats} ({outcome.failed} failed), "
          f"{outcome.resumed} already done, {outcome.skipped} skipped by the triangle rule{predicted}")
    print_outputs({**outputs, "results": outcome.results})
    return EXIT_OK


def write_reports_or_fail(results: "Results", folder: Path) -> Dict[str, Path]:
    """Render the reports; a write that fails (a full disk) is one line, not a traceback."""
    from sbprof.report import write_reports
    from sbprof.results import StorageError

    try:
        return write_reports(results, folder)
    except OSError as exc:
        raise StorageError(f"cannot write the reports in {folder}: {exc.strerror or exc}; results.json keeps "
                           "every finished cell (re-render with --render-only)") from None


if __name__ == "__main__":
    sys.exit(main())
