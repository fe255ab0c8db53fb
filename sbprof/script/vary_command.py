"""The command line of ``sbprof run --vary``: its own options beside ``sbprof run``'s, checked into a
:class:`~sbprof.script.vary_plan.VaryConfig` (the job: :data:`sbprof.script.VARY`; the command itself:
:mod:`sbprof.cli.vary`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from sbprof.analysis.vary import MAX_ROUNDS, PRECISION
from sbprof.jobs.job import ArgumentParser, Invocation

OPTIONS = ("--vary", "--vary-one-at-a-time", "--rounds", "--max-rounds", "--precision", "--loss-tolerance",
           "--time-budget", "--try")
DEFAULTS: Dict[str, Any] = {"vary": [], "one_at_a_time": False, "rounds": 4, "max_rounds": MAX_ROUNDS,
                            "precision": PRECISION, "loss_tolerance": 0.02, "time_budget": None, "try_": None}
"""The comparison's own options (beside ``sbprof run``'s) and their defaults."""


def parser(prog: str) -> ArgumentParser:
    p = ArgumentParser(prog=prog, allow_abbrev=False, add_help=False)
    p.add_argument("--vary", action="append", default=[])
    p.add_argument("--vary-one-at-a-time", dest="one_at_a_time", action="store_true")
    p.add_argument("--rounds", type=int, default=DEFAULTS["rounds"])
    p.add_argument("--max-rounds", dest="max_rounds", type=int, default=DEFAULTS["max_rounds"])
    p.add_argument("--precision", type=float, default=DEFAULTS["precision"])
    p.add_argument("--loss-tolerance", dest="loss_tolerance", type=float, default=DEFAULTS["loss_tolerance"])
    p.add_argument("--time-budget", dest="time_budget", type=float, default=None)
    p.add_argument("--try", dest="try_", default=None)
    p.add_argument("--render-only", dest="render_only", default=None)
    return p


def parse(argv: List[str], prog: str) -> Invocation:
    """``sbprof run --vary ... SCRIPT.py ...`` as the options :func:`load_config` takes, or the folder to
    re-render."""
    from sbprof.script.command import parse as parse_run, split_argv

    options, script, script_args = split_argv(argv)
    asked, rest = parser(prog).parse_known_args(options)
    if asked.render_only is not None:
        return Invocation(render_only=asked.render_only)
    source = parse_run(rest + ([script] if script else []) + script_args, prog).source
    return Invocation(source={**source, **{k: v for k, v in vars(asked).items() if k != "render_only"}})


def load_config(source: Mapping[str, Any], overrides: Optional[Mapping[str, Any]] = None,
                run_options: Any = None) -> Any:
    """The checked :class:`~sbprof.script.vary_plan.VaryConfig` of the options (``ConfigError`` for bad input).

    Example
    -------
    >>> load_config({"script": "train.py", "vary": ["num_workers: [0, 2]"], "rounds": 1})
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: --rounds must be an integer >= 2, got 1
    """
    from sbprof.base.checks import check_int
    from sbprof.base.errors import ConfigError
    from sbprof.script.command import load_config as load_run
    from sbprof.script.vary import Variant, variants
    from sbprof.script.vary_plan import VaryConfig

    args = {**DEFAULTS, **source, **(overrides or {})}
    check_int(args["rounds"], "--rounds", 2)
    check_int(args["max_rounds"], "--max-rounds", 2)
    if args["max_rounds"] < args["rounds"]:
        raise ConfigError(f"--max-rounds ({args['max_rounds']}) must be at least --rounds ({args['rounds']})")
    if not 0 < args["precision"] < 10:
        raise ConfigError(f"--precision must be a relative half-width above 0 (0.10: +-10 %), got "
                          f"{args['precision']}")
    if not 0 <= args["loss_tolerance"] < 1:
        raise ConfigError(f"--loss-tolerance must be at least 0 and below 1, got {args['loss_tolerance']}")
    if args["time_budget"] is not None and not args["time_budget"] > 0:
        raise ConfigError(f"--time-budget must be a positive number of seconds, got {args['time_budget']}")
    if args.get("keep_going") or args.get("ddp") is not None:
        raise ConfigError("--vary compares bounded runs: --continue and --ddp cannot go with it")
    if args.get("stages"):  # each run after the base's first measures the main stage only (train, else the first)
        raise ConfigError("--vary compares the script's main stage (train, else its first): --stages cannot go "
                          "with it")
    if args["try_"] is not None:
        if args["try_"] != "suggested":
            raise ConfigError(f"--try takes 'suggested' (the variants the base run's verdicts suggest), got "
                              f"{args['try_']!r}")
        if args["vary"]:
            raise ConfigError("--try suggested chooses the variants itself: give either --try suggested or --vary")
    found = variants(args["vary"], args["one_at_a_time"]) if args["try_"] is None else [Variant("base")]
    run = {k: v for k, v in args.items() if k not in DEFAULTS}
    if run.get("output_folder") is None:
        name = Path(run["script"]).stem if run.get("script") else str(run.get("module")).rsplit(".", 1)[-1]
        run["output_folder"] = str(Path("results") / "vary" / name)
    cfg = load_run(run)
    return VaryConfig(preamble=cfg.preamble, target=cfg.target, variants=found, rounds=args["rounds"],
                      max_rounds=args["max_rounds"], precision=args["precision"], loss_tolerance=args["loss_tolerance"],
                      time_budget_s=args["time_budget"],
                      specs=list(args["vary"]), one_at_a_time=bool(args["one_at_a_time"]),
                      try_suggested=args["try_"] is not None)
