"""``sbprof JOB CONFIG.yaml [--key value ...]`` and ``sbprof JOB --render-only RESULTS``, for every registered job.

One command line for every job (:mod:`sbprof.registry`): a job with a
command line of its own (``sbprof flops TARGET``) parses it itself
(:attr:`~sbprof.jobs.job.Job.parse`); for the others any
``--key value`` overrides that key of the YAML file, SpeechBrain-style; the
run options are the same everywhere (``--device cpu|cuda:N``,
``--noprogressbar``, ``--retry_failed``). Exit codes, the same everywhere:
0 done (a failed cell is a result), 1 the run could not go on (a full disk)
or every cell it measured failed, 2 bad input (nothing measured, nothing
written), 130 interrupted (finished records kept; the same command resumes).
"""
from __future__ import annotations

import os
import sys
from typing import Any, List

from sbprof.cli.common import EXIT_CONFIG, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, error, print_outputs
from sbprof.jobs.preamble import FLAGS, VALUES
from sbprof.jobs.job import ArgumentParser, Invocation, Job
from sbprof.registry import get_job


def parser(entry: Job, prog: str) -> ArgumentParser:
    p = ArgumentParser(
        prog=prog, allow_abbrev=False, description=entry.help,
        usage="%(prog)s CONFIG.yaml [--key value ...]\n       %(prog)s --render-only RESULTS",
        epilog="Any other --key value overrides that key of the YAML file, SpeechBrain-style (nested mappings merged "
               "key by key), e.g. --output_folder results/x --seed 3 --repeats '{runs: 2}'. Run options: "
               "--device cpu|cuda:N (instead of the YAML's devices); --noprogressbar; --retry_failed (measure again "
               "what ended OOM, in error or not installed). Exit codes: 0 done, 1 could not go on or every cell "
               "failed, 2 bad input, 130 interrupted.")
    p.add_argument("--render-only", metavar="RESULTS",
                   help="re-render the reports from an existing results.json (or its folder) without measuring")
    return p


def command_line(entry: Job, argv: List[str], prog: str) -> Invocation:
    """``CONFIG.yaml [--key value ...]`` or ``--render-only RESULTS`` (ConfigError on bad input)."""
    from sbprof.base.errors import ConfigError
    from sbprof.cli.overrides import parse_command_line

    args, rest = parser(entry, prog).parse_known_args(argv)
    if args.render_only:
        if rest:
            raise ConfigError(f"--render-only takes no other arguments, got {' '.join(rest)}")
        return Invocation(render_only=args.render_only)
    path, overrides, options = parse_command_line(rest, list(entry.config_keys()), FLAGS, VALUES)
    return Invocation(path, overrides, options)


def configure(entry: Job, argv: List[str], prog: str) -> Any:
    """The job's checked configuration from its command line, or the exit code of a command line that answered
    by itself (``--help``, ``--render-only``, bad input: one line)."""
    from sbprof.base.errors import ConfigError

    try:
        asked = entry.parse(argv, prog) if entry.parse is not None else command_line(entry, argv, prog)
        if asked.render_only is not None:
            return render_only(entry, asked.render_only)
        return entry.load_config(asked.source, asked.overrides, asked.options)
    except ConfigError as exc:
        error(str(exc))
        return EXIT_CONFIG
    except SystemExit as exc:  # argparse's --help (0) and its own usage errors (2): an exit code, not an exit
        return int(exc.code or 0)


def main(name: str, argv: List[str], prog: str) -> int:
    """Run the job ``name`` (see the module docstring); return the exit code."""
    from sbprof.base.errors import ConfigError, SbprofError
    from sbprof.results import FolderInUse

    entry = get_job(name)
    cfg = configure(entry, argv, prog)
    if isinstance(cfg, int):
        return cfg
    if entry.run_rank is not None and os.environ.get("RANK") is not None and os.environ.get("WORLD_SIZE") is not None:
        return run_rank(entry, cfg)
    from sbprof.jobs.runner import run_config

    pre = cfg.preamble
    # With --json, standard output holds the JSON alone: every status line goes to standard error.
    status = sys.stderr if getattr(cfg, "json", False) else sys.stdout
    for warning in pre.warnings:
        print(f"warning: {warning}", file=status)
    try:
        outcome = run_config(entry, cfg, log=lambda line: print(line, file=status))
    except KeyboardInterrupt:
        error(f"interrupted; finished records are kept in {pre.output_folder}; run the same command to resume")
        return EXIT_INTERRUPTED
    except (ConfigError, FolderInUse) as exc:
        error(str(exc))
        return EXIT_CONFIG
    except (SbprofError, OSError) as exc:
        error(str(exc))
        return EXIT_FAILED
    shown = entry.show(cfg, outcome) if entry.show is not None else None
    if shown is not None:
        print(shown)
    print(outcome.describe(entry.noun), file=status)
    print_outputs({**outcome.outputs, "results": outcome.results}, file=status)
    if outcome.all_failed:
        error(f"every {entry.noun} measured in this run failed; the first: {outcome.first_failure}")
        return EXIT_FAILED
    return EXIT_OK


def run_rank(entry: Job, cfg: Any) -> int:
    """Under torchrun, this process is one rank of the job: it measures in place (torchrun supervises the ranks)."""
    from sbprof.base.errors import ConfigError

    if os.environ.get("RANK") == "0":  # one rank says it for all
        for warning in cfg.preamble.warnings:
            print(f"warning: {warning}")
    try:
        return entry.run_rank(cfg)
    except ConfigError as exc:
        error(str(exc))
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def render_only(entry: Job, target: str) -> int:
    """``--render-only RESULTS``: the reports again from a saved folder of this job, nothing measured."""
    from sbprof.base.errors import ConfigError
    from sbprof.registry import render_only as render
    from sbprof.results import StorageError

    try:
        outputs = render(target, job=entry.name)
    except ConfigError as exc:
        error(str(exc))
        return EXIT_CONFIG
    except StorageError as exc:
        error(str(exc))
        return EXIT_FAILED
    print_outputs(outputs)
    return EXIT_OK


def run_recipe(script: str, job: str, prog: str) -> int:
    """Run a recipe script (``recipes/<name>.py``): the job ``job`` with the script's arguments.

    The recipes folder holds ``profile.py``, which would shadow the standard
    library's ``profile`` module (``cProfile`` imports it, and torch's compiler
    stack imports ``cProfile``) for every script run from that folder; the
    folder is taken off ``sys.path`` first.
    """
    folder = os.path.realpath(os.path.dirname(script))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != folder]
    return main(job, sys.argv[1:], prog=prog)
