"""The supervisor against workers that hang, die inside an item, or die between items: each told apart."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sbprof.base.errors import MeasurementError
from sbprof.workers.supervisor import SETUP_TIMEOUT_MIN_S, Supervisor, WorkerJob

HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def importable(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))


def supervise(tmp_path, dos, timeout_s=None):
    results, crashes, notes = {}, {}, []
    job = WorkerJob(module="misbehaving_worker", payload={"items": [{"do": d} for d in dos]}, n_items=len(dos),
                    name="test worker", log_path=tmp_path / "w.log")
    Supervisor(job, results.__setitem__, crashes.__setitem__, timeout_s=timeout_s, on_note=notes.append).run()
    return results, crashes, notes


def test_a_hung_item_is_stopped_after_the_timeout_and_the_rest_go_on(tmp_path):
    start = time.monotonic()
    results, crashes, notes = supervise(tmp_path, ["ok", "hang", "ok"], timeout_s=1.5)
    assert time.monotonic() - start < 30
    assert sorted(results) == [0, 2] and list(crashes) == [1]
    assert crashes[1].startswith("no result within 1.5 s: the worker was stopped (hung in this item")
    assert notes == []


def test_a_death_inside_an_item_is_that_items_crash(tmp_path):
    results, crashes, notes = supervise(tmp_path, ["ok", "crash", "ok"])
    assert sorted(results) == [0, 2] and crashes[1].startswith("worker process died (exit code 7) in this item")
    assert notes == []


def test_a_death_between_items_is_noted_and_a_fresh_worker_takes_the_rest(tmp_path):
    results, crashes, notes = supervise(tmp_path, ["exit", "ok", "ok"])
    assert sorted(results) == [0, 1, 2] and crashes == {}
    assert notes == ["test worker: the worker process died (exit code 0) between items; a fresh worker took the 2 "
                     "remaining item(s)"]
    assert (tmp_path / "w.log").read_text().count("--- test worker") == 2


def test_a_worker_silent_while_setting_up_is_a_failure_of_the_batch(tmp_path, monkeypatch):
    (tmp_path / "silent_worker.py").write_text("import time\ntime.sleep(3600)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    job = WorkerJob(module="silent_worker", payload={}, n_items=1, name="silent", log_path=tmp_path / "w.log")
    with pytest.raises(MeasurementError, match="no sign of life within 1 s while setting up"):
        Supervisor(job, lambda i, p: None, lambda i, m: None, timeout_s=1, setup_timeout_s=1).run()
    # By default a worker gets at least SETUP_TIMEOUT_MIN_S to set up, however short the cells' timeout.
    assert Supervisor(job, lambda i, p: None, lambda i, m: None, timeout_s=1).setup_timeout_s == SETUP_TIMEOUT_MIN_S
