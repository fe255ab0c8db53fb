"""Ctrl-C after the script has ended, during each of sbprof run's own phases (the peak FLOP/s probe, the analysis,
the rendering), leaves results.json and report.md of what was recorded, and the exit status of an interrupt (130).

Each SIGINT is sent when the phase's progress line appears on standard error (the line is printed as the phase
starts), as a user's Ctrl-C at that moment would be.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from helpers.signals import default_sigint
from run_helpers import TINY, env

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("phase", ["probing this CPU's peak FLOP/s", "analysing", "writing report.md"])
def test_an_interrupt_after_the_script_leaves_the_results_and_the_report(tmp_path, phase):
    out = tmp_path / "out"
    # An empty cache: the peak probe runs (once per machine otherwise).
    run_env = {**env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "sbprof", "run", "--output_folder", str(out), str(TINY), "--ops",
                             "100", "--steps", "12"], cwd=tmp_path, env=run_env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith(f"sbprof: {phase}"):
            os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=240) == 130, "".join(seen)[-3000:]
    assert any(line.startswith(f"sbprof: {phase}") for line in seen)
    records = json.loads((out / "results.json").read_text())["records"]
    assert [r["cell"]["variant"] for r in records] == ["train"] and len(records[0]["wall_s"]) == 5
    report = (out / "report.md").read_text()
    assert "## Stage `train` (loop)" in report and "Traceback" not in "".join(seen)
    if phase.startswith("probing"):  # the probe ends there: no share of the peak, and the report says why
        assert "the peak FLOP/s probe was interrupted" in report
        assert not (tmp_path / "cache" / "sbprof" / "peak_flops.json").exists()
    else:  # the interrupt waits until both files are written
        assert any("interrupted: finishing results.json and report.md" in line for line in seen)
