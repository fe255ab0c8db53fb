"""``torchrun --nproc_per_node=2 -m sbprof run --ddp gloo`` on a Brain that never calls ddp_init_group (issue 38's
ground truth), with one busy process beside the two ranks (issue 44: a known straggler at load up to one busy
process per core).

The script (scripts/unedited_brain.py) does fit() then evaluate(), registers its own DDP communication hook (its
clock of each training batch's all-reduce) and burns a known 40 ms of CPU time in each of rank 1's training batches.
One launch serves every assertion.
"""
import json
import subprocess
import sys

import pytest

from sbprof.analysis.limits import THRESHOLDS
from sbprof.analysis.rank_limits import section_limits
from sbprof.distributed.merge import find_run, merge_run
from sbprof.distributed.rankfile import rank_files, read_rank_file
from torchrun_tools import SCRIPTS, rank_env, run, torchrun

pytestmark = pytest.mark.slow
SPIN_CPU_S = 0.04
STAGES = ("train", "valid", "test")


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ddp")
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        done = run(torchrun(["--standalone", "--nproc_per_node=2", "--max_restarts=0", "-m", "sbprof", "run", "--ddp",
                             "gloo", "--output_folder", str(folder / "out"), str(SCRIPTS / "unedited_brain.py"),
                             str(folder)]),
                   folder, rank_env(folder, TEST_SPIN_CPU_S=str(SPIN_CPU_S)), timeout=240)
    finally:
        busy.kill()
        busy.wait()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_folder = find_run(folder / "out" / "ranks")
    outside = {r: json.loads((folder / f"outside{r}.json").read_text()) for r in (0, 1)}
    return folder, run_folder, merge_run(run_folder), outside


def section(summary, stage):
    return next(s for s in summary.sections if s.key == f"unedited_brain.py/{stage}")


def test_every_stage_of_both_ranks_is_in_the_merged_report(launched):
    _, run_folder, summary, _ = launched
    assert summary.complete and summary.backend == "gloo" and (run_folder / "report.md").is_file()
    for stage in STAGES:
        assert [(r.rank, r.steps) for r in section(summary, stage).rows] == [(0, 5), (1, 5)]


def test_communication_agrees_with_the_scripts_comm_hook_clock(launched):
    _, run_folder, _, outside = launched
    for path in rank_files(run_folder):
        rank = read_rank_file(path)
        extra = rank.records["unedited_brain.py/train"]["extra"]["rank"]
        ours, theirs = extra["comm_s"], [outside[rank.rank]["train_comm"][i] for i in extra["steps"]]
        # sbprof wraps the script's hook: its span encloses the script's, by the few microseconds of its wrapper
        # (and whatever a preemption between the two clocks adds on a loaded machine).
        assert all(a >= b - 1e-4 for a, b in zip(ours, theirs)), (ours, theirs)
        assert sum(ours) == pytest.approx(sum(theirs), rel=0.10, abs=0.001 * len(ours)), (rank.rank, ours, theirs)
    rank0 = next(r for r in section(launched[2], "train").rows if r.rank == 0)
    assert rank0.wait_s > SPIN_CPU_S * 0.8  # rank 0 waits for rank 1's spin in its all-reduce


def test_throughput_cpu_cost_and_data_wait_come_from_the_ranks_own_steps(launched):
    folder, run_folder, summary, _ = launched
    train = section(summary, "train")
    assert train.throughput is not None and train.throughput.steps == 5  # 4 utterances of 0.5 s a batch
    assert train.throughput.audio_s_per_s == pytest.approx(train.throughput.utterances_per_s * 0.5)
    for r in train.rows:
        own = json.loads((folder / "out" / f"rank{r.rank}" / "results.json").read_text())
        stage = next(m for m in own["records"] if m["cell"]["variant"] == "train")
        warmup = stage["warmup"]
        assert r.cpu.median == pytest.approx(sorted(stage["cpu_s"])[2])  # the rank's own measured steps
        assert r.cpu_cost == pytest.approx(sum(stage["cpu_s"]) / (2.0 * 5))
        waits = stage["extra"]["data_wait_s"][warmup:warmup + 5]
        assert r.data_wait_s == pytest.approx(sorted(waits)[2])
        assert r.data_wait_share < THRESHOLDS["data loading"].value  # an in-memory dataset: a small wait


def test_no_data_loading_verdict_where_every_ranks_data_wait_is_under_the_threshold(launched):
    _, _, summary, _ = launched
    train = section(summary, "train")
    assert not [v for v in summary.limits.verdicts if v.rule == "data loading" and "/train`" in v.sentence]
    # Also where the machine is quiet: the rule reads the data wait, not the time between steps.
    import dataclasses

    quiet = dataclasses.replace(train, crowding=None)
    assert "data loading" not in [v.rule for v in section_limits([quiet]).verdicts]


def test_time_between_steps_never_holds_another_stages_steps(launched):
    _, run_folder, _, _ = launched
    for path in rank_files(run_folder):
        steps = read_rank_file(path, steps=True).steps
        for stage in STAGES:  # the first step of each stage follows another stage's steps (or none)
            lines = steps[f"unedited_brain.py/{stage}"]
            assert lines[0]["gap_s"] is None and all(line["gap_s"] is not None for line in lines[1:])


def test_the_rank_that_burns_40_ms_of_cpu_is_named_with_that_cost(launched):
    _, run_folder, summary, _ = launched
    train = section(summary, "train")
    (verdict,) = [v for v in summary.limits.verdicts if v.rule == "straggler"]
    assert verdict.sentence.startswith("`unedited_brain.py/train`: Rank 1 ")
    assert verdict.figures[0].value == pytest.approx(SPIN_CPU_S, rel=0.15), (verdict.sentence, train.crowding)
    assert train.crowding.crowded  # two ranks and a busy process on the CI's two cores, or beside more load here
    assert "CPU time" in verdict.sentence and train.crowding.describe() in verdict.sentence
