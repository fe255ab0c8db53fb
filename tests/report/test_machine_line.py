"""Every report's header names the machine in one line, written by one function: the same text for the same facts,
and ``unknown`` for a fact the results file does not hold (files saved at 4810748, one per job, in tests/data)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sbprof.analysis.machines import analyse_machines
from sbprof.analysis.run import analyse as analyse_run
from sbprof.cli import main
from sbprof.record import Results
from sbprof.record.results import Machine
from sbprof.report.machines import render_merged
from sbprof.report.run import render_run

DATA = Path(__file__).resolve().parents[1] / "data" / "results_4810748"
JOBS = ["profile", "compare-models", "train", "stream"]
"""The jobs whose saved results render a header with the machine (flops, params, modules and transducer: none)."""
LINE = ("AMD EPYC (2 logical cores); no GPU; torch 2.14.1+cu130, torchaudio 2.11.0, speechbrain 1.1.2, "
        "Python 3.11.7")
"""What the fixtures' machine reads as, written out by hand from their ``machine``."""


def _rendered(tmp_path: Path, job: str, machine_edit=None) -> str:
    data = json.loads((DATA / f"{job}.json").read_text())
    if machine_edit is not None:
        machine_edit(data["machine"])
    folder = tmp_path / job
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(data))
    assert main([job, "--render-only", str(folder)]) == 0
    return (folder / "report.md").read_text()


def _machine_lines(report: str) -> list:
    return [line for line in report.splitlines() if "logical cores);" in line]


def test_the_fixtures_machine_is_what_the_line_says():
    machine = json.loads((DATA / "profile.json").read_text())["machine"]
    assert all(str(machine[k]) in LINE for k in ("cpu", "cpu_count", "torch", "torchaudio", "speechbrain", "python"))
    assert machine["gpu"] is None and "no GPU" in LINE


@pytest.mark.parametrize("job", JOBS)
def test_every_jobs_header_holds_the_same_machine_line(tmp_path, job, capsys):
    lines = _machine_lines(_rendered(tmp_path, job))
    assert len(lines) == 1 and LINE in lines[0], lines


def test_the_run_and_merged_reports_hold_the_same_line(tmp_path):
    machine = json.loads((DATA / "profile.json").read_text())["machine"]
    run = render_run(analyse_run(Results("run", rules={"script": "train.py", "args": []}, machine=dict(machine))))
    assert f"- **Machine**: {LINE}" in run.splitlines()
    profile = Results.from_dict(json.loads((DATA / "profile.json").read_text()), "profile.json")
    merged = render_merged(analyse_machines([Machine("box", tmp_path, profile)]))
    row = next(line for line in merged.splitlines() if line.startswith("| box "))
    assert f"| {LINE} |" in row


@pytest.mark.parametrize("job", JOBS)
def test_a_fact_the_file_lacks_reads_unknown(tmp_path, job, capsys):
    def older(machine):  # a file from before torchaudio and Python were recorded, on a GPU whose CUDA was not
        del machine["torchaudio"], machine["python"], machine["cuda"]
        machine["gpu"] = "A100"

    lines = _machine_lines(_rendered(tmp_path, job, older))
    assert len(lines) == 1, lines
    assert ("AMD EPYC (2 logical cores); A100 (CUDA unknown); torch 2.14.1+cu130, torchaudio unknown, "
            "speechbrain 1.1.2, Python unknown") in lines[0]
