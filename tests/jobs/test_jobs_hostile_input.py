"""Hostile input over every command: files built to crash or hang a loader, names that climb out of the output
folder, sizes no machine holds. Each is refused in one ``sbprof: error:`` line with exit 2, fast, nothing written.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.fake_interfaces import use_test_environment
from helpers.job_configs import YAML_JOBS, argv_of
from helpers.paths import ROOT
from helpers.refusals import assert_refused
from sbprof.cli import main
from sbprof.results import RESULTS_FILE


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def billion_laughs() -> str:
    """540 bytes whose aliases expand to 9^9 (387 million) values (the file reported was 765 bytes)."""
    lines, previous = ['laugh0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'], "l0"
    for level in range(1, 9):
        lines.append(f"laugh{level}: &l{level} [{', '.join([f'*{previous}'] * 9)}]")
        previous = f"l{level}"
    return "\n".join(lines) + "\n"


def deep_mapping(depth: int) -> str:
    return "deep:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(depth)) + "  " * (depth + 1) + "v: 1\n"


HOSTILE_YAML = {
    "a 5,000-deep list": ("deep: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 50 levels deep (line"),
    "a 400-deep mapping": (deep_mapping(400), "nested more than 50 levels deep (line"),
    "billion laughs": (billion_laughs(), "its aliases (*name) expand to more than 100,000 values"),
}


@pytest.mark.parametrize("case", list(HOSTILE_YAML))
@pytest.mark.parametrize("job", YAML_JOBS)
def test_a_config_built_to_crash_or_hang_the_loader_is_refused_fast(job, case, tmp_path, capsys):
    argv = argv_of(job, tmp_path, tmp_path / "out")
    content, expected = HOSTILE_YAML[case]
    config = Path(argv[0])
    config.write_text(config.read_text() + content)
    if case == "billion laughs":
        assert len(content.encode()) < 800
    started = time.process_time()
    code = main([job, *argv])
    assert time.process_time() - started < 10  # CPU time: the expansion is never started
    assert_refused(code, capsys, expected, nothing_in=tmp_path / "out")


def test_a_deep_value_on_the_command_line_is_refused(tmp_path, capsys):
    argv = argv_of("profile", tmp_path, tmp_path / "out")
    assert_refused(main(["profile", *argv, "--seed", "[" * 5000 + "]" * 5000]), capsys,
                   "command line: --seed: nested more than 50 levels deep", nothing_in=tmp_path / "out")


def not_regular(kind: str, path: Path) -> str:
    """Make ``path`` a symbolic link loop, a FIFO, a folder or a link to /dev/zero; what the refusal says."""
    if kind == "a symbolic link loop":
        os.symlink(path.name, path)
        return "a symbolic link loop"
    if kind == "a FIFO":
        os.mkfifo(path)
        return "it is a FIFO (named pipe), not a regular file"
    if kind == "a folder":
        path.mkdir()
        (path / RESULTS_FILE).write_text("{}")
        return "it is a folder, not a regular file"
    os.symlink("/dev/zero", path)
    return "it is a character device, not a regular file"


KINDS = ["a symbolic link loop", "a FIFO", "a folder", "/dev/zero"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_config_that_is_not_a_regular_file_is_refused(kind, tmp_path, capsys):
    argv = argv_of("profile", tmp_path, tmp_path / "out")
    config = tmp_path / "hostile.yaml"
    expected = not_regular(kind, config)
    assert_refused(main(["profile", str(config), *argv[1:]]), capsys, f"hostile.yaml: {expected}"
                   if kind == "a symbolic link loop" else expected, nothing_in=tmp_path / "out")


@pytest.mark.parametrize("use", ["render-only", "gate", "merge"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_results_file_that_is_not_a_regular_file_is_refused_without_hanging(kind, use, tmp_path):
    """In a separate process: a FIFO opened for reading would block it forever, /dev/zero fill its memory."""
    folder, other = tmp_path / "h01", tmp_path / "h02"
    for f in (folder, other):
        f.mkdir()
        (f / "report.md").write_text("earlier report\n")
        expected = not_regular(kind, f / RESULTS_FILE)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.name == "report.md"}
    argv = {"render-only": ["profile", "--render-only", str(folder)],
            "gate": ["compare", str(folder), str(other)],
            "merge": ["merge", str(folder), str(other), "--output", str(tmp_path / "merged")]}[use]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "sbprof", *argv], capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("sbprof: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert expected in done.stderr and "results.json/results.json" not in done.stderr, done.stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.name == "report.md"} == before
    assert not (tmp_path / "merged").exists()


def test_a_results_file_nested_thousands_deep_is_refused(tmp_path, capsys):
    folder = tmp_path / "h01"
    folder.mkdir()
    (folder / RESULTS_FILE).write_text("[" * 100_000 + "]" * 100_000)
    assert_refused(main(["profile", "--render-only", str(folder)]), capsys,
                   "not a readable results file (nested too deep)")


def test_a_mapping_given_for_a_null_key_is_merged(tmp_path):
    from sbprof.cli.overrides import parse_command_line
    from sbprof.registry import get_job

    entry = get_job("stream")
    argv = argv_of("stream", tmp_path, tmp_path / "out")
    assert "capacity: null" in Path(argv[0]).read_text()
    path, overrides, options = parse_command_line(
        [argv[0], "--capacity", "{chunk_size: 16, left_context_chunks: 2}"], keys=list(entry.config_keys()))
    cfg = entry.load_config(path, overrides, options)
    assert (cfg.capacity.chunk_size, cfg.capacity.left_context_chunks) == ((16,), (2,))
    assert not (tmp_path / "out").exists()


def test_a_mapping_given_for_a_list_is_refused_naming_the_key(tmp_path, capsys):
    argv = argv_of("compare-models", tmp_path, tmp_path / "out")
    assert_refused(main(["compare-models", *argv, "--variants", "{name: a}"]), capsys,
                   "variants must be a non-empty list of variants, got {'name': 'a'}", nothing_in=tmp_path / "out")


HUGE = 10**20
SIZES = {
    "profile": [("--profiling_dimensions", f"{{batch_sizes: [{HUGE}]}}", "profiling_dimensions.batch_sizes must hold "
                 f"only values up to 2,147,483,647, got {HUGE}"),
                ("--profiling_dimensions", "{audio_mockup_secs: [1e300]}", "audio_mockup_secs must hold only values "
                 "up to 2,147,483,647, got 1e+300"),
                ("--cpu_threads", "1000000", "cpu_threads is 1000000: at most 16 threads per logical core"),
                ("--repeats", f"{{runs: {HUGE}}}", f"must be at most 2,147,483,647, got {HUGE}"),
                ("--measured", f"{HUGE}", f"measured must be at most 2,147,483,647, got {HUGE}")],
    "compare-models": [("--batch_size", f"{HUGE}", f"batch_size must be at most 2,147,483,647, got {HUGE}"),
                       ("--values", f"[{HUGE}]", "values must hold only values up to 2,147,483,647")],
    "stream": [("--streaming", f"{{chunk_sizes: [{HUGE}]}}", "streaming.chunk_sizes must hold only values up to")],
    "train": [("--data", f"{{batch_size: {HUGE}}}", f"data.batch_size must be at most 2,147,483,647, got {HUGE}")],
}


@pytest.mark.parametrize("job, option, value, expected",
                         [(job, *case) for job, cases in SIZES.items() for case in cases])
def test_a_size_no_machine_holds_is_refused_before_measuring(job, option, value, expected, tmp_path, capsys):
    argv = argv_of(job, tmp_path, tmp_path / "out")
    assert_refused(main([job, *argv, option, value]), capsys, expected, nothing_in=tmp_path / "out")


NAMES = ["/../../../ESCAPED", "../x/y", "..", "a\\b"]


@pytest.mark.parametrize("name", NAMES)
def test_a_variant_name_that_is_a_path_is_refused(name, tmp_path, capsys):
    argv = argv_of("compare-models", tmp_path, tmp_path / "out")
    config = Path(argv[0])
    text = config.read_text()
    assert '"name": "a"' in text
    config.write_text(text.replace('"name": "a"', f'"name": {json.dumps(name)}', 1))
    assert_refused(main(["compare-models", *argv]), capsys, f"variants[0].name {name!r} becomes a file name",
                   nothing_in=tmp_path / "out")
    assert not list(tmp_path.parent.rglob("ESCAPED*")) and not (tmp_path / "x").exists()


def in_the_way(kind: str, path: Path) -> str:
    """Make ``path`` a symbolic link loop, a FIFO, a regular file or a dangling link, where a folder goes; what the
    refusal says it is."""
    if kind == "a symbolic link loop":
        os.symlink(path.name, path)
        return "a symbolic link loop"
    if kind == "a dangling link":
        os.symlink("gone", path)
        return "a symbolic link to 'gone', which does not exist"
    if kind == "a FIFO":
        os.mkfifo(path)
        return "a FIFO (named pipe)"
    path.write_text("x")
    return "a regular file"


PLACES = ["a symbolic link loop", "a dangling link", "a FIFO", "a regular file"]


@pytest.mark.parametrize("kind", PLACES)
def test_merge_output_that_is_no_folder_is_named_for_what_it_is(kind, tmp_path, capsys):
    """Before, a link loop given as --output read "cannot be made: a part of its path is a file"."""
    from helpers.job_configs import argv_of as small_run

    assert main(["profile", *small_run("profile", tmp_path, tmp_path / "a")]) == 0
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    capsys.readouterr()
    said = in_the_way(kind, tmp_path / "merged")
    assert_refused(main(["merge", str(tmp_path / "a"), str(tmp_path / "b"), "--output", str(tmp_path / "merged")]),
                   capsys, f"--output '{tmp_path / 'merged'}' " + ("exists and is " if "link" not in kind else
                                                                  "cannot be used: it is ") + said)


@pytest.mark.parametrize("kind", PLACES)
def test_a_report_folder_taken_by_something_else_is_named_for_what_it_is(kind, tmp_path, capsys):
    """The report's plots/ folder (and the output folder itself) taken by a link loop, a FIFO or a file: before,
    "cannot write the reports in ...: File exists" or a link loop read as "a part of its path is a file"."""
    argv = argv_of("profile", tmp_path, tmp_path / "out")
    assert main(["profile", *argv]) == 0
    shutil.rmtree(tmp_path / "out" / "plots")
    said = in_the_way(kind, tmp_path / "out" / "plots")
    capsys.readouterr()
    assert main(["profile", "--render-only", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'out' / 'plots'} is {said}, where a folder of the reports goes; " \
                                      "move it away" in err, err
    if kind == "a dangling link":
        return  # as an output folder, followed: the folder it names is made
    other = tmp_path / "other"
    said = in_the_way(kind, other)
    expected = "cannot be used: a symbolic link loop" if "link" in kind else f"exists and is {said}, not a folder"
    assert_refused(main(["profile", *argv, "--output_folder", str(other)]), capsys, expected)
