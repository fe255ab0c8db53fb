"""``sbprof gate`` on a busy machine: a copy of real results with every time x1.5 is a regression, on CPU time.

Ground truth: the x1.5 copy (wall and CPU times of real records scaled by a known factor) is 50 % slower by
construction; one busy process (``python -c "while True: pass"``) runs beside the measuring, so the runs' wall
times wait for cores while their CPU times (the model's own work, real matrix products) do not.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.fake_interfaces import use_test_environment, write_model_folder, write_sweep_yaml
from sbprof.cli import main as sbprof_main
from sbprof.registry import get_job
from sbprof.jobs.runner import run_config
from sbprof.results import RESULTS_FILE
from sbprof.sweep.config import load_config


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def measured_beside_a_busy_process(tmp_path: Path) -> Path:
    model = write_model_folder(tmp_path / "matmul", matrix_size=128, matmuls_per_second=150,
                               timing_log=str(tmp_path / "timing.jsonl"))
    out = tmp_path / "base"
    path = write_sweep_yaml(tmp_path / "p.yaml", str(model), "helpers.fake_interfaces.MatmulInterface", method="process",
                            args=["wavs", "wav_lens"], lengths=[1], batch_sizes=[1], measured=5, runs=4,
                            output_folder=out)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        outcome = run_config(get_job("profile"), load_config(path, None, {"noprogressbar": True}),
                             log=lambda line: None)
    finally:
        busy.kill()
        busy.wait()
    assert outcome.failed == 0 and outcome.measured == 4
    return out


def scaled_copy(folder: Path, target: Path, factor: float) -> Path:
    shutil.copytree(folder, target)
    data = json.loads((target / RESULTS_FILE).read_text())
    for record in data["records"]:
        for name in ("wall_s", "cpu_s"):
            record[name] = [factor * x for x in record[name]]
    (target / RESULTS_FILE).write_text(json.dumps(data))
    return target


def test_times_scaled_by_1_5_regress_on_cpu_time_with_a_busy_process_beside(tmp_path, capsys):
    base = measured_beside_a_busy_process(tmp_path)
    records = json.loads((base / RESULTS_FILE).read_text())["records"]
    assert all(r["extra"]["others_cpu_s"] / r["extra"]["window_s"] >= 0.5 for r in records)  # the busy process
    slower = scaled_copy(base, tmp_path / "slower", 1.5)
    capsys.readouterr()
    assert sbprof_main(["gate", str(base), str(slower)]) == 1  # regressed
    text = capsys.readouterr().out
    # Which clock judges is the rule's to decide from what the runs met (tested on known records below): with a
    # core left free beside the busy process, the wall-time spread may stay as narrow as the CPU time's, and the
    # wall time judges. Either clock must find the known x1.5, as the ratio itself.
    assert "regressed" in text and "1.500 [" in text
    if "judged on CPU time" in text:
        assert "1 cell(s) judged on CPU time" in text and "judged on CPU time: load" in text
    # The copy against itself: unchanged, exit 0.
    assert sbprof_main(["gate", str(base), str(scaled_copy(base, tmp_path / "same", 1.0))]) == 0


def records(scale, load, wall=(1.0, 1.6, 1.1, 1.5), cpu=(0.50, 0.51, 0.49, 0.50)):
    """Four runs of one 1 s cell: known CPU times (+-2 %), wall times spread by waiting, ``load`` others' cores."""
    from sbprof.record import Cell, Measurement
    from sbprof.record.results import Results

    return Results("profile", records=[
        Measurement(label="c", cell=Cell(model="m", device="cpu", threads=1, audio_s=1.0, batch_size=1, run=r),
                    wall_s=[scale * w] * 3, cpu_s=[scale * c] * 3, audio_seconds=1.0,
                    extra={"others_cpu_s": 2.0 * load, "window_s": 2.0})
        for r, (w, c) in enumerate(zip(wall, cpu))])


def test_the_rule_on_known_records():
    from sbprof.analysis.gate import describe_row, gate

    row, = gate(records(1.0, 1.3), records(1.5, 1.3)).rows
    assert row.status == "regressed" and row.on_cpu and "judged on CPU time: load 1.3" in describe_row(row)
    assert abs(row.verdict.ratio - 1.5) < 1e-9
    quiet, = gate(records(1.0, 0.1), records(1.5, 0.1)).rows  # no load to explain the spread: wall time
    assert not quiet.on_cpu and quiet.status == "unchanged"  # the +-60 % wall spread hides the x1.5
