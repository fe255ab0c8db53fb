"""Bad input to sbprof run: one ``sbprof: error:`` line, exit 2, nothing written."""
from __future__ import annotations

import subprocess
import sys

import pytest

from run_helpers import LOOP, env, records, sbprof_run


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


def test_a_binary_file_named_py_is_not_python(tmp_path):
    """Before, its NUL bytes reached Python's compiler: exit 1 and a results.json holding a SyntaxError."""
    (tmp_path / "model.py").write_bytes(b"\x00\x01\x02import torch\n")
    _refused(sbprof_run(["--output_folder", str(tmp_path / "out"), "model.py"], cwd=tmp_path), tmp_path,
             "model.py: not a Python script (it holds NUL bytes: a binary file?)")


LATIN_1_LOOP = """# -*- coding: latin-1 -*-
import torch
print("caf\xe9")
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(8):
    loss = model(torch.randn(2, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.slow
def test_a_script_in_the_encoding_its_coding_line_names_runs_as_python_runs_it(tmp_path):
    """PEP 263: Python reads a script in the encoding its coding line names; sbprof refused it as not UTF-8."""
    (tmp_path / "loop.py").write_bytes(LATIN_1_LOOP.encode("latin-1"))
    done = sbprof_run(["--output_folder", str(tmp_path / "out"), "loop.py"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "café" in done.stdout and len(records(tmp_path / "out")["train"]["wall_s"]) == 5


@pytest.mark.slow
def test_m_finds_a_package_in_the_working_directory_as_python_m_does(tmp_path):
    """The ``sbprof`` command's own path holds its bin folder, not the working directory (``python -P`` here, as
    the installed command): before, ``sbprof run -m pkg.mod`` could not find a package that ``python -m`` runs."""
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "train.py").write_text(LATIN_1_LOOP.split("\n", 1)[1].replace("caf\xe9", "from a package"))
    done = subprocess.run([sys.executable, "-P", "-m", "sbprof", "run", "--output_folder", str(tmp_path / "out"),
                           "-m", "mypkg.train"], cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "from a package" in done.stdout and len(records(tmp_path / "out")["train"]["wall_s"]) == 5


def test_counts_past_the_jobs_bound(tmp_path):
    _refused(sbprof_run(["--output_folder", str(tmp_path / "out"), "--measured", "4294967296", str(LOOP)],
                        cwd=tmp_path), tmp_path, "--measured must be at most 2,147,483,647, got 4294967296")


@pytest.mark.parametrize("kind", ["a symbolic link loop", "a FIFO (named pipe)"])
def test_a_script_that_is_no_file_is_named_for_what_it_is(tmp_path, kind):
    """Before, a link loop read "no such script" and a FIFO "not a file"."""
    import os

    script = tmp_path / "train.py"
    os.symlink(script.name, script) if "link" in kind else os.mkfifo(script)
    _refused(sbprof_run(["--output_folder", str(tmp_path / "out"), "train.py"], cwd=tmp_path), tmp_path,
             f"train.py: it is {kind}, not a script")
