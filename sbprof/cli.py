"""``sbprof-profile`` / ``python recipes/profile.py``: run a profiling sweep from a YAML file.

Usage::

    sbprof-profile profile.yaml [--output_folder DIR] [--key value ...]
    sbprof-profile --render-only DIR_OR_RESULTS_JSON

Overrides follow SpeechBrain's convention (see :mod:`sbprof.sweep.config`).
Exit codes: 0 done (failed cells are results, not failures of the run),
1 the sweep could not go on (e.g. the model does not load), 2 bad
configuration (nothing measured), 130 interrupted (finished cells kept).
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import List, Optional

from sbprof.errors import ConfigError, SbprofError

EXIT_CONFIG = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sbprof-profile",
        usage="%(prog)s PROFILE.yaml [--output_folder DIR] [--key value ...]\n"
              "       %(prog)s --render-only RESULTS",
        description="Profile a SpeechBrain pretrained model: real-time factor and peak memory "
                    "over audio lengths, batch sizes, devices and thread counts.",
        epilog="Any other --key value overrides that key of the YAML file, SpeechBrain-style, "
               "e.g. --output_folder results/x --seed 3 --profiling_dimensions '{batch_sizes: [1, 2]}'.",
        allow_abbrev=False,
    )
    parser.add_argument("--render-only", metavar="RESULTS",
                        help="re-render report.md and results.csv from an existing results.json "
                             "(or its folder) without measuring")
    return parser


def _error(message: str) -> None:
    print(f"sbprof: error: {message}", file=sys.stderr)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Optional[List[str]] = None) -> int:
    """Parse, validate, sweep, and print where the outputs are.

    Arguments
    ---------
    argv : list of str, optional
        Command-line arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args, rest = _parser().parse_known_args(argv)
    if args.render_only:
        if rest:
            _error(f"--render-only takes no other arguments, got {' '.join(rest)}")
            return EXIT_CONFIG
        from sbprof.report import render_results

        try:
            outputs = render_results(args.render_only)
        except SbprofError as exc:
            _error(str(exc))
            return EXIT_CONFIG
        for name, path in outputs.items():
            print(f"{name}: {path}")
        return 0

    from sbprof.sweep.config import load_config, parse_command_line
    from sbprof.sweep.runner import run_sweep

    if not rest or rest[0].startswith("-"):
        _error("give the YAML file first, e.g. sbprof-profile profile.yaml (see --help)")
        return EXIT_CONFIG
    try:
        param_file, overrides, run_options = parse_command_line(rest)
        cfg = load_config(param_file, overrides, run_options)
    except ConfigError as exc:
        _error(str(exc))
        return EXIT_CONFIG

    # A polite kill (SIGTERM) stops the worker and renders what was measured, like Ctrl-C.
    # Python lets only the main thread install handlers.
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_interrupt) if in_main else None
    try:
        outcome = run_sweep(cfg)
    except KeyboardInterrupt:
        _error(f"interrupted; finished cells are kept in {cfg.output_folder}; run the same command to resume")
        return EXIT_INTERRUPTED
    except ConfigError as exc:
        _error(str(exc))
        return EXIT_CONFIG
    except SbprofError as exc:
        _error(str(exc))
        return EXIT_FAILED
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    print(f"measured {outcome.measured} cell(s) ({outcome.failed} failed), "
          f"{outcome.resumed} already done, {outcome.skipped} skipped by the triangle rule")
    for name, path in outcome.outputs.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
