"""The node's side of a batch and the driver's replay of its events, without a cluster: a job started again measures
only what has no record yet; every event reaches the runner's handlers, stamped with where it ran."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sbprof.base.errors import ConfigError
from sbprof.cluster.events import EventLog, EventTail
from sbprof.cluster.executor import Handlers, Ticket
from sbprof.cluster.ledger import Ledger
from sbprof.cluster.node import slurm_batch
from sbprof.cluster.slurm import sbatch_parameters

WORKERS = Path(__file__).resolve().parents[1] / "workers"  # misbehaving_worker: answers, crashes or hangs on request


def spec(tmp_path: Path, dos):
    return {"module": "misbehaving_worker", "payload": {"items": [{"do": d} for d in dos]}, "n_items": len(dos),
            "name": "test worker", "log_path": str(tmp_path / "w.log"), "python": "python", "env": {},
            "timeout_s": 60}


def test_a_job_started_again_measures_only_the_items_without_a_record(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(WORKERS), os.environ.get("PYTHONPATH", "")]))
    events = tmp_path / "b.events"
    EventLog(events).emit({"event": "result", "index": 0, "payload": {"index": 0}})
    with open(events, "a") as f:
        f.write('{"event": "resu')  # the first run died while writing
    slurm_batch(spec(tmp_path, ["ok", "crash", "ok"]), str(events))
    seen = EventTail(events).read()
    assert [e["event"] for e in seen] == ["result", "node", "loaded", "crash", "loaded", "result", "end"]
    assert seen[1]["again"] is True
    assert [e["index"] for e in seen if e["event"] in ("result", "crash")] == [0, 1, 2]  # the batch's own indices
    starts = [line for line in (tmp_path / "w.log").read_text().splitlines() if line.startswith("--- ")]
    assert starts == ["--- test worker: 2 item(s)", "--- test worker: 1 item(s)"]  # item 0 never measured again


def test_the_nodes_events_reach_the_runners_handlers_stamped_with_where_they_ran():
    calls = []
    handlers = Handlers(lambda i, p: calls.append(("result", i, p)), lambda i, m: calls.append(("crash", i, m)),
                        lambda e: calls.append(("loaded", e["extra"])), lambda m: calls.append(("note", m)),
                        lambda m: calls.append(("rest", m)))
    ticket = Ticket("w", handlers, {"executor": "slurm", "type": "a100", "job": "12"})
    for event in ({"event": "node", "node": "n7", "partition": "gpu"}, {"event": "loaded", "extra": {"check": 1}},
                  {"event": "result", "index": 0, "payload": {"label": "c", "extra": {"x": 1}}},
                  {"event": "crash", "index": 1, "message": "worker process died"},
                  {"event": "failed", "message": "cannot load"}, {"event": "failed", "message": "again"}):
        ticket.apply(event)
    stamp = {"executor": "slurm", "type": "a100", "job": "12", "node": "n7", "partition": "gpu"}
    assert calls[2] == ("loaded", {"check": 1, "cluster": stamp})
    assert calls[3] == ("result", 0, {"label": "c", "extra": {"x": 1, "cluster": stamp}})
    assert calls[4] == ("crash", 1, "worker process died (on a100 node n7)")
    assert calls[5:] == [("rest", "cannot load (on a100 node n7)")]  # the rest fails once
    with pytest.raises(ConfigError, match="bad input"):
        Ticket("w", handlers, {}).apply({"event": "config", "message": "bad input"})


def test_the_ledger_survives_its_process_and_refuses_a_torn_file(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.add({"token": "t1", "job": None, "offset": 0})
    ledger.update("t1", job="5", offset=120)
    assert Ledger(tmp_path).entries() == [{"token": "t1", "job": "5", "offset": 120}]
    (tmp_path / "cluster-jobs.json").write_text('{"jobs": [')
    with pytest.raises(ConfigError, match="not a readable file of cluster jobs"):
        Ledger(tmp_path)


def test_sbatch_options_reach_submitit_and_a_job_is_never_requeued():
    pytest.importorskip("submitit")
    params = sbatch_parameters({"partition": "gpu", "exclusive": True, "mail_type": "END", "time": "2:00:00",
                                "reservation": "speech"})
    assert (params["partition"], params["exclusive"], params["mail_type"], params["time"]) == ("gpu", True, "END", None)
    assert params["additional_parameters"] == {"reservation": "speech", "time": "2:00:00", "no-requeue": True}
    assert json.loads(json.dumps(params))  # plain values only
    assert "exclusive" not in sbatch_parameters({"exclusive": False})  # sbatch's --exclusive takes no "false"
