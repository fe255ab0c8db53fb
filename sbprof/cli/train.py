"""``sbprof train`` (also ``python recipes/train_profile.py``): profile a real SpeechBrain training loop.

Usage::

    sbprof train train_profile.yaml [--output_folder DIR] [--key value ...] [--device cpu|cuda:N]
    sbprof train --render-only DIR_OR_RESULTS_JSON

Prints the report and writes ``report.md`` and ``results.json`` (and traces
with ``--profiling "{export_trace: True}"``) in the output folder.
Exit codes: 0 done (a variant that failed is a result), 1 the run could not go
on, 2 bad input (nothing measured), 130 interrupted (finished variants kept).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, List, Optional

from sbprof.cli.common import EXIT_CONFIG, EXIT_OK, job_config, print_outputs, render_only, run_in_folder

SCHEMA_KEYS = ("variants", "device", "threads", "seed", "learning_rate", "model", "data", "steps", "profiling",
               "output_folder")
VALUES = ("device",)
REPORT_FILE = "report.md"


def parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, usage="%(prog)s TRAIN.yaml [--key value ...]\n       %(prog)s --render-only RESULTS",
        description="Train small SpeechBrain models (Conformer + CTC, Conformer transducer) on mock-up "
                    "LibriSpeech-shaped batches and report step time, throughput, memory, FLOPs, parameters and "
                    "the per-module breakdown, forward and backward.",
        epilog="Any --key value overrides that key of the YAML file, e.g. --steps '{measured: 4}' "
               "--variants '[ctc]' --device cuda:0.", allow_abbrev=False)
    p.add_argument("--render-only", metavar="RESULTS", help="re-render report.md from an existing results.json")
    return p


def write_report(folder: Path, text: str) -> Path:
    from sbprof.results import atomic_write_text

    path = folder / REPORT_FILE
    atomic_write_text(path, text)
    return path


def _render(target: str) -> Dict[str, Path]:
    from sbprof.errors import ConfigError
    from sbprof.report.train_markdown import render_train
    from sbprof.results import load_results

    results = load_results(target)
    if results.job != "train":
        raise ConfigError(f"{target} holds a {results.job!r} run, not a training profile")
    path = Path(target)
    text = render_train(results)
    print(text)
    return {"report": write_report(path if path.is_dir() else path.parent, text)}


def main(argv: Optional[List[str]] = None, prog: str = "sbprof train") -> int:
    """Parse, check, lock the output folder, train and measure, render; return the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args, rest = parser(prog).parse_known_args(argv)
    if args.render_only:
        return render_only(args.render_only, rest, _render)
    cfg = job_config(rest, SCHEMA_KEYS, (), VALUES, "sbprof.train.config:load_train_config")
    if cfg is None:
        return EXIT_CONFIG
    from sbprof.report.train_markdown import render_train
    from sbprof.train.runner import run_training

    code, outcome = run_in_folder(cfg.output_folder, lambda folder: run_training(
        cfg, on_progress=lambda results: write_report(folder, render_train(results)),
        on_variant=lambda v: print(f"training {v} on {cfg.device} ...", flush=True)), "variants")
    if code:
        return code
    from sbprof.results import load_results

    text = render_train(load_results(outcome.results))
    print(text)
    print(f"measured {len(outcome.measured)} variant(s) ({len(outcome.failed)} failed), "
          f"{len(outcome.kept)} already done")
    print_outputs({"report": write_report(Path(outcome.results).parent, text), "results": outcome.results})
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
