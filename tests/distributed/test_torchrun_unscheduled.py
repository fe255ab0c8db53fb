"""``@sbprof.profile`` without a schedule under real torchrun: one recording across calls, so the profiler's own
start and stop never land between the steps, where they would read as the user's data loading."""
import json
import statistics

import pytest

from sbprof.distributed.merge import find_run, merge_run
from torchrun_tools import SCRIPTS, rank_env, run, torchrun

pytestmark = pytest.mark.slow


def test_between_steps_agrees_with_an_outside_clock_of_the_gap_between_calls_within_1_ms(tmp_path):
    done = run(torchrun(["--standalone", "--nproc_per_node=2", "--max_restarts=0", str(SCRIPTS / "unscheduled.py"),
                         str(tmp_path)]), tmp_path, rank_env(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = merge_run(find_run(tmp_path / "ranks"))
    (s,) = summary.sections
    assert summary.complete and [r.steps for r in s.rows] == [20, 20]
    for row in s.rows:
        outside = statistics.median(json.loads((tmp_path / f"gaps{row.rank}.json").read_text()))
        assert row.between_s == pytest.approx(outside, abs=0.001), (row.rank, row.between_s, outside)
    assert s.between_s == pytest.approx(0.005, abs=0.002)  # the 5 ms sleep, not a profiler session per call
