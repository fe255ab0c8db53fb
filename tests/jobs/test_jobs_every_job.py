"""What the one runner gives every job alike: resume after kill -9, render-only byte for byte, the job's name checked,
and the shared keys meaning the same with the same wording everywhere."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from helpers.fake_interfaces import use_test_environment
from helpers.job_configs import COUNT_JOBS, SCRIPT_JOBS, YAML_JOBS, argv_of, expected_records
from helpers.paths import ROOT, TESTS
from sbprof.analysis.payloads import PAYLOADS, check_payloads
from sbprof.cli import main
from sbprof.base.errors import ConfigError
from sbprof.registry import JOBS, get_job
from sbprof.jobs.render import summary_block
from sbprof.results import RESULTS_FILE, load_results

MULTI_CELL = YAML_JOBS


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def test_every_job_is_registered_and_the_command_knows_it(capsys):
    assert set(JOBS) == set(YAML_JOBS) | set(COUNT_JOBS) | set(SCRIPT_JOBS)
    assert main(["--help"]) == 0
    listed = capsys.readouterr().out
    assert all(f"  {job} " in listed for job in JOBS)


def _records(folder: Path) -> dict:
    data = json.loads((folder / RESULTS_FILE).read_text())
    return {json.dumps(r["cell"], sort_keys=True): r for r in data["records"] if r["status"] != "skipped"}


def _kill_after_first_record(argv, folder: Path, deadline_s: float = 240) -> None:
    """``python -m sbprof ...`` killed with SIGKILL (its whole process group: workers too) once a record is saved."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "sbprof", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        start = time.monotonic()
        while time.monotonic() - start < deadline_s:
            if (folder / RESULTS_FILE).exists() and _records(folder):
                break
            assert proc.poll() is None, f"the run ended before it could be killed (exit {proc.returncode})"
            time.sleep(0.05)
        else:
            raise AssertionError("no record within the deadline")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory):
    """Per multi-cell job: a run killed with SIGKILL after its first record, then the same command again."""
    done = {}

    def run(job):
        if job not in done:
            tmp = tmp_path_factory.mktemp(job)
            out = tmp / "out"
            argv = [job, *argv_of(job, tmp, out)]
            _kill_after_first_record(argv, out)
            before = _records(out)
            code = main(argv)
            done[job] = (out, argv, before, code)
        return done[job]

    return run


@pytest.mark.slow
@pytest.mark.parametrize("job", MULTI_CELL)
def test_kill_9_mid_run_then_a_rerun_measures_only_the_missing_cells(job, killed_and_resumed, capsys):
    out, argv, before, code = killed_and_resumed(job)
    assert code == 0
    after = _records(out)
    assert len(after) == expected_records(job) and 1 <= len(before) < expected_records(job)
    for key, record in before.items():
        assert after[key] == record  # untouched: not measured again
    capsys.readouterr()
    assert main(argv) == 0  # everything is there now: nothing measured again
    assert f"measured 0 {get_job(job).noun}(s) (0 failed), {len(after)} already done" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("job", MULTI_CELL)
def test_render_only_reproduces_the_report_byte_for_byte_and_refuses_another_jobs_folder(job, killed_and_resumed,
                                                                                      capsys):
    out = killed_and_resumed(job)[0]
    written = {name: (out / name).read_bytes() for name in ("report.md", "results.csv") if (out / name).exists()}
    assert "report.md" in written
    assert_summary_is_the_reports(job, out)
    for name in written:
        (out / name).unlink()
    assert main([job, "--render-only", str(out)]) == 0
    assert {name: (out / name).read_bytes() for name in written} == written
    other = next(j for j in MULTI_CELL if j != job)
    capsys.readouterr()
    assert main([other, "--render-only", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"sbprof: error: {out / RESULTS_FILE} holds results of 'sbprof {job}', not of 'sbprof {other}': "
                   f"render it with 'sbprof {job} --render-only', or give a folder of {other} results")


def assert_a_misspelt_payload_key_is_refused(job: str, out: Path, copy: Path, capsys) -> None:
    """The file ``job`` wrote loads strictly; the same file with one payload key misspelt (its last letter dropped)
    is one line naming the payload class, the key, the field it should be and the file, and exit code 2."""
    assert check_payloads(load_results(out), str(out)) == []  # every key the job's workers wrote is declared
    data = json.loads((out / RESULTS_FILE).read_text())
    record = next(r for r in data["records"] if r.get("extra"))
    key = next(iter(record["extra"]))
    bad = key[:-1]
    record["extra"] = {(bad if k == key else k): v for k, v in record["extra"].items()}
    copy.mkdir()
    (copy / RESULTS_FILE).write_text(json.dumps(data))
    capsys.readouterr()
    assert main([job, "--render-only", str(copy)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    owner = next(cls.__name__ for cls in PAYLOADS[job] if key in {f.name for f in dataclasses.fields(cls)})
    assert err == [f"sbprof: error: {copy / RESULTS_FILE}: record {record['label']!r}: extra: unknown key {bad!r} of "
                   f"{owner} (did you mean {owner}.{key}?)"]


@pytest.mark.slow
@pytest.mark.parametrize("job", MULTI_CELL)
def test_the_file_a_job_wrote_loads_strictly_and_a_misspelt_payload_key_is_refused(job, killed_and_resumed,
                                                                                   tmp_path, capsys):
    assert_a_misspelt_payload_key_is_refused(job, killed_and_resumed(job)[0], tmp_path / "misspelt", capsys)


def assert_summary_is_the_reports(job: str, out: Path) -> None:
    """results.json's summary block is the one the saved records' analysis gives, the analysis whose rendering
    --render-only then reproduces byte for byte: its figures are the report's."""
    entry = get_job(job)
    block = summary_block(entry, entry.analyse(load_results(out)))
    assert json.loads((out / RESULTS_FILE).read_text())["summary"] == json.loads(json.dumps(block))


@pytest.mark.parametrize("job", COUNT_JOBS)
def test_count_jobs_are_records_that_render_again(job, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([job, *argv_of(job, tmp_path, out)]) == 0
    report = (out / "report.md").read_bytes()
    assert_summary_is_the_reports(job, out)
    (out / "report.md").unlink()
    assert main([job, "--render-only", str(out)]) == 0 and (out / "report.md").read_bytes() == report
    assert_a_misspelt_payload_key_is_refused(job, out, tmp_path / "misspelt", capsys)
    capsys.readouterr()
    assert main([job, *argv_of(job, tmp_path, out)]) == 0  # a rerun keeps the record
    assert "measured 0 model(s) (0 failed), 1 already done" in capsys.readouterr().out
    other = next(j for j in COUNT_JOBS if j != job)
    assert main([other, "--render-only", str(out)]) == 2
    assert f"holds results of 'sbprof {job}', not of 'sbprof {other}'" in capsys.readouterr().err


def _config(job: str, tmp_path: Path, devices):
    """The job's checked config with ``devices`` set (a YAML key, or ``--device`` for the count commands)."""
    entry = get_job(job)
    argv = argv_of(job, tmp_path, tmp_path / "out")
    from sbprof.cli.job import command_line

    if job in COUNT_JOBS:
        asked = entry.parse(argv + (["--device", devices] if devices else []), f"sbprof {job}")
    else:
        asked = command_line(entry, [argv[0], "--devices", json.dumps(devices)], f"sbprof {job}")
    return entry.load_config(asked.source, asked.overrides, asked.options)


@pytest.mark.parametrize("job", YAML_JOBS)
def test_devices_null_means_every_device_of_this_machine_in_every_job(job, tmp_path):
    expected = ("cuda:0", "cpu") if torch.cuda.is_available() else ("cpu",)
    assert _config(job, tmp_path, None).preamble.devices == expected


@pytest.mark.parametrize("job", list(YAML_JOBS) + list(COUNT_JOBS))
@pytest.mark.parametrize("device, wording", [
    ("gpu", "devices: 'gpu' is not a device (use cpu, cuda or cuda:N)"),
    ("cuda:3", "asked for, but CUDA is not available on this machine"),
])
def test_a_bad_device_gets_the_same_wording_in_every_job(job, device, wording, tmp_path):
    if device.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("CUDA is present")
    with pytest.raises(ConfigError) as caught:
        _config(job, tmp_path, device)
    assert wording in str(caught.value)


@pytest.mark.slow
@pytest.mark.parametrize("job", MULTI_CELL)
def test_a_disk_that_fills_mid_run_loses_no_record(job, tmp_path, capsys, monkeypatch):
    """The disk is full from the write of results.json that carries a second record on (an injected ENOSPC),
    until sbprof gives back the space it held: that record is saved all the same, and the run stops with one
    line (for train, the record of its second variant: the case of issue 22 that lost it)."""
    from sbprof.results import files

    out = tmp_path / "out"
    real, carried = files.os.replace, []
    reserve = out / files.RESERVE_FILE

    def full_from_the_second_record(src, dst):
        if str(dst).endswith(RESULTS_FILE) and reserve.exists():
            records = len(json.loads(Path(src).read_text())["records"])
            if records >= 2:
                carried.append(records)
                raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(files.os, "replace", full_from_the_second_record)
    assert main([job, *argv_of(job, tmp_path, out)]) == 1
    err = capsys.readouterr().err
    assert "is full: the last result was saved" in err and err.count("\n") == 1, err
    assert carried and len(json.loads((out / RESULTS_FILE).read_text())["records"]) == carried[0]
    assert not reserve.exists()
