"""Worker batches as Slurm jobs (through submitit), their records back through the shared output folder.

Each batch is one job on a node of its machine type (``partition``,
``gres``, ``constraint``... of the type; exclusive unless it says
``exclusive: false``; never requeued). The job runs
:func:`sbprof.cluster.node.slurm_batch`, which appends the batch's events to
``jobs/<token>.events`` in the type's output folder; the driver reads them
as they come and saves each record at once, as a local run does. The jobs
it sent are kept in the folder's ledger (:mod:`sbprof.cluster.ledger`), so
a driver killed and started again takes them over. A job that ends before
its batch does (cancelled, preempted, out of time, its node lost) has its
cells recorded as errors with Slurm's state, reason and the line Slurm wrote
in the job's log.
"""
from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

from sbprof.base.errors import ConfigError
from sbprof.cluster.events import EventTail
from sbprof.cluster.executor import Flight, Handlers, RemoteExecutor, Ticket
from sbprof.cluster.ledger import Ledger
from sbprof.cluster.spec import ExecutorSpec, MachineType
from sbprof.workers.supervisor import WorkerJob

JOBS_DIR = "jobs"
ENDED = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
         "DEADLINE", "REVOKED", "SPECIAL_EXIT")
"""Slurm job states after which the job runs no more."""
STATE_EVERY_S = 2.0
"""How often one job's state is asked of Slurm while its events file is quiet."""


def slurm_state(job_id: str) -> Optional[Tuple[str, str]]:
    """``(state, reason)`` of a Slurm job, or ``None`` when Slurm does not know it (any more)."""
    for command in (["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T|%r"],
                    ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,Reason"]):
        try:
            out = subprocess.run(command, capture_output=True, text=True, timeout=60).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out:
            state, _, reason = out.splitlines()[0].partition("|")
            return state.split()[0], reason.strip()
    return None


def job_by_name(name: str) -> Optional[str]:
    """The id of the Slurm job named ``name`` that Slurm still knows, if any."""
    try:
        out = subprocess.run(["squeue", "-h", "-t", "all", "-n", name, "-o", "%i"], capture_output=True, text=True,
                             timeout=60).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out[0] if out else None


def slurm_line(folder: Path, job_id: str) -> str:
    """What Slurm wrote in the job's log when it stopped it (``*** JOB 12 ON n1 CANCELLED AT ... ***``), or the
    log's last line."""
    lines = []
    for path in sorted(folder.glob(f"{job_id}_*log.err")) + sorted(folder.glob(f"{job_id}_*log.out")):
        try:
            lines += [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            continue
    marked = [line for line in lines if "***" in line]
    return (marked or lines or [""])[-1][:300]


def sbatch_parameters(options: Dict[str, Any]) -> Dict[str, Any]:
    """A machine type's options as submitit's ``update_parameters``: its own names directly, any other sbatch
    option under ``additional_parameters``; no time limit unless given (the partition's default)."""
    from submitit.slurm.slurm import _make_sbatch_string  # the parameters submitit knows, read from its signature
    import inspect

    known = set(inspect.signature(_make_sbatch_string).parameters) - {"command", "folder", "additional_parameters"}
    options = {k: v for k, v in options.items() if v is not False}  # an sbatch flag set false is a flag left out
    direct = {k: v for k, v in options.items() if k in known}
    extra = {k.replace("_", "-"): v for k, v in options.items() if k not in known}
    if isinstance(direct.get("time"), str):  # "HH:MM:SS": sbatch reads it, submitit wants minutes
        extra["time"] = direct.pop("time")
    extra["no-requeue"] = True  # a requeued job would measure its cells a second time
    return {"time": None, **direct, "additional_parameters": extra}


class SlurmExecutor(RemoteExecutor):
    """Batches of one machine type as Slurm jobs (see the module docstring)."""

    def __init__(self, spec: ExecutorSpec, machine: MachineType, folder: Path, timeout_s: Optional[float],
                 interrupt: Any = None):
        super().__init__(interrupt)
        try:
            import submitit  # noqa: F401
        except ImportError:
            raise ConfigError("executor: kind slurm needs submitit: pip install 'sbprof[cluster]'") from None
        self.machine = machine
        self.parameters = sbatch_parameters(spec.options_of(machine))
        self.folder = Path(folder)
        self.jobs = self.folder / JOBS_DIR
        self.timeout_s = timeout_s
        self.ledger = Ledger(self.folder)
        self._check()

    def _check(self) -> None:
        """Ask Slurm whether it would take this type's jobs (``sbatch --test-only``: nothing is submitted), so a
        partition or option it refuses is one line before any job of any type is sent."""
        import tempfile

        from submitit.slurm.slurm import _make_sbatch_string

        with tempfile.TemporaryDirectory(prefix="sbprof-sbatch-") as tmp:
            script = Path(tmp) / "check.sh"
            script.write_text(_make_sbatch_string(command="true", folder=tmp, job_name="sbprof-check",
                                                  **self.parameters))
            try:
                checked = subprocess.run(["sbatch", "--test-only", str(script)], capture_output=True, text=True,
                                         timeout=120)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise ConfigError(f"executor: kind slurm, but sbatch cannot be run here ({exc}); start sbprof on a "
                                  "machine of the cluster (a login node)") from None
        if checked.returncode != 0:
            lines = [line.strip() for line in (checked.stderr + checked.stdout).splitlines() if line.strip()]
            raise ConfigError(f"executor.machines.{self.machine.name}: Slurm would refuse its jobs: "
                              f"{lines[0] if lines else f'sbatch --test-only exit code {checked.returncode}'}")

    def submit(self, job: WorkerJob, handlers: Handlers, adds_figures: bool) -> Flight:
        import submitit

        token = uuid.uuid4().hex[:12]
        entry = {"token": token, "job": None, "name": job.name, "adds_figures": adds_figures,
                 "items": job.payload["items"], "events": f"{JOBS_DIR}/{token}.events", "offset": 0}
        self.ledger.add(entry)  # first: a driver killed during sbatch finds the job by its name
        spec = {"module": job.module, "payload": job.payload, "n_items": job.n_items, "name": job.name,
                "log_path": str(job.log_path), "python": job.python, "env": job.env, "timeout_s": self.timeout_s}
        # submitit runs its job under this interpreter; the node's supervisor starts the batch's own (job.python).
        executor = submitit.SlurmExecutor(folder=self.jobs / "slurm" / "%j")
        try:
            executor.update_parameters(job_name=f"sbprof-{token}", **self.parameters)
            from sbprof.cluster.node import slurm_batch

            submitted = executor.submit(slurm_batch, spec, str(self.folder / entry["events"]))
        except Exception as exc:  # sbatch refused it (a partition that does not exist...), or an option is unknown
            self.ledger.remove(token)
            detail = getattr(exc, "stderr", None) or getattr(exc, "output", None) or str(exc)
            detail = detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
            lines = [line for line in detail.splitlines() if line.strip()] or [type(exc).__name__]
            raise ConfigError(f"executor: Slurm refused the job of machine type {self.machine.name!r}: "
                              f"{lines[-1].strip()}") from None
        self.ledger.update(token, job=str(submitted.job_id))
        return self._follow({**entry, "job": str(submitted.job_id)}, handlers)

    def start(self, rebuild: Callable[[Dict[str, Any]], Handlers]) -> bool:
        for entry in self.ledger.entries():
            if entry["job"] is None:  # killed between the ledger and sbatch: submitted or not?
                found = job_by_name(f"sbprof-{entry['token']}")
                if found is None and not (self.folder / entry["events"]).exists():
                    self.ledger.remove(entry["token"])  # never submitted: the plan sends its cells again
                    continue
                entry["job"] = found
                self.ledger.update(entry["token"], job=found)
            self.flying.append(self._follow(entry, rebuild(entry), taken_over=True))
        return self.wait()

    def _follow(self, entry: Dict[str, Any], handlers: Handlers, taken_over: bool = False) -> Flight:
        job_id, token = entry["job"], entry["token"]
        stamp = {"executor": "slurm", "type": self.machine.name, "job": job_id}
        ticket = Ticket(entry["name"], handlers, stamp, bool(entry.get("adds_figures")))
        if taken_over:
            handlers.note(f"{entry['name']}: Slurm job {job_id} sent by an earlier run, taken over")
        tail = EventTail(self.folder / entry["events"], int(entry.get("offset", 0)))
        asked = {"at": 0.0, "state": None}

        def over() -> bool:
            if job_id is None:
                return True  # no job to follow: what its events file holds is all there is
            if time.monotonic() - asked["at"] >= STATE_EVERY_S:
                asked["at"], asked["state"] = time.monotonic(), slurm_state(job_id)
            state = asked["state"]
            return state is None or state[0] in ENDED

        def finish(t: Ticket) -> None:
            if t.ended:
                return
            state = slurm_state(job_id) if job_id is not None else None
            if state is None:
                why = (f"Slurm job {job_id} is no longer known to Slurm" if job_id else
                       "its Slurm job was never identified (the run that sent it was killed while sending it)")
            else:
                reason = f" ({state[1]})" if state[1] and state[1] != "None" else ""
                why = f"Slurm job {job_id} ended {state[0]}{reason}"
            line = slurm_line(self.jobs / "slurm" / str(job_id), str(job_id)) if job_id else ""
            stopped = f"; the job was stopped by {t.stopped}" if t.stopped else ""
            t.give_up(f"{why}{': ' + line if line else ''}{stopped}; this cell was not measured "
                      f"(--retry_failed measures it again)")

        return Flight(ticket, tail.read, over, finish, applied=lambda: self.ledger.update(token, offset=tail.offset),
                      after=[lambda: self.ledger.remove(token)])

    def stop(self) -> None:
        for flight in self.flying:
            flight.ticket.handlers.note(
                f"{flight.ticket.name}: Slurm job {flight.ticket.stamp.get('job')} keeps running; the same command "
                "collects its records (or scancel it)")
        self.flying.clear()
