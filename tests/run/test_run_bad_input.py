"""Bad input to sbprof run: one ``sbprof: error:`` line, exit 2, nothing written."""
from __future__ import annotations

import pytest

from run_helpers import LOOP, sbprof_run


def _refused(done, tmp_path, words: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sbprof: error:") and words in lines[0], done.stderr
    assert not (tmp_path / "out").exists()


def test_a_missing_script(tmp_path):
    _refused(sbprof_run(["--output_folder", str(tmp_path / "out"), "missing.py"], cwd=tmp_path), tmp_path,
             "missing.py: no such script")


def test_a_script_that_is_not_python(tmp_path):
    (tmp_path / "hparams.yaml").write_text("lr: 0.1\nmodel: !new:torch.nn.Linear [1, 2]\n")
    _refused(sbprof_run(["--output_folder", str(tmp_path / "out"), "hparams.yaml"], cwd=tmp_path), tmp_path,
             "not a Python script")


def test_a_missing_module(tmp_path):
    _refused(sbprof_run(["--output_folder", str(tmp_path / "out"), "-m", "no_such_pkg.train"], cwd=tmp_path),
             tmp_path, "-m no_such_pkg.train")


def test_no_script_at_all(tmp_path):
    _refused(sbprof_run(["--warmup", "1"], cwd=tmp_path), tmp_path, "give the SCRIPT.py")


@pytest.mark.slow
def test_a_script_with_no_step(tmp_path):
    (tmp_path / "hello.py").write_text("import torch\nprint('hello', torch.ones(2).sum().item())\n")
    done = sbprof_run(["--output_folder", str(tmp_path / "out"), "hello.py"], cwd=tmp_path)
    assert "hello 2.0" in done.stdout
    _refused(done, tmp_path, "no Brain, optimiser step or inference call was seen")


@pytest.mark.slow
def test_an_output_folder_in_use(tmp_path):
    from sbprof.results import FolderLock

    (tmp_path / "out").mkdir()
    with FolderLock(tmp_path / "out"):
        done = sbprof_run(["--output_folder", str(tmp_path / "out"), str(LOOP), "--steps", "4"], cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sbprof: error:") and "in use" in lines[0], done.stderr
    assert "script args" not in done.stdout  # refused before the script ran
    assert not (tmp_path / "out" / "results.json").exists()
