"""``sbprof merge`` and ``sbprof compare`` (the regression gate): commands over saved results, measuring nothing.

Usage::

    sbprof merge FOLDER FOLDER [FOLDER ...] --output DIR
    sbprof compare BASELINE NEW [--threshold 5%] [--metric rtf|peak_memory] [--within-run] [--any-machine]

Exit codes. ``merge``: 0 done, 1 the report could not be written (a full
disk), 2 bad input. ``compare``: 0 nothing regressed, 1 something is slower
or heavier beyond the threshold (or fails now), 2 bad input or cells that
cannot be judged (too few runs; see ``--within-run``).
"""
from __future__ import annotations

import sys
from typing import Callable, Dict, List, Optional

from sbprof.cli.common import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, Parser, error, print_outputs
from sbprof.errors import ConfigError, SbprofError

def parse_threshold(text: str) -> float:
    """``5%`` or ``0.05`` as a fraction.

    Example
    -------
    >>> parse_threshold("5%"), parse_threshold("0.1")
    (0.05, 0.1)
    >>> parse_threshold("5")
    Traceback (most recent call last):
    ...
    sbprof.errors.ConfigError: --threshold 5: give a percentage (5%) or a fraction (0.05)
    """
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ConfigError(f"--threshold {text}: give a percentage (5%) or a fraction (0.05)") from None
    if not 0 <= value <= 1 or (not text.endswith("%") and value >= 1):
        raise ConfigError(f"--threshold {text}: give a percentage (5%) or a fraction (0.05)")
    return value


def merge(argv: List[str], prog: str) -> int:
    """Merge results folders of several machines into one report."""
    parser = Parser(
        prog=prog, allow_abbrev=False,
        description="Put results folders from several machines side by side in one report: machines as "
                    "columns, their environments listed; no figure mixes two machines' records.")
    parser.add_argument("folders", nargs="+", metavar="FOLDER", help="results folders (or results.json files)")
    parser.add_argument("--output", required=True, metavar="DIR", help="where report.md and the plot go")
    args = parser.parse_args(argv)
    from sbprof.analysis.machines import analyse_machines
    from sbprof.report.machines import write_merged_report
    from sbprof.results import RESULTS_FILE, prepare_output_folder
    from sbprof.results.merge import load_machines

    try:
        machines = load_machines(args.folders)
        output = prepare_output_folder(args.output, "--output")
        inputs = {(m.source if m.source.is_dir() else m.source.parent).resolve() for m in machines}
        if output.resolve() in inputs or (output / RESULTS_FILE).exists():
            raise ConfigError(f"--output {args.output!r} holds results of its own (an input folder, or another "
                              "run's): its report would be replaced; give a new folder")
        outputs = write_merged_report(analyse_machines(machines), output)
    except SbprofError as exc:
        error(str(exc))
        return EXIT_CONFIG
    except OSError as exc:
        error(f"cannot write the report in {args.output}: {exc.strerror or exc}")
        return EXIT_FAILED
    print_outputs(outputs)
    return EXIT_OK


def gate(argv: List[str], prog: str) -> int:
    """The regression gate: print verdicts per cell; exit 1 when something regressed."""
    parser = Parser(
        prog=prog, allow_abbrev=False,
        description="Compare a new run with a baseline cell by cell, with a noise-aware verdict from the runs' "
                    "raw samples (Hodges-Lehmann ratio of run medians or percentiles, exact Mann-Whitney "
                    "interval). Exit 1 when a cell is slower or heavier beyond the threshold, 2 when cells cannot "
                    "be judged.")
    parser.add_argument("baseline", metavar="BASELINE", help="results folder or results.json")
    parser.add_argument("new", metavar="NEW", help="results folder or results.json")
    parser.add_argument("--threshold", default="5%", help="smallest change that counts (default 5%%)")
    parser.add_argument("--metric", default="rtf", help="rtf (default) or peak_memory")
    parser.add_argument("--confidence", type=float, default=0.95, help="level of the intervals (default 0.95)")
    parser.add_argument("--statistic", default="median",
                        help="what each run is reduced to: median (default), min, or pNN, e.g. p10 (the 10th "
                             "percentile of its calls: steadier on a shared machine, for runs of ~100 calls)")
    parser.add_argument("--within-run", action="store_true",
                        help="judge cells with fewer than 4 runs a side from their calls as if independent "
                             "(labelled WITHIN-RUN; expect false alarms)")
    parser.add_argument("--any-machine", action="store_true", help="compare results from different hardware")
    args = parser.parse_args(argv)
    from sbprof.analysis.gate import gate as run_gate
    from sbprof.report.gate import render_gate
    from sbprof.results import load_results

    try:
        report = run_gate(load_results(args.baseline), load_results(args.new), args.metric,
                          parse_threshold(args.threshold), args.confidence, args.within_run, args.any_machine,
                          args.statistic)
    except SbprofError as exc:
        error(str(exc))
        return EXIT_CONFIG
    print(render_gate(report), end="")
    if report.regressed:
        return EXIT_FAILED
    return EXIT_CONFIG if report.unjudged else EXIT_OK


COMMANDS: Dict[str, Callable[[List[str], str], int]] = {"merge": merge, "compare": gate}


def main(argv: Optional[List[str]] = None, prog: str = "sbprof compare") -> int:
    """Run the subcommand that ``prog`` names (``sbprof compare`` or ``sbprof merge``).

    Example
    -------
    >>> main(["a.yaml"], prog="sbprof unknown")
    Traceback (most recent call last):
    ...
    ValueError: no subcommand named 'unknown' here; known: merge, compare
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    command = prog.split()[-1]
    if command not in COMMANDS:
        raise ValueError(f"no subcommand named {command!r} here; known: {', '.join(COMMANDS)}")
    return COMMANDS[command](argv, prog)


if __name__ == "__main__":
    sys.exit(main())
