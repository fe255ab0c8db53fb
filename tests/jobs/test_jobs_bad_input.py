"""Bad input over every command: exit code 2, one ``sbprof: error:`` line naming the problem, nothing written.

The cases of issue 22, run over every job the registry holds (and merge, the gate, the count commands): a
configuration file that cannot be read, a command line that makes no sense, an output folder that cannot
hold results, a saved results file edited by hand or written by a newer sbprof.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from helpers.fake_interfaces import use_test_environment
from helpers.job_configs import COUNT_JOBS, YAML_JOBS, argv_of
from helpers.paths import ROOT
from helpers.refusals import assert_refused
from sbprof.cli import main
from sbprof.results import RESULTS_FILE


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def _config_cases(tmp_path: Path, job: str) -> dict:
    """Case name -> (argv after ``sbprof JOB``, expected text), for one job whose config writes into ``tmp_path/out``."""
    argv = argv_of(job, tmp_path, tmp_path / "out")
    config, text = argv[0], Path(argv[0]).read_text()

    def write(name: str, content: bytes) -> str:
        (tmp_path / name).write_bytes(content)
        return str(tmp_path / name)

    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    return {
        "not UTF-8": ([write("b.yaml", text.encode() + b"# \xff\n")], "not UTF-8 text (byte 0xff"),
        "!include of a missing file": ([write("i.yaml", (text + "x: !include:gone.yaml\n").encode())],
                                       "gone.yaml: cannot be read (No such file or directory), named by an !include"),
        "over the size limit": ([write("big.yaml", (text + "#" + "x" * (2 << 20) + "\n").encode())],
                                "2.0 MiB is too large for a configuration file (the limit is 1 MiB)"),
        "no such file": ([str(tmp_path / "none.yaml")], "no such configuration file"),
        "a flag given a value": ([config, "--noprogressbar", "maybe"],
                                 "--noprogressbar is a flag: give it alone, or true / false, not 'maybe'"),
        "an empty device": ([config, "--device", ""], "--device needs a value, got an empty one"),
        "an empty output folder": ([config, "--output_folder", ""], "--output_folder needs a value"),
        "an output folder in a symlink loop": ([config, "--output_folder", str(loop / "x")],
                                               "cannot be used: a symbolic link loop"),
        "an output path past PATH_MAX": ([config, "--output_folder", str(tmp_path) + ("/" + "x" * 250) * 20],
                                         "beyond this system's path limit"),
        "an unknown option": ([config, "--outputfolder", "x"], "unknown option --outputfolder"),
        # (--precision is the train job's own key: its autocast precision)
        "a SpeechBrain training option": ([config, "--eval_precision", "fp16"], "SpeechBrain training option"),
        "render-only on nothing": (["--render-only", str(tmp_path / "none")], "no such results folder or file"),
        "render-only without its folder": (["--render-only"], "argument --render-only: expected one argument"),
    }


CONFIG_CASES = ["not UTF-8", "!include of a missing file", "over the size limit", "no such file",
                "a flag given a value", "an empty device", "an empty output folder",
                "an output folder in a symlink loop", "an output path past PATH_MAX", "an unknown option",
                "a SpeechBrain training option", "render-only on nothing", "render-only without its folder"]


@pytest.mark.parametrize("case", CONFIG_CASES)
@pytest.mark.parametrize("job", YAML_JOBS)
def test_a_config_or_command_line_that_cannot_run(job, case, tmp_path, capsys):
    argv, expected = _config_cases(tmp_path, job)[case]
    assert_refused(main([job, *argv]), capsys, expected, nothing_in=tmp_path / "out")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One small finished run per job, made once for the module."""
    done = {}

    def run(job):
        if job not in done:
            out = tmp_path_factory.mktemp(job) / "out"
            assert main([job, *argv_of(job, out.parent, out)]) == 0
            done[job] = out
        return done[job]

    return run


EDITS = {
    "wall_s a string": (lambda r: r.update(wall_s="x"), "field 'wall_s' must be a list of numbers of seconds from 0 to 1e9"),
    "wall_s empty": (lambda r: r.update(wall_s=[]), "'wall_s'"),
    "no cell": (lambda r: r.pop("cell"), "no 'cell' (the record's coordinates)"),
    "audio seconds 0": (lambda r: r.update(audio_seconds=0), "'audio_seconds' must be null or a positive number"),
    "format version 99": (None, "written by a newer sbprof (results format version 99); this sbprof reads versions"),
}


@pytest.mark.slow
@pytest.mark.parametrize("use", ["render-only", "gate", "merge"])
@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("job", YAML_JOBS)
def test_a_hand_edited_or_newer_results_file_is_refused_naming_what(job, edit, use, measured, tmp_path, capsys):
    good = measured(job)
    bad = tmp_path / "edited"
    shutil.copytree(good, bad)
    data = json.loads((good / RESULTS_FILE).read_text())
    change, expected = EDITS[edit]
    if change is None:
        data["version"] = 99
    else:
        change(next(r for r in data["records"] if r["status"] == "ok"))
    (bad / RESULTS_FILE).write_text(json.dumps(data))
    before = {p.name: p.read_bytes() for p in bad.iterdir() if p.is_file()}
    argv = {"render-only": [job, "--render-only", str(bad)], "gate": ["compare", str(good), str(bad)],
            "merge": ["merge", str(good), str(bad), "--output", str(tmp_path / "merged")]}[use]
    if use != "render-only" and edit == "wall_s empty" and job in ("train", "transducer"):
        expected = ""  # the gate (no audio seconds) and merge (not side-by-side results) refuse these jobs' files first
    assert_refused(main(argv), capsys, expected, nothing_in=tmp_path / "merged")
    assert {p.name: p.read_bytes() for p in bad.iterdir() if p.is_file()} == before  # nothing rewritten


@pytest.mark.parametrize("job", ["train", "transducer"])
def test_merge_takes_only_side_by_side_results(job, measured, tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(measured(job), copy)
    assert_refused(main(["merge", str(measured(job)), str(copy), "--output", str(tmp_path / "m")]), capsys,
                   f"holds results of 'sbprof {job}'; merge puts results of profile or compare-models side by side",
                   nothing_in=tmp_path / "m")


def test_merge_output_that_would_overwrite_or_cannot_be_made(measured, tmp_path, capsys):
    first = measured("profile")
    second = tmp_path / "second"
    shutil.copytree(first, second)
    report = (second / "report.md").read_bytes()
    assert_refused(main(["merge", str(first), str(second), "--output", str(second)]), capsys,
                   "holds results of its own (an input folder, or another run's)")
    assert (second / "report.md").read_bytes() == report
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    assert_refused(main(["merge", str(first), str(second), "--output", str(loop / "x")]), capsys,
                   "cannot be made: a symbolic link loop")
    assert_refused(main(["merge"]), capsys, "sbprof-ranks: no such folder of rank files")  # by default: a run's ranks


@pytest.mark.parametrize("argv, expected", [
    (["flops", "encoder_asr", "--type", "EncoderASR", "--audio_s", "nan"], "--audio_s must be a positive number"),
    (["flops", "encoder_asr", "--type", "EncoderASR", "--audio_s", "0"], "--audio_s must be a positive number"),
    (["flops", "encoder_asr", "--type", "EncoderASR", "--audio_s", "-1"], "--audio_s must be a positive number"),
    (["flops", "encoder_asr", "--type", "EncoderASR", "--batch_size", "0"], "--batch_size must be an integer >= 1"),
    (["flops", "encoder_asr", "--type", "EncoderASR", "--input", "[1, 16]"], "--input is for a module"),
    (["flops", "--depth", "x"], "argument --depth: invalid int value: 'x'"),
])
def test_count_command_lines_that_cannot_run(argv, expected, tmp_path, capsys):
    assert_refused(main([*argv, "--output_folder", str(tmp_path / "out")]), capsys, expected,
                   nothing_in=tmp_path / "out")


@pytest.mark.parametrize("job", COUNT_JOBS)
def test_count_targets_and_folders_that_cannot_be_used(job, tmp_path, capsys):
    (tmp_path / "empty.yaml").write_text("")
    assert_refused(main([job, str(tmp_path / "empty.yaml")]), capsys, "the file is empty (no keys, at most comments)")
    argv = argv_of(job, tmp_path, tmp_path / "out")
    (tmp_path / "afile").write_text("x")
    assert_refused(main([job, *argv[:-1], str(tmp_path / "afile" / "sub")]), capsys,
                   "cannot be made: a part of its path is a file")
    assert_refused(main([job, *argv[:-1], ""]), capsys, "output_folder", nothing_in=tmp_path / "out")


@pytest.mark.parametrize("argv, expected", [
    (["train", "train_profile.yaml", "--world_sizes", "[0]"], "world_sizes must hold only positive integers, got 0"),
    (["train", "train_profile.yaml", "--world_sizes", "[1, 1]"], "world_sizes lists a value twice"),
    (["train", "train_profile.yaml", "--world_sizes", "[1, 2]", "--scaling", "[huge]"], "unknown scaling 'huge'"),
    (["stream", "stream.yaml", "--streaming", "{chunk_sizes: [4]}"],
     "streaming.chunk_sizes: 4 is not allowed by model 'streaming_asr': it was trained for chunk sizes 8 to 32"),
])
def test_the_distributed_and_streaming_jobs_refuse_what_they_cannot_run(argv, expected, tmp_path, capsys):
    command, config, *rest = argv
    code = main([command, str(ROOT / config), *rest, "--output_folder", str(tmp_path / "out"), "--noprogressbar"])
    assert_refused(code, capsys, expected, nothing_in=tmp_path / "out")


def test_a_rank_file_that_is_not_one(tmp_path, capsys):
    (tmp_path / "rank00000.jsonl").write_text("garbage\n")
    assert_refused(main(["merge", str(tmp_path)]), capsys, "rank00000.jsonl: line 1 is not a rank-file line")
    assert not (tmp_path / "report.md").exists()
