"""A job measured on a cluster's machine types: one results folder per type, the types side by side, the cost.

With ``executor: {kind: slurm | ray, machines: {...}}`` the output folder
holds ``machines/<type>/``, one ordinary results folder per machine type
(its ``results.json``, measured under that type's conditions, and the job's
own report: one table per type, never pooled), ``cluster.json`` (the
executor as given: its types and prices) and ``report.md``: the nodes of
each type and their noise floor, the cost of 1,000 hours of audio, the
cheapest real-time choice, and the types side by side
(:mod:`sbprof.analysis.cluster`, :mod:`sbprof.report.cluster`). Each type is
measured by the one runner with its executor (:mod:`sbprof.cluster`), the
types side by side in threads of this process; Ctrl-C or SIGTERM stops them
all. ``--render-only`` on the folder renders every report again.
"""
from __future__ import annotations

import json
import shutil
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from sbprof.base.errors import ConfigError
from sbprof.cluster.spec import ExecutorSpec, MachineType
from sbprof.jobs.job import Job
from sbprof.record.results import Results
from sbprof.results import FolderLock, atomic_write, load_results, prepare_output_folder

CLUSTER_FILE = "cluster.json"
MACHINES_DIR = "machines"
LIBRARIES = ("python", "torch", "torchaudio", "speechbrain")
"""What the driver's machine says of the nodes' (they run its interpreter, from the shared filesystem)."""


class TypedPlan:
    """A job's plan measured on one machine type: its steps, under the type's conditions (``machine`` of its
    results: the executor, the type and the options that pick its nodes; the interpreter's libraries)."""

    def __init__(self, plan: Any, spec: ExecutorSpec, machine: MachineType):
        self.plan, self.spec, self.machine = plan, spec, machine

    def header(self) -> Results:
        header = self.plan.header()
        here = {k: v for k, v in header.machine.items() if k in LIBRARIES}
        return replace(header, machine={"hostname": f"{self.machine.name} ({self.spec.kind})", **here,
                                        "cluster": self.spec.conditions(self.machine)})

    def expected(self) -> int:
        return self.plan.expected()

    def steps(self, view: Any) -> Any:
        return self.plan.steps(view)


def type_config(cfg: Any, machine: MachineType, folder: Path) -> Any:
    """``cfg`` for one machine type: its devices and thread counts, its own output folder."""
    pre = replace(cfg.preamble, devices=machine.devices, cpu_threads=machine.cpu_threads,
                  cuda_threads=machine.cuda_threads, output_folder=str(folder))
    return replace(cfg, preamble=pre)


def make_executor(spec: ExecutorSpec, machine: MachineType, folder: Path, timeout_s: Optional[float],
                  interrupt: threading.Event) -> Any:
    if spec.kind == "slurm":
        from sbprof.cluster.slurm import SlurmExecutor

        return SlurmExecutor(spec, machine, folder, timeout_s, interrupt)
    from sbprof.cluster.rayexec import RayExecutor

    return RayExecutor(spec, machine, timeout_s, interrupt)


def run_cluster(job: Job, cfg: Any, log: Callable[[str], None], run_job: Callable[..., Any],
                outcome: Callable[..., Any]) -> Any:
    """Measure ``job`` on every machine type of its executor (see the module docstring), each type by the runner's
    ``run_job``; the runner's ``outcome`` (:class:`~sbprof.jobs.outcome.Outcome`) of all types together."""
    from sbprof.jobs.render import Reporting

    pre = cfg.preamble
    spec: ExecutorSpec = pre.executor
    root = Path(pre.output_folder)
    created = not root.exists()
    interrupt = threading.Event()
    runs: List[Tuple[MachineType, Path, Any, Any]] = []
    for machine in spec.machines:  # every plan and executor checked before anything is written or submitted
        folder = root / MACHINES_DIR / machine.name
        plan = TypedPlan(job.plan(type_config(cfg, machine, folder)), spec, machine)
        runs.append((machine, folder, plan, make_executor(spec, machine, folder, pre.timeout_s, interrupt)))
    root = prepare_output_folder(pre.output_folder)
    outcomes: Dict[str, Any] = {}
    errors: List[BaseException] = []

    def measure(machine: MachineType, folder: Path, plan: Any, executor: Any) -> None:
        try:
            outcomes[machine.name] = run_job(
                plan, str(folder), retry_failed=pre.retry_failed, progress_bar=pre.progress_bar and len(runs) == 1,
                reporting=Reporting(job, folder), derive=job.derive, log=lambda line: log(f"{machine.name}: {line}"),
                time_budget_s=pre.time_budget_s, executor=executor)
        except BaseException as exc:  # kept for the main thread, which raises the first
            errors.append(exc)
            interrupt.set()  # the other types stop too: the run ends here

    with FolderLock(root):
        atomic_write(root / CLUSTER_FILE, json.dumps({"job": job.name, "executor": spec.to_dict()}, indent=1) + "\n")
        outputs: Dict[str, Path] = {}
        try:
            _side_by_side([lambda r=r: measure(*r) for r in runs], interrupt)
        finally:  # also after an interruption: the types side by side as far as they were measured
            measured = any((folder / "results.json").exists() for _, folder, _, _ in runs)
            if measured:
                outputs = render_cluster_folder(root)
        if errors:
            if created and not measured:
                shutil.rmtree(root, ignore_errors=True)  # bad input found only now leaves nothing behind
            raise next((e for e in errors if not isinstance(e, KeyboardInterrupt)), errors[0])
    return _outcome(outcome(folder=root, results=root / MACHINES_DIR), outcomes, outputs)


def _side_by_side(tasks: List[Callable[[], None]], interrupt: threading.Event) -> None:
    """Run ``tasks`` in threads (one alone in this thread); Ctrl-C here stops them all, then is raised."""
    if len(tasks) == 1:
        tasks[0]()
        return
    threads = [threading.Thread(target=task, name=f"sbprof-type-{i}") for i, task in enumerate(tasks)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.5)
    except KeyboardInterrupt:
        interrupt.set()
        for t in threads:
            t.join()
        raise


def _outcome(out: Any, outcomes: Dict[str, Any], outputs: Dict[str, Path]) -> Any:
    """``out`` (an empty outcome of the whole run) holding what each machine type's run did."""
    for name, o in outcomes.items():
        out.measured += o.measured
        out.failed += o.failed
        out.resumed += o.resumed
        out.any_ok = out.any_ok or o.any_ok
        out.cells |= {(name,) + key for key in o.cells}
        out.notes += [f"{name}: {note}" for note in o.notes]
        out.first_failure = out.first_failure or (f"{name}: {o.first_failure}" if o.first_failure else "")
        out.outputs.update({f"{name}/{key}": path for key, path in o.outputs.items()})
    out.outputs.update(outputs)
    return out


def is_cluster_folder(path: Path) -> bool:
    return (path / CLUSTER_FILE).is_file()


def render_cluster_folder(root: Path, job: Optional[str] = None) -> Dict[str, Path]:
    """The cluster report of ``root`` from its saved results alone (after a run, and for ``--render-only``)."""
    from sbprof.analysis.cluster import analyse_cluster, prices_of
    from sbprof.jobs.render import write_files
    from sbprof.report.cluster import render

    try:
        saved = json.loads((root / CLUSTER_FILE).read_text())
        executor = saved["executor"]
        names = [m["name"] for m in executor["machines"]]
    except (OSError, ValueError, KeyError, TypeError):
        raise ConfigError(f"{root / CLUSTER_FILE}: not a readable cluster run's file") from None
    if job is not None and saved.get("job") != job:
        raise ConfigError(f"{root} holds a cluster run of 'sbprof {saved.get('job')}', not of 'sbprof {job}'")
    types = []
    for name in names:
        folder = root / MACHINES_DIR / name
        if (folder / "results.json").is_file():
            types.append((name, str(folder), load_results(folder)))
    summary = analyse_cluster(saved["job"], types, prices_of(executor), executor.get("currency", ""))
    return write_files(render(summary), root)
