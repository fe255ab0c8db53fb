"""``sbprof run [options] SCRIPT.py [ARGS ...]`` and ``sbprof run [options] -m MODULE [ARGS ...]``: the command line
of the run job, and its options as a :class:`~sbprof.script.plan.RunConfig`.

sbprof's options come before the script; everything after the script (or
after ``-m MODULE``) is the script's, untouched, its own ``--flags``
included.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from sbprof.base.checks import check_int, nearest
from sbprof.base.errors import ConfigError
from sbprof.jobs.job import ArgumentParser, Invocation

DEFAULTS: Dict[str, Any] = {"script": None, "module": None, "args": (), "warmup": 2, "measured": 5,
                            "keep_going": False, "trace": True, "output_folder": None, "verbose": False,
                            "ddp": None, "stages": None}
"""The run job's options and their defaults (the command line's and :func:`sbprof.run`'s)."""
DDP_BACKENDS = ("gloo", "nccl", "auto")
USAGE = "%(prog)s [options] SCRIPT.py [ARGS ...]\n       %(prog)s [options] -m MODULE [ARGS ...]\n" \
        "       %(prog)s --render-only RESULTS"


def parser(prog: str) -> ArgumentParser:
    p = ArgumentParser(prog=prog, usage=USAGE, allow_abbrev=False, argument_default=argparse.SUPPRESS,
                       description="profile a SpeechBrain recipe or PyTorch script as it runs, without editing it",
                       epilog="Everything after SCRIPT.py (or -m MODULE) goes to the script untouched. Steps found: "
                              "each speechbrain Brain batch (stages train/valid/test), each torch.optim optimiser "
                              "step of a plain loop, each speechbrain.inference batch or file call. Compare variants "
                              "(docs/run.md): --vary \"num_workers: [0, 2]\" [--vary ...] [--vary-one-at-a-time] "
                              "[--rounds 4] [--max-rounds 8] [--precision 0.10] [--loss-tolerance 0.02] "
                              "[--time-budget S] SCRIPT.py, or --try suggested SCRIPT.py")
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a module as a script (as python -m)")
    p.add_argument("--warmup", type=int,
                   help=f"steps per stage left out of the figures (default {DEFAULTS['warmup']})")
    p.add_argument("--measured", type=int,
                   help=f"steps per stage measured after the warm-up (default {DEFAULTS['measured']})")
    p.add_argument("--continue", dest="keep_going", action="store_true",
                   help="after the measured steps, let the script run to its end (default: stop it there)")
    p.add_argument("--stages", metavar="STAGE[,STAGE...]", type=lambda text: text.split(","),
                   help="measure only these stages (e.g. train, or brain2.valid); the others' steps run unmeasured, and "
                        "the script stops once these have their steps (default: every stage)")
    p.add_argument("--no-trace", dest="trace", action="store_false", help="no torch.profiler trace")
    p.add_argument("--verbose", action="store_true", help="keep the profiler's own console lines (hidden by default)")
    p.add_argument("--ddp", nargs="?", const="auto", metavar="gloo|nccl",
                   help="under torchrun: start the process group before the script (as SpeechBrain's ddp_init_group "
                        "would) and give each Brain this distributed_backend unless the script sets one (bare --ddp: "
                        "nccl with a GPU, else gloo)")
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
    >>> split_argv(["--ddp", "train.py"]), split_argv(["--ddp", "gloo", "train.py"])[1]
    ((['--ddp'], 'train.py', []), 'train.py')
    """
    takes_value = {"-m", "--warmup", "--measured", "--output_folder", "--render-only", "--stages",
                   "--vary", "--rounds", "--max-rounds", "--precision", "--loss-tolerance", "--time-budget",
                   "--try"}  # from --vary on: sbprof.cli.vary
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--ddp" and i + 1 < len(argv) and argv[i + 1] in DDP_BACKENDS:  # its value is optional
            i += 2
        elif arg == "-m" or (arg in takes_value and "=" not in arg):
            if arg == "-m":
                return argv[:i + 2], None, argv[i + 2:]
            i += 2
        elif arg.startswith("-"):
            i += 1
        else:
            return argv[:i], arg, argv[i + 1:]
    return argv, None, []


def parse(argv: List[str], prog: str) -> Invocation:
    """``sbprof run ...`` as the options :func:`load_config` takes, or the folder to re-render."""
    options, script, script_args = split_argv(argv)
    given = vars(parser(prog).parse_args(options))
    render_only = given.pop("render_only", None)
    if render_only is not None:
        if script:
            raise ConfigError(f"--render-only takes no other arguments, got {script}")
        return Invocation(render_only=render_only)
    if script is None and given.get("module") is None:
        raise ConfigError(f"{prog}: give the SCRIPT.py to run (or -m MODULE)")
    return Invocation(source={**given, "script": script, "args": script_args})


def load_config(source: Mapping[str, Any], overrides: Optional[Mapping[str, Any]] = None,
                run_options: Optional[Mapping[str, Any]] = None) -> Any:
    """The checked :class:`~sbprof.script.plan.RunConfig` from the options (``source``, then ``overrides``).

    Under torchrun (``RANK`` and ``WORLD_SIZE`` set) each rank's results go below the folder, in ``rank<N>/``,
    and the rank files beside them, in ``ranks/``.

    Example
    -------
    >>> load_config({"script": "train.py", "warmup": -1})
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: --warmup must be at least 0 and --measured at least 1, got -1 and 5
    """
    from sbprof.jobs.preamble import Preamble, Repeats, check_output_folder
    from sbprof.script.ddp import check_ddp
    from sbprof.script.launch import check_target
    from sbprof.script.plan import RunConfig

    if not isinstance(source, Mapping):
        raise ConfigError(f"sbprof run: give the options as a mapping, e.g. {{'script': 'train.py'}}, not {source!r}")
    args = {**DEFAULTS, **source, **(overrides or {})}
    unknown = sorted(set(args) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"sbprof run: unknown option {unknown[0]!r}{nearest(unknown[0], list(DEFAULTS))}; options: "
                          f"{', '.join(DEFAULTS)}")
    if args["script"] is None and args["module"] is None:
        raise ConfigError("sbprof run: give the SCRIPT.py to run (or -m MODULE)")
    if not all(isinstance(args[k], int) and not isinstance(args[k], bool) for k in ("warmup", "measured")) \
            or args["warmup"] < 0 or args["measured"] < 1:
        raise ConfigError(f"--warmup must be at least 0 and --measured at least 1, got {args['warmup']} and "
                          f"{args['measured']}")
    for key in ("warmup", "measured"):  # the jobs' bound on counts
        check_int(args[key], f"--{key}", 0)
    stages = _check_stages(args["stages"])
    target = check_target(args["script"], args["module"], list(args["args"]))
    ddp = check_ddp(args["ddp"])
    folder = check_output_folder(args["output_folder"], "--output_folder", str(Path("results") / "run" / target.name))
    rank = os.environ.get("RANK") if os.environ.get("WORLD_SIZE") is not None else None
    ranks = None
    if rank is not None:
        folder, ranks = str(Path(folder) / f"rank{rank}"), str(Path(folder) / "ranks")
    preamble = Preamble(devices=("cpu",), cpu_threads=(1,), cuda_threads=1, seed=0, warmup=args["warmup"],
                        measured=args["measured"], repeats=Repeats(runs=1), output_folder=folder, progress_bar=False)
    return RunConfig(preamble=preamble, target=target, keep_going=bool(args["keep_going"]), trace=bool(args["trace"]),
                     rank_folder=ranks, verbose=bool(args["verbose"]), ddp=ddp, stages=stages)


def _check_stages(stages: Any) -> Optional[Tuple[str, ...]]:
    """``--stages``' names (``None``: every stage); :class:`ConfigError` for an empty or repeated name.

    Example
    -------
    >>> _check_stages(["train"]), _check_stages(None)
    (('train',), None)
    >>> _check_stages(["train", ""])
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: --stages takes stage names separated by commas (e.g. --stages train,valid), got 'train,'
    """
    if stages is None:
        return None
    names = [stages] if isinstance(stages, str) else stages
    if not isinstance(names, (list, tuple)) or not names \
            or not all(isinstance(n, str) and n.strip() == n and n for n in names) or len(set(names)) != len(names):
        shown = ",".join(map(str, names)) if isinstance(names, (list, tuple)) else repr(names)
        raise ConfigError(f"--stages takes stage names separated by commas (e.g. --stages train,valid), got {shown!r}")
    return tuple(names)
