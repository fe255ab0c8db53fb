"""Worker batches as Ray tasks, each on a node carrying its machine type's custom resource.

A machine type is a Ray custom resource the user gives their nodes
(``ray start --resources='{"a100": 1}'``): a batch of that type asks for one
unit of it, so a node runs one batch at a time and only nodes of the type
run its batches. The task is a streaming generator
(:func:`sbprof.cluster.node.ray_batch`): each event comes back as it is
made and its record is saved at once. Ray never retries a task (a retried
batch would measure its cells a second time); a node lost mid-batch ends
the task with Ray's error, and the cells left are recorded as errors with
it, as a Slurm job that is cancelled. A task's events are read by a thread
per task; only the driver's one thread saves them.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Dict, List, Optional

from sbprof.base.errors import ConfigError
from sbprof.cluster.executor import Flight, Handlers, RemoteExecutor, Ticket
from sbprof.cluster.spec import ExecutorSpec, MachineType
from sbprof.workers.supervisor import WorkerJob

_CONNECT = threading.Lock()


def connect(options: Dict[str, Any]) -> Any:
    """Ray, connected once per process to the cluster at ``options['address']`` (``auto``: the one started on
    this machine with ``ray start``)."""
    try:
        import ray
    except ImportError:
        raise ConfigError("executor: kind ray needs Ray: pip install 'sbprof[cluster]'") from None
    with _CONNECT:
        if not ray.is_initialized():
            kwargs = {k: v for k, v in options.items() if k in ("namespace", "runtime_env")}
            try:
                ray.init(address=options.get("address", "auto"), log_to_driver=False, **kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ConfigError(f"executor: cannot reach the Ray cluster at {options.get('address', 'auto')!r}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    return ray


class RayExecutor(RemoteExecutor):
    """Batches of one machine type as Ray tasks (see the module docstring)."""

    def __init__(self, spec: ExecutorSpec, machine: MachineType, timeout_s: Optional[float], interrupt: Any = None):
        super().__init__(interrupt)
        self.ray = connect(spec.options)
        self.machine = machine
        self.timeout_s = timeout_s
        self._streams: List[Any] = []  # the tasks running, to cancel when the run stops
        if self.ray.cluster_resources().get(machine.name, 0) < 1:
            raise ConfigError(f"executor: no node of the Ray cluster carries the resource {machine.name!r} (start "
                              f"the nodes of that type with ray start --resources='{{\"{machine.name}\": 1}}')")
        from sbprof.cluster.node import ray_batch

        options = {"num_cpus": 0, **spec.options_of(machine), "resources": {machine.name: 1}, "max_retries": 0,
                   "num_returns": "streaming"}
        try:
            self.task = self.ray.remote(ray_batch).options(**options)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"executor.machines.{machine.name}: Ray refused a task option: "
                              f"{str(exc).splitlines()[0]}") from None

    def submit(self, job: WorkerJob, handlers: Handlers, adds_figures: bool) -> Flight:
        spec = {"module": job.module, "payload": job.payload, "n_items": job.n_items, "name": job.name,
                "log_path": str(job.log_path), "python": job.python, "env": job.env, "timeout_s": self.timeout_s}
        stream = self.task.remote(spec)
        ticket = Ticket(job.name, handlers, {"executor": "ray", "type": self.machine.name}, adds_figures)
        events: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        state = {"over": False, "lost": ""}

        def follow() -> None:
            try:
                for ref in stream:
                    events.put(self.ray.get(ref))
            except Exception as exc:  # the node died, the task was cancelled, the object was lost
                lines = str(exc).strip().splitlines()
                state["lost"] = f"{type(exc).__name__}: {lines[0] if lines else ''}"
            finally:
                state["over"] = True

        threading.Thread(target=follow, name=f"sbprof-ray-{job.name}", daemon=True).start()

        def poll() -> List[Dict[str, Any]]:
            out = []
            while True:
                try:
                    event = events.get_nowait()
                except queue.Empty:
                    return out
                if event.get("event") == "log":  # the node's worker log, kept beside the others
                    job.log_path.parent.mkdir(parents=True, exist_ok=True)
                    with open(job.log_path, "a") as log:
                        log.write(event.get("text", ""))
                else:
                    out.append(event)

        def finish(t: Ticket) -> None:
            t.give_up(f"the Ray task ended before its batch did ({state['lost'] or 'no reason given'}); this cell "
                      "was not measured (--retry_failed measures it again)")

        self._streams.append(stream)
        return Flight(ticket, poll, lambda: bool(state["over"]) and events.empty(), finish,
                      after=[lambda: self._streams.remove(stream)])

    def stop(self) -> None:
        for stream in list(self._streams):
            try:
                self.ray.cancel(stream, force=True)
            except Exception:  # already over, or the cluster is gone: nothing left to stop
                pass
        self.flying.clear()
