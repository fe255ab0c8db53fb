"""What a job's plan hands the runner: worker batches and ready records, and the interleaved passes over runs.

A job's plan (``plan(cfg)`` in its package) says *what* to measure; the
runner (:mod:`sbprof.jobs.runner`) does the rest. The plan yields steps:

- a :class:`Batch`: items (each one cell, one record) that one fresh worker
  process measures; the runner drops the items whose record is already
  stored, so resuming needs nothing from the plan;
- :class:`Records`: records made without measuring (a cell skipped by a rule,
  a backend not installed, figures attached afterwards);
- a :class:`Barrier`: the steps after it read what the batches before it
  measured (an executor that runs batches side by side, on a cluster, waits
  there for every batch it started).

Between two steps the runner has saved every record, so a plan reads the
store (:class:`StoreView`) to decide what comes next: another run of a cell
whose interval is still wide, a corner cell predicted to fit.
:func:`interleaved_passes` is that loop for every job: pass ``r`` measures run
``r`` of each cell that needs one, group after group, cells in a new order
each pass, so slow drift of the machine spreads over cells instead of
biasing some.
"""
from __future__ import annotations

import itertools
import random
import sys
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Protocol, Sequence, Union

from sbprof.analysis.intervals import RepeatPolicy, SpreadPrior
from sbprof.base.errors import ConfigError
from sbprof.record import Cell, Measurement
from sbprof.analysis.runs import cpu_figure, has_cpu, load_explains, others_load, run_figure
from sbprof.record.results import Results

FAILED = ("oom", "error")


@dataclass
class Item:
    """One cell for a worker: its coordinates, its label and what the worker needs for it (JSON).

    A ``calibration`` item is measured like the others but kept apart, in the
    results' ``calibration`` list (e.g. a reference batch timed at the start
    and end of every worker process, the run's noise floor): never resumed,
    never counted as a cell, run only beside cells that need measuring.
    """

    cell: Cell
    label: str
    payload: Dict[str, Any] = field(default_factory=dict)
    calibration: bool = False

    def to_dict(self) -> Dict[str, Any]:
        # Not the codec's shape: a worker reads the payload's keys beside the cell's, not under "payload".
        return {"cell": self.cell.to_dict(), "label": self.label, "calibration": self.calibration, **self.payload}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Item":
        """The item :meth:`to_dict` wrote (as a cluster's executor keeps a batch it sent).

        Example
        -------
        >>> item = Item(Cell(model="m", run=2), "m run 2", {"settings": {"a": 1}})
        >>> Item.from_dict(item.to_dict()) == item
        True
        """
        rest = {k: v for k, v in data.items() if k not in ("cell", "label", "calibration")}
        return cls(Cell.from_dict(data["cell"]), data["label"], rest, bool(data.get("calibration")))


@dataclass
class Batch:
    """Items one fresh worker process measures (``python -m module``), and what becomes of its answers.

    Arguments
    ---------
    name : str
        Names the worker in messages and logs (``measure worker for cpu-1threads``).
    module : str
        The worker module (see :mod:`sbprof.workers.cells`).
    payload : dict
        What every item shares (the config, the setting...); JSON.
    items : list of Item
    log : str
        The worker's log file name, under the output folder's ``logs/``.
    env : dict
        Environment variables for the worker (thread pools are sized from them).
    python : str
        The interpreter (a backend may need another one).
    adds_figures : bool
        Each answer is figures added to the ``extra`` of its cell's stored record (e.g. a profiler pass over
        cells already timed), not a record of its own; a crash is noted there, the timing stands.
    resumable : bool
        Items whose cell is already stored are dropped before the worker starts.
    concurrent : bool
        The plan's next steps, up to its next :class:`Barrier`, do not read this batch's records: an executor
        may run it beside them (on a cluster) instead of waiting for it. Locally every batch runs in turn.
    whole : bool
        The batch's records are saved together, in one write, once its worker is done (e.g. a distributed world
        and its ranks): an interruption never leaves some of them stored, which a resume would take for done.
    """

    name: str
    module: str
    payload: Dict[str, Any]
    items: List[Item]
    log: str
    env: Dict[str, str] = field(default_factory=dict)
    python: str = sys.executable
    adds_figures: bool = False
    resumable: bool = True
    concurrent: bool = False
    whole: bool = False


@dataclass
class Records:
    """Records made without a worker (``replace``: they may overwrite stored ones); ``notes``: lines for the run."""

    records: List[Measurement]
    replace: bool = False
    notes: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class Barrier:
    """The steps after this one read the records of the batches before it (see :attr:`Batch.concurrent`)."""


Step = Union[Batch, Records, Barrier]


class StoreView(Protocol):
    """What a plan may read of the results while it runs (the runner's store, read-only)."""

    retry_failed: bool
    side_by_side: bool  # batches measured side by side (a cluster); optional, False when absent

    def get(self, cell: Cell) -> Optional[Measurement]: ...

    def records(self) -> List[Measurement]: ...

    def calibration(self) -> List[Measurement]: ...

    def retried(self, cell: Cell) -> bool: ...

    def save_now(self, records: Callable[[], "Records"], why: str) -> None:
        """Store ``records()`` and render now, for a plan whose process is about to end without returning to the
        runner (``why``: in words); a failure is one line, never raised."""


class Plan(Protocol):
    """A job's plan (see the module docstring); :class:`JobPlan` is the base of every job's."""

    def header(self) -> Results:
        """What every record of the run is measured under: job, rules, models (with fingerprints), machine."""

    def expected(self) -> int:
        """How many records a complete run holds (the progress bar's first total; it may grow)."""

    def steps(self, view: StoreView) -> Iterator[Step]:
        """The work, step by step (see the module docstring)."""


def repeat_policy(repeats: Any) -> RepeatPolicy:
    """The :class:`~sbprof.analysis.intervals.RepeatPolicy` of a config's ``repeats``."""
    if repeats.adaptive:
        return RepeatPolicy(target_rel=repeats.target, min_runs=repeats.min_runs, max_runs=repeats.max_runs,
                            confidence=repeats.confidence)
    return RepeatPolicy.fixed(repeats.runs, confidence=repeats.confidence)


class JobPlan:
    """The base of a job's plan: its config and shared preamble, and the header of its results.

    A job names itself (``job``, the ``job`` of its ``results.json``) and its
    worker module (``worker``); it adds ``header``, ``expected`` and ``steps``.
    """

    job = ""
    worker = ""

    def __init__(self, cfg: Any):
        self.cfg = cfg
        self.pre = cfg.preamble

    def payload(self, setting: Any, **more: Any) -> Dict[str, Any]:
        """What a batch's worker is sent: the checked configuration, the setting's device and threads, and
        ``more`` (the job's own: a variant, a mode)."""
        return {"config": self.cfg.to_dict(), "device": setting.device, "threads": setting.threads, **more}

    def results(self, rules: Dict[str, Any], models: Dict[str, Dict[str, Any]]) -> Results:
        """What a run measures under: this job, its rules and models, and this machine (hardware, libraries)."""
        from sbprof.measuring.env import collect_env
        from sbprof.record.results import MACHINE_KEYS

        env = collect_env()
        return Results(job=self.job, rules=rules, models=models, machine={k: getattr(env, k) for k in MACHINE_KEYS})


def models_header(sources: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The ``models`` of a results header, for models named by source (``name -> ModelSource``): each one's
    description and the fingerprint of its build, which a resumed run must match."""
    from sbprof.models.source import fingerprint

    return {name: {**src.describe(), "fingerprint": fingerprint(src)} for name, src in sources.items()}


def needs_measuring(view: StoreView, cell: Cell) -> bool:
    """Whether a cell the plan wants measured still needs it.

    Yes when nothing is stored, or only a placeholder (a cell a rule skipped
    before: the plan wants it now); a failure (or a record marked
    ``retryable``, e.g. a backend not installed) only with ``--retry_failed``,
    and once per invocation.
    """
    stored = view.get(cell)
    if stored is None:
        return True
    if view.retried(cell):
        return False
    if stored.status in FAILED or stored.extra.get("retryable"):
        return view.retry_failed
    return stored.status == "skipped"


def stored_runs(view: StoreView, cell: Cell) -> List[Measurement]:
    """The records of ``cell``'s runs stored so far, from run 0 up to the first missing or failed one."""
    runs: List[Measurement] = []
    while True:
        m = view.get(replace(cell, run=len(runs)))
        if m is None or not m.ok or not m.wall_s:
            return runs
        runs.append(m)


def stored_figures(view: StoreView, cell: Cell, cpu: bool = False) -> List[float]:
    """The figures of ``cell``'s runs stored so far (:func:`stored_runs`): wall time, or with ``cpu`` CPU time
    (empty when a run kept none)."""
    runs = stored_runs(view, cell)
    if cpu:
        return [cpu_figure(m) for m in runs] if all(has_cpu(m) for m in runs) else []
    return [run_figure(m) for m in runs]


def next_run(view: StoreView, cell: Cell, policy: RepeatPolicy, prior: Optional[SpreadPrior] = None,
             cpu_prior: Optional[SpreadPrior] = None) -> Optional[Cell]:
    """The next run of ``cell`` to measure (its coordinates), or ``None`` when it has enough runs.

    Run 0 when nothing is stored (or a failure is retried); a cell whose
    first run failed is not repeated; otherwise the policy decides from the
    figures of the runs stored so far (``prior``: the spread of its group):
    their wall times, or their CPU times when other processes' load explains
    the wall-time spread (:func:`~sbprof.analysis.runs.load_explains`; a
    busy machine then stops the cell once the model's own work is pinned).
    """
    base = replace(cell, run=0)
    if needs_measuring(view, base):
        return base
    if not view.get(base).ok:
        return None
    runs = stored_runs(view, cell)
    decision = policy.decide([run_figure(m) for m in runs], prior)
    if decision.add_run and runs and all(has_cpu(m) for m in runs):
        on_cpu = policy.decide([cpu_figure(m) for m in runs], cpu_prior)
        if load_explains(others_load(runs), decision.interval, on_cpu.interval):
            decision = on_cpu
    if not decision.add_run:
        return None
    return replace(cell, run=len(runs))


def refuse_runs_beyond(view: StoreView, cells: Sequence[Cell], policy: RepeatPolicy) -> None:
    """Refuse a stored run of one of ``cells`` that the policy would never measure (an edited or copied record)."""
    planned = {replace(c, run=0).key() for c in cells}
    for m in view.records():
        if m.cell.run >= policy.max_runs and replace(m.cell, run=0).key() in planned:
            raise ConfigError(f"the stored record {m.label!r} is run {m.cell.run} of its cell, but this configuration "
                              f"measures at most {policy.max_runs} run(s) of a cell (runs 0 to {policy.max_runs - 1}):"
                              " give 'repeats' as it was, or use another --output_folder")


@dataclass
class Group:
    """Cells that one worker process measures together (a setting, a variant, a backend)."""

    cells: List[Cell]
    batch: Callable[[List[Cell]], Batch]


def interleaved_passes(view: StoreView, groups: Callable[[], Sequence[Group]], policy: RepeatPolicy, seed: int,
                       after_batch: Optional[Callable[[Batch], Iterable[Step]]] = None,
                       after_pass: Optional[Callable[[int], Iterable[Step]]] = None) -> Iterator[Step]:
    """Pass after pass, one more run of every cell that needs one (see the module docstring).

    ``groups`` is called at each pass (a plan may add cells between passes);
    ``after_batch`` and ``after_pass`` may add steps (a profiled pass, records).
    When the view measures batches ``side_by_side`` (a cluster), a pass's batches are concurrent and the steps
    ``after_batch`` adds come after the pass's :class:`Barrier`; locally each comes right after its batch.
    """
    side_by_side = getattr(view, "side_by_side", False)
    for pass_index in itertools.count():
        did = False
        read_later: List[Batch] = []
        for group in groups():
            refuse_runs_beyond(view, group.cells, policy)
            # The group's cells share worker processes: their pooled spread steadies each cell's own.
            prior = SpreadPrior.pooled(stored_figures(view, cell) for cell in group.cells)
            cpu_prior = SpreadPrior.pooled(stored_figures(view, cell, cpu=True) for cell in group.cells)
            wanted = [c for c in (next_run(view, cell, policy, prior, cpu_prior) for cell in group.cells)
                      if c is not None]
            if not wanted:
                continue
            random.Random(seed + pass_index).shuffle(wanted)  # a new order each pass
            batch = group.batch(wanted)
            # The groups of one pass are apart (their cells, their spreads): a cluster measures them side by side.
            batch.concurrent = side_by_side
            yield batch
            did = True
            if after_batch is not None:
                if side_by_side:
                    read_later.append(batch)
                else:
                    yield from after_batch(batch)
        if side_by_side:
            yield Barrier()  # what follows reads this pass's records
            for batch in read_later:
                yield from after_batch(batch)
        if after_pass is not None:
            extra = list(after_pass(pass_index))
            if extra:
                yield from extra
                continue  # the pass added work: look again
        if not did:
            return


def worker_env(threads: int, **more: str) -> Dict[str, str]:
    """Thread pools of native libraries are sized from these when they load, before torch sets its own."""
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), **more}


def log_name(*parts: Any) -> str:
    """A worker log's file name from its parts, filesystem-safe (``worker-cpu-1threads.log``)."""
    text = "-".join(str(p) for p in parts if p not in (None, ""))
    return "worker-" + "".join(c if c.isalnum() or c in "._-" else "_" for c in text) + ".log"
