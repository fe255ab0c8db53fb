"""The loop's whole time in a plain PyTorch loop: data wait, the time between ``__next__`` and the step, the step.

Ground truth: items that sleep 20 ms (data wait), a 20 ms pause between ``__next__`` and the model call (the
preprocessing, moving and logging a loop does outside its step) and a model that sleeps 20 ms in its forward (the
step): a third of the loop each. Sleeps, so that other work on the machine cannot stretch one part more than
another.
"""
from __future__ import annotations

import pytest

from run_helpers import LOOP, records, sbprof_run
from sbprof.analysis.run import analyse
from sbprof.results.store import load_results

pytestmark = pytest.mark.slow


def test_data_wait_time_between_and_step_each_read_a_third_of_the_loop(tmp_path):
    out = tmp_path / "out"
    done = sbprof_run(["--output_folder", str(out), str(LOOP), "--steps", "12", "--sleep_ms", "20", "--between_ms",
                       "20", "--nap_ms", "20"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    report = analyse(load_results(out / "results.json"))
    loop = report.stages[0].loop
    for share in (loop.wait_share, loop.between_share, loop.step_share):
        assert share == pytest.approx(1 / 3, rel=0.15), loop
    assert loop.between_known and 0.020 <= loop.between_s and 0.020 <= loop.wait_s and 0.020 <= loop.step_s
    # The data-loading verdict reads the wait's share of the loop (a third), not of wait + step (a half).
    (verdict,) = [v for v in report.limits.verdicts if v.rule == "data loading"]
    figures = {f.name: f.value for f in verdict.figures}
    assert figures["wait share"] == pytest.approx(1 / 3, rel=0.15)
    assert "of the loop" in verdict.sentence
    assert len(records(out)["train"]["wall_s"]) == 5
