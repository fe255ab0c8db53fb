"""``sbprof merge`` and ``sbprof gate`` (the regression gate): commands over saved results, measuring nothing.

Usage::

    sbprof merge FOLDER FOLDER [FOLDER ...] --output DIR    results folders of several machines
    sbprof merge [RUN_FOLDER] [--output DIR]               the rank files of one distributed run
    sbprof gate BASELINE NEW [--threshold 5%] [--metric rtf|peak_memory] [--within-run] [--any-machine]

``sbprof compare`` is the gate's former name, kept as an alias for one release.

Exit codes. ``merge``: 0 done, 1 the report could not be written (a full
disk) or, for a distributed run, the run was incomplete (a rank missing or
stopped early: the report says which), 2 bad input. ``gate``: 0 nothing regressed, 1 something is slower
or heavier beyond the threshold (or fails now), 2 bad input or cells that
cannot be judged (too few runs; see ``--within-run``).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from sbprof.base.errors import ConfigError, SbprofError
from sbprof.cli.common import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, error, print_outputs
from sbprof.jobs.job import ArgumentParser


def parse_threshold(text: str) -> float:
    """``5%`` or ``0.05`` as a fraction.

    Example
    -------
    >>> parse_threshold("5%"), parse_threshold("0.1")
    (0.05, 0.1)
    >>> parse_threshold("5")
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: --threshold 5: give a percentage (5%) or a fraction (0.05)
    """
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ConfigError(f"--threshold {text}: give a percentage (5%) or a fraction (0.05)") from None
    if value < 0:
        raise ConfigError(f"--threshold {text}: the smallest increase that counts is never negative: give a "
                          "percentage (5%) or a fraction (0.05)")
    if not value <= 1 or (not text.endswith("%") and value >= 1):
        raise ConfigError(f"--threshold {text}: give a percentage (5%) or a fraction (0.05)")
    return value


def joined_values(argv: List[str], options: Tuple[str, ...]) -> List[str]:
    """``--option value`` as ``--option=value`` for ``options``: a value that starts with ``-`` (``-5%``) is then
    the option's value, which argparse would otherwise take for an option of its own.

    Example
    -------
    >>> joined_values(["a", "b", "--threshold", "-5%", "--within-run"], ("--threshold",))
    ['a', 'b', '--threshold=-5%', '--within-run']
    """
    out: List[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in options and i + 1 < len(argv):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def merge_parser(prog: str) -> ArgumentParser:
    """``sbprof merge``'s command line."""
    parser = ArgumentParser(
        prog=prog, allow_abbrev=False,
        description="Put results folders from several machines side by side in one report (machines as columns, "
                    "their environments listed; no figure mixes two machines' records); or merge the rank files of "
                    "one distributed run (a run folder, a folder holding one run, or by default $SBPROF_RANK_FOLDER, "
                    "./sbprof-ranks or the working directory): stragglers, imbalance, communication and waiting per "
                    "rank and host. Exit 1 when that run is incomplete.")
    parser.add_argument("folders", nargs="*", metavar="FOLDER", help="results folders (or results.json files), or "
                                                                     "one folder of rank files")
    parser.add_argument("--output", metavar="DIR", help="where report.md goes (a run's report: default its folder)")
    return parser


def merge(argv: List[str], prog: str) -> int:
    """Merge results folders of several machines, or the rank files of one distributed run, into one report."""
    args = merge_parser(prog).parse_args(argv)
    if len(args.folders) <= 1 and _holds_runs(args.folders):
        return merge_ranks(args.folders[0] if args.folders else None, args.output)
    if len(args.folders) == 1:
        refusal = _what_it_is(args.folders[0])
        if refusal is not None:
            error(refusal)
            return EXIT_CONFIG
    from sbprof.analysis.machines import analyse_machines
    from sbprof.jobs.render import write_files
    from sbprof.report.machines import render
    from sbprof.results import RESULTS_FILE, prepare_output_folder
    from sbprof.results.merge import load_machines

    def write() -> Dict[str, Path]:
        machines = load_machines(args.folders)
        if args.output is None:
            raise ConfigError("--output DIR is needed to merge results folders of several machines")
        output = prepare_output_folder(args.output, "--output")
        inputs = {(m.source if m.source.is_dir() else m.source.parent).resolve() for m in machines}
        if output.resolve() in inputs or (output / RESULTS_FILE).exists():
            raise ConfigError(f"--output {args.output!r} holds results of its own (an input folder, or another "
                              "run's): its report would be replaced; give a new folder")
        return write_files(render(analyse_machines(machines)), output)

    return _report(write, args.output)


def _report(write: Callable[[], Dict[str, Path]], where: Optional[str]) -> int:
    """Check the input and write a report through ``write``; its paths printed, or one line: exit 2 on bad input,
    1 when the report could not be written."""
    try:
        outputs = write()
    except SbprofError as exc:
        error(str(exc))
        return EXIT_CONFIG
    except OSError as exc:
        error(f"cannot write the report in {where}: {exc.strerror or exc}")
        return EXIT_FAILED
    print_outputs(outputs)
    return EXIT_OK


ACCEPTS = ("sbprof merge takes one distributed run (its run folder, a folder holding one run, or a working "
           "directory holding sbprof-ranks/), or two or more results folders (with --output)")


def _holds_runs(folders: List[str]) -> bool:
    """No folder (the default rank folder), or one folder of rank files, of runs, or holding ``sbprof-ranks/``."""
    from sbprof.distributed.merge import holds_ranks, runs_in
    from sbprof.distributed.world import DEFAULT_FOLDER

    if not folders:
        return True
    folder = Path(folders[0])
    try:
        return folder.is_dir() and (holds_ranks(folder) or bool(runs_in(folder)) or (folder / DEFAULT_FOLDER).is_dir())
    except OSError:
        return False


def _what_it_is(argument: str) -> Optional[str]:
    """Why one argument that is no distributed run cannot be merged (one line), or ``None`` for a results folder."""
    from sbprof.results import RESULTS_FILE

    path = Path(argument)
    if path.name.startswith("rank") and path.name.endswith(".jsonl"):
        return (f"{argument} is one rank's file: give the run folder that holds it ({path.parent}) to merge every "
                f"rank of that run; {ACCEPTS}")
    try:
        if path.is_dir() and not (path / RESULTS_FILE).is_file():
            return f"{argument} holds no rank files (rank*.jsonl), no run folder and no {RESULTS_FILE}; {ACCEPTS}"
        if not path.exists() and not path.is_symlink():
            return f"{argument}: no such folder; {ACCEPTS}"
    except OSError as exc:
        return f"{argument}: cannot be read ({exc.strerror or exc}); {ACCEPTS}"
    return None


def merge_ranks(folder: Optional[str], output: Optional[str]) -> int:
    """``sbprof merge [RUN_FOLDER]``: one distributed run's report; exit 1 when the run is incomplete."""
    from sbprof.distributed.merge import find_run, merge_run
    from sbprof.jobs.render import write_files
    from sbprof.report.distributed import render
    from sbprof.results import prepare_output_folder

    merged = []

    def write() -> Dict[str, Path]:
        run_folder = find_run(folder)
        try:
            merged.append(merge_run(run_folder))
        except (ValueError, KeyError, TypeError) as exc:  # a hand-edited or foreign line: bad input, one line
            if isinstance(exc, SbprofError):
                raise
            raise ConfigError(f"{run_folder}: a rank file holds what this sbprof cannot read "
                              f"({type(exc).__name__}: {exc})") from None
        return write_files(render(merged[0]), prepare_output_folder(output or str(run_folder), "--output"))

    code = _report(write, output or folder)
    if code != EXIT_OK:
        return code
    summary = merged[0]
    if not summary.complete:
        gone = ", ".join(f"rank {m.rank} ({_last_step(m.last_step)}; {m.why})" for m in summary.missing)
        early = ", ".join(f"rank {r.rank} ({r.ended}; {_last_step(r.last_step)})" for r in summary.stopped_early)
        error(f"run {summary.run_id} is incomplete: " + "; ".join(p for p in (f"missing {gone}" if gone else "",
                                                                            f"stopped early {early}" if early else "")
                                                                   if p))
        return EXIT_FAILED
    return EXIT_OK


def _last_step(index: Optional[int]) -> str:
    """Where a rank stopped, counting steps from 1 as the report does."""
    return "no step ended" if index is None else f"last step ended: {index + 1}, counting from 1"


GATE_VALUES = ("--threshold", "--metric", "--confidence", "--statistic")
"""``sbprof gate``'s options that take a value (``--threshold 5 %`` is one value)."""


def gate_parser(prog: str) -> ArgumentParser:
    """``sbprof gate``'s command line (its argv joined by :func:`joined_values` over :data:`GATE_VALUES` first)."""
    parser = ArgumentParser(
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
    return parser


def gate(argv: List[str], prog: str) -> int:
    """The regression gate: print verdicts per cell; exit 1 when something regressed."""
    args = gate_parser(prog).parse_args(joined_values(argv, GATE_VALUES))
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


COMMANDS: Dict[str, Callable[[List[str], str], int]] = {"merge": merge, "gate": gate}
ALIASES = {"compare": "gate"}
"""Former names, kept for one release: the same command, nothing printed about it."""


def main(argv: Optional[List[str]] = None, prog: str = "sbprof gate") -> int:
    """Run the subcommand that ``prog`` names (``sbprof gate``, its alias ``sbprof compare``, or ``sbprof merge``).

    Example
    -------
    >>> main(["a.yaml"], prog="sbprof unknown")
    Traceback (most recent call last):
    ...
    ValueError: no subcommand named 'unknown' here; known: merge, gate, compare
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    command = prog.split()[-1]
    if command not in COMMANDS and command not in ALIASES:
        raise ValueError(f"no subcommand named {command!r} here; known: {', '.join([*COMMANDS, *ALIASES])}")
    try:
        return COMMANDS[ALIASES.get(command, command)](argv, prog)
    except ConfigError as exc:  # a usage mistake (the parser's): one line, exit code 2
        error(str(exc))
        return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
