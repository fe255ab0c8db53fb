"""sbprof run's trace is bounded: a closure optimiser (LBFGS: 20 closures a step, each running a bare nn.Linear 100
times, about 15,000 operators and 70,000 trace events a step) is traced up to the cap and cut there, and the whole
run stays within 1.25x the script's own peak memory.

Ground truths outside sbprof: the kernel's peak resident set of each process (``wait4``), the script run without
sbprof; the regions of a step, each its own time, cannot sum to more than the step.
"""
from __future__ import annotations

import json

import pytest

from run_helpers import LBFGS, TINY, peak_rss_run, records, sbprof_run
from sbprof.analysis.run import analyse
from sbprof.results.store import load_results

pytestmark = pytest.mark.slow


def test_a_closure_optimiser_is_traced_up_to_the_cap_and_the_run_stays_within_its_memory_bound(tmp_path):
    plain, plain_rss = peak_rss_run([str(LBFGS)], cwd=tmp_path)
    assert plain.returncode == 0 and "trained 12 steps" in plain.stdout, plain.stderr[-2000:]
    done, rss = peak_rss_run(["-m", "sbprof", "run", "--output_folder", str(tmp_path / "out"), str(LBFGS)],
                             cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert rss <= 1.25 * plain_rss, (rss / 2**20, plain_rss / 2**20)
    train = records(tmp_path / "out")["train"]
    trace = train["extra"]["trace"]
    # Cut inside its first traced step (the 11th): collection stopped before the cap; the exact count, read back,
    # is under it, and the file holds those events.
    assert train["extra"]["roles"][10:] == ["traced_cut", "spare"]
    assert trace["cut_in_step"] == 10 and 0 < trace["events"] <= trace["cap"]
    (path,) = trace["files"]
    events = json.loads(open(path).read())["traceEvents"]
    assert len([e for e in events if e.get("ph") == "X"]) <= trace["cap"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "cut inside step 11 at the cap" in report and "sbprof: stopping the trace" in done.stderr
    # LBFGS runs the forward and backward inside Optimizer.step: each counts once, for its own region.
    extra = train["extra"]
    for i, role in enumerate(extra["roles"]):
        if role == "measured":
            regions = extra["forward_s"][i] + extra["backward_s"][i] + extra["optimizer_s"][i]
            assert regions <= extra["all_wall_s"][i] + 1e-9
            assert extra["forward_s"][i] > 0 and extra["backward_s"][i] > 0 and extra["optimizer_s"][i] > 0
    (stage,) = analyse(load_results(tmp_path / "out" / "results.json")).stages
    assert stage.forward_share + stage.backward_share + stage.optimizer_share <= 1.0
    # The model is one bare nn.Linear: it is its own row in the per-module table.
    assert "Linear" in [r["label"] for r in train["extra"]["modules"]["rows"]]


def test_a_script_with_a_profiler_of_its_own_is_measured_and_its_profiler_left_alone(tmp_path):
    done = sbprof_run(["--output_folder", str(tmp_path / "out"), str(TINY), "--ops", "50", "--steps", "12",
                       "--own_profiler"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "trained 12 steps" in done.stdout and "own profiler events:" in done.stdout
    train = records(tmp_path / "out")["train"]
    assert len(train["wall_s"]) == 5 and train["extra"]["roles"][-2:] == ["spare", "spare"]
    assert "the script runs a torch profiler of its own" in (tmp_path / "out" / "report.md").read_text()
