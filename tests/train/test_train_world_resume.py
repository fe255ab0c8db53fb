"""A ``world_sizes`` study interrupted or edited between a world's record and its ranks' records: never a world
taken for done without its ranks (before, a SIGTERM there left world 1 marked done, and its speed-ups read n/a).

Real torchrun launches (one rank, tiny model) in a real ``sbprof train`` process; the SIGTERM is sent by that
process to itself right after the first write of ``results.json`` that holds a world's record.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers.paths import ROOT
from helpers.train_tiny import tiny_overrides
from sbprof.cli import main
from sbprof.results import RESULTS_FILE

pytestmark = pytest.mark.slow

TERM_AFTER_THE_WORLDS_WRITE = """
import json, os, signal, sys
from sbprof.results import store
real, sent = store.atomic_write, []

def write_then_term(path, content):
    real(path, content)
    if not sent and any(r["cell"]["rank"] is None for r in json.loads(content)["records"]):
        sent.append(True)
        os.kill(os.getpid(), signal.SIGTERM)  # as a scheduler's polite kill would, at the worst moment

store.atomic_write = write_then_term
from sbprof.cli import main
sys.exit(main(["train", sys.argv[1], "--noprogressbar"]))
"""


def _config(tmp_path):
    config = tmp_path / "worlds.yaml"
    config.write_text(json.dumps(tiny_overrides(tmp_path / "out", world_sizes=[1], variants=["ctc"],
                                                scaling=["strong"])))
    return config


def _cells(out):
    return sorted((r["cell"]["rank"] is None, r["cell"]["rank"], r["status"])
                  for r in json.loads((out / RESULTS_FILE).read_text())["records"])


def _world_is_whole(out):
    """The report's world of 1 reads as a whole world: its rank's figures are there."""
    report = " ".join((out / "report.md").read_text().split())
    return "**Complete**: all 1 ranks ended normally." in report and "| ranks with figures | 1 of 1 |" in report


def test_a_sigterm_after_the_worlds_write_never_leaves_a_world_without_its_ranks(tmp_path, capsys):
    config = _config(tmp_path)
    out = tmp_path / "out"
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])  # this checkout, in every process
    done = subprocess.run([sys.executable, "-c", TERM_AFTER_THE_WORLDS_WRITE, str(config)], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 130, done.stderr[-3000:]
    assert _cells(out) == [(False, 0, "ok"), (True, None, "ok")]  # the world and its rank, saved together
    assert main(["train", str(config), "--noprogressbar"]) == 0
    assert "measured 0 cell(s) (0 failed), 2 already done" in capsys.readouterr().out  # nothing launched
    assert _world_is_whole(out)


def test_a_world_stored_without_its_ranks_is_launched_again_whole(tmp_path, capsys):
    """A file edited (or written by an sbprof that saved a world apart from its ranks): the resume rereads the
    world, instead of taking it for done."""
    config = _config(tmp_path)
    out = tmp_path / "out"
    assert main(["train", str(config), "--noprogressbar"]) == 0
    data = json.loads((out / RESULTS_FILE).read_text())
    data["records"] = [r for r in data["records"] if r["cell"]["rank"] is None]
    (out / RESULTS_FILE).write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["train", str(config), "--noprogressbar"]) == 0
    assert "measured 2 cell(s) (0 failed), 0 already done" in capsys.readouterr().out  # the world launched again
    assert _cells(out) == [(False, 0, "ok"), (True, None, "ok")]
    assert _world_is_whole(out)
