"""``sbprof run [options] SCRIPT.py [ARGS ...]``: the run job's command, whose process is the script's.

The command line is the job's (:mod:`sbprof.script.command`). Unlike the
other jobs (:mod:`sbprof.cli.job`), the script's own standard output stays
its own (sbprof's lines and the report go to standard error) and the exit
code is the script's. Exit codes: the script's own (0 when sbprof stopped it after
its steps, 1 when it raised, its ``sys.exit`` status, 130 interrupted, also
after the script ended: the reports of what was recorded are written
first), 2 for bad input to sbprof (nothing run, nothing written), 1 when the
results could not be written or no step could be measured (one line says
why).
"""
from __future__ import annotations

import os
import shutil
import sys
from typing import List

from sbprof.cli.common import EXIT_CONFIG, EXIT_FAILED, EXIT_INTERRUPTED, error, print_outputs


def main(argv: List[str], prog: str = "sbprof run") -> int:
    """Run ``sbprof run`` (see the module docstring); return the exit code."""
    from sbprof.cli import vary

    if vary.handles(argv):  # --vary: the script under each variant (sbprof.cli.vary)
        return vary.main(argv, prog)
    from sbprof.base.errors import ConfigError
    from sbprof.cli.job import configure
    from sbprof.jobs.runner import run_config
    from sbprof.results import FolderInUse, StorageError
    from sbprof.script import JOB as entry
    from sbprof.script.launch import script_traceback
    from sbprof.script.plan import log

    cfg = configure(entry, argv, prog)
    if isinstance(cfg, int):
        return cfg
    folder = cfg.preamble.output_folder
    created = not os.path.exists(folder)
    plan = entry.plan(cfg)
    plan.after_script.held = True  # Ctrl-C after the script waits for the reports (sbprof.script.interrupts)
    try:
        outcome = run_config(entry, cfg, log, plan=plan, announce=lambda: log("writing report.md"))
    except (ConfigError, FolderInUse) as exc:
        if created:
            shutil.rmtree(folder, ignore_errors=True)
        error(str(exc))
        return EXIT_CONFIG if plan.ended is None or plan.ended.exit_code == 0 else plan.ended.exit_code
    except (StorageError, OSError) as exc:
        error(str(exc))
        return EXIT_FAILED
    finally:
        plan.after_script.restore()
    ended = plan.ended
    report = outcome.outputs.get("report.md")
    if report is not None and report.is_file():
        print(report.read_text(), file=sys.stderr)
    print_outputs({**outcome.outputs, "results": outcome.results})
    if ended.error is not None and ended.how == "raised":
        print(script_traceback(ended.error), end="", file=sys.stderr)
    elif ended.message is not None:
        print(ended.message, file=sys.stderr)
    if plan.after_script.hit:
        return EXIT_INTERRUPTED
    if plan.unmeasured is not None and ended.exit_code == 0:
        error(plan.unmeasured)
        return EXIT_FAILED
    return ended.exit_code
