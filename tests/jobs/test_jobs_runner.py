"""The one runner's own rules, on the profiling job: a hung cell, a run whose every cell fails, bad input found by a
worker, the recipe scripts."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers.fake_interfaces import replace_in_file, use_test_environment, write_model_folder, write_sweep_yaml
from sbprof.cli import main
from sbprof.results import RESULTS_FILE

FAULTY = {"type_name": "helpers.fake_interfaces.FaultyInterface", "method": "process", "args": ["wavs", "wav_lens"]}


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def faulty_yaml(tmp_path, **hparams):
    folder = write_model_folder(tmp_path / "faulty", **{"raise_batch_sizes": [], "oom_from_s": 1e9,
                                                        "kill_batch_sizes": [], **hparams})
    return write_sweep_yaml(tmp_path / "s.yaml", str(folder), **FAULTY, lengths=[0.5], batch_sizes=[1, 2, 3])


def stored(tmp_path):
    return {r["cell"]["batch_size"]: r for r in json.loads((tmp_path / "out" / RESULTS_FILE).read_text())["records"]}


def test_a_hung_cell_is_recorded_after_timeout_s_and_the_run_goes_on(tmp_path, capsys):
    path = faulty_yaml(tmp_path, hang_batch_sizes=[2])
    replace_in_file(path, "seed: 0", "seed: 0\ntimeout_s: 3")
    assert main(["profile", str(path), "--noprogressbar"]) == 0
    cells = stored(tmp_path)
    assert cells[1]["status"] == cells[3]["status"] == "ok"
    assert cells[2]["status"] == "error" and cells[2]["message"].startswith("no result within 3 s")
    assert "error: no result within 3 s" in (tmp_path / "out" / "report.md").read_text()


def test_a_run_whose_every_cell_fails_exits_1_naming_the_first_failure(tmp_path, capsys):
    assert main(["profile", str(faulty_yaml(tmp_path, raise_batch_sizes=[1, 2, 3])), "--noprogressbar"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("sbprof: error: every cell measured in this run failed; the first:") and "\n" not in err
    assert "ValueError: fake failure for batch size" in err
    assert {r["status"] for r in stored(tmp_path).values()} == {"error"}  # recorded all the same


def test_bad_input_found_by_a_worker_leaves_no_folder_behind(tmp_path, capsys):
    folder = write_model_folder(tmp_path / "m", raise_batch_sizes=[], oom_from_s=1e9, kill_batch_sizes=[])
    path = write_sweep_yaml(tmp_path / "s.yaml", str(folder), **FAULTY, lengths=[0.00001], batch_sizes=[1])
    assert main(["profile", str(path), "--noprogressbar"]) == 2
    assert "shorter than one sample" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_recipe_folder_holding_profile_py_does_not_shadow_cprofile(tmp_path):
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "profile.py").write_text("raise SystemExit('the recipes folder shadowed the profile module')\n")
    # The job, stood in for, imports cProfile (as torch's compiler stack does) after run_recipe set sys.path up.
    (recipes / "other.py").write_text(
        "import sys\nimport sbprof.cli.job as job\n"
        "job.main = lambda name, argv, prog: 0 if hasattr(__import__('cProfile'), 'Profile') and argv == ['x'] else 1\n"
        "sys.exit(job.run_recipe(__file__, 'profile', prog='other'))\n")
    out = subprocess.run([sys.executable, str(recipes / "other.py"), "x"], capture_output=True, text=True,
                         env={**os.environ})
    assert out.returncode == 0, out.stderr


def test_the_runner_is_wired_in_one_place():
    """Every command and library caller starts the runner through run_config: the folder, Reporting, retries,
    budget, resumes and log are put together once (a cluster's types get run_job from there too)."""
    from pathlib import Path

    import sbprof

    root = Path(sbprof.__file__).parent
    callers = {str(p.relative_to(root)) for p in root.rglob("*.py") if "run_job(" in p.read_text()}
    assert callers == {"jobs/runner.py", "jobs/cluster.py"}, callers
    assert all("run_config(" in (root / p).read_text() for p in ("cli/job.py", "cli/run.py", "cli/vary.py"))
