"""The ``sbprof_budget`` fixture never loses a stored baseline: bad options are refused before anything is touched,
an interrupted update keeps the old baseline, and two processes recording one budget do not both record it.

Each test runs real pytest sessions (``pytester``) over a test file that uses the fixture.
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Dict

import pytest

from helpers.fake_interfaces import use_test_environment, write_model_folder
from helpers.signals import default_sigint

pytest_plugins = ["pytester"]

BUSY = {"type": "helpers.fake_interfaces.BusyInterface", "method": "process", "args": ["wavs", "wav_lens"]}


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def plugin_args() -> list:
    """``-p sbprof.pytest_plugin`` unless the installed entry point already loads it (twice is an error)."""
    installed = any(ep.value == "sbprof.pytest_plugin" for ep in metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", "sbprof.pytest_plugin"]


def snapshot(folder: Path) -> Dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def stored_baselines(folder: Path, *names: str) -> Dict[str, bytes]:
    """Stand-ins for committed baselines: what matters is that their bytes survive."""
    for name in names:
        (folder / name).mkdir(parents=True)
        (folder / name / "results.json").write_text(f'{{"stand-in for": "{name}"}}\n')
    return snapshot(folder)


def one_error_line(result) -> str:
    """The failure's one ``sbprof: error:`` line (pytest's summary repeats it, shortened), with no traceback."""
    lines = [line for line in result.outlines if line.startswith("sbprof: error: ")]
    assert len(lines) == 1 and "Traceback" not in result.stdout.str(), "\n".join(result.outlines)
    return lines[0]


def test_a_bad_model_under_the_name_dot_deletes_no_baseline(pytester):
    before = stored_baselines(pytester.path / "bl2", "asr", "vad")
    pytester.makepyfile(test_inner='''
def test_budget(sbprof_budget):
    sbprof_budget.check(".", source="no_such_model_zz", type="EncoderASR", runs=4)
''')
    result = pytester.runpytest("--sbprof-baselines", "bl2", "-p", "no:cacheprovider", *plugin_args())
    assert snapshot(pytester.path / "bl2") == before
    result.assert_outcomes(failed=1)
    assert "budget name '.' becomes a file name" in one_error_line(result)


def test_the_name_dotdot_deletes_nothing_above_the_baselines_folder(pytester):
    stored_baselines(pytester.path / ".sbprof-baselines", "asr")  # the default folder, in use
    pytester.makepyfile(test_inner='''
def test_budget(sbprof_budget):
    sbprof_budget.check("..", source="no_such_model_zz", type="EncoderASR", runs=4)
''')
    before = snapshot(pytester.path)
    result = pytester.runpytest("-p", "no:cacheprovider", *plugin_args())
    assert snapshot(pytester.path) == before  # the test file itself included
    result.assert_outcomes(failed=1)
    assert "budget name '..' becomes a file name" in one_error_line(result)


def test_a_typo_under_update_keeps_the_committed_baseline(pytester):
    before = stored_baselines(pytester.path / ".sbprof-baselines", "asr")
    pytester.makepyfile(test_inner='''
def test_budget(sbprof_budget):
    sbprof_budget.check("asr", source="encoder_asr", type="EncoderASRR", runs=4)
''')
    result = pytester.runpytest("--sbprof-update-baselines", "-p", "no:cacheprovider", *plugin_args())
    assert snapshot(pytester.path / ".sbprof-baselines") == before
    result.assert_outcomes(failed=1)
    assert "'EncoderASRR'" in one_error_line(result)


@pytest.mark.parametrize("options, expected", [
    ('metric="peak_mem"', "metric must be one of rtf, peak_memory, got 'peak_mem' (did you mean 'peak_memory'?)"),
    ("threshold=-3", "threshold must be a fraction in [0, 1]"),
    ("confidence=0.2", "confidence must be a level in [0.5, 1)"),
    ("runs=3", "runs=3; a verdict at 95% needs at least 4 fresh-process runs"),
    ('statistic="p0"', "statistic 'p0' is not one of"),
    ("audio_s=-1", "audio_s must be a positive number"),
    ("samplez=3", "unknown option 'samplez' (did you mean 'samples'?)"),
    ('name="../escaped"', "budget name '../escaped' becomes a file name"),
    ('name=".sbprof.lock"', "must not start with '.'"),
])
def test_every_option_is_refused_before_anything_is_measured_or_touched(pytester, options, expected):
    before = stored_baselines(pytester.path / ".sbprof-baselines", "asr")
    name = '' if options.startswith("name=") else '"asr", '
    pytester.makepyfile(test_inner=f'''
def test_budget(sbprof_budget):
    sbprof_budget.check({name}source="encoder_asr", type="EncoderASR", {options})
''')
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = pytester.runpytest("-p", "no:cacheprovider", *plugin_args())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers_cpu_s = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    result.assert_outcomes(failed=1)
    line = one_error_line(result)
    assert expected is None or expected in line, line
    assert snapshot(pytester.path / ".sbprof-baselines") == before
    assert not (pytester.path / "escaped").exists()
    # No worker process was started: one spends seconds of CPU importing torch and SpeechBrain (CPU time, so a
    # busy machine cannot fail this).
    assert workers_cpu_s < 0.5, f"{workers_cpu_s:.1f} s of child CPU time: something was measured before the refusal"


def test_a_name_linked_out_of_the_baselines_folder_is_refused(pytester):
    outside = pytester.path / "outside"
    before = stored_baselines(outside, "asr")
    (pytester.path / "bl").mkdir()
    (pytester.path / "bl" / "asr").symlink_to(outside / "asr")
    pytester.makepyfile(test_inner='''
def test_budget(sbprof_budget):
    sbprof_budget.check("asr", source="encoder_asr", type="EncoderASR", runs=4)
''')
    result = pytester.runpytest("--sbprof-baselines", "bl", "--sbprof-update-baselines", "-p", "no:cacheprovider",
                                *plugin_args())
    result.assert_outcomes(failed=1)
    assert "outside the baselines folder" in one_error_line(result)
    assert snapshot(outside) == before


INNER_BUSY = '''
import os

def test_budget(sbprof_budget):
    sbprof_budget.check("busy", source=os.environ["BUSY_FOLDER"], audio_s=0.5, runs=4, samples=2, warmup=0,
                        **{busy})
'''


def start_pytest(folder: Path, model: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pytest", "test_inner.py", "-q", "-p", "no:cacheprovider",
                             *plugin_args(), "--rootdir", str(folder), *args], cwd=folder,
                            env={**os.environ, "BUSY_FOLDER": str(model)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=default_sigint)  # tests/helpers/signals.py


@pytest.mark.slow
def test_ctrl_c_during_an_update_keeps_the_stored_baseline(pytester):
    model = write_model_folder(pytester.path / "busy", rtf=0.2)  # 4 runs x 2 calls x 0.1 s: time to interrupt
    baselines = pytester.path / ".sbprof-baselines"
    before = stored_baselines(baselines, "busy")
    pytester.makepyfile(test_inner=INNER_BUSY.format(busy=BUSY))
    inner = start_pytest(pytester.path, model, "--sbprof-update-baselines")
    deadline = time.monotonic() + 120
    while not list(baselines.rglob("logs/*.log")) and inner.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # until a worker was started: the update is under way
    assert inner.poll() is None, inner.communicate()[0]
    inner.send_signal(signal.SIGINT)
    out = inner.communicate(timeout=120)[0]
    after = snapshot(baselines)
    after.pop(".sbprof.lock", None)  # the baselines folder's lock file stays (see sbprof.results.lock)
    assert after == before, out
    assert inner.returncode == 2, out  # pytest: interrupted


@pytest.mark.slow
def test_two_processes_recording_one_new_budget_record_it_once(pytester):
    model = write_model_folder(pytester.path / "busy", rtf=0.02)
    pytester.makepyfile(test_inner=INNER_BUSY.format(busy=BUSY))
    first, second = (start_pytest(pytester.path, model, "-rs") for _ in range(2))
    outs = [p.communicate(timeout=300)[0] for p in (first, second)]
    recorded = [out for out in outs if "baseline of 4 runs recorded" in out]
    assert len(recorded) == 1, "\n\n".join(outs)
    checked = next(out for out in outs if out not in recorded)
    # Held to the other's baseline: passed (or failed, naming the budget, if the machine's noise says so)
    assert "1 passed" in checked or "budget 'busy' (rtf, threshold 10%)" in checked, checked
    from sbprof.results import load_results

    stored = load_results(pytester.path / ".sbprof-baselines" / "busy")
    assert sorted(m.cell.run for m in stored.records) == [0, 1, 2, 3] and all(m.ok for m in stored.records)


@pytest.mark.slow
def test_a_read_only_baselines_folder_is_checked_without_a_lock_and_an_update_there_is_one_line(pytester):
    """A read-only checkout in CI: before, even a plain check failed with a raw OSError, as it made its lock file
    first. A check reads the stored baseline and needs no lock; recording there is refused in one line."""
    from helpers.mounts import read_only

    model = write_model_folder(pytester.path / "busy", rtf=0.02)
    baselines = pytester.path / ".sbprof-baselines"
    pytester.makepyfile(test_inner=INNER_BUSY.format(busy=BUSY))
    recorded = start_pytest(pytester.path, model, "-rs").communicate(timeout=300)[0]
    assert "baseline of 4 runs recorded" in recorded, recorded
    (baselines / ".sbprof.lock").unlink()  # as a fresh clone has it: no lock file
    before = snapshot(baselines)
    with read_only(baselines):
        checked = start_pytest(pytester.path, model).communicate(timeout=300)[0]
        updated = start_pytest(pytester.path, model, "--sbprof-update-baselines").communicate(timeout=300)[0]
        assert snapshot(baselines) == before
    assert "OSError" not in checked and "Read-only file system" not in checked, checked
    # Held to its baseline: passed (or failed, naming the budget, if the machine's noise says so)
    assert "1 passed" in checked or "budget 'busy' (rtf, threshold 10%)" in checked, checked
    (line,) = [line for line in updated.splitlines() if line.startswith("sbprof: error: ")]
    assert "cannot be written (Read-only file system): cannot record a new baseline of budget 'busy'" in line
    assert "Traceback" not in updated
