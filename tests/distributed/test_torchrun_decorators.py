"""The decorators under real torchrun (gloo, one thread per rank), against the scripts' own clocks and sleeps.

One launch of two node groups on localhost serves every assertion of the straggler run; one more launch
kills a rank with SIGKILL mid-run (and torchrun then stops the other with SIGTERM).
"""
import json
import re

import pytest

from sbprof.cli.tools import main as cli
from sbprof.distributed.merge import find_run, merge_run
from sbprof.distributed.rankfile import rank_files, read_rank_file
from torchrun_tools import SCRIPTS, rank_env, run, torchrun, two_node_groups

pytestmark = pytest.mark.slow
SLEEP_S = 0.1
STEPS = 10


@pytest.fixture(scope="module")
def straggler(tmp_path_factory):
    folder = tmp_path_factory.mktemp("straggler")
    codes = two_node_groups([str(SCRIPTS / "straggler.py"), str(folder)], folder,
                            rank_env(folder, TEST_SLEEP_S=str(SLEEP_S), TEST_STEPS=str(STEPS)))
    assert codes == [0, 0], (folder / "node0.log").read_text()[-3000:] + (folder / "node1.log").read_text()[-3000:]
    run_folder = find_run(folder / "ranks")
    outside = {r: json.loads((folder / f"outside{r}.json").read_text())["outside_s"] for r in (0, 1)}
    return folder, run_folder, merge_run(run_folder), outside


def section(summary, key):
    return next(s for s in summary.sections if s.key == key)


def test_both_ranks_of_both_node_groups_are_in_the_merged_report(straggler):
    _, run_folder, summary, _ = straggler
    assert summary.complete and summary.world_size == 2 and summary.backend == "gloo"
    steps = section(summary, "train_step")
    assert [r.rank for r in steps.rows] == [0, 1]
    assert [(h.node_rank, h.ranks) for h in steps.hosts] == [(0, [0]), (1, [1])]
    assert {s.key for s in summary.sections} == {"train_step", "evaluate", "inspect"}  # all three decorators


def test_each_rank_record_carries_its_place_in_the_world(straggler):
    _, run_folder, _, _ = straggler
    for path in rank_files(run_folder):
        rank = read_rank_file(path)
        world = rank.records["train_step"]["settings"]["distributed"]
        assert world["rank"] == rank.rank == world["node_rank"] and world["local_rank"] == 0
        assert world["world_size"] == 2 and world["backend"] == "gloo" and world["host"]
        assert rank.end["reason"] == "exit"


def test_communication_agrees_with_an_outside_clock_around_each_all_reduce(straggler):
    _, run_folder, _, outside = straggler
    for path in rank_files(run_folder):
        rank = read_rank_file(path)
        extra = rank.records["train_step"]["extra"]["rank"]
        assert len(extra["steps"]) == STEPS - 2  # wait 1, warm-up 1
        clock = sum(outside[rank.rank][i] for i in extra["steps"])
        comm = sum(extra["comm_s"])
        # 10 %, and at least 1.5 ms a step: the outside clock also holds the Python around each call (argument
        # checks, the work handle), which no event covers; it was 1 ms a step on the rank that waits little, with a
        # second test process beside it, where its all-reduces took 8.7 ms.
        slack = 0.0015 * len(extra["steps"])
        assert comm > 0 and comm == pytest.approx(clock, rel=0.10, abs=slack), (rank.rank, comm, clock)


def test_the_slowed_rank_is_the_straggler_and_the_other_waits_for_it(straggler):
    _, _, summary, _ = straggler
    steps = section(summary, "train_step")
    assert steps.slowest.rank == 1
    assert steps.excess_s == pytest.approx(SLEEP_S, rel=0.10)
    fast = next(r for r in steps.rows if r.rank == 0)
    assert steps.most_waiting is fast and fast.wait_s == pytest.approx(SLEEP_S, rel=0.10)
    assert steps.imbalance == pytest.approx(1 + SLEEP_S / steps.median_busy_s, rel=0.02)


def test_rank_0_merged_at_the_end_and_a_later_merge_gives_the_same_report(straggler, capsys):
    _, run_folder, _, _ = straggler
    at_the_end = (run_folder / "report.md").read_text()
    assert cli([str(run_folder)], prog="sbprof merge") == 0
    assert (run_folder / "report.md").read_text() == at_the_end
    assert "rank 1" in at_the_end and "**Complete**" in at_the_end


def test_traces_are_per_rank_named_by_rank_in_the_run_folder(straggler):
    _, run_folder, _, _ = straggler
    names = sorted(p.name.split(".")[0] for p in (run_folder / "traces").glob("*.pt.trace.json"))
    # One recording across the unscheduled evaluate() calls under torchrun, ended when inspect() starts recording
    # (torch records one session per process); the second call, during inspect()'s cycle, is timed only.
    assert names == ["rank00000", "rank00001"]
    trace = json.loads(next((run_folder / "traces").glob("rank00001*")).read_text())
    assert trace["distributedInfo"]["rank"] == 1


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("killed")
    done = run(torchrun(["--standalone", "--nproc_per_node=2", "--max_restarts=0", str(SCRIPTS / "killed.py")]),
               folder, rank_env(folder, TEST_KILL_AT="5", SBPROF_MERGE_TIMEOUT_S="20"))
    return folder, done


def test_a_killed_rank_is_named_missing_and_the_other_keeps_its_figures(killed, capsys):
    folder, done = killed
    assert done.returncode != 0  # torchrun: the run failed
    code = cli([str(folder / "ranks")], prog="sbprof merge")
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.startswith("sbprof: error: run ") and "\n" not in err  # incomplete
    summary = merge_run(find_run(folder / "ranks"))
    assert summary.missing == []  # rank 1's file has its steps: it counts, rebuilt from its step lines
    rows = {r.rank: r for r in summary.sections[0].rows}
    assert rows[0].steps == 4 and rows[0].comm_s > 0  # warm-up step 0 left out
    assert rows[1].steps == 4  # steps 1-4 it wrote before the kill, each counted
    # torchrun stopped rank 0 with SIGTERM in its step 5: its file was closed with its records, in 30 s of sleep
    assert [(r.rank, r.ended.split(":")[0], r.last_step) for r in summary.stopped_early] == [
        (0, "SIGTERM", 4), (1, "no end line", 4)]
    report = (find_run(folder / "ranks") / "report.md").read_text()
    assert "**INCOMPLETE**" in report
    assert re.search(r"\|\s*1\s*\|\s*\S+\s*\|\s*5\s*\|\s*no end line", report)  # rank 1, its 5th step last
