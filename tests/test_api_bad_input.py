"""The Python API refuses what the command line refuses, with a typed error, before anything runs or is written."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import sbprof
from helpers.job_configs import argv_of
from helpers.refusals import assert_refused
from sbprof.base.checks import THREADS_PER_CORE
from sbprof.cli import main
from sbprof.base.errors import ConfigError

TOO_MANY = THREADS_PER_CORE * (os.cpu_count() or 1) + 1


def test_measure_refuses_more_threads_than_the_command_line_takes():
    """10**6 threads made libgomp abort the caller; the bound is the command line's."""
    calls = []
    for n in (10**6, TOO_MANY):
        with pytest.raises(ConfigError, match=f"num_threads is {n}: at most {THREADS_PER_CORE} threads per logical"):
            sbprof.measure(lambda: calls.append(1), num_threads=n)
    assert calls == []  # refused before the function ran
    assert len(sbprof.measure(lambda: None, warmup=0, repeats=1, num_threads=TOO_MANY - 1).wall_s) == 1


def test_the_command_line_refuses_the_same_thread_counts(tmp_path, capsys, monkeypatch):
    from helpers.fake_interfaces import use_test_environment

    use_test_environment(monkeypatch, tmp_path / "models")
    argv = argv_of("profile", tmp_path, tmp_path / "out")
    path = Path(argv[0])
    path.write_text(path.read_text().replace("cpu_threads: [1]", f"cpu_threads: [1, {TOO_MANY}]"))
    assert_refused(main(["profile", *argv]), capsys, f"cpu_threads is {TOO_MANY}: at most {THREADS_PER_CORE}",
                   nothing_in=tmp_path / "out")


def test_export_checks_its_folder_when_built(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("kept")
    with pytest.raises(ConfigError, match=r"export\(dir_name='.*a_file'\): is a file, not a folder"):
        sbprof.export(dir_name=str(a_file))
    with pytest.raises(ConfigError, match="lies under .*a_file, which is a file, not a folder"):
        sbprof.export(dir_name=a_file / "traces")
    with pytest.raises(ConfigError, match="must name a folder, got ''"):
        sbprof.export(dir_name="")
    assert a_file.read_text() == "kept" and sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]
    sbprof.export(dir_name=tmp_path / "later" / "traces")  # a folder still to be made is fine, and not made yet
    assert not (tmp_path / "later").exists()


@pytest.mark.parametrize("options, message", [
    ({"noprogressbar": "maybe"}, "run(): noprogressbar is a flag: give True or False, not 'maybe'"),
    ({"retry_failed": 1}, "run(): retry_failed is a flag: give True or False, not 1"),
    ({"device": 3}, "run(): device needs a device (cpu, cuda or cuda:N), got 3"),
    ({"device": " "}, "run(): device needs a device (cpu, cuda or cuda:N), got ' '"),
    ({"progress_bar": False}, "run(): unknown run option 'progress_bar'; the run options are device, noprogressbar, "
                              "retry_failed"),
])
def test_run_checks_its_options_as_the_command_line_does(tmp_path, monkeypatch, options, message):
    from helpers.fake_interfaces import use_test_environment

    use_test_environment(monkeypatch, tmp_path / "models")
    config = argv_of("profile", tmp_path, tmp_path / "out")[0]
    with pytest.raises(ConfigError) as caught:
        sbprof.run("profile", config, **options)
    assert str(caught.value) == message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("job", ["profile", "compare-models", "train", "stream", "transducer"])
def test_api_errors_speak_of_the_api_not_of_a_command_line(tmp_path, job, monkeypatch):
    """Before: a mapping given as the configuration was printed as a file name ("{'seed': 1}: no such
    configuration file"), and an unknown key of overrides= was the "command line"'s."""
    from helpers.fake_interfaces import use_test_environment

    use_test_environment(monkeypatch, tmp_path / "models")
    with pytest.raises(ConfigError, match=r"^a configuration is a YAML file: give its path, not a dict "
                                          r"\({'seed': 1}\); keys to change go in overrides=$"):
        sbprof.run(job, {"seed": 1})
    config = argv_of(job, tmp_path, tmp_path / "out")[0]
    with pytest.raises(ConfigError, match=r"^overrides=: unknown key 'sed' \(did you mean 'seed'\?\)"):
        sbprof.run(job, config, overrides={"sed": 3})
    assert not (tmp_path / "out").exists()
