"""The merged report's "What limits this": a real straggler under torchrun, and the rules on built sections.

Ground truth: a known busy-spin of 30 ms in each training batch of rank 1 (tests/distributed/scripts/
brain_fit_evaluate.py), against the same run's evaluation batches, where no rank spins and no collective runs
(one torchrun launch only; a balanced training run would be a second one).
"""
import pytest

from sbprof.analysis.distributed import section_limits
from sbprof.analysis.rank_sections import SectionSummary, StragglerCost
from sbprof.distributed.merge import find_run, merge_run
from torchrun_tools import SCRIPTS, rank_env, run, torchrun

SPIN_S = 0.03


def _by_section(limits):
    """Verdicts by (section key, rule): each sentence of a run with several sections starts with its key."""
    return {(v.sentence.split("`")[1], v.rule): v for v in limits.verdicts}


@pytest.mark.slow
def test_a_spinning_rank_is_named_with_its_cost_and_balanced_steps_have_no_straggler(tmp_path):
    done = run(torchrun(["--standalone", "--nproc_per_node=2", "--max_restarts=0",
                         str(SCRIPTS / "brain_fit_evaluate.py"), str(tmp_path)]),
               tmp_path, rank_env(tmp_path, SBPROF_MERGE_TIMEOUT_S="30", TEST_SPIN_S=str(SPIN_S),
                                  TEST_SPIN_RANK="1"), timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_folder = find_run(tmp_path / "ranks")
    summary = merge_run(run_folder)
    verdicts = _by_section(summary.limits)
    spun = verdicts[("TinyBrain/train", "straggler")]
    assert "Rank 1 is slowest" in spun.sentence
    cost = next(f.value for f in spun.figures if f.name == "straggler cost")
    # The spin is busy time rank 0 does not have: the cost is the spin, give or take the load noise of a 2-core
    # machine (a few ms).
    assert cost == pytest.approx(SPIN_S, abs=0.006)
    # Evaluation holds no collective: whichever rank is slower there, no rank waits for it step by step.
    assert ("TinyBrain/test", "straggler") not in verdicts, summary.limits
    assert "straggler (TinyBrain/test): its steps hold no communication" in summary.limits.undecided[0]
    # Rank 0's 30 ms in the all-reduce is waiting for rank 1 (the straggler's cost), not communication: what the
    # communication rule weighs is each rank's time in it less that wait (gloo's own few ms on a loaded machine).
    train = next(s for s in summary.sections if s.key == "TinyBrain/train")
    rank0 = next(r for r in train.rows if r.rank == 0)
    assert rank0.comm_s > SPIN_S * 0.8
    comm = verdicts.get(("TinyBrain/train", "communication"))
    assert comm is None or comm.figures[0].value < SPIN_S / 2, comm
    # The report rank 0 wrote at exit ends with the verdicts.
    report = (run_folder / "report.md").read_text()
    assert report.index("## What limits this") > report.index("## Definitions")
    assert "**straggler.** `TinyBrain/train`: Rank 1 is slowest" in report


def _section(rows=(), **figures):
    return SectionSummary("s", 2, list(rows), [], [], None, None, None, None, None, None, None, None, None, **figures)


def busy_comm_figures(s):
    v = section_limits([s]).verdicts[0]
    return {f.name: pytest.approx(f.value) for f in v.figures}


def _row(rank, comm_s, wait_s):
    from sbprof.analysis.rank_rows import RankRow

    return RankRow(rank, "h", 0, rank, 5, None, None, comm_s, None, wait_s, None, None, None, None, "", "done", None)


def test_communication_and_time_between_steps_fire_over_their_thresholds_only():
    # Each rank's communication less its wait for the other: 30 ms and 30 ms (rank 0 waited 50 ms of its 80).
    rows = [_row(0, 0.08, 0.05), _row(1, 0.03, 0.0)]
    busy = _section(rows=rows, comm_step_s=0.1, between_s=0.02, between_step_s=0.1)
    assert [v.rule for v in section_limits([busy]).verdicts] == ["communication", "data loading"]
    between = section_limits([busy]).verdicts[1]
    assert between.sentence.startswith("The time between steps") and between.figures[0].name == "between steps"
    assert busy_comm_figures(busy) == {"communication less wait": 0.03, "step": 0.1}
    calm = _section(rows=[_row(0, 0.069, 0.05), _row(1, 0.019, 0.0)], comm_step_s=0.1, between_s=0.011,
                    between_step_s=0.1)
    assert section_limits([calm]).verdicts == []


def test_a_section_with_ranks_but_no_common_step_cannot_decide_the_straggler():
    row = _row(1, None, None)
    s = SectionSummary("s", 2, [row], [row], [], row, None, None, None, None, None, None, None, None)
    assert section_limits([s]).undecided == ["straggler (s): no step that every rank reported"]
    s = SectionSummary("s", 2, [row], [row], [], row, None, None, None, None, None, None, None, None,
                       straggler_cost=StragglerCost(0.004, 5), step_s=0.1)
    assert section_limits([s]).verdicts == []  # 4 % of the step: under the threshold
    s = SectionSummary("s", 2, [row], [row], [], row, None, None, None, None, None, None, None, None,
                       straggler_cost=StragglerCost(0.006, 5), step_s=0.1)
    assert [v.rule for v in section_limits([s]).verdicts] == ["straggler"]  # 6 %: over it
