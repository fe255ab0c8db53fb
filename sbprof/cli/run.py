"""``sbprof run [options] SCRIPT.py [ARGS ...]`` and ``sbprof run [options] -m MODULE [ARGS ...]``.

sbprof's options come before the script; everything after the script (or
after ``-m MODULE``) is the script's, untouched, its own ``--flags``
included. Exit codes: the script's own (0 when sbprof stopped it after
its steps, 1 when it raised, its ``sys.exit`` status, 130 interrupted), 2 for
bad input to sbprof (nothing run, nothing written), 1 when the results
could not be written.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import List, Optional, Tuple, Union

from sbprof.cli.common import EXIT_CONFIG, EXIT_FAILED, Parser, error, print_outputs
from sbprof.script.plan import RunConfig

DEFAULT_WARMUP = 2
DEFAULT_MEASURED = 5
USAGE = "%(prog)s [options] SCRIPT.py [ARGS ...]\n       %(prog)s [options] -m MODULE [ARGS ...]\n" \
        "       %(prog)s --render-only RESULTS"


def parser(prog: str) -> Parser:
    p = Parser(prog=prog, usage=USAGE, allow_abbrev=False,
               description="profile a SpeechBrain recipe or PyTorch script as it runs, without editing it",
               epilog="Everything after SCRIPT.py (or -m MODULE) goes to the script untouched. Steps found: each "
                      "speechbrain Brain batch (stages train/valid/test), each torch.optim optimiser step of a plain "
                      "loop, each speechbrain.inference batch or file call.")
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a module as a script (as python -m)")
    p.add_argument("--warmup", type=int, default=DEFAULT_WARMUP,
                   help=f"steps per stage left out of the figures (default {DEFAULT_WARMUP})")
    p.add_argument("--measured", type=int, default=DEFAULT_MEASURED,
                   help=f"steps per stage measured after the warm-up (default {DEFAULT_MEASURED})")
    p.add_argument("--continue", dest="keep_going", action="store_true",
                   help="after the measured steps, let the script run to its end (default: stop it there)")
    p.add_argument("--no-trace", dest="trace", action="store_false", help="no torch.profiler trace")
    p.add_argument("--output_folder", help="where results.json, report.md and traces go "
                                           "(default results/run/<script name>)")
    p.add_argument("--render-only", metavar="RESULTS", help="re-render a saved run's reports, nothing run")
    return p


def split_argv(argv: List[str]) -> Tuple[List[str], Optional[str], List[str]]:
    """sbprof's options, the script (``None`` with ``-m``) and the script's arguments.

    Example
    -------
    >>> split_argv(["--warmup", "1", "train.py", "hp.yaml", "--warmup", "9"])
    (['--warmup', '1'], 'train.py', ['hp.yaml', '--warmup', '9'])
    >>> split_argv(["-m", "pkg.mod", "--lr", "1"])
    (['-m', 'pkg.mod'], None, ['--lr', '1'])
    """
    takes_value = {"-m", "--warmup", "--measured", "--output_folder", "--render-only"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "-m" or (arg in takes_value and "=" not in arg):
            if arg == "-m":
                return argv[:i + 2], None, argv[i + 2:]
            i += 2
        elif arg.startswith("-"):
            i += 1
        else:
            return argv[:i], arg, argv[i + 1:]
    return argv, None, []


def parse(argv: List[str], prog: str) -> Union[RunConfig, int]:
    """The command line as a :class:`RunConfig`, or the exit code of a command that answered by itself."""
    from sbprof.base.errors import ConfigError
    from sbprof.jobs.preamble import Preamble, Repeats, check_output_folder
    from sbprof.script.launch import check_target

    options, script, script_args = split_argv(argv)
    args = parser(prog).parse_args(options)
    if args.render_only:
        from sbprof.cli.job import render_only
        from sbprof.jobs.registry import get_job

        return render_only(get_job("run"), args.render_only, [script] if script else [])
    if script is None and args.module is None:
        raise ConfigError(f"{prog}: give the SCRIPT.py to run (or -m MODULE)")
    if args.warmup < 0 or args.measured < 1:
        raise ConfigError(f"--warmup must be at least 0 and --measured at least 1, got {args.warmup} and "
                          f"{args.measured}")
    target = check_target(script, args.module, script_args)
    folder = check_output_folder(args.output_folder, "--output_folder", str(Path("results") / "run" / target.name))
    rank = os.environ.get("RANK") if os.environ.get("WORLD_SIZE") is not None else None
    ranks = None
    if rank is not None:  # under torchrun: each rank its own results below the folder, the rank files beside them
        folder, ranks = str(Path(folder) / f"rank{rank}"), str(Path(folder) / "ranks")
    preamble = Preamble(devices=("cpu",), cpu_threads=(1,), cuda_threads=1, seed=0, warmup=args.warmup,
                        measured=args.measured, repeats=Repeats(runs=1), output_folder=folder, progress_bar=False)
    return RunConfig(preamble=preamble, target=target, keep_going=args.keep_going, trace=args.trace,
                     rank_folder=ranks)


def main(argv: List[str], prog: str = "sbprof run") -> int:
    """Run ``sbprof run`` (see the module docstring); return the exit code."""
    from sbprof.base.errors import ConfigError
    from sbprof.jobs.registry import get_job
    from sbprof.jobs.render import reports
    from sbprof.jobs.runner import run_job
    from sbprof.results import FolderInUse, StorageError
    from sbprof.script.launch import script_traceback
    from sbprof.script.plan import Plan

    try:
        cfg = parse(argv, prog)
    except ConfigError as exc:
        error(str(exc))
        return EXIT_CONFIG
    except SystemExit as exc:  # --help (0) or argparse's one-line error (2)
        return int(exc.code or 0)
    if isinstance(cfg, int):
        return cfg
    entry, folder = get_job("run"), cfg.preamble.output_folder
    created = not os.path.exists(folder)
    plan = Plan(cfg)
    try:
        outcome = run_job(plan, folder, progress_bar=False, render=lambda results: reports(entry, results, folder),
                          log=lambda line: print(f"sbprof: {line}", file=sys.stderr))
    except (ConfigError, FolderInUse) as exc:
        if created:
            shutil.rmtree(folder, ignore_errors=True)
        error(str(exc))
        return EXIT_CONFIG if plan.ended is None or plan.ended.exit_code == 0 else plan.ended.exit_code
    except (StorageError, OSError) as exc:
        error(str(exc))
        return EXIT_FAILED
    ended = plan.ended
    report = outcome.outputs.get("report.md")
    if report is not None and report.is_file():
        print(report.read_text(), file=sys.stderr)
    print_outputs({**outcome.outputs, "results": outcome.results})
    if ended.error is not None and ended.how == "raised":
        print(script_traceback(ended.error), end="", file=sys.stderr)
    elif ended.message is not None:
        print(ended.message, file=sys.stderr)
    return ended.exit_code
