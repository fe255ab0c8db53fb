"""Where the runner's worker batches run: local processes (the default), or a cluster's nodes.

The runner (:mod:`sbprof.jobs.runner`) hands each batch to its executor
with :class:`Handlers`, the callbacks that save what comes back: a record,
a crashed cell, the worker's setup, a note, or "every cell left failed".
:class:`LocalExecutor` runs the batch here and now under the
:class:`~sbprof.workers.supervisor.Supervisor`, as sbprof always has. A
:class:`RemoteExecutor` (Slurm, Ray) sends the batch to a node of its
machine type, and replays the node's events (:mod:`sbprof.cluster.node`)
into the same handlers as they arrive, in the driver's one thread, so the
results store sees exactly the calls a local run makes. Batches the plan
marks concurrent run side by side until the plan's next barrier.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Protocol

from sbprof.base.errors import ConfigError, MeasurementError
from sbprof.workers.supervisor import Supervisor, WorkerJob


class Executor(Protocol):
    """What the runner asks of an executor (:class:`LocalExecutor`, :class:`RemoteExecutor`)."""

    side_by_side: bool  # a pass's batches run side by side (the plan then puts a barrier after them)

    def start(self, rebuild: Callable[[Dict[str, Any]], "Handlers"]) -> bool: ...

    def run(self, job: WorkerJob, handlers: "Handlers", concurrent: bool = False,
            adds_figures: bool = False) -> bool: ...

    def wait(self) -> bool: ...

    def stop(self) -> None: ...


@dataclass
class Handlers:
    """The runner's callbacks for one batch (item indices are the batch's)."""

    result: Callable[[int, Dict[str, Any]], None]
    crash: Callable[[int, str], None]
    loaded: Callable[[Dict[str, Any]], None]
    note: Callable[[str], None]
    fail_rest: Callable[[str], None]
    """Every item without a record yet becomes an ``error`` record with this message."""
    over: Callable[[], None] = lambda: None
    """The batch is over (its worker or node is done): a batch saved whole is saved now."""


class LocalExecutor:
    """Each batch in fresh worker processes on this machine, one batch at a time (sbprof's default)."""

    side_by_side = False

    def __init__(self, timeout_s: Optional[float] = None):
        self.timeout_s = timeout_s

    def start(self, rebuild: Callable[[Dict[str, Any]], Handlers]) -> bool:
        """Take over what an earlier, killed run left running (nothing, locally); True when a record was stored."""
        return False

    def run(self, job: WorkerJob, handlers: Handlers, concurrent: bool = False, adds_figures: bool = False) -> bool:
        try:
            Supervisor(job, handlers.result, handlers.crash, handlers.loaded, timeout_s=self.timeout_s,
                       on_note=handlers.note).run()
        except MeasurementError as exc:
            # This worker cannot do its items (a model that does not load, an interpreter that does not start):
            # each remaining item is an error record, and the run goes on with the other batches.
            handlers.fail_rest(str(exc))
        handlers.over()
        return True

    def wait(self) -> bool:
        return False

    def stop(self) -> None:
        """The run stops (Ctrl-C, an error): nothing runs beyond the batch being measured."""


class Ticket:
    """One batch on a node: its handlers, the events replayed so far, and the stamp its records carry.

    ``stamp`` (``extra.cluster`` of each record: executor, machine type, job, node) is added to the records the
    node sends; a batch that adds figures to records measured before leaves their stamp alone.
    """

    def __init__(self, name: str, handlers: Handlers, stamp: Dict[str, Any], adds_figures: bool = False):
        self.name = name
        self.handlers = handlers
        self.stamp = dict(stamp)
        self.adds_figures = adds_figures
        self.ended = False  # the node said end (or failed, or the batch was given up)
        self.stopped = ""  # the signal that stopped the job, if one did
        self.records = 0
        self.handlers.loaded({"extra": {"cluster": dict(self.stamp)}})

    def where(self) -> str:
        return f"{self.stamp.get('type')} node {self.stamp.get('node', '?')}"

    def apply(self, event: Dict[str, Any]) -> None:
        """Replay one event of the node into the runner's handlers."""
        kind = event.get("event")
        if kind == "node":  # where the batch runs: the host, and what the scheduler says of it
            self.stamp.update({k: event[k] for k in ("node", "partition", "ray_node") if event.get(k)})
            self.handlers.loaded({"extra": {"cluster": dict(self.stamp)}})
        elif kind == "loaded":
            self.handlers.loaded({"extra": {**(event.get("extra") or {}), "cluster": dict(self.stamp)}})
        elif kind == "result":
            payload = event["payload"]
            if not self.adds_figures:
                payload = {**payload, "extra": {**(payload.get("extra") or {}), "cluster": dict(self.stamp)}}
            self.records += 1
            self.handlers.result(int(event["index"]), payload)
        elif kind == "crash":
            self.records += 1
            self.handlers.crash(int(event["index"]), f"{event['message']} (on {self.where()})")
        elif kind == "note":
            self.handlers.note(f"{self.name} on {self.where()}: {event['message']}")
        elif kind == "failed":
            self.give_up(f"{event['message']} (on {self.where()})")
        elif kind == "config":
            self.ended = True
            raise ConfigError(event["message"])
        elif kind == "stopped":
            self.stopped = str(event.get("signal") or "a signal")
        elif kind == "end":
            self.ended = True
            self.handlers.over()

    def give_up(self, why: str) -> None:
        """Every cell still without a record becomes an error record saying ``why``."""
        if not self.ended:
            self.ended = True
            self.records += 1
            self.handlers.fail_rest(why)
            self.handlers.over()


@dataclass
class Flight:
    """A ticket and how to follow it: ``poll()`` gives the events that came since the last call, and ``finish()``
    is called once the job is over (ended or not: it gives up the cells left, with the scheduler's reason)."""

    ticket: Ticket
    poll: Callable[[], List[Dict[str, Any]]]
    over: Callable[[], bool]
    finish: Callable[[Ticket], None]
    applied: Callable[[], None] = lambda: None  # told once the events of a poll are saved
    after: List[Callable[[], None]] = field(default_factory=list)


class RemoteExecutor:
    """A cluster's executor: batches sent to nodes, their events replayed here (see the module docstring).

    A subclass sends (``submit``) and follows (its :class:`Flight`); the waiting, the replay and the stop are
    here. ``interrupt``, when set (another thread's Ctrl-C), stops the waiting as Ctrl-C would.
    """

    side_by_side = True
    poll_s = 0.5

    def __init__(self, interrupt: Optional[threading.Event] = None):
        self.flying: List[Flight] = []
        self.interrupt = interrupt

    def submit(self, job: WorkerJob, handlers: Handlers, adds_figures: bool) -> Flight:
        raise NotImplementedError

    def start(self, rebuild: Callable[[Dict[str, Any]], Handlers]) -> bool:
        """Take over the batches an earlier run left running, and collect them; True when a record was stored."""
        return False

    def run(self, job: WorkerJob, handlers: Handlers, concurrent: bool = False, adds_figures: bool = False) -> bool:
        self.flying.append(self.submit(job, handlers, adds_figures))
        return self.wait() if not concurrent else self._poll()

    def wait(self) -> bool:
        """Follow every batch sent until each is over; True when a record was stored meanwhile."""
        stored = False
        while self.flying:
            stored = self._poll() or stored
            if self.flying:
                if self.interrupt is not None and self.interrupt.is_set():
                    raise KeyboardInterrupt
                time.sleep(self.poll_s)
        return stored

    def _poll(self) -> bool:
        stored = False
        for flight in list(self.flying):
            before = flight.ticket.records
            over = flight.over()  # asked before reading: what the node wrote before it ended is read below
            self._replay(flight)
            if over or flight.ticket.ended:
                if not flight.ticket.ended:
                    self._replay(flight)
                flight.finish(flight.ticket)
                self.flying.remove(flight)
                for then in flight.after:
                    then()
            stored = stored or flight.ticket.records > before
        return stored

    @staticmethod
    def _replay(flight: Flight) -> None:
        events = flight.poll()
        try:
            for event in events:
                flight.ticket.apply(event)
        finally:
            if events:
                flight.applied()

    def stop(self) -> None:
        """The run stops: batches already sent keep running on their nodes (a Slurm job's records are collected by
        the next run); subclasses may do more."""
