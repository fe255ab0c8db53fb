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

from fake_interfaces import replace_in_file, use_test_environment, write_model_folder, write_sweep_yaml
from sbprof.cli import main
from sbprof.sweep.store import RESULTS_FILE

REPO = Path(__file__).resolve().parents[1]
BUSY = {"type_name": "fake_interfaces.BusyInterface", "method": "process", "args": ["wavs", "wav_lens"]}


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def _busy_yaml(tmp_path: Path, rtf: float, **kwargs) -> Path:
    folder = write_model_folder(tmp_path / "busy", rtf=rtf)
    return write_sweep_yaml(tmp_path / "s.yaml", str(folder), **BUSY, **kwargs)


def _stored(folder: Path) -> dict:
    data = json.loads((folder / RESULTS_FILE).read_text())
    return {(c["config"]["audio_s"], c["config"]["batch_size"]): c for c in data["cells"]}


# (edit of the YAML or extra argv, text the one-line message must hold)
BAD_INPUTS = [
    (("seed: 0", "sed: 0"), "unknown key 'sed' (did you mean 'seed'?)"),
    (("    batch_sizes:", "    batch_size:"), "did you mean 'profiling_dimensions.batch_sizes'?"),
    (("audio_mockup_secs: [0.5, 1]", "audio_mockup_secs: [-0.5, 1]"), "profiling_dimensions.audio_mockup_secs"),
    (("audio_mockup_secs: [0.5, 1]", "audio_mockup_secs: [0, 1]"), "positive numbers of seconds, got 0"),
    (("batch_sizes: [1, 2]", "batch_sizes: [0, 2]"), "profiling_dimensions.batch_sizes"),
    (("batch_sizes: [1, 2]", "batch_sizes: [-4]"), "positive integers, got -4"),
    (("example_audio: null", "example_audio: no_such.wav"), "example_audio: no such file"),
    (("type: EncoderASR", "type: EncoderASX"), "EncoderASX"),
    (("source: encoder_asr", "source: encoder_asx"), "is not a local model"),
    (("devices: [cpu]", "devices: [gpu]"), "devices: 'gpu'"),
    (["--sede", "1"], "command-line override: unknown key 'sede'"),
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
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sbprof: error: ") and "\n" not in err, err
    assert expected in err
    if isinstance(change, tuple):
        assert str(path) in err  # the file is named
    assert not (tmp_path / "out").exists()  # nothing measured, nothing written


def test_missing_yaml_and_usage(tmp_path, capsys):
    assert main([str(tmp_path / "none.yaml")]) == 2
    assert "none.yaml: no such configuration file" in capsys.readouterr().err
    assert main([]) == 2
    assert "give the YAML file first" in capsys.readouterr().err


def test_changed_settings_are_refused_on_rerun(tmp_path, capsys):
    path = _busy_yaml(tmp_path, 0.01, lengths=[0.5], batch_sizes=[1])
    assert main([str(path), "--noprogressbar"]) == 0
    before = (tmp_path / "out" / RESULTS_FILE).read_text()
    assert main([str(path), "--noprogressbar", "--measured_batches", "3"]) == 2
    err = capsys.readouterr().err
    assert "measured_batches: 2 there, 3 now" in err and "--output_folder" in err
    assert (tmp_path / "out" / RESULTS_FILE).read_text() == before


def test_model_that_cannot_load_stops_with_exit_1(tmp_path, capsys):
    path = _busy_yaml(tmp_path, 0.01, lengths=[0.5], batch_sizes=[1])
    (tmp_path / "busy" / "hyperparams.yaml").write_text("sample_rate: 16000\nmodules: {}\n")  # no pretrainer
    assert main([str(path), "--noprogressbar"]) == 1
    err = capsys.readouterr().err
    assert "could not load model" in err and "KeyError" in err and "pretrainer" in err


def test_failing_cells_are_recorded_and_the_sweep_continues(tmp_path, capsys):
    folder = write_model_folder(tmp_path / "faulty", raise_batch_sizes=[2], oom_from_s=1, kill_batch_sizes=[])
    path = write_sweep_yaml(tmp_path / "s.yaml", str(folder), "fake_interfaces.FaultyInterface",
                            method="process", args=["wavs", "wav_lens"], lengths=[0.5, 1], batch_sizes=[1, 2])
    assert main([str(path), "--noprogressbar"]) == 0
    out = capsys.readouterr().out
    assert "measured 4 cell(s) (3 failed)" in out
    stored = _stored(tmp_path / "out")
    assert {k: c["status"] for k, c in stored.items()} == {
        (0.5, 1): "ok", (0.5, 2): "error", (1, 1): "oom", (1, 2): "error"}
    assert "| OOM" in (tmp_path / "out" / "report.md").read_text()


def test_render_only(tmp_path, capsys):
    path = _busy_yaml(tmp_path, 0.01, lengths=[0.5], batch_sizes=[1])
    assert main([str(path), "--noprogressbar"]) == 0
    (tmp_path / "out" / "report.md").unlink()
    capsys.readouterr()
    assert main(["--render-only", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "report.md").is_file()
    assert main(["--render-only", str(tmp_path / "nowhere")]) == 2
    assert "no such results file" in capsys.readouterr().err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_resume_after_interruption(tmp_path, capsys, sig):
    """Kill a real run mid-sweep (Ctrl-C, or SIGKILL of the runner as in a crash), rerun, compare.

    Each cell spins a known time (0.2 x audio seconds x 3 batches), so the
    sweep is still running when the first two cells are on disk.
    """
    path = _busy_yaml(tmp_path, 0.2, lengths=[0.5, 1, 1.5], batch_sizes=[1, 2])
    out = tmp_path / "out"
    # A session of its own: the signal reaches the runner and its worker, as Ctrl-C would.
    proc = subprocess.Popen([sys.executable, str(REPO / "recipes" / "profile.py"), str(path), "--noprogressbar"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
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
