"""``sbprof run --vary --time-budget S``: the budget bounds the comparison's time, a run still going when it ends
included (a hang, a slower round), with the processes that run started.
"""
from __future__ import annotations

import time

import psutil
from run_helpers import RECIPES, sbprof_run

from sbprof.analysis.vary import analyse
from sbprof.results import load_results

VARY = RECIPES / "vary" / "loop.py"


def test_a_run_still_going_when_the_budget_ends_is_stopped_with_its_workers_and_recorded(tmp_path):
    # The base (2 DataLoader workers) waits for items that each sleep 10 minutes: its first step never comes.
    # Without a bound on the run itself, the comparison would wait for them (sbprof_run's timeout would fail this).
    out, budget = tmp_path / "cmp", 20
    began = time.monotonic()
    proc = sbprof_run(["--vary", "num_workers: [2, 0]", "--rounds", "2", "--time-budget", str(budget),
                       "--warmup", "0", "--measured", "2", "--output_folder", str(out), str(VARY),
                       "--steps", "3", "--sleep_ms", "600000"], cwd=tmp_path, timeout=300)
    took = time.monotonic() - began
    assert proc.returncode == 1, proc.stderr[-2000:]  # the base never ran: nothing to compare
    assert took < budget + 120, took  # the parent's own start and report beside the budget, on a loaded machine
    report = analyse(load_results(out))
    base = next(v for v in report.variants if v.name == "base")
    assert base.runs == 0 and len(base.failures) == 1, base.failures
    assert f"the time budget of {budget} s ended" in base.failures[0]
    assert any("time budget" in note for note in report.notes)  # the other variant never started
    assert not (out / "variants" / "num_workers_0").exists()
    left = [p for p in psutil.process_iter(["cmdline"]) if str(out) in " ".join(p.info["cmdline"] or [])]
    assert left == [], left  # the run's process and its workers are gone
