"""The command line: bad input stops before measuring, failures are recorded, interrupted runs resume."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from helpers.fake_interfaces import replace_in_file, use_test_environment, write_model_folder, write_sweep_yaml
from helpers.refusals import assert_refused
from helpers.signals import default_sigint
from sbprof.cli import main as sbprof_main
from sbprof.results import RESULTS_FILE

REPO = Path(__file__).resolve().parents[1]
BUSY = {"type_name": "helpers.fake_interfaces.BusyInterface", "method": "process", "args": ["wavs", "wav_lens"]}


def main(argv):
    return sbprof_main(["profile"] + list(argv))


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def _busy_yaml(tmp_path: Path, rtf: float, **kwargs) -> Path:
    folder = write_model_folder(tmp_path / "busy", rtf=rtf)
    return write_sweep_yaml(tmp_path / "s.yaml", str(folder), **BUSY, **kwargs)


def _stored(folder: Path) -> dict:
    data = json.loads((folder / RESULTS_FILE).read_text())
    return {(c["cell"]["audio_s"], c["cell"]["batch_size"]): c for c in data["records"]}


# (edit of the YAML or extra argv, text the one-line message must hold)
BAD_INPUTS = [
    (("seed: 0", "sed: 0"), "unknown key 'sed' (did you mean 'seed'?)"),
    (("    batch_sizes:", "    batch_size:"), "did you mean 'profiling_dimensions.batch_sizes'?"),
    (("audio_mockup_secs: [0.5, 1]", "audio_mockup_secs: [-0.5, 1]"), "profiling_dimensions.audio_mockup_secs"),
    (("audio_mockup_secs: [0.5, 1]", "audio_mockup_secs: [0, 1]"), "positive numbers, got 0"),
    (("batch_sizes: [1, 2]", "batch_sizes: [0, 2]"), "profiling_dimensions.batch_sizes"),
    (("batch_sizes: [1, 2]", "batch_sizes: [-4]"), "positive integers, got -4"),
    (("example_audio: null", "example_audio: no_such.wav"), "example_audio: no such file"),
    (("type: EncoderASR", "type: EncoderASRR"), "no class 'EncoderASRR' in speechbrain.inference (did you mean 'EncoderASR'?)"),
    (("source: encoder_asr", "source: encoder_asx"), "is not a local model"),
    (("devices: [cpu]", "devices: [gpu]"), "devices: 'gpu' is not a device"),
    (("output_folder: ", "output_folder: ''\n#"), "output_folder must be a non-empty path"),
    (["--sede", "1"], "unknown option --sede (did you mean 'seed'?)"),
    (["--debug"], "--debug is a SpeechBrain training option"),
]


@pytest.mark.parametrize("change, expected", BAD_INPUTS)
def test_bad_input_stops_before_measuring(tmp_path, capsys, change, expected):
    path = write_sweep_yaml(tmp_path / "s.yaml", "encoder_asr", "EncoderASR")
    argv = [str(path)]
    if isinstance(change, tuple):
        replace_in_file(path, *change)
    else:
        argv += change
    err = assert_refused(main(argv), capsys, expected, nothing_in=tmp_path / "out")  # nothing measured or written
    if isinstance(change, tuple):
        assert str(path) in err  # the file is named


def _one_line_exit_2(capsys, argv, expected):
    assert_refused(main(argv), capsys, expected)


@pytest.mark.parametrize("text, expected", [("", "the file is empty"), ("# only a comment\n", "the file is empty"),
                                            ("- a\n- b\n", "top level must be a mapping of keys, got a list")])
def test_empty_or_list_yaml(tmp_path, capsys, text, expected):
    (tmp_path / "p.yaml").write_text(text)
    _one_line_exit_2(capsys, [str(tmp_path / "p.yaml")], expected)


@pytest.mark.parametrize("folder, expected", [
    ("file", "exists and is a regular file, not a folder"), ("file/sub", "a part of its path is a file"),
    ("/dev/null", "exists and is a character device, not a folder")])
def test_output_folder_that_cannot_hold_results(tmp_path, capsys, folder, expected):
    (tmp_path / "file").write_text("x")
    path = _busy_yaml(tmp_path, 0.01, lengths=[0.5], batch_sizes=[1])
    target = folder if folder.startswith("/") else str(tmp_path / folder)
    _one_line_exit_2(capsys, [str(path), "--noprogressbar", "--output_folder", target], expected)
    assert not (tmp_path / "logs").exists()  # no worker was started


def test_example_audio_without_samples(tmp_path, capsys):
    import soundfile

    soundfile.write(str(tmp_path / "silent.wav"), [], 16000)
    path = write_sweep_yaml(tmp_path / "s.yaml", "encoder_asr", "EncoderASR", example_audio=tmp_path / "silent.wav")
    _one_line_exit_2(capsys, [str(path)], "holds no samples")
    assert not (tmp_path / "out").exists()


def test_length_shorter_than_one_sample_is_bad_input_not_a_failed_cell(tmp_path, capsys):
    path = _busy_yaml(tmp_path, 0.01, lengths=[0.00001, 0.5], batch_sizes=[1])
    _one_line_exit_2(capsys, [str(path), "--noprogressbar"], "[1e-05] s is shorter than one sample at the model's 16000 Hz")
    assert not (tmp_path / "out" / RESULTS_FILE).exists()  # nothing measured


def test_input_that_cannot_be_allocated_is_oom(tmp_path, capsys):
    path = _busy_yaml(tmp_path, 0.01, lengths=[1e9, 0.5], batch_sizes=[1])
    assert main([str(path), "--noprogressbar"]) == 0
    stored = _stored(tmp_path / "out")
    assert stored[(1e9, 1)]["status"] == "oom" and stored[(0.5, 1)]["status"] == "ok"


@pytest.mark.parametrize("content, expected", [
    ('{"format": "sbprof-results", "version": 2, "records": null}', "'records' must be a list"),
    ('{"format": "sbprof-sweep-results", "version": 1, "settings": {}, "cells": null}', "'cells' (a list)"),
    ('{"format": "sbprof-sweep-results", "version": 1, "settings": {}, "cells": [{"config": {"model": "m"}}]}',
     "lacks its coordinate(s)"),
])
def test_broken_results_file_on_render_and_resume(tmp_path, capsys, content, expected):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / RESULTS_FILE).write_text(content)
    _one_line_exit_2(capsys, ["--render-only", str(tmp_path / "out")], expected)
    path = _busy_yaml(tmp_path, 0.01, lengths=[0.5], batch_sizes=[1])
    _one_line_exit_2(capsys, [str(path), "--noprogressbar"], expected)
    assert (tmp_path / "out" / RESULTS_FILE).read_text() == content  # left as it was


def test_missing_yaml_and_usage(tmp_path, capsys):
    assert main([str(tmp_path / "none.yaml")]) == 2
    assert "none.yaml: no such configuration file" in capsys.readouterr().err
    assert main([]) == 2
    assert "give the YAML file first" in capsys.readouterr().err
    assert main(["--noprogressbar", str(tmp_path / "none.yaml")]) == 2  # flags go after the file
    assert "give the YAML file first" in capsys.readouterr().err


def test_changed_settings_are_refused_on_rerun(tmp_path, capsys):
    path = _busy_yaml(tmp_path, 0.01, lengths=[0.5], batch_sizes=[1])
    assert main([str(path), "--noprogressbar"]) == 0
    before = (tmp_path / "out" / RESULTS_FILE).read_text()
    assert main([str(path), "--noprogressbar", "--measured", "3"]) == 2
    err = capsys.readouterr().err
    assert "measured: 2 there, 3 now" in err and "--output_folder" in err
    assert (tmp_path / "out" / RESULTS_FILE).read_text() == before


def test_results_of_another_machine_or_model_build_are_refused(tmp_path, capsys):
    path = _busy_yaml(tmp_path, 0.01, lengths=[0.5], batch_sizes=[1])
    assert main([str(path), "--noprogressbar"]) == 0
    results = tmp_path / "out" / RESULTS_FILE
    data = json.loads(results.read_text())
    data["machine"]["torch"] = "1.13.1"
    results.write_text(json.dumps(data))
    _one_line_exit_2(capsys, [str(path), "--noprogressbar"], "torch: '1.13.1' there")
    data["machine"]["torch"] = json.loads(results.read_text())["records"][0]["env"]["torch"]
    results.write_text(json.dumps(data))
    (tmp_path / "busy" / "hyperparams.yaml").write_text(
        (tmp_path / "busy" / "hyperparams.yaml").read_text().replace("rtf: 0.01", "rtf: 0.02"))
    _one_line_exit_2(capsys, [str(path), "--noprogressbar"], "fingerprint: 'folder:")


def test_failed_cells_are_kept_on_resume_and_retried_on_request(tmp_path, capsys):
    folder = write_model_folder(tmp_path / "faulty", raise_batch_sizes=[2], oom_from_s=1, kill_batch_sizes=[])
    path = write_sweep_yaml(tmp_path / "s.yaml", str(folder), "helpers.fake_interfaces.FaultyInterface",
                            method="process", args=["wavs", "wav_lens"], lengths=[0.5, 1], batch_sizes=[1, 2])
    assert main([str(path), "--noprogressbar"]) == 0
    first = _stored(tmp_path / "out")
    assert main([str(path), "--noprogressbar"]) == 0
    assert "measured 0 cell(s) (0 failed), 4 already done" in capsys.readouterr().out
    assert _stored(tmp_path / "out") == first
    assert main([str(path), "--noprogressbar", "--retry_failed"]) == 0
    assert "measured 3 cell(s) (3 failed), 1 already done" in capsys.readouterr().out
    again = _stored(tmp_path / "out")
    assert again[(0.5, 1)] == first[(0.5, 1)]  # the good cell was not measured again


def test_two_runs_on_one_folder(tmp_path, capsys):
    """The second run is refused at once, naming the folder and the first run's process; the first
    run finishes with all its cells."""
    path = _busy_yaml(tmp_path, 0.2, lengths=[0.5, 1], batch_sizes=[1, 2])
    first = subprocess.Popen([sys.executable, str(REPO / "recipes" / "profile.py"), str(path), "--noprogressbar"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lock = tmp_path / "out" / ".sbprof.lock"
        deadline = time.monotonic() + 60
        while not (lock.exists() and lock.read_text().strip()):
            assert time.monotonic() < deadline and first.poll() is None
            time.sleep(0.05)
        t0 = time.monotonic()
        _one_line_exit_2(capsys, [str(path), "--noprogressbar"],
                         f"output folder '{tmp_path / 'out'}' is in use by another sbprof run (process {first.pid})")
        assert time.monotonic() - t0 < 5  # at once, not after measuring
        assert first.wait(timeout=120) == 0, first.communicate()
    finally:
        if first.poll() is None:
            first.kill()
    assert {k: c["status"] for k, c in _stored(tmp_path / "out").items()} == {
        (0.5, 1): "ok", (0.5, 2): "ok", (1, 1): "ok", (1, 2): "ok"}


def test_model_that_cannot_load_stops_with_exit_1(tmp_path, capsys):
    path = _busy_yaml(tmp_path, 0.01, lengths=[0.5], batch_sizes=[1])
    (tmp_path / "busy" / "hyperparams.yaml").write_text("sample_rate: 16000\nmodules: {}\n")  # no pretrainer
    assert main([str(path), "--noprogressbar"]) == 1
    err = capsys.readouterr().err
    assert "could not load model" in err and "KeyError" in err and "pretrainer" in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_resume_after_interruption(tmp_path, capsys, sig):
    """Kill a real run mid-sweep (Ctrl-C, or SIGKILL of the runner as in a crash), rerun, compare.

    Each cell spins a known time (0.2 x audio seconds x 3 batches), so the
    sweep is still running when the first two cells are on disk.
    """
    path = _busy_yaml(tmp_path, 0.2, lengths=[0.5, 1, 1.5], batch_sizes=[1, 2])
    out = tmp_path / "out"
    private_tmp = tmp_path / "tmp"  # the run's own temporary folder: whatever it leaves there is its own
    private_tmp.mkdir()
    # A session of its own: the signal reaches the runner and its worker, as Ctrl-C would (SIGINT's default
    # action restored first: see tests/helpers/signals.py).
    proc = subprocess.Popen([sys.executable, str(REPO / "recipes" / "profile.py"), str(path), "--noprogressbar"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "TMPDIR": str(private_tmp)},
                            preexec_fn=default_sigint)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if sum(c["status"] == "ok" for c in _stored(out).values()) >= 2:
                    break
            except (FileNotFoundError, json.JSONDecodeError):
                pass  # not written yet (a torn file would be a JSONDecodeError and fail below)
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        workers = psutil.Process(proc.pid).children()
        assert workers, "the runner should have a worker process"
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)  # Ctrl-C: the terminal signals the whole process group
        else:
            os.kill(proc.pid, sig)  # the runner alone dies; its worker must not live on
        _, err = proc.communicate(timeout=60)
        _, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive, "a worker outlived its runner"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "interrupted" in err
    else:
        assert proc.returncode == -signal.SIGKILL

    # Jobs reach workers on their standard input: a killed runner leaves no job file behind.
    assert os.listdir(private_tmp) == []
    interrupted = _stored(out)  # must parse: every write was atomic
    finished = {k: c for k, c in interrupted.items() if c["status"] == "ok"}
    assert 2 <= len(finished) < 6

    assert main([str(path), "--noprogressbar"]) == 0
    assert f"measured {6 - len(finished)} cell(s) (0 failed), {len(finished)} already done" in capsys.readouterr().out
    final = _stored(out)
    assert set(final) == {(a, b) for a in (0.5, 1, 1.5) for b in (1, 2)}
    assert all(c["status"] == "ok" for c in final.values())
    for key, record in finished.items():
        assert final[key] == record  # same samples: not measured twice, not lost
