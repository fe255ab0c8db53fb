"""The one runner: every job's plan measured the same way, in its locked output folder.

For any job (:class:`~sbprof.jobs.job.Job`), :func:`run_job`:

- makes and locks the output folder (one run per folder; the kernel drops
  the lock on any exit, kill -9 included) and holds a few MiB of its disk
  back, so the record just measured is still saved when the disk fills;
- opens ``results.json`` (:class:`~sbprof.results.ResultStore`: the job's
  name and format version, written atomically after every record, refused
  when it was measured under other rules or on another machine);
- executes the plan's steps (:mod:`sbprof.jobs.plan`): drops the items already
  stored (resume; ``--retry_failed`` measures failures again, once), runs
  each batch in a fresh worker process (:class:`~sbprof.workers.supervisor.Supervisor`:
  a crash, the OOM killer or a hang becomes the item's ``error`` record and a
  fresh worker takes the rest), and saves each record as it comes;
- shows a progress bar with ETA, turns SIGTERM into Ctrl-C, and at each
  checkpoint (after each batch that saved a record, and when it stops)
  analyses the results once and hands that one summary to ``results.json``'s
  summary block and to the reports (``reporting``), so an interrupted run
  still leaves tables of what was measured.

Measuring code never renders: the caller passes ``reporting``
(:class:`~sbprof.jobs.render.Reporting`: the job's analysis, then its
renderers).
"""
from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from tqdm import tqdm

from sbprof.record.payload import Payload
from sbprof.base.errors import ConfigError, MeasurementError, SbprofError
from sbprof.jobs.budget import Budget
from sbprof.jobs.job import Job
from sbprof.jobs.outcome import Outcome, sigterm_interrupts
from sbprof.cluster.executor import Executor, Handlers, LocalExecutor
from sbprof.jobs.render import Reporting
from sbprof.jobs.plan import Barrier, Batch, Item, Plan, Records, needs_measuring
from sbprof.record import Cell, Measurement
from sbprof.results import RESULTS_FILE, FolderLock, ResultStore, Results, StorageError, prepare_output_folder
from sbprof.workers.supervisor import WorkerJob

LOG_DIR = "logs"


class View:
    """The store as a plan sees it (read-only), with the cells retried in this invocation."""

    def __init__(self, store: ResultStore, retry_failed: bool, side_by_side: bool = False,
                 save_now: Optional[Callable[[Callable[[], Records], str], None]] = None):
        self.store = store
        self.retry_failed = retry_failed
        self.side_by_side = side_by_side  # the executor measures a pass's batches side by side (a cluster)
        self.measured: Set[Tuple[Any, ...]] = set()  # cells measured (or retried) in this invocation
        self._save_now = save_now

    def save_now(self, records: Callable[[], Records], why: str) -> None:
        """Store ``records()`` now (the runner's, see :meth:`_Run.save_now`); a view without a runner cannot."""
        if self._save_now is None:
            raise MeasurementError(f"{why}: nothing can be saved from here (no runner holds the folder)")
        self._save_now(records, why)

    def get(self, cell: Cell) -> Optional[Measurement]:
        return self.store.get(cell)

    def records(self) -> List[Measurement]:
        return self.store.records()

    def calibration(self) -> List[Measurement]:
        return list(self.store.results.calibration)

    def retried(self, cell: Cell) -> bool:
        return cell.key() in self.measured

    def mark(self, cell: Cell) -> None:
        self.measured.add(cell.key())


class _Run:
    """One invocation's state: the store, its view, the bar and the outcome."""

    def __init__(self, plan: Plan, store: ResultStore, outcome: Outcome, retry_failed: bool, progress_bar: bool,
                 executor: Executor, log: Callable[[str], None], reporting: Optional[Reporting] = None):
        self.plan = plan
        self.store = store
        self.executor = executor
        self.view = View(store, retry_failed, executor.side_by_side, self.save_now)
        self.outcome = outcome
        self.log = log
        self.reporting = reporting
        already = len(store.records())
        self.bar = tqdm(total=max(1, plan.expected() - already), disable=not progress_bar, dynamic_ncols=True,
                        bar_format="{desc}{n_fmt}/{total_fmt} records|{bar}| [{elapsed}<{remaining}]{postfix}")

    def made(self, m: Measurement) -> None:
        """A record measured (or failed) in this invocation."""
        self.view.mark(m.cell)
        self.outcome.cells.add(replace(m.cell, run=0).key())  # a cell's runs count once
        if m.ok:
            self.outcome.measured += 1
        elif m.status in ("oom", "error"):
            self.outcome.failed += 1
            self.outcome.first_failure = self.outcome.first_failure or f"{m.label}: {m.message}"
        if self.bar.n + 1 > self.bar.total:
            self.bar.total = self.bar.n + 1
        self.bar.set_postfix_str(f"last: {m.label} {m.status}", refresh=False)
        self.bar.update(1)

    def records(self, step: Records) -> bool:
        for note in step.notes:
            self.outcome.notes.append(note)
            self.log(f"note: {note}")
        fresh = [m for m in step.records if step.replace or self.store.get(m.cell) is None]
        if fresh or step.notes:  # one write: on a full disk the space held back saves the records with their notes
            self.store.add_many(fresh, step.notes)
        return bool(fresh)

    def save_now(self, records: Callable[[], Records], why: str) -> None:
        """The process ends now without coming back here (the script called ``os._exit``): store ``records()``
        and render the reports, or say in one line why not; the space held back is given back either way."""
        try:
            self.records(records())
            self.checkpoint()
        except ConfigError as exc:  # e.g. nothing was recorded: the plan says why
            self.log(f"error: {' '.join(str(exc).split())}")
            return
        except (SbprofError, OSError) as exc:
            self.log(f"error: {why}, and what it recorded could not be saved: {' '.join(str(exc).split())}")
            return
        finally:
            self.store.reserve.release()
        for name, path in {**self.outcome.outputs, "results": self.store.path}.items():
            self.log(f"{name}: {path}")

    def checkpoint(self) -> None:
        """Analyse what is stored once; save that summary's block in ``results.json`` and render its reports."""
        if self.reporting is None:
            return
        summary = self.reporting.analyse(self.store.snapshot())
        self.store.set_summary(self.reporting.summary_block(summary))
        self.outcome.outputs.update(self.reporting.render(summary))

    def batch(self, batch: Batch) -> bool:
        """Run ``batch``'s missing items in worker processes, by the executor; True when a record was stored."""
        wanted = [i for i in batch.items
                  if not i.calibration and (not batch.resumable or needs_measuring(self.view, i.cell))]
        if not wanted:
            return False
        items = [i for i in batch.items if i.calibration or i in wanted]
        job = WorkerJob(module=batch.module, payload={**batch.payload, "items": [i.to_dict() for i in items]},
                        n_items=len(items), name=batch.name, log_path=self.store.path.parent / LOG_DIR / batch.log,
                        python=batch.python, env=batch.env)
        return self.executor.run(job, self.handlers(batch, items), batch.concurrent, batch.adds_figures)

    def handlers(self, batch: Batch, items: List[Item]) -> Handlers:
        """What becomes of each answer about ``items`` (the batch's, in the worker's order): saved at once, or, for
        a batch saved whole, in one write once it is over."""
        done: Set[int] = set()
        setup: Dict[str, Any] = {}  # what the worker's setup found (e.g. a check), kept in the records of crashes
        whole: List[Measurement] = []

        def keep(index: int, m: Measurement) -> None:
            done.add(index)
            if items[index].calibration:
                self.store.add_calibration([m])
                return
            if batch.whole:
                whole.append(m)
                return
            self.store.add(m)
            if not batch.adds_figures:
                self.made(m)

        def on_result(index: int, payload: Dict[str, Any]) -> None:
            keep(index, self._record(batch, items[index], payload))

        def on_crash(index: int, message: str) -> None:
            keep(index, self._failed(batch, items[index], message, setup))

        def on_loaded(event: Dict[str, Any]) -> None:
            setup.clear()
            setup.update(event.get("extra") or {})

        def fail_rest(message: str) -> None:
            for index in range(len(items)):
                if index not in done:
                    keep(index, self._failed(batch, items[index], message, setup))

        def over() -> None:
            # One write: an interruption before it leaves none of them, and the batch runs again whole.
            if whole:
                self.store.add_many(list(whole))
                for m in whole:
                    self.made(m)
                whole.clear()

        return Handlers(on_result, on_crash, on_loaded, self.note, fail_rest, over)

    def sent_before(self, sent: Dict[str, Any]) -> Handlers:
        """The handlers of a batch an earlier run sent to a cluster, as the executor kept it (its name, items and
        whether it adds figures), so what its node measured is saved as if this run had sent it."""
        items = [Item.from_dict(d) for d in sent["items"]]
        batch = Batch(name=sent["name"], module="", payload={}, items=items, log="",
                      adds_figures=bool(sent.get("adds_figures")))
        return self.handlers(batch, items)

    def _record(self, batch: Batch, item: Item, payload: Dict[str, Any]) -> Measurement:
        if batch.adds_figures:
            stored = self.store.get(item.cell)
            return Measurement.from_dict({**stored.to_dict(), "extra": {**stored.extra, **payload}})
        return Measurement.from_dict(payload)

    def _failed(self, batch: Batch, item: Item, message: str, setup: Dict[str, Any]) -> Measurement:
        if batch.adds_figures:  # the timing stands; only the added figures are missing
            return self._record(batch, item, Payload(extra_error=message).to_dict())
        from sbprof.measuring.env import collect_env

        return Measurement(label=item.label, cell=item.cell, status="error", message=message,
                           settings=dict(item.payload.get("settings", {})), env=collect_env(), extra=dict(setup))

    def note(self, message: str) -> None:
        """Something the run did on its own (a worker replaced): a line now, and kept in results.json."""
        self.outcome.notes.append(message)
        self.log(f"note: {message}")
        self.store.add_note(message)


def run_job(plan: Plan, output_folder: str, *, retry_failed: bool = False, progress_bar: bool = True,
            timeout_s: Optional[float] = None, reporting: Optional[Reporting] = None,
            derive: Optional[Callable[[Measurement], Dict[str, Any]]] = None,
            log: Callable[[str], None] = print, time_budget_s: Optional[float] = None,
            executor: Optional[Executor] = None, resumes: bool = True) -> Outcome:
    """Measure every missing record of ``plan`` into ``output_folder`` (see the module docstring).

    Arguments
    ---------
    plan : Plan
        The job's plan for a validated configuration.
    output_folder : str
        Made if needed and locked for the run.
    retry_failed : bool
        Measure again the records that ended OOM, in error, or "not installed".
    progress_bar, timeout_s
        Show a bar; stop a worker whose item gives no result within ``timeout_s`` (recorded as hung).
    reporting : Reporting, optional
        The job's analysis and reports (:class:`~sbprof.jobs.render.Reporting`): once after each batch that
        saved a record and when the run stops, the stored results are analysed once and that summary gives
        ``results.json``'s ``summary`` block and the reports.
    derive : callable, optional
        Figures written beside each record of ``results.json``.
    log : callable
        Receives one line per notable event.
    time_budget_s : float, optional
        The run's wall-clock budget: no batch starts that would end past it, judged from the longest batch so far
        (:class:`Budget`); a running batch is never stopped. ``None``: unbounded.
    executor : optional
        Where the batches run (:mod:`sbprof.cluster.executor`); default: local worker processes, one batch at a
        time, each item stopped past ``timeout_s``.
    resumes : bool
        Whether the same command run again goes on where this one stopped (:attr:`sbprof.jobs.job.Job.resumes`).
        A job that cannot resume (``sbprof run``: a script runs once) refuses a folder that already holds a run,
        as a folder in use is refused, instead of replacing it.

    Raises
    ------
    ConfigError
        Bad input found now (a folder that cannot hold results, a file measured under other rules).
    FolderInUse, StorageError, KeyboardInterrupt
        Another run holds the folder; a write failed (finished records kept); Ctrl-C or SIGTERM.
    """
    created = not Path(output_folder).exists()
    folder = prepare_output_folder(output_folder)
    try:
        return _run_locked(plan, folder, retry_failed, progress_bar, executor or LocalExecutor(timeout_s),
                           reporting, derive, log, Budget(time_budget_s), resumes)
    except ConfigError:
        # Bad input found only once running (e.g. by the model's worker): a folder this run made and
        # that holds no result goes, so bad input leaves nothing behind.
        _remove_if_made(folder, created)
        raise
    except OSError as exc:
        # A write the results file's own handling does not cover (the lock's process id on a full disk).
        if _remove_if_made(folder, created):
            kept = "nothing was measured, and the folder this run made is removed"
        elif (folder / RESULTS_FILE).exists():
            kept = f"the records saved before are kept in {folder / RESULTS_FILE}"
        else:
            kept = "nothing was measured"
        raise StorageError(f"cannot write in {folder}: {exc.strerror or exc}; {kept}") from None


def _remove_if_made(folder: Path, created: bool) -> bool:
    """Remove ``folder`` when this run made it and it holds no results; True when it did."""
    if created and not (folder / RESULTS_FILE).exists():
        shutil.rmtree(folder, ignore_errors=True)
        return True
    return False


def _run_locked(plan: Plan, folder: Path, retry_failed: bool, progress_bar: bool, executor: Executor,
                reporting: Optional[Reporting], derive: Optional[Callable[[Measurement], Dict[str, Any]]],
                log: Callable[[str], None],
                budget: Optional[Budget] = None, resumes: bool = True) -> Outcome:
    with sigterm_interrupts(), FolderLock(folder):
        store = ResultStore(folder, plan.header(), derive=derive, resumes=resumes)
        # Placeholders (cells a rule skipped) are not results kept from before.
        before = {m.cell.key() for m in store.records() if m.status != "skipped" or m.extra.get("retryable")}
        if not resumes and (store.records() or store.results.notes):
            raise ConfigError(f"{folder} already holds a run ({len(store.records())} record(s) in {store.path}); a "
                              f"run of sbprof {store.results.job} cannot be resumed, so running it again there would "
                              "replace that run: give another --output_folder, or move that folder away")
        outcome = Outcome(folder=folder, results=store.path)
        store.reserve.require()
        if before:
            log(f"resuming: {len(before)} record(s) already in {store.path}")
        run = _Run(plan, store, outcome, retry_failed, progress_bar, executor, log, reporting)
        changed = refused = False
        try:
            budget = budget or Budget(None)
            # A cluster: what an earlier run sent and was killed before collecting, collected first.
            changed = executor.start(run.sent_before)
            for step in plan.steps(run.view):
                if isinstance(step, Batch) and not budget.fits():
                    run.note(budget.stopped())  # a running batch is never stopped: only new ones are not started
                    break
                started = time.monotonic()
                if isinstance(step, Barrier):
                    stored = executor.wait()  # batches sent side by side (a cluster): all in before going on
                else:
                    stored = run.records(step) if isinstance(step, Records) else run.batch(step)
                if not isinstance(step, Records) and stored:  # a batch (or a cluster's pass) that measured
                    budget.took(time.monotonic() - started)
                changed = changed or stored
                if stored and not isinstance(step, Records):
                    run.checkpoint()
                    changed = False
            changed = executor.wait() or changed
        except BaseException as exc:
            executor.stop()
            # The plan refused what is stored (bad input): the earlier reports stay as they were.
            refused = isinstance(exc, ConfigError) and not changed
            raise
        finally:
            run.bar.close()
            store.reserve.release()
            # Also after an interruption: the tables show what was measured so far.
            if reporting is not None and not refused and store.records() and (changed or not outcome.outputs):
                run.checkpoint()
        if store.saved_in_reserve:
            log(f"note: the disk of {folder} is full: this run's records were saved in the space sbprof held back "
                f"({store.path})")
        outcome.any_ok = any(m.ok for m in store.records())
        outcome.resumed = len(before - run.view.measured)
        return outcome


def run_config(job: Job, cfg: Any, log: Callable[[str], None] = print, *, plan: Optional[Plan] = None,
               announce: Optional[Callable[[], None]] = None) -> Outcome:
    """Run ``job`` on its checked configuration, with its analysis and renderer after each batch: the one wiring
    of the runner, for ``sbprof JOB CONFIG.yaml``, ``sbprof run`` (with or without ``--vary``) and library callers
    (by name: :func:`sbprof.registry.run`).

    The folder, retries, progress bar, time budget and timeout are the configuration's preamble's; whether a run
    resumes and the figures beside each record are the job's. ``plan``: one the caller built (and reads after the
    run), else ``job.plan(cfg)``; ``announce``: called before the reports are written."""
    pre = cfg.preamble
    if pre.executor is not None:  # a cluster's machine types, each measured by run_job in its own folder
        from sbprof.jobs.cluster import run_cluster

        with sigterm_interrupts():
            return run_cluster(job, cfg, log, run_job, Outcome)
    return run_job(job.plan(cfg) if plan is None else plan, pre.output_folder, retry_failed=pre.retry_failed,
                   progress_bar=pre.progress_bar, timeout_s=pre.timeout_s,
                   reporting=Reporting(job, pre.output_folder, announce=announce), derive=job.derive, log=log,
                   time_budget_s=pre.time_budget_s, resumes=job.resumes)
