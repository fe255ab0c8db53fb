"""sbprof run at its process's and its disk's boundaries: a disk that fills, a folder that holds a run already,
a script that forks, a script that leaves by ``os._exit``. What was measured is never lost, never mixed with
another process's steps, and never replaced."""
from __future__ import annotations

import json

import pytest

from helpers.mounts import small_disk
from run_helpers import RECIPES, LOOP, records, sbprof_run

BOUNDARIES = RECIPES / "loop" / "boundaries.py"


def _stray(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".sbprof-reserve") or p.suffix == ".tmp")


def test_a_disk_that_fills_while_the_script_runs_keeps_every_measured_step(tmp_path):
    """150 measured steps, and the output folder's 12 MiB disk filled at step 20: the steps are saved in the space
    sbprof held back (before, a note written first spent it, and the message said to run the script again)."""
    with small_disk(tmp_path / "small") as disk:
        out = disk / "out"
        done = sbprof_run(["--warmup", "2", "--measured", "150", "--output_folder", str(out), str(BOUNDARIES),
                           "--steps", "200", "--fill_at", "20", "--fill_folder", str(disk)], cwd=tmp_path)
        assert "disk filled: No space left on device" in done.stdout
        assert done.returncode == 0, done.stderr
        (record,) = records(out).values()
        assert len(record["wall_s"]) == 150 and record["warmup"] == 2
        assert f"sbprof: note: the disk of {out} is full: this run's records were saved in the space sbprof held " \
               "back" in done.stderr
        assert "run again" not in done.stderr and "run the same command" not in done.stderr
        notes = json.loads((out / "results.json").read_text())["notes"]
        assert any("trace of train was not written" in n for n in notes)  # the report names no trace it lacks
        assert (out / "report.md").is_file() and _stray(out) == [] and not list((out / "traces").iterdir())


@pytest.mark.slow
def test_running_the_same_command_into_its_finished_folder_is_refused_and_keeps_the_run(tmp_path):
    out = tmp_path / "out"
    argv = ["--output_folder", str(out), str(LOOP), "--steps", "8"]
    assert sbprof_run(argv, cwd=tmp_path).returncode == 0
    before = (out / "results.json").read_bytes()
    again = sbprof_run(argv, cwd=tmp_path)
    assert again.returncode == 2, again.stderr
    (line,) = again.stderr.strip().splitlines()
    assert line.startswith(f"sbprof: error: {out} already holds a run (1 record(s) in {out}/results.json); a run of "
                           "sbprof run cannot be resumed"), line
    assert "script args" not in again.stdout  # refused before the script ran
    assert (out / "results.json").read_bytes() == before


@pytest.mark.parametrize("child, status", [("returns", 0), ("child_exit", 7), ("raises", 1)])
def test_a_forked_child_never_writes_the_parents_results_and_os_exit_keeps_what_was_recorded(tmp_path, child,
                                                                                              status):
    """The parent takes 3 steps, forks a child that takes 2 and ends its own way, then leaves by os._exit(5)."""
    out = tmp_path / "out"
    done = sbprof_run(["--measured", "10", "--output_folder", str(out), str(BOUNDARIES), "--steps", "3",
                       "--fork", child, "--hard_exit", "5"], cwd=tmp_path)
    assert done.returncode == 5, done.stderr
    assert f"child status {status}" in done.stdout  # the child ended as Python would have ended it
    assert ("RuntimeError: the child's own error" in done.stderr) == (child == "raises")
    (record,) = records(out).values()
    assert record["warmup"] == 2 and len(record["wall_s"]) == 1  # the parent's 3 steps, none of the child's
    assert record["settings"]["ended"] == "left by os._exit(5)" and record["settings"]["exit_code"] == 5
    assert "sbprof: note: the script left by os._exit(5)" in done.stderr
    assert f"sbprof: report.md: {out / 'report.md'}" in done.stderr
    assert "left by os._exit(5)" in (out / "report.md").read_text() and _stray(out) == []


def test_os_exit_from_a_thread_of_the_script_says_why_nothing_is_saved(tmp_path):
    """torch's profiler can be stopped only in the thread that runs the script: saving from the thread that
    called os._exit crashed the process (SIGSEGV in the trace's export). It says why instead, and gives the held
    space back."""
    script = tmp_path / "thread_exit.py"
    script.write_text("import os, threading, torch\nm = torch.nn.Linear(4, 1)\n"
                      "o = torch.optim.SGD(m.parameters(), lr=0.1)\nfor _ in range(5):\n"
                      "    loss = m(torch.randn(2, 4)).sum(); o.zero_grad(); loss.backward(); o.step()\n"
                      "t = threading.Thread(target=lambda: os._exit(4), name='quitter'); t.start(); t.join()\n")
    out = tmp_path / "out"
    done = sbprof_run(["--output_folder", str(out), str(script)], cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("sbprof: error:")]
    assert line == ("sbprof: error: the script left by os._exit(4), and what it recorded could not be saved: it "
                    "called os._exit from thread 'quitter', and torch's profiler can be stopped only in the thread "
                    "the script runs in")
    assert _stray(out) == [] and not (out / "results.json").exists()
