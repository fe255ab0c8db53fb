"""``sbprof run --vary "KNOB: [V1, V2]" [--vary ...] SCRIPT.py [ARGS ...]``: the script run under each variant,
each run a fresh ``sbprof run`` process, and the measured gain of each against the base.

Options (before the script, beside ``sbprof run``'s ``--warmup``, ``--measured`` and ``--output_folder``):
``--vary`` (repeatable; their product), ``--vary-one-at-a-time``, ``--rounds N`` (runs of each variant,
default 4: the fewest for the gate's 95 % interval), ``--max-rounds N`` (default 8: adaptive repeats add
rounds while a throughput ratio's relative half-width passes ``--precision``, default 0.10),
``--loss-tolerance F`` (default 0.02) and ``--time-budget S``. ``--try suggested`` (in place of ``--vary``)
runs the base first, a normal ``sbprof run``, then the variants its own verdicts suggest
(:mod:`sbprof.script.vary_suggest`). ``sbprof run --render-only FOLDER`` re-renders a saved comparison (its
report and plot). Exit codes: 0 when the
comparison ran (a failing variant is recorded, not an exit status), 2 for bad input (one line), 1 when the base
never ran, 130 interrupted.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from sbprof.cli.common import EXIT_CONFIG, EXIT_FAILED, EXIT_INTERRUPTED, error, print_outputs
from sbprof.jobs.job import ArgumentParser, Invocation, Job, Lazy

OPTIONS = ("--vary", "--vary-one-at-a-time", "--rounds", "--max-rounds", "--precision", "--loss-tolerance",
           "--time-budget", "--try")
DEFAULTS: Dict[str, Any] = {"vary": [], "one_at_a_time": False, "rounds": 4, "max_rounds": 8,
                            "precision": 0.10, "loss_tolerance": 0.02, "time_budget": None, "try_": None}
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


JOB = Job("vary", "sbprof run --vary: the script under each variant, the measured gain of each",
          load_config=load_config, plan=Lazy("sbprof.script.vary_plan", "VaryPlan"),
          analyse=Lazy("sbprof.analysis.vary", "analyse"), render=Lazy("sbprof.report.vary", "render"),
          parse=parse, noun="run")
"""Not in the registry (``sbprof run`` leads here, :func:`handles`): its parts, for the runner and the reports."""


def _is_vary_folder(folder: str) -> bool:
    from sbprof.results import load_results

    try:
        return load_results(folder).job == JOB.name
    except Exception:  # noqa: B902  # not a readable results folder: sbprof run's own --render-only says why
        return False


def handles(argv: List[str]) -> bool:
    """Whether ``sbprof run ARGV`` is a comparison (a ``--vary`` option before the script, or ``--render-only``
    of a comparison's folder)."""
    from sbprof.script.command import split_argv

    options = split_argv(argv)[0]
    if "--render-only" in options[:-1]:
        return _is_vary_folder(options[options.index("--render-only") + 1])
    return any(o.split("=", 1)[0] in OPTIONS for o in options)


def log(line: str) -> None:
    print(f"sbprof: {line}", file=sys.stderr, flush=True)


def suggested(cfg: Any) -> Any:
    """``--try suggested``: the base run, then ``cfg`` with the variants its verdicts suggest; or the exit code
    when the base failed (1) or no verdict suggests a variant (0, the base's report printed)."""
    from dataclasses import replace

    from sbprof.analysis.run import analyse
    from sbprof.results import load_results
    from sbprof.script.vary_suggest import BASE_RUN, base_run, suggest

    folder = Path(cfg.preamble.output_folder)
    target = cfg.target
    script = (["-m", target.module] if target.module else [target.path]) + list(target.args)
    results, why = base_run(script, cfg.preamble.warmup, cfg.preamble.measured, folder / BASE_RUN, log)
    if results is None:
        error(f"the base run failed: {why} (see {folder / (BASE_RUN + '.stderr.txt')})")
        return EXIT_FAILED
    found = suggest(analyse(load_results(str(results.parent))).limits)
    if not found:
        print((results.parent / "report.md").read_text(), file=sys.stderr)
        log(f"no verdict of the base run suggests a variant sbprof can measure: nothing to compare (the base's "
            f"report: {results.parent / 'report.md'})")
        return 0
    for variant, why in found:
        log(f"suggested: {variant.name} (by {why})")
    return replace(cfg, variants=[cfg.variants[0]] + [v for v, _ in found],
                   suggested={v.name: why for v, why in found})


def main(argv: List[str], prog: str = "sbprof run") -> int:
    """Run the comparison (see the module docstring); return the exit code."""
    from sbprof.base.errors import ConfigError, SbprofError
    from sbprof.jobs.render import Reporting, reports
    from sbprof.jobs.runner import run_job
    from sbprof.results import FolderInUse, load_results

    try:
        asked = parse(argv, prog)
        if asked.render_only is not None:
            folder = asked.render_only
            outputs = reports(JOB, load_results(folder, job=JOB.name), folder)
            print((Path(folder) / "report.md").read_text(), file=sys.stderr)
            print_outputs(outputs)
            return 0
        cfg = load_config(asked.source)
    except ConfigError as exc:
        error(str(exc))
        return EXIT_CONFIG
    except SystemExit as exc:  # the parser's one line was printed
        return int(exc.code or 0)
    from sbprof.script.vary_plan import VaryPlan

    folder = cfg.preamble.output_folder
    if cfg.try_suggested:
        cfg = suggested(cfg)
        if isinstance(cfg, int):
            return cfg
    log(f"{len(cfg.variants)} variant(s) x {cfg.rounds} rounds (up to {cfg.max_rounds} while a ratio is too wide): "
        f"{', '.join(v.name for v in cfg.variants)}")
    try:
        outcome = run_job(VaryPlan(cfg, log), folder, progress_bar=False, log=log, reporting=Reporting(JOB, folder))
    except KeyboardInterrupt:
        log("interrupted: the finished runs are kept in results.json (run the same command to go on)")
        return EXIT_INTERRUPTED
    except (SbprofError, OSError) as exc:  # bad input (a folder in use, another run's results) or a failed write
        error(str(exc))
        return EXIT_CONFIG if isinstance(exc, (ConfigError, FolderInUse)) else EXIT_FAILED
    report = outcome.outputs.get("report.md")
    if report is not None and report.is_file():
        print(report.read_text(), file=sys.stderr)
    print_outputs({**outcome.outputs, "results": outcome.results})
    base = cfg.variants[0].name
    stored = load_results(outcome.results)
    if not any(m.ok and m.cell.params.get("variant") == base for m in stored.records):
        error(f"the base ({base}) never ran: nothing to compare (see {Path(folder) / 'variants'})")
        return EXIT_FAILED
    return 0
