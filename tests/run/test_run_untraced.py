"""sbprof run's measured steps are the script's own steps: no profiler and no per-module hooks run in them.

Ground truth: the same script run without sbprof, in fresh processes, timed by its own clocks (perf_counter and
process_time around each step, written by the script). The recipe is the worst case for a trace: a step of 3,000
tiny operators, each of which the profiler records (its traced steps cost about twice the CPU time).
"""
from __future__ import annotations

import json
import statistics

import pytest

from run_helpers import TINY, plain_run, records, sbprof_run

pytestmark = pytest.mark.slow
ARGS = ["--ops", "3000", "--steps", "12"]  # 12 steps: the whole default plan of a stage, nothing stopped
PAIRS = 4


def _own_cpu(path, steps):
    times = json.loads(path.read_text())
    return statistics.median(times[i][1] for i in steps)


def test_measured_steps_cost_what_the_same_steps_cost_unprofiled(tmp_path):
    # Paired fresh processes, the order alternating (drift of the machine hits both arms alike); process CPU time,
    # which other work on a busy machine does not stretch; per pair the ratio of the medians over the measured
    # steps, then the median over pairs (one process may differ from another by a few per cent).
    by_sbprof, by_script, traced = [], [], []
    for pair in range(PAIRS):
        folder = tmp_path / f"pair{pair}"
        folder.mkdir()
        plain, profiled = folder / "plain.json", folder / "profiled.json"
        arms = [lambda: plain_run([str(TINY), *ARGS, "--times", str(plain)], cwd=folder),
                lambda: sbprof_run(["--output_folder", str(folder / "out"), str(TINY), *ARGS, "--times",
                                    str(profiled)], cwd=folder)]
        for arm in arms if pair % 2 == 0 else arms[::-1]:
            done = arm()
            assert done.returncode == 0, done.stderr[-2000:]
        train = records(folder / "out")["train"]
        roles = train["extra"]["roles"]
        steps = [i for i, role in enumerate(roles) if role == "measured"]
        assert len(steps) == 5 and steps == list(range(2, 7))
        unprofiled = _own_cpu(plain, steps)
        by_sbprof.append(statistics.median(train["cpu_s"]) / unprofiled)  # the figure sbprof reports
        by_script.append(_own_cpu(profiled, steps) / unprofiled)  # what the script's steps cost under sbprof
        traced.append(train["extra"]["trace"]["events"])
        # The profiler's console lines stay out of the user's terminal.
        assert "gpuGetDeviceCount" not in done.stderr and "USDT:" not in done.stderr
    # Fresh processes of the same script differ by up to 17 % in one pair here (0.93-1.17, unprofiled against
    # unprofiled with sbprof's modules imported: 0.93-1.00), so the median of 4 pairs is bounded at 10 %, far below
    # a traced step's 1.4-1.6x; the 5 % bar itself is benchmarks/run_overhead.py's, over as many rounds as it takes.
    assert statistics.median(by_script) == pytest.approx(1.0, abs=0.10), by_script
    assert statistics.median(by_sbprof) == pytest.approx(1.0, abs=0.10), by_sbprof
    # The same steps traced (two per stage, after the measured ones) cost far more: the figures could not come
    # from them. The report says so beside the trace.
    report = (tmp_path / "pair0" / "out" / "report.md").read_text()
    cost = records(tmp_path / "pair0" / "out")["train"]
    wall = cost["extra"]["all_wall_s"]
    cpu = cost["extra"]["all_cpu_s"]
    roles = cost["extra"]["roles"]
    traced_cpu = statistics.median(c for c, r in zip(cpu, roles) if r == "traced")
    assert traced_cpu > 1.3 * statistics.median(cost["cpu_s"]) and min(traced) > 3000
    assert "a step traced whole took" in report and len(wall) == 12
