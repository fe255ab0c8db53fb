"""Results files written by sbprof at 546453e (format version 2: each job under its old name and old rule keys)
still render, through their own job's renderers, after migration."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sbprof.cli import main
from sbprof.results import load_results

OLD = Path(__file__).resolve().parents[1] / "data" / "results_546453e"


@pytest.mark.parametrize("name, job, shows", [
    ("profile", "profile", ["| 0.5 s", "Runs: each cell was measured in 2 fresh worker processes"]),
    ("compare", "compare-models", ["| ctc ", "- **Schedule**: 1 warm-up call, then 3 measured calls"]),
    ("train", "train", ["## ctc (CTCBrain, cpu, 1 threads, batch 2)", "1 warm-up + 2 measured steps"]),
    ("transducer", "transducer", ["| reference |", "1 unmeasured steps, then 2 measured ones"]),
])
def test_a_546453e_results_file_renders_as_its_job(tmp_path, capsys, name, job, shows):
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(OLD / f"{name}.json", folder / "results.json")
    results = load_results(folder)
    assert results.job == job and {"warmup", "measured"} <= set(results.rules)
    assert main([job, "--render-only", str(folder)]) == 0
    report = (folder / "report.md").read_text()
    assert all(text in report for text in shows), report[:2000]
