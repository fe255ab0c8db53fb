"""``sbprof run --try suggested``: the variants the base run's own "What limits this" verdicts suggest.

The base run is a normal bounded ``sbprof run`` of the script (its trace on, no
knob set), in ``base_run/`` of the comparison's folder; its verdicts
(:func:`~sbprof.analysis.run.run_limits`) are read back and each verdict
whose advice is a knob becomes variants, one knob at a time against the base
(the script as it is):

- **data loading** (the data wait's share of the loop past its threshold): more DataLoader workers,
  ``num_workers`` 2 and 4, capped at the machine's cores;
- **dispatch-bound** (many operators, each near the dispatch floor): ``compile`` true.

Every other verdict a ``sbprof run`` computes advises nothing a knob can set
(a bigger batch is the script's own option, whose name sbprof cannot know),
and one whose figures could not decide suggests nothing.

Example
-------
>>> from sbprof.analysis.limits import Limits, data_loading
>>> verdict = data_loading(wait_s=0.05, step_s=0.02)
>>> [(v.name, why.split(":")[0]) for v, why in suggest(Limits([verdict]), cores=2)]
[('num_workers 2', 'data loading')]
>>> suggest(Limits([]), cores=2)
[]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from sbprof.analysis.limits import Limits, Verdict
from sbprof.script.vary import Variant, variant_of

BASE_RUN = "base_run"
"""The base run's folder, inside the comparison's."""
WORKERS = (2, 4)
"""The DataLoader workers the data-loading verdict suggests (capped at the cores)."""


def _workers(cores: int) -> List[Tuple[str, Any]]:
    return [("num_workers", n) for n in sorted({min(n, max(cores, 1)) for n in WORKERS})]


SUGGESTIONS: Dict[str, Callable[[int], List[Tuple[str, Any]]]] = {
    "data loading": _workers,
    "dispatch-bound": lambda cores: [("compile", True)],
}
"""Each verdict's rule -> the (knob, value) pairs it suggests, given the machine's cores."""


def suggest(limits: Limits, cores: Optional[int] = None) -> List[Tuple[Variant, str]]:
    """The variants the verdicts of ``limits`` suggest (see the module docstring), each with the verdict that
    suggested it (``"RULE: SENTENCE"``); the first verdict to suggest a variant names it."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    out: Dict[str, Tuple[Variant, str]] = {}
    for verdict in limits.verdicts:
        for knob, value in SUGGESTIONS.get(verdict.rule, lambda _: [])(cores):
            variant = variant_of([(knob, value)])
            out.setdefault(variant.name, (variant, _why(verdict)))
    return list(out.values())


def _why(verdict: Verdict) -> str:
    return f"{verdict.rule}: {verdict.sentence}"


def base_run_command(script_argv: List[str], warmup: int, measured: int, folder: Path) -> List[str]:
    """The base run's process: ``sbprof run`` with the comparison's steps, into ``folder``."""
    return [sys.executable, "-m", "sbprof", "run", "--warmup", str(warmup), "--measured", str(measured),
            "--output_folder", str(folder), *script_argv]


def base_run(script_argv: List[str], warmup: int, measured: int, folder: Path,
             log: Callable[[str], None]) -> Tuple[Optional[Path], str]:
    """Run the base (or find it run before: resume) in ``folder``; ``(its results.json, "")`` or ``(None,
    why it failed)``."""
    results = folder / "results.json"
    asked = folder.parent / f"{BASE_RUN}.command.json"  # what the stored base ran: reused only for the same command
    command = base_run_command(script_argv, warmup, measured, folder)[1:]  # not the Python, which may move
    if results.is_file() and json.loads(results.read_text()).get("records"):
        if asked.is_file() and json.loads(asked.read_text()) == command:
            log(f"the base run is in {folder} (run before)")
            return results, ""
        log(f"the base run in {folder} was of another command (its script arguments or steps): run again")
    import shutil

    from sbprof.script.vary_plan import failure_reason

    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    log(f"the base run: sbprof run of the script as it is, into {folder}")
    proc = subprocess.run(base_run_command(script_argv, warmup, measured, folder), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, errors="replace")
    (folder.parent / f"{BASE_RUN}.stderr.txt").write_text(proc.stderr)
    if proc.returncode != 0 or not results.is_file():
        shutil.rmtree(folder, ignore_errors=True)  # not kept as a finished base run: the same command retries it
        return None, failure_reason(proc.returncode, proc.stderr)
    asked.write_text(json.dumps(command))
    return results, ""
