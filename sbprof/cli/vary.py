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
from typing import Any, List

from sbprof.cli.common import EXIT_CONFIG, EXIT_FAILED, EXIT_INTERRUPTED, error, print_outputs
from sbprof.script import VARY
from sbprof.script.vary_command import OPTIONS, load_config, parse


def _is_vary_folder(folder: str) -> bool:
    from sbprof.results import load_results

    try:
        return load_results(folder).job == VARY.name
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
    from sbprof.jobs.render import reports
    from sbprof.jobs.runner import run_config
    from sbprof.results import FolderInUse, load_results

    try:
        asked = parse(argv, prog)
        if asked.render_only is not None:
            folder = asked.render_only
            outputs = reports(VARY, load_results(folder, job=VARY.name), folder)
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
    try:
        if cfg.try_suggested:  # the base run first (a Ctrl-C or a bad stored base: as for the comparison)
            cfg = suggested(cfg)
            if isinstance(cfg, int):
                return cfg
        log(f"{len(cfg.variants)} variant(s) x {cfg.rounds} rounds (up to {cfg.max_rounds} while a ratio is too "
            f"wide): {', '.join(v.name for v in cfg.variants)}")
        outcome = run_config(VARY, cfg, log, plan=VaryPlan(cfg, log))
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
