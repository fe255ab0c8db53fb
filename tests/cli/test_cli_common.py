"""What the commands share: recipe scripts that do not shadow the standard library, a job run in its
locked folder with every way it can stop turned into one line and an exit code, a config loaded or refused."""
import errno
import os
import subprocess
import sys

import pytest

from sbprof.cli.common import EXIT_CONFIG, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, job_config, run_in_folder
from sbprof.errors import ConfigError, MeasurementError
from sbprof.results import FolderLock


def test_a_recipe_folder_holding_profile_py_does_not_shadow_cprofile(tmp_path):
    recipes, modules = tmp_path / "recipes", tmp_path / "modules"
    recipes.mkdir()
    modules.mkdir()
    (recipes / "profile.py").write_text("raise SystemExit('the recipes folder shadowed the profile module')\n")
    (recipes / "other.py").write_text("import sys\nfrom sbprof.cli.common import run_recipe\n"
                                      "sys.exit(run_recipe(__file__, 'probe', prog='other'))\n")
    (modules / "probe.py").write_text("def main(argv, prog):\n    import cProfile\n"
                                      "    return 0 if hasattr(cProfile, 'Profile') and argv == ['x'] else 1\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(modules), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(recipes / "other.py"), "x"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr


def _raise(exc):
    def run(folder):
        raise exc
    return run


@pytest.mark.parametrize("stop, code, says", [
    (KeyboardInterrupt(), EXIT_INTERRUPTED, "interrupted; finished cells are kept in"),
    (ConfigError("bad key"), EXIT_CONFIG, "bad key"),
    (MeasurementError("the model does not load"), EXIT_FAILED, "the model does not load"),
    (OSError(errno.ENOSPC, "No space left on device"), EXIT_FAILED, "No space left on device"),
])
def test_a_job_that_stops_is_one_line_and_an_exit_code(tmp_path, capsys, stop, code, says):
    assert run_in_folder(str(tmp_path / "out"), _raise(stop), "cells") == (code, None)
    err = capsys.readouterr().err.strip()
    assert err.startswith("sbprof: error: ") and "\n" not in err and says in err, err


def test_a_job_runs_in_its_locked_folder_and_a_second_one_is_refused(tmp_path, capsys):
    folder = tmp_path / "out"
    assert run_in_folder(str(folder), lambda f: (f, f.is_dir()), "cells") == (EXIT_OK, (folder, True))
    with FolderLock(folder):  # another run holds the folder
        assert run_in_folder(str(folder), lambda f: "measured", "cells") == (EXIT_CONFIG, None)
    assert "sbprof: error:" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert run_in_folder(str(tmp_path / "file"), lambda f: "measured", "cells") == (EXIT_CONFIG, None)


def test_job_config_loads_after_parsing_and_refuses_bad_input_in_one_line(capsys):
    seen = job_config(["c.yaml", "--seed", "3", "--device", "cpu"], ["seed"], (), ("device",),
                      "tests_cli_loader:load")
    assert seen == ("c.yaml", {"seed": 3}, {"device": "cpu"})
    assert job_config(["c.yaml", "--sede", "3"], ["seed"], (), (), "tests_cli_loader:load") is None
    err = capsys.readouterr().err.strip()
    assert err.startswith("sbprof: error: ") and "--sede" in err and "\n" not in err


@pytest.fixture(autouse=True)
def _loader(tmp_path, monkeypatch):
    """A loader module that returns what it was given (``job_config`` imports it by name)."""
    (tmp_path / "tests_cli_loader.py").write_text("def load(path, overrides, options):\n"
                                                  "    return path, overrides, options\n")
    monkeypatch.syspath_prepend(str(tmp_path))
