"""``sbprof merge`` on what is not a run: one line naming the argument and what merge takes, exit 2; a section with
no recorded step, a dead rank's steps, the default folder read the same when named."""
import json
import os

import pytest

from sbprof.cli.tools import main as cli
from sbprof.distributed.merge import merge_run
from sbprof.distributed.rankfile import rank_file
from test_merge import partial_run, write_run


def one_error_line(capsys):
    err = capsys.readouterr().err.strip()
    assert err.startswith("sbprof: error: ") and "\n" not in err, err
    return err


def test_an_empty_folder_is_named_with_what_merge_takes(tmp_path, capsys, monkeypatch):
    (tmp_path / "emptyd").mkdir()
    monkeypatch.chdir(tmp_path)
    assert cli(["emptyd"], prog="sbprof merge") == 2
    err = one_error_line(capsys)
    assert "emptyd holds no rank files" in err and "sbprof merge takes one distributed run" in err
    assert "at least two" not in err


def test_a_rank_file_given_alone_names_the_run_folder_to_give(tmp_path, capsys):
    run = write_run(tmp_path, 2, steps=2)
    assert cli([str(rank_file(run, 0))], prog="sbprof merge") == 2
    err = one_error_line(capsys)
    assert "is one rank's file" in err and f"({run})" in err


def test_a_rank_file_that_is_a_symlink_loop_is_bad_input_named(tmp_path, capsys):
    run = write_run(tmp_path, 2, steps=2)
    rank_file(run, 1).unlink()
    os.symlink(rank_file(run, 1), rank_file(run, 1))  # a link to itself
    assert cli([str(run)], prog="sbprof merge") == 2
    err = one_error_line(capsys)
    assert "rank00001.jsonl: a symbolic link loop" in err
    assert not (run / "report.md").exists()


@pytest.mark.parametrize("case", ["missing", "empty"])
def test_a_missing_or_empty_rank_file_never_says_step_none(tmp_path, capsys, case):
    run = partial_run(tmp_path, {1: "gone"})
    if case == "empty":
        rank_file(run, 1).write_text("")
    assert cli([str(run)], prog="sbprof merge") == 1
    err = one_error_line(capsys)
    assert "None" not in err and "rank 1 (no step ended;" in err
    assert "None" not in (run / "report.md").read_text()


def test_a_working_directory_holding_sbprof_ranks_is_read_as_the_default(tmp_path, capsys, monkeypatch):
    write_run(tmp_path / "sbprof-ranks", 2, steps=3)
    assert cli([str(tmp_path)], prog="sbprof merge") == 0
    named = capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    assert cli([], prog="sbprof merge") == 0
    assert capsys.readouterr().out == named


def test_a_dead_ranks_written_steps_count_and_a_section_without_steps_is_reported_as_such(tmp_path, capsys):
    run = partial_run(tmp_path, {1: None})  # rank 1 died after its step lines 0-2, no record, no end
    summary = merge_run(run)
    rows = {r.rank: r for r in summary.sections[0].rows}
    assert rows[1].steps >= 1 and rows[1].ended.startswith("no end line")
    assert [m.rank for m in summary.missing] == []
    # A section whose steps were all before the schedule's recorded part: no crash, a line saying so
    path = rank_file(run, 0)
    lines = path.read_text().splitlines()
    record = next(json.loads(line) for line in lines if line.startswith('{"record"'))
    m = record["record"]["measurement"]
    m["wall_s"], m["cpu_s"], m["warmup"] = [], [], 1
    m["extra"]["rank"].update(steps=[], comm_s=[], gap_s=[], allocated_peak_bytes=[])
    for key in [k for k in m["extra"] if k.endswith("_per_step")]:
        m["extra"][key] = []
    empty = dict(record["record"], section="idle/test")
    m["cell"]["model"] = "idle/test"
    m["extra"]["rank"]["section"] = "idle/test"
    path.write_text("\n".join(lines[:-1] + [json.dumps({"record": empty}), lines[-1]]) + "\n")
    assert cli([str(run)], prog="sbprof merge") == 1  # incomplete (rank 1 died), never a traceback
    capsys.readouterr()
    report = (run / "report.md").read_text()
    assert "## idle/test" in report and "0 steps recorded (1 step taken" in report
