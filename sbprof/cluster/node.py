"""The node's side of a batch sent to a cluster: the same supervisor as at home, its events sent back.

A Slurm job (through submitit) calls :func:`slurm_batch`, a Ray task
:func:`ray_batch`. Either runs the batch's worker processes exactly as a
local run does (:class:`~sbprof.workers.supervisor.Supervisor`: fresh
processes, a crash or a hang recorded as the cell's result, a fresh worker
for the rest) and sends each event on: appended to the batch's events file
in the output folder (Slurm: a shared filesystem), or yielded to the driver
as it is made (Ray). Events: ``node`` (where it runs), ``loaded``,
``result``, ``crash``, ``note``, ``failed`` (the batch cannot be done here:
its remaining cells are errors), ``config`` (bad input: the run stops),
``stopped`` (the scheduler stopped the job) and ``end``.

When Slurm starts a job again (a requeue the cluster forces), the cells
that already have their event are not measured a second time. Slurm's
SIGTERM (a cancel, a preemption, the time limit) stops the batch at once,
so the cells left are recorded with Slurm's reason by the driver, not as
crashed workers; submitit's own handlers (which would requeue a preempted
job) are set aside while the batch runs.
"""
from __future__ import annotations

import os
import queue
import signal
import socket
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

from sbprof.base.errors import ConfigError, MeasurementError
from sbprof.cluster.events import EventLog, done_indices
from sbprof.workers.supervisor import Supervisor, WorkerJob

Emit = Callable[[Dict[str, Any]], None]
LOG_BYTES = 1 << 20
"""The most of a worker log a Ray node sends back (its end)."""


class Stopped(BaseException):
    """The scheduler stopped this job (SIGTERM): the supervisor stops its worker, the batch ends here."""


def run_batch(spec: Dict[str, Any], emit: Emit, skip: frozenset = frozenset()) -> None:
    """Run one batch (``spec``: the worker job's fields and ``timeout_s``) on this machine, every event emitted
    with the batch's own item indices; items in ``skip`` are not measured."""
    keep: List[int] = [i for i in range(spec["n_items"]) if i not in skip]
    payload = dict(spec["payload"])
    payload["items"] = [payload["items"][i] for i in keep]
    job = WorkerJob(module=spec["module"], payload=payload, n_items=len(keep), name=spec["name"],
                    log_path=Path(spec["log_path"]), python=spec["python"], env=dict(spec["env"]))

    def crash(index: int, message: str) -> None:
        if "SIGTERM" in message:
            time.sleep(1.0)  # the scheduler's SIGTERM reaches this process too: let it stop the batch first
        emit({"event": "crash", "index": keep[index], "message": message})

    emit({"event": "node", "node": socket.gethostname(), "slurm_job": os.environ.get("SLURM_JOB_ID"),
          "partition": os.environ.get("SLURM_JOB_PARTITION"), "again": bool(skip)})
    try:
        if keep:
            Supervisor(job, lambda i, payload: emit({"event": "result", "index": keep[i], "payload": payload}), crash,
                       lambda event: emit({"event": "loaded", "extra": event.get("extra") or {}}),
                       timeout_s=spec.get("timeout_s"),
                       on_note=lambda message: emit({"event": "note", "message": message})).run()
    except ConfigError as exc:
        emit({"event": "config", "message": str(exc)})
        return
    except MeasurementError as exc:
        emit({"event": "failed", "message": str(exc)})
    emit({"event": "end"})


@contextmanager
def _slurm_signals(emit: Emit) -> Iterator[None]:
    """SIGTERM stops the batch; SIGUSR2 (submitit's time-limit warning) is noted and measuring goes on."""

    def stop(signum: int, frame: object) -> None:
        raise Stopped(signal.Signals(signum).name)

    def warned(signum: int, frame: object) -> None:
        emit({"event": "note", "message": f"Slurm sent {signal.Signals(signum).name}: its time limit (or a "
                                          "preemption) is near; measuring goes on until Slurm stops the job"})

    previous = {s: signal.signal(s, handler) for s, handler in ((signal.SIGTERM, stop), (signal.SIGUSR2, warned))}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def slurm_batch(spec: Dict[str, Any], events: str) -> None:
    """A Slurm job's function (submitted by the driver through submitit): the batch, its events in ``events``."""
    log = EventLog(events)
    log.seal()
    skip = frozenset(done_indices(events))
    with _slurm_signals(log.emit):
        try:
            run_batch(spec, log.emit, skip)
        except Stopped as exc:
            log.emit({"event": "stopped", "signal": str(exc)})


def ray_batch(spec: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
    """A Ray task's body (a streaming generator): the batch's events, each yielded as it is made.

    The worker log is written on the node (the driver's folder may not exist there) and its end is sent back
    as a ``log`` event after the batch's last record and before its ``end``: the driver stops following a batch
    at its end, and a log sent after it was lost whenever the end came in the same poll (a race CI met).
    """
    events: "queue.Queue[Dict[str, Any]]" = queue.Queue()
    with tempfile.TemporaryDirectory(prefix="sbprof-ray-") as tmp:
        log_path = Path(tmp) / Path(spec["log_path"]).name
        local = {**spec, "log_path": str(log_path)}

        def work() -> None:
            try:
                run_batch(local, events.put)
            except BaseException as exc:  # reported, never lost in a thread
                events.put({"event": "failed", "message": f"{type(exc).__name__}: {exc}"})
            finally:
                events.put({"event": "_done"})

        threading.Thread(target=work, name="sbprof-batch", daemon=True).start()
        end = None
        while True:
            event = events.get()
            if event["event"] == "_done":
                break
            if event["event"] == "end":  # held back until the log is sent
                end = event
                continue
            if event["event"] == "node":  # which Ray node (several may share a host name)
                import ray

                event["ray_node"] = ray.get_runtime_context().get_node_id()
            yield event
        text = log_path.read_bytes()[-LOG_BYTES:].decode(errors="replace") if log_path.exists() else ""
        yield {"event": "log", "text": text}
        if end is not None:
            yield end
