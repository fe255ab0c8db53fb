"""sbprof run's CPU figures: CPU time per step against a known spin, CPU cost as a replay of the raw records."""
from __future__ import annotations

import json

import pytest

from run_helpers import brain_args, measured, sbprof_run
from sbprof.analysis.run import analyse
from sbprof.results.store import load_results

pytestmark = pytest.mark.slow
SPIN_S = 0.04


def test_cpu_time_per_step_holds_a_known_spin_and_the_cpu_cost_replays_the_records(tmp_path):
    out = tmp_path / "run"
    done = sbprof_run(["--output_folder", str(out), *brain_args(tmp_path / "recipe", "--spin_ms", str(SPIN_S * 1e3))],
                      cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    stage = next(s for s in analyse(load_results(out / "results.json")).stages if s.stage == "train")
    # The Brain's forward spins 40 ms of process CPU time each step: a step's CPU time can never read less, and
    # the tiny model around it adds only a few ms (other processes stretch wall time, not this CPU time).
    assert SPIN_S <= stage.cpu_step.min and stage.cpu_step.median < SPIN_S + 0.02, stage.cpu_step
    record = next(r for r in json.loads((out / "results.json").read_text())["records"]
                  if r["cell"]["variant"] == "train")
    audio = measured(record, "audio_s")
    assert stage.cpu_cost == pytest.approx(sum(record["cpu_s"]) / sum(audio), rel=1e-12)  # a replay
    report = (out / "report.md").read_text()
    assert "| CPU cost (core-seconds per audio second)" in report and "**CPU time, CPU cost**" in report
