"""benchmarks/gpu_check.py on the CPU: one line and exit 0 without a GPU; a bad command line is one line and exit 2;
and its machinery (parts as pytest processes, junit outcomes, recorded figures, a part killed at its timeout, the
table and its files) run end to end on a small project of fake CUDA-marked tests, with the real pytest."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from benchmarks import gpu_check, gpu_setup
from benchmarks.gpu_check import Part, run_check

CHECK = Path(gpu_check.__file__)

FAKE_TESTS = '''
import time
import pytest
from benchmarks.gpu_truths import check, keep_report, relative

pytestmark = pytest.mark.cuda


def test_holds():
    check(relative("holds", 1.0, 1.0, 0.01, "s"))


def test_misses():
    check(relative("misses", 1.2, 1.0, 0.01, "s"))


def test_fails_before_comparing():
    assert 1 == 2, "broken setup"


def test_passes_without_a_figure(tmp_path):
    (tmp_path / "report.md").write_text("| figure | value |")
    keep_report("fake job", tmp_path / "report.md")


def test_skipped():
    pytest.skip("needs 2 GPUs")


@pytest.mark.parametrize("x", ["a"])
def test_param(x):
    check(relative(f"param {x}", 1.0, 1.0, 0.01))
'''

SLOW_TEST = '''
import time
import pytest
from benchmarks.gpu_truths import check, relative


@pytest.mark.cuda
def test_records_then_hangs():
    check(relative("before the hang", 1.0, 1.0, 0.01))
    time.sleep(60)


def test_not_cuda_never_runs():
    raise AssertionError("a test without the cuda mark ran")
'''


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the check would run")
def test_without_a_gpu_the_check_says_so_in_one_line_and_exits_0(tmp_path):
    done = subprocess.run([sys.executable, str(CHECK), str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [done.stdout.strip()] and done.stdout.startswith("gpu_check: no CUDA device")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv,message", [([], "required: outdir"),
                                          (["o", "--only", "trian"], "unknown part(s) trian")])
def test_a_bad_command_line_is_one_line_and_exit_2(argv, message):
    done = subprocess.run([sys.executable, str(CHECK), *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and message in done.stderr and done.stderr.startswith("gpu_check.py: error")


def _project(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "slow").mkdir()
    (root / "setup.cfg").write_text("[tool:pytest]\nmarkers =\n    cuda: needs a CUDA device\n")
    (root / "tests" / "test_fake_cuda.py").write_text(FAKE_TESTS)
    (root / "slow" / "test_fake_slow.py").write_text(SLOW_TEST)
    return root


def test_the_check_runs_parts_and_writes_one_table(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PYTHONPATH", str(gpu_setup.ROOT))  # restored afterwards; the check prepends its own
    monkeypatch.setattr(sys, "path", list(sys.path))
    root = _project(tmp_path / "proj")
    parts = (Part("fake", ("tests",), 120), Part("slow", ("slow",), 8), Part("late", ("tests",), 60))
    code = run_check(tmp_path / "out", 200, ["fake", "slow"], root=root, all_parts=parts, wheels=tmp_path / "none")
    assert code == 1  # a figure did not hold, a test failed, a part timed out
    data = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    rows = {f["figure"]: f for f in data["figures"]}
    assert rows["holds"]["holds"] is True and rows["misses"]["holds"] is False and rows["param a"]["holds"] is True
    failed = rows["test_fake_cuda.py::test_fails_before_comparing"]
    assert failed["holds"] is False and "broken setup" in failed["note"]
    assert rows["test_fake_cuda.py::test_passes_without_a_figure"]["holds"] is True
    assert rows["test_fake_cuda.py::test_skipped"]["holds"] is None and "needs 2 GPUs" in rows[
        "test_fake_cuda.py::test_skipped"]["note"]
    assert rows["before the hang"]["holds"] is True  # recorded before the part was killed
    assert rows["part slow"]["agreement"] == "timed out after 8 s" and rows["part slow"]["holds"] is False
    assert not any("not_cuda" in name for name in rows) and "part late" not in rows  # not asked for
    assert rows["holds"]["source"] == "tests/test_fake_cuda.py::test_holds"
    assert data["versions"]["GPU"] == "none" and "no wheel folder" in data["versions"]["wheels"]
    table = (tmp_path / "out" / "gpu_check.md").read_text()
    assert "| figure | sbprof | outside reference | agreement | holds? |" in table
    assert "| misses | 1.2 s | 1 s | +20.0 % (tolerance ±1 %) | NO |" in table
    assert "# fake job" in (tmp_path / "out" / "gpu_reports.md").read_text()
    assert "===== part slow" in (tmp_path / "out" / "gpu_check.log").read_text()
    printed = capsys.readouterr().out
    assert printed.startswith("GPU: none\n") and "part slow: timed out after 8 s" in printed


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel, made by hand."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}/__init__.py", "VALUE = 42\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def test_only_the_missing_distributions_are_installed_offline_into_the_site_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "")
    monkeypatch.setattr(sys, "path", list(sys.path))
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    wheels.mkdir()
    _wheel(wheels, "sbprof_fake_dist", "0.1")
    _wheel(wheels, "tabulate", "0.0.1")  # installed here already: left alone
    assert [w.name for w in gpu_setup.missing_wheels(wheels)] == ["sbprof_fake_dist-0.1-py3-none-any.whl"]
    installed, problem = gpu_setup.install_missing(wheels, site)
    assert (installed, problem) == (["sbprof-fake-dist"], "")
    import sbprof_fake_dist

    assert sbprof_fake_dist.VALUE == 42 and not (site / "tabulate").exists()
    assert str(site) in sys.path and str(site) == __import__("os").environ["PYTHONPATH"].split(":")[0]
    assert gpu_setup.install_missing(wheels, site) == ([], "")  # nothing left to install


def test_a_junit_file_missing_or_cut_short_gives_no_outcomes(tmp_path):
    assert gpu_check.outcomes(tmp_path / "absent.xml") == []
    (tmp_path / "cut.xml").write_text('<testsuites><testsuite><testcase classname="tests.x" name="t"')
    assert gpu_check.outcomes(tmp_path / "cut.xml") == []
