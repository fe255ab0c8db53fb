"""Rank files damaged or edited: a line cut in the middle of a file, figures out of sense, a record without its
section. ``sbprof merge`` refuses each in one line naming the file and the line (exit 2), never merging it as a
complete run; a rank that never ended a step is said in words, never as "step None"."""
import json

import pytest

from sbprof.cli.tools import main as cli
from sbprof.distributed.rankfile import rank_file
from test_merge import write_run


def one_error_line(capsys):
    err = capsys.readouterr().err.strip()
    assert err.startswith("sbprof: error: ") and "\n" not in err, err
    return err


def _lines(path):
    return path.read_bytes().splitlines(keepends=True)


def _step_lines(lines):
    return [i for i, line in enumerate(lines) if line.startswith(b'{"step"')]


@pytest.mark.parametrize("rest", ["joined", "on its own line"])
def test_a_file_cut_during_its_second_step_line_is_refused_naming_the_line(tmp_path, capsys, rest):
    """Before, the cut line was skimmed unread: the run merged as "Complete: all 2 ranks ended normally", exit 0."""
    run = write_run(tmp_path, 2, steps=4)
    path = rank_file(run, 1)
    lines = _lines(path)
    second = _step_lines(lines)[1]
    cut = lines[second][: len(lines[second]) // 2] + (b"" if rest == "joined" else b"\n")
    path.write_bytes(b"".join(lines[:second]) + cut + b"".join(lines[second + 1:]))
    assert cli([str(run)], prog="sbprof merge") == 2
    err = one_error_line(capsys)
    assert f"{path}: line {second + 1} is not a rank-file line (cut short, or edited)" in err
    assert not (run / "report.md").exists()


def test_a_stopped_ranks_negative_step_time_is_refused_naming_the_line(tmp_path, capsys):
    """A rank with no end line has its figures rebuilt from its step lines: before, a negative step time there
    was rendered as it stood."""
    run = write_run(tmp_path, 2, steps=4)
    path = rank_file(run, 1)
    lines = _lines(path)
    third = _step_lines(lines)[2]
    step = json.loads(lines[third])
    step["step"]["wall_s"] = -0.27
    lines[third] = (json.dumps(step) + "\n").encode()
    path.write_bytes(b"".join(lines[:third + 1]))  # the rank died after this step: no record, no end line
    assert cli([str(run)], prog="sbprof merge") == 2
    err = one_error_line(capsys)
    assert f"{path}: line {third + 1}: a step's wall_s must be a number of seconds from 0 to 1e9, got -0.27" in err


@pytest.mark.parametrize("edit, message", [
    (lambda r: r.pop("section"), "a record line holds a section (a name) and a measurement (a mapping)"),
    (lambda r: r["measurement"].update(wall_s="x"), "the record of 'train': field 'wall_s' must be a list of numbers"),
])
def test_a_broken_record_line_names_its_file_and_line(tmp_path, capsys, edit, message):
    """Before: "a rank file holds what this sbprof cannot read (KeyError: 'section')", naming only the folder,
    and a broken measurement named neither file nor line."""
    run = write_run(tmp_path, 2, steps=3)
    path = rank_file(run, 0)
    lines = _lines(path)
    at = next(i for i, line in enumerate(lines) if line.startswith(b'{"record"'))
    record = json.loads(lines[at])
    edit(record["record"])
    lines[at] = (json.dumps(record) + "\n").encode()
    path.write_bytes(b"".join(lines))
    assert cli([str(run)], prog="sbprof merge") == 2
    err = one_error_line(capsys)
    assert f"{path}: line {at + 1}: " in err and message in err


def test_a_header_whose_world_size_is_no_count_is_refused_naming_the_file(tmp_path, capsys):
    run = write_run(tmp_path, 2, steps=2)
    for rank in (0, 1):
        path = rank_file(run, rank)
        lines = _lines(path)
        header = json.loads(lines[0])
        header["header"]["world_size"] = "two"
        path.write_bytes((json.dumps(header) + "\n").encode() + b"".join(lines[1:]))
    assert cli([str(run)], prog="sbprof merge") == 2
    assert f"{rank_file(run, 0)}: line 1: the header's world_size is 'two', not a count from 1" in \
        one_error_line(capsys)


@pytest.mark.parametrize("steps, words", [(0, "no step of it ended"), (3, "its last step to end was step 3, counting from 1")])
def test_a_killed_rank_of_a_train_world_is_said_in_words(tmp_path, steps, words):
    """Before: "rank 1 has no figures: ...; last seen at step None"."""
    from sbprof.record import Cell
    from sbprof.train.world_worker import rank_record

    run = write_run(tmp_path, 2, steps=3)
    path = rank_file(run, 1)
    lines = _lines(path)
    kept = lines[:1] + [lines[i] for i in _step_lines(lines)[:steps]]  # killed: no record, no end line
    path.write_bytes(b"".join(kept))
    record, why = rank_record(Cell(model="ctc", rank=1), path, "train")
    assert record.status == "error" and why.startswith("no end line")
    assert record.message.endswith(words) and "None" not in record.message
