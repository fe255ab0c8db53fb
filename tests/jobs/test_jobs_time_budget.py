"""``time_budget_s``: a sweep stops starting batches once the budget would be passed, stays resumable, and its
report names the cells that missed their precision target.

Ground truth: an outside clock (``time.monotonic`` around the command), and the duration of one batch of the same
grid measured by an unbounded one-run sweep beside it.
"""
from __future__ import annotations

import time

import pytest

from helpers.fake_interfaces import use_test_environment, write_model_folder, write_sweep_yaml
from sbprof.cli import main as sbprof_main
from sbprof.results import load_results

CELLS = ["0.5 s x 1", "0.5 s x 2", "1 s x 1", "1 s x 2"]


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def sweep_yaml(tmp_path, name, runs, budget=None):
    busy = write_model_folder(tmp_path / "busy", rtf=0.02)
    path = write_sweep_yaml(tmp_path / f"{name}.yaml", str(busy), "helpers.fake_interfaces.BusyInterface", method="process",
                            args=["wavs", "wav_lens"], lengths=[0.5, 1], batch_sizes=[1, 2], runs=runs,
                            output_folder=tmp_path / name)
    if budget is not None:
        path.write_text(path.read_text() + f"time_budget_s: {budget}\n")
    return path


def timed(argv):
    start = time.monotonic()
    code = sbprof_main(argv)
    return code, time.monotonic() - start


def test_a_small_budget_ends_within_one_batch_and_the_report_names_the_cells_that_missed(tmp_path):
    code, one_batch = timed(["profile", str(sweep_yaml(tmp_path, "once", 1)), "--noprogressbar"])
    assert code == 0
    adaptive = "adaptive, target: 0.001, min_runs: 3, max_runs: 6"  # inside write_sweep_yaml's {runs: ...}
    path = sweep_yaml(tmp_path, "bounded", adaptive, budget=1)
    code, took = timed(["profile", str(path), "--noprogressbar"])
    assert code == 0  # as for a normal run
    assert took <= 1 + 1.5 * one_batch  # the budget plus one batch (a first batch always starts)
    results = load_results(tmp_path / "bounded")
    assert sorted({m.cell.run for m in results.records}) == [0]  # one pass, then the budget stopped it
    assert any("time budget: stopped after" in note for note in results.notes)
    report = (tmp_path / "bounded" / "report.md").read_text()
    assert "Cells that did not reach the precision target" in report
    line = next(line for line in report.splitlines() if "Cells that did not reach" in line)
    assert all(cell in line for cell in CELLS)
    assert "0 of 4 cells met the target" in report
    # Resumable: the same command measures the next pass on top of the first.
    assert sbprof_main(["profile", str(path), "--noprogressbar"]) == 0
    assert sorted({m.cell.run for m in load_results(tmp_path / "bounded").records}) == [0, 1]


@pytest.mark.parametrize("value", [0, -5, "soon", True])
def test_a_bad_budget_is_one_line_and_exit_2(tmp_path, capsys, value):
    path = sweep_yaml(tmp_path, "bad", 1)
    path.write_text(path.read_text() + f"time_budget_s: {value}\n")
    assert sbprof_main(["profile", str(path), "--noprogressbar"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "time_budget_s must be a positive number of seconds or null" in err[0]


def test_a_budget_below_one_batch_still_measures_a_batch_each_run(tmp_path, capsys):
    """Before, a budget smaller than one batch stopped every run before its first batch: exit 0 with nothing
    measured, and its "run again to resume" advice looped for ever. Each run now measures one batch (its first
    always starts) and stops before the next, so running it again goes on."""
    path = sweep_yaml(tmp_path, "tiny", 2, budget=0.001)  # two runs of each cell: two batches, one per pass
    counts = []
    for _ in range(2):
        assert sbprof_main(["profile", str(path), "--noprogressbar"]) == 0
        counts.append(len(load_results(tmp_path / "tiny").records))
    assert counts == [4, 8]  # each run measured one pass of the 4 cells, the second on top of the first
    notes = load_results(tmp_path / "tiny").notes
    assert sum("time budget: stopped after" in note and "run again to resume" in note for note in notes) == 1
