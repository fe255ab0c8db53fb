"""The ``sbprof`` command: one subcommand per registered job, plus ``merge`` and ``gate`` over saved results.

    sbprof run [options] SCRIPT.py [ARGS ...]    profile a recipe or script as it runs (sbprof run --help)
    sbprof JOB CONFIG.yaml [--key value ...]     run a job (profile, train, transducer, compare-models...)
    sbprof JOB --render-only RESULTS             re-render a job's saved results, nothing measured
    sbprof flops | params | modules TARGET       counts and per-module time of one model
    sbprof merge FOLDER ... / sbprof gate BASE NEW      machines side by side / the regression gate

Each subcommand's ``--help`` says more; ``sbprof-profile`` and
``python recipes/profile.py`` are ``sbprof profile``. Nothing heavy (torch,
SpeechBrain) is imported before a subcommand needs it.
"""
from __future__ import annotations

import sys
from typing import Dict, List, Optional

from sbprof.cli.common import EXIT_CONFIG, error
from sbprof.registry import JOBS

TOOLS: Dict[str, str] = {
    "merge": "results folders of several machines (or ranks) side by side in one report",
    "gate": "regression gate: a new run against a baseline, exit 1 when worse",
    "compare": "alias of gate (its former name, kept for one release)",
}
"""Subcommands over saved results (:mod:`sbprof.cli.tools`), beside the jobs."""


def usage() -> str:
    lines = ["usage: sbprof SUBCOMMAND [ARGS ...]   (sbprof SUBCOMMAND --help for more)", "", "subcommands:"]
    lines += [f"  {name:<16} {entry.help}" for name, entry in JOBS.items()]
    lines += [f"  {name:<16} {text}" for name, text in TOOLS.items()]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    """Dispatch ``sbprof SUBCOMMAND ...``; return the exit code.

    Example
    -------
    >>> main(["--help"])  # doctest: +ELLIPSIS
    usage: sbprof SUBCOMMAND ...
    ...
    0
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else EXIT_CONFIG
    name, rest = argv[0], argv[1:]
    if name == "run":  # the script's own arguments follow the script: not the jobs' --key value overrides
        from sbprof.cli.run import main as run_script

        return run_script(rest, prog="sbprof run")
    if name in TOOLS:
        from sbprof.cli.tools import main as tool

        try:
            return tool(rest, prog=f"sbprof {name}")
        except SystemExit as exc:  # argparse's --help (0) or its one-line usage error (2): a code, not an exit
            return int(exc.code or 0)
    if name not in JOBS:
        from sbprof.base.checks import nearest

        known = list(JOBS) + list(TOOLS)
        error(f"unknown subcommand {name!r}{nearest(name, known)}; subcommands: {', '.join(known)}")
        return EXIT_CONFIG
    from sbprof.cli.job import main as run

    return run(name, rest, prog=f"sbprof {name}")


def profile(argv: Optional[List[str]] = None) -> int:
    """``sbprof-profile``: the same as ``sbprof profile``."""
    from sbprof.cli.job import main as run

    return run("profile", sys.argv[1:] if argv is None else list(argv), prog="sbprof-profile")
