"""``sbprof run`` on SpeechBrain's own integration examples, unedited, against the same examples run without it.

    python benchmarks/run_examples.py PATH_TO_SPEECHBRAIN_SOURCE [--only LM_RNN G2P] [--timeout 1200]

Each of the 16 folders of ``tests/integration/`` (and ``tests/samples``, which
they read as ``../../samples``) is copied to a temporary folder, and its example
script is run three ways, one after another, each a fresh process:

1. unprofiled, under a small outside launcher (written below, no sbprof code)
   that wraps every Brain's ``fit_batch`` and ``evaluate_batch`` with its own
   ``perf_counter`` and ``process_time`` and appends each call's times to a file;
   the process's total wall time and peak resident set come from ``wait4``;
2. ``sbprof run SCRIPT`` (the default, bounded run): its exit code, the stages it
   measured, and its train stage's median measured step;
3. ``sbprof run --continue SCRIPT``: its exit code, total wall time and peak
   resident set.

The table compares the train stage's median measured step (sbprof's figure)
with the outside clock's median over the same calls of ``fit_batch`` (the same
step indices) in the unprofiled run, in wall and CPU time, and the
``--continue`` run's total CPU time (user + system), total wall and peak RSS
with the unprofiled run's. With
``--rounds N`` the three runs are repeated (the arms' order rotating, each run
in a fresh copy of the example) and each ratio is the median over rounds, its
range beside it. A machine shared with other work stretches wall time, not a
process's CPU time: read the CPU ratio first.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
MAIN = {"ASR_CTC": "example_asr_ctc_experiment.py", "augmentation": "example_add_noise.py"}
"""The script run in folders that hold several (the others hold one ``example_*.py``)."""

LAUNCHER = '''"""Outside clock: times every Brain's fit_batch and evaluate_batch, then runs the example as __main__."""
import json, os, runpy, sys, time

import speechbrain.core as core

LOG = open(os.environ["OUTSIDE_CLOCK_FILE"], "a")
INIT = core.Brain.__init__


def timed(method, name):
    def call(*args, **kwargs):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return method(*args, **kwargs)
        finally:
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            stage = kwargs.get("stage", args[1] if len(args) > 1 else None)
            stage = "train" if name == "fit_batch" else str(getattr(stage, "name", "test")).lower()
            LOG.write(json.dumps([stage, wall, cpu]) + "\\n")
            LOG.flush()
    return call


def init(self, *args, **kwargs):
    INIT(self, *args, **kwargs)
    for name in ("fit_batch", "evaluate_batch"):
        setattr(self, name, timed(getattr(self, name), name))


core.Brain.__init__ = init
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
runpy.run_path(script, run_name="__main__")
'''


def script_of(folder: Path) -> Optional[Path]:
    name = MAIN.get(folder.name)
    if name is not None:
        return folder / name
    scripts = sorted(folder.glob("example*.py"))
    return scripts[0] if scripts else None


def launch(command: List[str], cwd: Path, timeout: float, extra_env: Dict[str, str]) -> Dict[str, Any]:
    """Run ``python COMMAND`` in ``cwd``: exit code, total wall time, peak RSS (``wait4``), the log's tail."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", **extra_env,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    log = cwd / f"log-{time.monotonic_ns()}.txt"
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, *command], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)  # the child's own resources, reaped here
        finally:
            timer.cancel()
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"code": proc.returncode, "wall_s": wall, "rss": usage.ru_maxrss * 1024,
            "cpu_s": usage.ru_utime + usage.ru_stime, "tail": log.read_text()[-1500:]}


def run_example(name: str, source: Path, work: Path, timeout: float, rounds: int) -> Dict[str, Any]:
    """The three runs of one example, ``rounds`` times (the order of the arms rotating), each in a fresh copy of
    it, so that no run finds another's outputs (see the module docstring)."""
    (work / "launcher.py").write_text(LAUNCHER)
    result: Dict[str, Any] = {"name": name, "rounds": []}
    arms = ["plain", "default", "continue"]
    for r in range(rounds):
        runs: Dict[str, Any] = {}
        for arm in arms[r % 3:] + arms[:r % 3]:
            folder = work / "tests" / "integration" / name
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(source / "tests" / "integration" / name, folder)
            script = script_of(folder)
            if script is None:
                return {"name": name, "error": "no example script", "rounds": []}
            result["script"] = script.name
            if arm == "plain":
                clock = folder / "outside_clock.jsonl"
                runs[arm] = launch([str(work / "launcher.py"), script.name], folder, timeout,
                                   {"OUTSIDE_CLOCK_FILE": str(clock)})
                runs["outside"] = ([json.loads(line) for line in clock.read_text().splitlines()]
                                   if clock.exists() else [])
                continue
            out = work / f"sbprof-{name}-{arm}-{r}"
            runs[arm] = launch(["-m", "sbprof", "run", *(["--continue"] if arm == "continue" else []),
                                "--output_folder", str(out), script.name], folder, timeout, {})
            results = out / "results.json"
            runs[arm]["records"] = json.loads(results.read_text())["records"] if results.exists() else []
        result["rounds"].append(runs)
    return result


def _median(values: List[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def _ratio(values: List[float]) -> str:
    """The median over rounds of a ratio, and its range when there are several."""
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def _step_ratios(runs: Dict[str, Any]) -> Optional[Tuple[float, float, float, float, int]]:
    """sbprof's train median measured step and the outside clock's over the same calls: (wall, CPU ratios, sbprof's
    wall, the outside wall, steps)."""
    train = next((r for r in runs["default"]["records"] if r["cell"]["variant"] == "train" and r.get("wall_s")), None)
    if train is None:
        return None
    indices = [i for i, role in enumerate(train["extra"].get("roles", [])) if role == "measured"]
    outside = [entry for entry in runs["outside"] if entry[0] == "train"]
    same = [outside[i] for i in indices if i < len(outside)]
    if not same:
        return None
    wall, outside_wall = _median(train["wall_s"]), _median([s[1] for s in same])
    return wall / outside_wall, _median(train["cpu_s"]) / _median([s[2] for s in same]), wall, outside_wall, len(same)


def row(result: Dict[str, Any]) -> List[str]:
    """One line of the table: ratios as the median over rounds (their range)."""
    rounds = result["rounds"]
    if not rounds:
        return [f"`{result['name']}`", "n/a", "n/a", "n/a", result.get("error", "not run")]
    last = rounds[-1]
    stages = [r["cell"]["variant"] for r in last["default"]["records"] if r.get("wall_s")]
    steps = [s for s in (_step_ratios(runs) for runs in rounds) if s is not None]
    if steps:
        step = (f"CPU {_ratio([s[1] for s in steps])}, wall {_ratio([s[0] for s in steps])} "
                f"({1e3 * _median([s[2] for s in steps]):.1f} ms vs {1e3 * _median([s[3] for s in steps]):.1f} ms, "
                f"{steps[0][4]} steps)")
    else:
        step = "n/a (no training step)" if not any(e[0] == "train" for e in last["outside"]) else "n/a"
    if any(runs["plain"]["code"] != 0 for runs in rounds):
        cont = "n/a (fails unprofiled)"
    else:
        walls = [runs["continue"]["wall_s"] / runs["plain"]["wall_s"] for runs in rounds]
        cpus = [runs["continue"]["cpu_s"] / runs["plain"]["cpu_s"] for runs in rounds if "cpu_s" in runs["plain"]]
        rss = [runs["continue"]["rss"] / runs["plain"]["rss"] for runs in rounds]
        cont = (f"CPU {_ratio(cpus)}, wall {_ratio(walls)}, RSS {_ratio(rss)} "
                f"({_median([r['plain']['wall_s'] for r in rounds]):.0f} s, "
                f"{_median([r['plain']['rss'] for r in rounds]) / 2**20:.0f} MiB unprofiled)")
    codes = " ; ".join(sorted({f"{r['plain']['code']} / {r['default']['code']} / {r['continue']['code']}"
                               for r in rounds}))
    return [f"`{result['name']}`", ", ".join(stages) or "none", step, cont, codes]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", type=Path, help="SpeechBrain's source tree (holding tests/integration, tests/samples)")
    p.add_argument("--only", nargs="*", help="these examples only")
    p.add_argument("--timeout", type=float, default=1200, help="seconds per run")
    p.add_argument("--json", type=Path, help="also write every run's figures here")
    p.add_argument("--rounds", type=int, default=1, help="runs of each arm per example (the ratios' median)")
    args = p.parse_args()
    names = sorted(d.name for d in (args.source / "tests" / "integration").iterdir() if d.is_dir())
    names = [n for n in names if not args.only or n in args.only]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(args.source / "tests" / "samples", work / "tests" / "samples")
        for name in names:
            result = run_example(name, args.source, work, args.timeout, args.rounds)
            results.append(result)
            # Each example's row as it ends, and the JSON rewritten: a run stopped midway keeps what it measured.
            print("| " + " | ".join(row(result)) + " |", file=sys.stderr, flush=True)
            if args.json:
                args.json.write_text(json.dumps(results, indent=1))
    print("| example | measured stages (default run) | train step median, sbprof vs unprofiled outside clock "
          "(ratios, same steps) | `--continue` vs unprofiled: total CPU, wall, peak RSS (ratios) | exit codes "
          "(unprofiled / default / `--continue`) |")
    print("|---|---|---|---|---|")
    for result in results:
        print("| " + " | ".join(row(result)) + " |")


if __name__ == "__main__":
    main()
