"""sbprof run's "What limits this" on workloads built to have a limit, and on the same workloads without it.

Ground truths outside the code under test: a Dataset item that sleeps 30 ms (a sleep never ends early) and a
forward that runs a known number of tiny operators (10,000 ``x + 1``), against one large matrix product.
"""
from __future__ import annotations

import json

import pytest

from run_helpers import LOOP, TINY, sbprof_run
from sbprof.analysis.run import analyse
from sbprof.record.codec import to_json
from sbprof.results.store import load_results

pytestmark = pytest.mark.slow


def _run(tmp_path, *args):
    tmp_path.mkdir(exist_ok=True)
    out = tmp_path / "out"
    done = sbprof_run(["--output_folder", str(out), *map(str, args)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = analyse(load_results(out / "results.json"))
    # results.json keeps the verdicts the report shows (its summary block), for --render-only and readers
    assert json.loads((out / "results.json").read_text())["summary"]["limits"] == to_json(report.limits)
    return report, {v.rule: v for v in report.limits.verdicts}, (out / "report.md").read_text()


def test_a_sleeping_dataset_fires_data_loading_and_the_same_without_sleep_does_not(tmp_path):
    report, verdicts, text = _run(tmp_path / "sleep", LOOP, "--steps", "12", "--sleep_ms", "30")
    figures = {f.name: f.value for f in verdicts["data loading"].figures}
    # One item per batch, fetched in this process: each step waits its item's 30 ms sleep, plus DataLoader
    # bookkeeping (and, on a shared machine, a little preemption).
    assert 0.030 <= figures["data wait"] < 0.045
    loop = figures["data wait"] + figures["between"] + figures["step"]
    assert figures["wait share"] == pytest.approx(figures["data wait"] / loop)
    assert text.rstrip().endswith("its figures come from the tables above.")
    assert "1. **data loading.** Stage `train`: Waiting for data takes" in text.split("## What limits this")[1]
    assert "| operators per step; CPU per operator (dispatch floor) |" in text
    # Without the sleep, DataLoader's own work (a fraction of a ms) beside a step that spins 60 ms.
    report, verdicts, _ = _run(tmp_path / "awake", LOOP, "--steps", "12", "--spin_ms", "60")
    assert report.stages[0].data_wait_s < 0.030
    assert "data loading" not in verdicts


def test_many_tiny_operators_fire_dispatch_bound_and_one_matmul_does_not(tmp_path):
    report, verdicts, _ = _run(tmp_path / "tiny", TINY, "--ops", "10000")
    stage = report.stages[0]
    # The forward's 10,000 additions, each dispatched once, and a few more (the sum, backward's and the
    # optimiser's), counted in the FLOP step.
    assert 10000 <= stage.operators_per_step < 10100
    assert "dispatch-bound" in verdicts, (stage.cpu_per_operator_s, stage.dispatch_floor_s)
    report, verdicts, _ = _run(tmp_path / "matmul", TINY, "--matmul", "384")
    assert report.stages[0].operators_per_step < 100
    assert "dispatch-bound" not in verdicts


def test_without_the_flop_step_the_dispatch_rule_says_why_it_cannot_decide(tmp_path):
    # No warm-up step: the FLOP step would be the 6th, after the memory and per-module steps; the script has 2.
    report, verdicts, text = _run(tmp_path, "--warmup", "0", "--measured", "2", TINY, "--ops", "2000", "--steps", "2")
    assert "dispatch-bound" not in verdicts
    assert ("Not decided: dispatch-bound (train): no operator count (the stage ended after 2 of its 8 planned "
            "steps, before step 6, which takes FLOPs and operators per step)") in text
