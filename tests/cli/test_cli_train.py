"""``sbprof train`` / ``recipes/train_profile.py``: tables printed and written; bad input is one line, exit 2."""
import subprocess
import sys

import pytest

from helpers.paths import ROOT
from helpers.refusals import assert_refused
from helpers.train_tiny import tiny_argv
from sbprof.cli import main as sbprof_main


def main(argv):
    return sbprof_main(["train"] + list(argv))


@pytest.mark.slow
def test_the_recipe_script_runs_a_tiny_configuration(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "recipes" / "train_profile.py"), str(ROOT / "train_profile.yaml"),
                           *tiny_argv(out), "--variants", "[ctc]"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for heading in ("## ctc (CTCBrain, cpu, 1 threads, batch 2)", "### Where the step's time goes",
                    "### Compute per module", "### Parameters per submodule", "| step time, median [q1, q3]"):
        assert heading in proc.stdout
    assert (out / "report.md").read_text().strip() in proc.stdout and (out / "results.json").is_file()


def test_the_sbprof_command_and_render_only(tmp_path, capsys):
    out = tmp_path / "out"
    assert sbprof_main(["train", str(ROOT / "train_profile.yaml"), *tiny_argv(out), "--variants", "[transducer]",
                        "--profiling", "{memory: False, flops: False}"]) == 0
    printed = capsys.readouterr().out
    assert "## transducer (TransducerBrain" in printed and "rnnt_loss" in printed and "Memory (" not in printed
    (out / "report.md").unlink()
    assert main(["--render-only", str(out)]) == 0
    assert "## transducer" in (out / "report.md").read_text()


@pytest.mark.parametrize("argv, message", [
    (["--variants", "[ctc, rnnt]"], "variants: unknown variant 'rnnt'"),
    (["--mesured", "2"], "unknown option --mesured (did you mean 'measured'?)"),
    (["--model", "{kernel_size: 30}"], "model.kernel_size must be odd"),
    (["--profiling", "{modules: [decoder.*]}"], "profiling.modules: pattern 'decoder.*' matches no module"),
    (["--data", "{batch_size: 0}"], "data.batch_size must be an integer >= 1, got 0"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    assert_refused(main([str(ROOT / "train_profile.yaml"), "--output_folder", str(tmp_path / "o"), *argv]), capsys,
                   message, nothing_in=tmp_path / "o")


def test_a_missing_file(tmp_path, capsys):
    assert main([str(tmp_path / "nope.yaml")]) == 2
    assert "no such configuration file" in capsys.readouterr().err
