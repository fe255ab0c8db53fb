"""A rank's merge at exit, in a fresh process of a one-rank world (``RANK``/``WORLD_SIZE`` set, no torchrun): a
section with no recorded step is reported as such, and a merge that fails sets the rank's exit code."""
import subprocess
import sys

from torchrun_tools import rank_env

SCRIPT = """
import sys, torch, sbprof
import sbprof.distributed.ranklog as ranklog
if sys.argv[1] == "fail":
    ranklog.run_merge = lambda folder, timeout_s=None: 2  # the merge says: bad input
@sbprof.profile_optimiser(wait=0, warmup=0, active=3)
def step():
    torch.ones(8).sum()
@sbprof.profile_optimiser  # default schedule: its 2 calls never reach the recorded steps 4-8
def short():
    torch.ones(8).sum()
for _ in range(3):
    step()
for _ in range(2):
    short()
"""


def launch(tmp_path, mode):
    env = rank_env(tmp_path, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", SBPROF_RUN_ID="one")
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)


def test_a_section_with_no_recorded_step_is_reported_as_such_and_the_rank_exits_0(tmp_path):
    done = launch(tmp_path, "ok")
    assert done.returncode == 0, done.stderr[-2000:]
    report = (tmp_path / "ranks" / "one" / "report.md").read_text()
    assert "## step" in report and "## short" in report
    assert "0 steps recorded (2 steps taken on each rank" in report and "Traceback" not in done.stderr


def test_a_failed_merge_at_exit_sets_the_ranks_exit_code(tmp_path):
    done = launch(tmp_path, "fail")
    assert done.returncode == 2, done.stderr[-2000:]


INTERLEAVED = """
import time, sbprof
@sbprof.profile(activities=())
def train():
    time.sleep(0.001)
@sbprof.profile(activities=())
def valid():
    time.sleep(0.001)
for _ in range(4):  # two training steps 20 ms apart, then a validation step 50 ms later, as fit() interleaves them
    train()
    time.sleep(0.02)
    train()
    time.sleep(0.05)
    valid()
"""


def test_time_between_steps_never_holds_another_targets_steps(tmp_path):
    from sbprof.distributed.merge import find_run, merge_run
    from sbprof.distributed.rankfile import rank_files, read_rank_file

    env = rank_env(tmp_path, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", SBPROF_RUN_ID="mixed")
    done = subprocess.run([sys.executable, "-c", INTERLEAVED], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    run_folder = find_run(tmp_path / "ranks")
    steps = read_rank_file(rank_files(run_folder)[0], steps=True).steps
    gaps = [line["gap_s"] for line in steps["train"]]
    # A training step that follows another training step: the 20 ms sleep (and the loop around it), never less;
    # one that follows a validation step has no time between steps of its own; nor has any validation step.
    assert [g is None for g in gaps] == [True, False] * 4
    assert all(g >= 0.02 for g in gaps if g is not None), gaps
    assert all(line["gap_s"] is None for line in steps["valid"])
    (train,) = [s for s in merge_run(run_folder).sections if s.key == "train"]
    assert train.between_s >= 0.02 and train.between_ranks == [0]
